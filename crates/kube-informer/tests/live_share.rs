//! An informer whose share (KEP-5866 hash ranges) changes while it runs: after each change
//! the cache holds exactly the objects of the new share, while objects keep being created;
//! an empty share holds nothing and sends no request. On fake-apiserver honouring
//! `shardSelector` and ignoring it (the reflector filters either way).

use std::collections::BTreeSet;

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
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

async fn a_live_share_holds_exactly_its_ranges_as_they_change(honoured: bool) {
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

    let share = LiveShare::new(None);
    let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    let selectors = Selectors::default()
        .in_namespace("shop")
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
    let requests = |server: &FakeApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.resource.as_deref() == Some("configmaps"))
            .filter(|r| matches!(r.verb, Some(Verb::List | Verb::Watch)))
            .count()
    };
    assert_eq!(requests(&server), 0, "an empty share asks for nothing");

    let held = || -> BTreeSet<String> {
        informer
            .store()
            .list()
            .iter()
            .map(|cm| cm.metadata.uid.clone().unwrap())
            .collect()
    };
    let mut created = 200;
    for step in [&[0][..], &[0, 1], &[1], &[2, 3], &[]] {
        share.set(quarters(step));
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
    }
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_share_holds_exactly_its_ranges_as_they_change_on_a_server_that_filters() {
    a_live_share_holds_exactly_its_ranges_as_they_change(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_share_holds_exactly_its_ranges_as_they_change_on_a_server_that_ignores_it() {
    a_live_share_holds_exactly_its_ranges_as_they_change(false).await;
}
