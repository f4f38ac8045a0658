//! Server-side apply (`application/apply-patch+yaml`): the configuration merged into the
//! object, or the object created from it, with ownership as [`crate::managed`] keeps it.

use std::{sync::Arc, time::SystemTime};

use serde_json::Value;

use super::{Part, Writer};
use crate::{
    Inner, managed::Apply, registry::Gvr, status::ApiError, storage::StoredObject, util::rfc3339,
};

impl Inner {
    /// Applies `config` as `manager`; `force` takes conflicting fields from their owners.
    /// Answers 201 with a created object, 200 with an updated one, and the real server's
    /// 409 (one cause per field and owner) for a conflict without `force`.
    #[allow(clippy::too_many_arguments)] // the apply request's parts, as the URL gives them
    pub(crate) fn apply(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        config: &Value,
        manager: &str,
        force: bool,
        part: Part,
    ) -> Result<(u16, Arc<StoredObject>), ApiError> {
        let apply = Apply {
            config,
            manager,
            api_version: &gvr.api_version(),
            force,
            scope: part.scope(),
        };
        let now = rfc3339(SystemTime::now());
        let updated = self.write_existing(gvr, namespace, name, Writer::Recorded, part, |live| {
            apply.onto(Some(&live), &now)
        });
        match updated {
            Err(e) if e.code == 404 && part == Part::Object => {
                let object = apply.onto(None, &now)?;
                self.create_as(gvr, namespace, object, Writer::Recorded, part)
                    .map(|o| (201, o))
            }
            other => other.map(|o| (200, o)),
        }
    }
}
