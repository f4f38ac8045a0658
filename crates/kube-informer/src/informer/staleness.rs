//! [`Staleness`]: how far an informer's cache is behind the API server, from what its
//! reflectors hear anyway (LISTs, events as they arrive, bookmarks) and, when asked for,
//! one `limit=1` read per period ([`ReflectorOptions::staleness_probe`]).
//!
//! [`ReflectorOptions::staleness_probe`]: crate::reflector::ReflectorOptions::staleness_probe

use std::time::Duration;

use kube::Resource;

use super::{SharedIndexInformer, inner::Inner};

/// How far an informer's cache is behind the API server, as
/// [`SharedIndexInformer::staleness`] tells it (and the metrics
/// `informer_staleness_seconds` and `informer_staleness_resource_versions`).
///
/// **`behind`** is how long the cache has been missing something the server had: the age
/// of the oldest server version the informer heard of and has not applied yet, or of the
/// server's silence — a probe unanswered, or a request failed, since the last version a
/// LIST, bookmark or probe gave. Zero when the cache has applied everything heard.
///
/// - Events waiting in the informer's queue (a handler holding the informer back, a
///   burst) count from the moment they arrived: the time between an event and the cache
///   holding it. (With [`QueueKind::DeltaFifo`](super::QueueKind::DeltaFifo) events do not
///   move the cache's resourceVersion, only bookmarks and relists do: there, events are not
///   counted, and the probe's version is confirmed at the next bookmark.)
/// - A server that cannot be reached counts from the first failure (or unanswered probe)
///   until a watch opens again or a LIST, bookmark or probe answers.
/// - A watch that is behind the server (a slow network, a server holding events back) or
///   stuck is seen only with the [probe](crate::reflector::ReflectorOptions::staleness_probe),
///   which reads where the server is: without it, only failures (an idle watch, a failed
///   request) start the clock.
/// - The probe's version is the whole server's (etcd's revision), so on a quiet collection
///   the watch confirms reaching it only with the server's next bookmark, which
///   kube-apiserver sends about once a minute: `behind` then reads up to about a minute
///   high. Alert on several minutes (see docs/operations.md).
///
/// **`versions_behind`** is how many resourceVersions lie between the newest the informer
/// heard of and the cache's; `None` when they are not comparable. ResourceVersions count
/// every write the server stored, of any kind: this says how busy the server was, not how
/// many objects of this cache are missing.
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::Api;
/// use kube_informer::{informer::{InformerOptions, SharedIndexInformer}, reflector::ReflectorOptions};
///
/// # async fn demo(client: kube::Client) {
/// let options = InformerOptions::default()
///     .reflector(ReflectorOptions::default().staleness_probe(Duration::from_secs(60)));
/// let pods = SharedIndexInformer::new(Api::<Pod>::all(client), options);
/// // ... run it, then:
/// if pods.staleness().behind > Duration::from_secs(300) {
///     eprintln!("the pod cache is more than five minutes behind");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Staleness {
    /// How long the cache has been missing something the server had (see above).
    pub behind: Duration,
    /// ResourceVersions between the newest heard of and the cache's (see above).
    pub versions_behind: Option<u128>,
}

impl<K: Resource + Clone + Send + Sync + 'static> SharedIndexInformer<K> {
    /// How far the cache is behind the API server, now (see [`Staleness`]). An informer
    /// over several namespaces reports its most behind namespace.
    pub fn staleness(&self) -> Staleness {
        self.inner.staleness()
    }
}

impl Staleness {
    /// Level with everything heard.
    pub(super) const LEVEL: Self = Self {
        behind: Duration::ZERO,
        versions_behind: Some(0),
    };

    /// The worse of two (versions not comparable in either: not comparable).
    pub(super) fn worse(self, other: Self) -> Self {
        Self {
            behind: self.behind.max(other.behind),
            versions_behind: match (self.versions_behind, other.versions_behind) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            },
        }
    }
}

impl<K> Inner<K> {
    /// The worst of the reflectors' lags.
    pub(super) fn staleness(&self) -> Staleness {
        self.reflectors
            .iter()
            .map(|reflector| {
                let lag = reflector.heard().lag();
                Staleness {
                    behind: lag.behind,
                    versions_behind: lag.versions,
                }
            })
            .fold(Staleness::LEVEL, Staleness::worse)
    }
}

#[cfg(feature = "metrics")]
impl<K: Send + Sync> super::metrics::StaleCache for Inner<K> {
    fn staleness(&self) -> Staleness {
        Inner::staleness(self)
    }
}
