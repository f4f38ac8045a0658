//! An informer whose share (KEP-5866 hash ranges) changes while it runs: after each change
//! the cache holds exactly the objects of the new share, while objects keep being created
//! and changed; an empty share holds nothing and sends no request. A narrowed share lists
//! nothing; a widened one lists only the ranges it gained, exactly at the version its cache
//! is at, and watches on from that version (one namespace; an informer of several
//! namespaces relists its share whole). On fake-apiserver honouring `shardSelector` and
//! ignoring it (the reflector filters either way).

use std::collections::BTreeSet;

use fake_apiserver::{FakeApiServer, Gvr, RequestRecord, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_informer::{
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    list_watch::{HASH_SPACE_END, LiveShare, Selectors, ShardField, ShardSelector, shard_hash},
};
use serde_json::json;

use crate::common::until;

const QUARTER: u128 = HASH_SPACE_END / 4;

fn quarters(which: &[u128]) -> Option<ShardSelector> {
    let ranges = which.iter().map(|q| q * QUARTER..(q + 1) * QUARTER);
    ShardSelector::with_ranges(ShardField::Uid, ranges).ok()
}

/// The informer's LISTs and WATCHes of config maps in `requests` (those with a shard
/// selector: not the test's own).
fn list_watches(requests: &[RequestRecord]) -> Vec<&RequestRecord> {
    requests
        .iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps"))
        .filter(|r| r.param("shardSelector").is_some())
        .filter(|r| matches!(r.verb, Some(Verb::List | Verb::Watch)))
        .collect()
}

/// What a change of the share from `previous` to `now` asked for (`requests`): nothing
/// listed when narrowed; else one LIST of exactly the gained ranges at one version, with
/// the watches after it from that version (no streaming list).
fn assert_only_moved_listed(previous: &[u128], now: &[u128], requests: &[&RequestRecord]) {
    let gained: Vec<u128> = now
        .iter()
        .copied()
        .filter(|q| !previous.contains(q))
        .collect();
    let lists: Vec<_> = requests
        .iter()
        .filter(|r| r.verb == Some(Verb::List))
        .collect();
    let streaming = requests
        .iter()
        .any(|r| r.param("sendInitialEvents") == Some("true"));
    assert!(
        !streaming,
        "{previous:?} -> {now:?}: a streaming list: {requests:#?}"
    );
    if gained.is_empty() || now.is_empty() {
        assert!(
            lists.is_empty(),
            "{previous:?} -> {now:?}: listed {lists:#?}"
        );
        return;
    }
    let [list] = lists[..] else {
        panic!("{previous:?} -> {now:?}: not one LIST: {requests:#?}");
    };
    // The gained quarters, adjacent ones as one range.
    let mut runs: Vec<std::ops::Range<u128>> = Vec::new();
    for q in gained {
        match runs.last_mut() {
            Some(run) if run.end == q * QUARTER => run.end += QUARTER,
            _ => runs.push(q * QUARTER..(q + 1) * QUARTER),
        }
    }
    let expected = ShardSelector::with_ranges(ShardField::Uid, runs)
        .unwrap()
        .to_string();
    assert_eq!(list.param("shardSelector"), Some(expected.as_str()));
    assert_eq!(list.param("resourceVersionMatch"), Some("Exact"));
    let at = list.param("resourceVersion").expect("listed at a version");
    for watch in requests
        .iter()
        .filter(|r| r.verb == Some(Verb::Watch))
        .take(1)
    {
        assert_eq!(watch.param("resourceVersion"), Some(at), "{requests:#?}");
    }
}

async fn a_live_share_holds_exactly_its_ranges_as_they_change(honoured: bool, namespaces: &[&str]) {
    let config = ServerConfig::default().shard_selectors(honoured);
    let server = FakeApiServer::start(config).await.unwrap();
    let cms = Gvr::core("configmaps");
    server
        .seed(
            &cms,
            (0..200).map(|i| json!({"metadata": {"name": format!("cm-{i}"), "namespace": "shop"}})),
        )
        .unwrap();
    let client = server.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    let one_namespace = namespaces.len() == 1;

    let share = LiveShare::new(None);
    let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    let selectors = Selectors::default()
        .in_namespaces(namespaces.iter().copied())
        .live_shards(share.clone());
    let informer = factory.informer_with(InformerSpec::<ConfigMap>::new().selectors(selectors));
    factory.start();
    factory
        .wait_for_sync(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        informer.store().list().is_empty(),
        "an empty share holds nothing"
    );
    assert!(
        list_watches(&server.requests()).is_empty(),
        "an empty share asks for nothing"
    );

    let held = || -> BTreeSet<String> {
        informer
            .store()
            .list()
            .iter()
            .map(|cm| cm.metadata.uid.clone().unwrap())
            .collect()
    };
    let mut created = 200;
    let mut previous: &[u128] = &[];
    for step in [&[0][..], &[0, 1], &[1], &[2, 3], &[0, 1, 2, 3], &[3], &[]] {
        let before = server.requests().len();
        share.set(quarters(step));
        // Changes racing the share's: some before the version the cache is listed at.
        for i in (0..200).step_by(20) {
            let patch = json!({"data": {"step": format!("{step:?}")}});
            let name = format!("cm-{i}");
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
        for _ in 0..10 {
            let cm = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(format!("cm-{created}")),
                    ..Default::default()
                },
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm).await.unwrap();
            created += 1;
        }
        let all = api.list(&ListParams::default()).await.unwrap().items;
        let expected: BTreeSet<String> = all
            .iter()
            .map(|cm| cm.metadata.uid.clone().unwrap())
            .filter(|uid| step.contains(&(u128::from(shard_hash(uid)) / QUARTER)))
            .collect();
        until(
            &format!("the cache holds exactly quarters {step:?}"),
            || held() == expected,
        )
        .await;
        let versions = || -> BTreeSet<(String, String)> {
            let cached = informer.store().list();
            cached
                .iter()
                .map(|cm| {
                    let m = &cm.metadata;
                    (m.uid.clone().unwrap(), m.resource_version.clone().unwrap())
                })
                .collect()
        };
        let server_versions: BTreeSet<(String, String)> = all
            .iter()
            .map(|cm| {
                let m = &cm.metadata;
                (m.uid.clone().unwrap(), m.resource_version.clone().unwrap())
            })
            .filter(|(uid, _)| step.contains(&(u128::from(shard_hash(uid)) / QUARTER)))
            .collect();
        until(
            &format!("quarters {step:?} cached at their versions"),
            || versions() == server_versions,
        )
        .await;
        if one_namespace && !previous.is_empty() {
            assert_only_moved_listed(previous, step, &list_watches(&server.requests()[before..]));
        }
        previous = step;
    }
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_share_holds_exactly_its_ranges_as_they_change_on_a_server_that_filters() {
    a_live_share_holds_exactly_its_ranges_as_they_change(true, &["shop"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_share_holds_exactly_its_ranges_as_they_change_on_a_server_that_ignores_it() {
    a_live_share_holds_exactly_its_ranges_as_they_change(false, &["shop"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_share_of_several_namespaces_is_relisted_whole_as_it_changes() {
    a_live_share_holds_exactly_its_ranges_as_they_change(true, &["shop", "depot"]).await;
}
