//! Against the real binaries: restarts keep the port and the data, a terminated apiserver
//! keeps serving the watches it has open, a partition stalls a watch until healed, and
//! nothing outlives the environment, not even when the test panics.

use std::path::Path;
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kube_envtest::{Environment, EnvironmentOptions};

type Watch = std::pin::Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Send>>;

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn alive(pid: u32) -> bool {
    // Reaped processes have no /proc entry; a zombie would still have one.
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The next Added/Modified/Deleted object's name, skipping bookmarks; `None` if the stream
/// ended or nothing came within `timeout`.
async fn next_name(watch: &mut Watch, timeout: Duration) -> Option<String> {
    let next = async {
        while let Some(event) = watch.next().await {
            match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                    return o.metadata.name;
                }
                Ok(_) => continue,
                Err(err) => panic!("watch error: {err}"),
            }
        }
        None
    };
    tokio::time::timeout(timeout, next).await.ok().flatten()
}

async fn watch_from_now(cms: &Api<ConfigMap>) -> kube::Result<Watch> {
    let rv = cms
        .list_metadata(&Default::default())
        .await?
        .metadata
        .resource_version;
    Ok(cms
        .watch(&WatchParams::default(), &rv.unwrap_or_default())
        .await?
        .boxed())
}

#[tokio::test]
async fn restarts_keep_the_port_and_the_data() -> Result<(), Box<dyn std::error::Error>> {
    let Some(mut env) = Environment::start_or_skip(EnvironmentOptions::new()).await? else {
        return Ok(());
    };
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let created = cms
        .create(&PostParams::default(), &config_map("kept"))
        .await?;
    let (port, first_pid) = (env.port(), env.apiserver_pid().expect("running"));

    env.restart_apiserver().await?;
    let second_pid = env.apiserver_pid().expect("running again");
    assert_eq!(env.port(), port);
    assert_ne!(second_pid, first_pid);
    assert!(!alive(first_pid), "a stopped apiserver has exited");
    // The same client reconnects by itself and finds the same object at the same version.
    let read = cms.get("kept").await?;
    assert_eq!(read.metadata.uid, created.metadata.uid);
    assert_eq!(
        read.metadata.resource_version,
        created.metadata.resource_version
    );

    // A crash, then a start: still the same port and data, and the audit log goes on.
    env.kill_apiserver().await?;
    assert!(cms.get("kept").await.is_err(), "no apiserver, no answer");
    let through_proxy: Api<ConfigMap> = Api::namespaced(env.partitionable_client(), "default");
    assert!(
        through_proxy.get("kept").await.is_err(),
        "the proxy closes, it does not hang"
    );
    assert!(matches!(env.start_apiserver().await, Ok(())));
    assert!(matches!(
        env.start_apiserver().await,
        Err(kube_envtest::Error::ApiServerRunning { .. })
    ));
    cms.create(&PostParams::default(), &config_map("after-crash"))
        .await?;
    env.wait_for_audit_event(Duration::from_secs(60), |e| e.name() == Some("after-crash"))
        .await?;
    assert_eq!(cms.list(&Default::default()).await?.items.len(), 2);

    // A graceful stop leaves nothing behind.
    let (etcd, apiserver, dir) = (
        env.etcd_pid(),
        env.apiserver_pid().expect("running"),
        env.dir().to_owned(),
    );
    env.stop().await?;
    assert!(!alive(etcd) && !alive(apiserver) && !dir.exists());
    Ok(())
}

#[tokio::test]
async fn a_terminated_apiserver_keeps_serving_its_open_watches()
-> Result<(), Box<dyn std::error::Error>> {
    let Some(mut env) = Environment::start_or_skip(EnvironmentOptions::new()).await? else {
        return Ok(());
    };
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut watch = watch_from_now(&cms).await?;
    cms.create(&PostParams::default(), &config_map("before"))
        .await?;
    assert_eq!(
        next_name(&mut watch, Duration::from_secs(60))
            .await
            .as_deref(),
        Some("before")
    );

    let old = env.terminate_apiserver().await?.expect("was running");
    assert!(
        alive(old),
        "SIGTERM leaves the old process alive for a while"
    );
    assert_eq!(env.terminated_apiserver_pids(), [old]);
    // A new apiserver on the same port serves new connections, while the old one still
    // streams etcd's events to the watch it has open (it would close it 60 s after SIGTERM).
    env.start_apiserver().await?;
    cms.create(&PostParams::default(), &config_map("during"))
        .await?;
    assert_eq!(
        next_name(&mut watch, Duration::from_secs(60))
            .await
            .as_deref(),
        Some("during")
    );
    assert!(alive(old));

    // Killing the old one closes the watch: the stream ends (or errors).
    env.kill_terminated_apiservers().await?;
    assert!(!alive(old));
    let end = tokio::time::timeout(Duration::from_secs(60), watch.next()).await?;
    assert!(!matches!(end, Some(Ok(WatchEvent::Added(_)))), "{end:?}");

    // Dropping on a panic kills everything: etcd, the apiserver, one left terminated.
    env.terminate_apiserver().await?;
    env.start_apiserver().await?;
    let mut pids = vec![env.etcd_pid(), env.apiserver_pid().expect("running")];
    pids.extend(env.terminated_apiserver_pids());
    let dir = env.dir().to_owned();
    assert!(pids.iter().all(|&pid| alive(pid)));
    let panicked = tokio::spawn(async move {
        let _env = env;
        panic!("a failing test");
    })
    .await;
    assert!(panicked.is_err());
    for pid in pids {
        assert!(!alive(pid), "pid {pid} outlived its environment");
    }
    assert!(!dir.exists());
    Ok(())
}

#[tokio::test]
async fn a_partition_stalls_a_watch_until_healed() -> Result<(), Box<dyn std::error::Error>> {
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new()).await? else {
        return Ok(());
    };
    let direct: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let through_proxy: Api<ConfigMap> = Api::namespaced(env.partitionable_client(), "default");
    let proxy = env.proxy();
    let mut watch = watch_from_now(&through_proxy).await?;
    direct
        .create(&PostParams::default(), &config_map("one"))
        .await?;
    assert_eq!(
        next_name(&mut watch, Duration::from_secs(60))
            .await
            .as_deref(),
        Some("one")
    );
    assert!(proxy.open_connections() >= 1);

    proxy.partition();
    assert!(proxy.is_partitioned());
    direct
        .create(&PostParams::default(), &config_map("two"))
        .await?;
    assert_eq!(
        next_name(&mut watch, Duration::from_secs(1)).await,
        None,
        "stalled"
    );
    // New requests hang too (no error, no answer), as across a real partition.
    let get = tokio::time::timeout(Duration::from_secs(1), through_proxy.get("one")).await;
    assert!(
        get.is_err(),
        "a request through a partition must hang: {get:?}"
    );

    proxy.heal();
    assert_eq!(
        next_name(&mut watch, Duration::from_secs(60))
            .await
            .as_deref(),
        Some("two")
    );
    assert_eq!(
        through_proxy.get("two").await?.metadata.name.as_deref(),
        Some("two")
    );

    // Severing closes the watch's connection: the stream ends instead of hanging.
    proxy.sever_connections();
    let end = tokio::time::timeout(Duration::from_secs(60), watch.next()).await?;
    assert!(!matches!(end, Some(Ok(WatchEvent::Added(_)))), "{end:?}");
    assert_eq!(
        through_proxy.get("one").await?.metadata.name.as_deref(),
        Some("one")
    );
    Ok(())
}
