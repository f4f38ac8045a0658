//! Against the real binaries: the options reach the processes and have their effect, and a
//! process that fails to start is reported with its log.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Service, ServicePort, ServiceSpec};
use kube::api::{Api, ListParams, PostParams, VersionMatch};
use kube::core::ObjectMeta;
use kube_envtest::{Assets, Environment, EnvironmentOptions, Error};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn cmdline(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    raw.split(|&b| b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

#[tokio::test]
async fn compaction_and_extra_flags_take_effect() -> Result<(), Box<dyn std::error::Error>> {
    let options = EnvironmentOptions::new()
        .compaction_interval(Duration::from_secs(1))
        .apiserver_arg("--service-cluster-ip-range=10.96.0.0/24")
        .etcd_arg("--name=renamed")
        // Otherwise the watch cache's snapshots answer exact reads at old versions for ~13 s
        // more after etcd compacted (measured with 1.36): correct, but slow to test.
        .apiserver_arg("--feature-gates=ListFromCacheSnapshot=false");
    let Some(env) = Environment::start_or_skip(options).await? else {
        return Ok(());
    };

    // `--name=value` replaced ours instead of being passed twice.
    let etcd_args = cmdline(env.etcd_pid());
    assert!(
        etcd_args.contains(&"--name=renamed".to_owned()),
        "{etcd_args:?}"
    );
    assert!(
        !etcd_args.contains(&"--name=envtest".to_owned()),
        "{etcd_args:?}"
    );
    let apiserver_args = cmdline(env.apiserver_pid().expect("running"));
    assert!(apiserver_args.contains(&"--etcd-compaction-interval=1000ms".to_owned()));
    let service = Service {
        metadata: meta("web"),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let service = Api::<Service>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &service)
        .await?;
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");
    assert!(ip.starts_with("10.96.0."), "{ip}");

    // After a compaction, an exact read at an old version is gone (410).
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let old = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: meta("c"),
                ..Default::default()
            },
        )
        .await?;
    let old_rv = old.metadata.resource_version.expect("a version");
    let exact = ListParams::default()
        .at(&old_rv)
        .matching(VersionMatch::Exact);
    assert!(cms.list(&exact).await.is_ok(), "readable before compaction");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Writes move etcd's revision on, so the next compaction passes the old version.
        cms.replace("c", &PostParams::default(), &cms.get("c").await?)
            .await?;
        match cms.list(&exact).await {
            Err(kube::Error::Api(status)) if status.code == 410 => break,
            Ok(_) if Instant::now() < deadline => {}
            other => panic!("expected 410 Gone after compaction, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_failed_start_quotes_the_log() -> Result<(), Box<dyn std::error::Error>> {
    let Some(assets) = Assets::from_env_or_skip("a_failed_start_quotes_the_log") else {
        return Ok(());
    };
    // kube-apiserver refuses an unknown flag and exits: the error says so, with its log.
    let options = EnvironmentOptions::new()
        .assets(assets.clone())
        .apiserver_arg("--no-such-flag")
        .keep_dir(true);
    let err = Environment::start(options)
        .await
        .expect_err("an unknown flag fails");
    let Error::Exited { process, log, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*process, "kube-apiserver");
    assert!(log.tail.contains("unknown flag: --no-such-flag"), "{err}");
    assert!(
        err.to_string().contains(&log.path.display().to_string()),
        "{err}"
    );
    // keep_dir(true) left the folder (and the log) behind; etcd was killed all the same.
    let dir = log
        .path
        .parent()
        .expect("the environment's folder")
        .to_owned();
    assert!(Path::new(&log.path).exists());
    std::fs::remove_dir_all(&dir)?;

    // A timeout names the process and the URL it polled.
    let options = EnvironmentOptions::new()
        .assets(assets)
        .startup_timeout(Duration::ZERO);
    let err = Environment::start(options)
        .await
        .expect_err("no time is too short");
    let Error::Timeout { process, url, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (*process, url.ends_with("/health")),
        ("etcd", true),
        "{err}"
    );
    Ok(())
}
