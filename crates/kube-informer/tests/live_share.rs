//! An informer whose share (KEP-5866 hash ranges) changes while it runs: after each change
//! the cache holds exactly the objects of the new share, while objects keep being created
//! and changed; an empty share holds nothing and sends no request. A narrowed share lists
//! nothing; a widened one lists only the ranges it gained, exactly at the version its cache
//! is at, and watches on from that version (one namespace; an informer of several
//! namespaces relists its share whole). On fake-apiserver honouring `shardSelector` and
//! ignoring it (the reflector filters either way).

use std::collections::BTreeSet;

use fake_apiserver::{FakeApiServer, Fault, Gate, Gvr, RequestRecord, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_informer::{
    ReadOnlyStore,
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

/// uid → resourceVersion of `objects`.
fn versions<'a>(objects: impl IntoIterator<Item = &'a ConfigMap>) -> BTreeSet<(String, String)> {
    objects
        .into_iter()
        .map(|cm| {
            let m = &cm.metadata;
            (m.uid.clone().unwrap(), m.resource_version.clone().unwrap())
        })
        .collect()
}

/// Waits until `store` holds exactly the objects of `quarters` the server has now, at the
/// server's versions (a hang guard: a cache that never gets there fails).
async fn holds_exactly(api: &Api<ConfigMap>, store: &ReadOnlyStore<ConfigMap>, quarters: &[u128]) {
    let all = api.list(&ListParams::default()).await.unwrap().items;
    let in_share = |cm: &&ConfigMap| {
        let uid = cm.metadata.uid.as_deref().unwrap();
        quarters.contains(&(u128::from(shard_hash(uid)) / QUARTER))
    };
    let expected = versions(all.iter().filter(in_share));
    until(
        &format!("the cache holds exactly quarters {quarters:?}, at the server's versions"),
        || versions(store.list().iter().map(|cm| cm.as_ref())) == expected,
    )
    .await;
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
        holds_exactly(&api, &informer.store(), step).await;
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

/// A change that could not be taken in by listing the moved ranges (the LIST failed), then
/// a second change while the whole share was being listed: the cache held no known share,
/// so the second is listed whole too. (Taking it in from the share begun, not the share
/// cached, kept the ranges of the first change that the second kept unlisted for good.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_during_a_relist_after_a_failed_move_relists_whole() {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    server
        .seed(
            &Gvr::core("configmaps"),
            (0..200).map(|i| json!({"metadata": {"name": format!("cm-{i}"), "namespace": "shop"}})),
        )
        .unwrap();
    let client = server.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    let share = LiveShare::new(quarters(&[0]));
    let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    let selectors = Selectors::default()
        .in_namespace("shop")
        .live_shards(share.clone());
    let informer = factory.informer_with(InformerSpec::<ConfigMap>::new().selectors(selectors));
    factory.start();
    holds_exactly(&api, &informer.store(), &[0]).await;

    // The move's LIST fails; the whole share's streaming list that follows is held.
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 500,
        times: 1,
        retry_after_seconds: None,
    });
    let gate = Gate::new();
    server.inject(Fault::Hold {
        verb: Verb::Watch,
        gate: gate.clone(),
        times: 1,
    });
    share.set(quarters(&[1]));
    until("the relist of quarter 1 held", || {
        server.fault_counts().get("hold") == Some(&1)
    })
    .await;
    assert_eq!(server.fault_counts().get("status:500"), Some(&1));
    share.set(quarters(&[1, 2]));
    gate.open();
    holds_exactly(&api, &informer.store(), &[1, 2]).await;
    factory.shutdown().await;
}
