//! `/metrics`: the one metric this server keeps, in the real server's text format.

use bytes::Bytes;

use super::response::Reply;
use crate::Inner;

/// The one metric this server keeps, in the real server's name and text format:
/// `apiserver_terminated_watchers_total{group,resource}`, watches ended because their
/// client did not keep up.
pub(super) fn metrics(inner: &Inner) -> Reply {
    let mut text = String::from(
        "# HELP apiserver_terminated_watchers_total [STABLE] Counter of watchers closed due to unresponsiveness broken by resource type.\n# TYPE apiserver_terminated_watchers_total counter\n",
    );
    for (gvr, count) in inner.storage.lock().terminated_watchers() {
        if count > 0 {
            text.push_str(&format!(
                "apiserver_terminated_watchers_total{{group=\"{}\",resource=\"{}\"}} {count}\n",
                gvr.group, gvr.resource
            ));
        }
    }
    Reply::bytes(200, Bytes::from(text))
}
