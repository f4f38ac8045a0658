//! The query parameters of a resource request, parsed and checked as the real server does.

use std::collections::BTreeMap;

use crate::{
    registry::{Gvr, ResourceType},
    selector::{FieldSelector, Filter, LabelSelector},
    status::ApiError,
};

/// The query parameters the server understands.
#[derive(Debug, Default)]
pub(crate) struct Params {
    pub(crate) resource_version: Option<String>,
    pub(crate) resource_version_match: Option<String>,
    pub(crate) limit: Option<u64>,
    pub(crate) continue_token: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    /// `shardSelector` (KEP-5866); an empty one is none.
    pub(crate) shard_selector: Option<String>,
    pub(crate) timeout_seconds: Option<u64>,
    pub(crate) allow_watch_bookmarks: bool,
    pub(crate) send_initial_events: Option<bool>,
    pub(crate) field_manager: Option<String>,
    /// `force` of a server-side apply: take conflicting fields from their managers.
    pub(crate) force: bool,
    pub(crate) grace_period_seconds: Option<u64>,
}

pub(crate) fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True")
}

impl Params {
    pub(crate) fn parse(q: &BTreeMap<String, String>) -> Result<Self, ApiError> {
        let number = |name: &str| -> Result<Option<u64>, ApiError> {
            q.get(name)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid value {v:?} for {name}"))
                    })
                })
                .transpose()
        };
        let text = |name: &str| q.get(name).cloned();
        Ok(Self {
            resource_version: text("resourceVersion"),
            resource_version_match: text("resourceVersionMatch").filter(|v| !v.is_empty()),
            limit: number("limit")?,
            continue_token: text("continue").filter(|v| !v.is_empty()),
            label_selector: text("labelSelector"),
            field_selector: text("fieldSelector"),
            shard_selector: text("shardSelector").filter(|v| !v.is_empty()),
            timeout_seconds: number("timeoutSeconds")?,
            allow_watch_bookmarks: q.get("allowWatchBookmarks").is_some_and(|v| truthy(v)),
            send_initial_events: q.get("sendInitialEvents").map(|v| truthy(v)),
            field_manager: text("fieldManager"),
            force: q.get("force").is_some_and(|v| truthy(v)),
            grace_period_seconds: number("gracePeriodSeconds")?,
        })
    }

    /// The objects the request selects; `shards`: whether the server honours
    /// `shardSelector` (one that does not ignores it, as an unknown parameter).
    pub(crate) fn filter(
        &self,
        ty: &ResourceType,
        namespace: Option<&str>,
        shards: bool,
    ) -> Result<Filter, ApiError> {
        let labels = LabelSelector::parse(self.label_selector.as_deref().unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let pods = ty.gvr == Gvr::core("pods");
        let supported = |path: &str| {
            matches!(path, "metadata.name" | "metadata.namespace")
                || (pods && matches!(path, "spec.nodeName" | "status.phase"))
        };
        let fields = FieldSelector::parse(self.field_selector.as_deref().unwrap_or(""), supported)
            .map_err(ApiError::bad_request)?;
        // Not a 400: kube-apiserver returns the parse error as a plain error, a bare 500.
        let shard = match (&self.shard_selector, shards) {
            (Some(text), true) => Some(
                crate::shard::ShardSelector::parse(text)
                    .map_err(|e| ApiError::internal(format!("invalid shard selector: {e}")))?,
            ),
            _ => None,
        };
        Ok(Filter {
            namespace: namespace.map(str::to_owned),
            labels,
            fields,
            shard,
        })
    }
}
