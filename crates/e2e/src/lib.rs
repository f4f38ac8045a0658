//! kube-informer's end-to-end suite: every scenario runs against fake-apiserver and against a
//! real kube-apiserver (through `kube-envtest`), so the two are held side by side.
//!
//! This library is the scenarios' shared support:
//!
//! - [`Backend`]: either server, with a direct client (for the test's own writes), a client
//!   through a partitionable TCP proxy (for the code under test), restarts, and the
//!   [`Request`]s the server saw, normalised from fake-apiserver's request log or the real
//!   server's audit log.
//! - [`churn`]: seeded creates, updates and deletes through the API, returning the last
//!   resourceVersion written.
//! - [`assert_cache_matches`]: the informer's cache against a fresh LIST, exact keys and
//!   resourceVersions; a failure prints the diverging keys.
//!
//! Each scenario is written once as `async fn(Backend)` and instantiated for both servers by
//! [`both!`]; a fleet's, on three servers (a hub and two members), by [`three!`]. Without the real server's binaries (`KUBEBUILDER_ASSETS`), the real half skips
//! with a loud banner (and fails when `KUBE_ENVTEST_REQUIRED=1`, as CI sets).

mod backend;
mod churn;
mod compare;
mod crd;
mod ledger;
mod probe;
mod raw;
mod recording;
mod running;
mod three;

pub use backend::{Backend, BackendOptions, Request};
pub use churn::{Churn, churn, config_map};
pub use compare::{assert_cache_matches, ensure_namespace, eventually, server_state};
pub use crd::install_crd;
pub use ledger::Ledger;
pub use probe::probe;
pub use raw::{Answer, error, send};
pub use recording::{Answers, recording};
pub use running::{Running, quick};
pub use three::on_three;

/// Instantiates a scenario `async fn name(backend: Backend)` as two tests, `name::fake` and
/// `name::real`, with the given backend options.
#[macro_export]
macro_rules! both {
    ($scenario:ident) => {
        $crate::both!($scenario, $crate::BackendOptions::default());
    };
    ($scenario:ident, $options:expr) => {
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn fake() {
                let options = {
                    #[allow(unused_imports)]
                    use super::*;
                    $options
                };
                super::$scenario($crate::Backend::fake(options).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(
                envtest_missing,
                ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
            )]
            async fn real() {
                let options = {
                    #[allow(unused_imports)]
                    use super::*;
                    $options
                };
                if let Some(backend) = $crate::Backend::real(options, stringify!($scenario)).await {
                    super::$scenario(backend).await;
                }
            }
        }
    };
}
