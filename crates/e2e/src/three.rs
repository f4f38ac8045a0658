//! Three servers of one kind — a fleet's hub and two members — for scenarios of fleets:
//! [`on_three`] and the [`three!`](crate::three) macro, the [`both!`](crate::both) of three.

use std::future::Future;

use crate::Backend;

/// Runs `scenario(hub, a, b)` on three servers made by `make` (given a name for each). The
/// servers, and the proxies in front of them, run on a runtime of their own, so that the
/// scenario's runtime counts only its own tasks (a watch's server side outlives its client
/// by up to a bookmark interval). Returns without running it when `make` gives `None` (the
/// real server's binaries are missing: [`Backend::real`] says so loudly).
pub fn on_three<F, S, Fut>(make: impl Fn(&'static str) -> F, scenario: S)
where
    F: Future<Output = Option<Backend>> + Send + 'static,
    S: FnOnce(Backend, Backend, Backend) -> Fut,
    Fut: Future<Output = ()>,
{
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let spawn = |f: F| async { tokio::spawn(f).await.expect("the server starts") };
    let (hub, a, b) = servers.block_on(async {
        tokio::join!(
            spawn(make("fleet hub")),
            spawn(make("fleet member a")),
            spawn(make("fleet member b")),
        )
    });
    let (Some(hub), Some(a), Some(b)) = (hub, a, b) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(scenario(hub, a, b));
    drop(runtime);
    servers.shutdown_background();
}

/// Instantiates a scenario `async fn name(hub: Backend, a: Backend, b: Backend)` as two
/// tests, `name::fake` and `name::real`, each on three servers of its kind.
#[macro_export]
macro_rules! three {
    ($scenario:ident) => {
        mod $scenario {
            #[test]
            fn fake() {
                $crate::on_three(
                    |_| async {
                        Some($crate::Backend::fake($crate::BackendOptions::default()).await)
                    },
                    super::$scenario,
                );
            }

            #[test]
            #[cfg_attr(
                envtest_missing,
                ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
            )]
            fn real() {
                $crate::on_three(
                    |name| $crate::Backend::real($crate::BackendOptions::default(), name),
                    super::$scenario,
                );
            }
        }
    };
}
