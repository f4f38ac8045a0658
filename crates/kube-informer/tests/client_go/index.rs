//! client-go `tools/cache/index_test.go`: index function values, and objects under several
//! index values at once.

use std::{collections::BTreeSet, sync::Arc};

use k8s_openapi::api::core::v1::Pod;
use kube_informer::{Indexers, Store};

fn pod(name: &str, labels: &[(&str, &str)], users: Option<&str>) -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.into());
    pod.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
    );
    pod.metadata.annotations = users.map(|u| [("users".to_owned(), u.to_owned())].into());
    Arc::new(pod)
}

/// Mirrors `TestGetIndexFuncValues`.
#[test]
fn get_index_func_values() {
    let foo = |p: &Pod| vec![p.metadata.labels.as_ref().unwrap()["foo"].clone()];
    let index = Store::new(Indexers::new().index("testmodes", foo));
    index.add(pod("one", &[("foo", "bar")], None)).unwrap();
    index.add(pod("two", &[("foo", "bar")], None)).unwrap();
    index.add(pod("tre", &[("foo", "biz")], None)).unwrap();
    let mut values = index.list_index_func_values("testmodes").unwrap();
    values.sort();
    assert_eq!(values, ["bar", "biz"]);
}

fn names(pods: Vec<Arc<Pod>>) -> BTreeSet<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect()
}

/// Mirrors `TestMultiIndexKeys`.
#[test]
fn multi_index_keys() {
    let users = |p: &Pod| {
        p.metadata.annotations.as_ref().unwrap()["users"]
            .split(',')
            .map(str::to_owned)
            .collect()
    };
    let index = Store::new(Indexers::new().index("byUser", users));
    index.add(pod("one", &[], Some("ernie,bert"))).unwrap();
    index.add(pod("two", &[], Some("bert,oscar"))).unwrap();
    index.add(pod("tre", &[], Some("ernie,elmo"))).unwrap();
    let by = |user: &str| names(index.by_index("byUser", user).unwrap());
    let set = |names: &[&str]| {
        names
            .iter()
            .map(|n| (*n).to_owned())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(by("ernie"), set(&["one", "tre"]));
    assert_eq!(by("bert"), set(&["one", "two"]));
    assert_eq!(by("elmo"), set(&["tre"]));
    assert_eq!(by("oscar"), set(&["two"]));
    assert_eq!(by("elmo1"), set(&[]));

    index.delete(&pod("tre", &[], Some("ernie,elmo"))).unwrap();
    assert_eq!(by("ernie"), set(&["one"]));
    assert_eq!(by("elmo"), set(&[]));

    index.update(pod("two", &[], Some("oscar"))).unwrap();
    assert_eq!(by("bert"), set(&["one"]));
}
