//! kubectl's everyday commands with its defaults, on both servers: the `create` generators
//! of the built-in kinds (protobuf bodies), `get all`, and a CustomResourceDefinition
//! applied from a file, established and served; its custom resources patched as kubectl
//! patches them (a strategic merge patch is refused with the real server's words); and its
//! deletion deleting them (a watch sees each go) and taking its API away.

use std::path::{Path, PathBuf};

use e2e::{Backend, both};
use futures_util::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::{
    batch::v1::{CronJob, Job},
    core::v1::ResourceQuota,
    networking::v1::Ingress,
    policy::v1::PodDisruptionBudget,
    rbac::v1::{Role, RoleBinding},
    scheduling::v1::PriorityClass,
};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams},
    core::ObjectList,
};

/// Runs kubectl, expecting success; `None` when kubectl is not installed (the test skips).
async fn ok(backend: &Backend, args: &[&str]) -> Option<String> {
    backend.kubectl(args).await
}

/// This build of kube-apiserver answers `/openapi/v2` with 503, where kubectl's client-side
/// validation of `apply` looks; the fake is asked with kubectl's default (validation on).
fn apply_args<'a>(backend: &Backend, file: &'a str, ns: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec!["apply", "-f", file];
    if backend.name() == "real" {
        args.push("--validate=false");
    }
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    args
}

fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("a temporary file");
    path
}

async fn kubectl_creates_the_built_in_kinds(backend: Backend) {
    let name = backend.name();
    let ns = "kubectl-kinds";
    if ok(&backend, &["create", "namespace", ns]).await.is_none() {
        return;
    }
    let commands: [&[&str]; 13] = [
        &["create", "serviceaccount", "sa"],
        &["create", "service", "clusterip", "svc", "--tcp=80:8080"],
        &["create", "deployment", "d", "--image=nginx"],
        &["create", "job", "j", "--image=busybox"],
        &[
            "create",
            "cronjob",
            "cj",
            "--image=busybox",
            "--schedule=*/5 * * * *",
        ],
        &["create", "job", "j2", "--from=cronjob/cj"],
        &["create", "role", "r", "--verb=get", "--resource=pods"],
        &[
            "create",
            "rolebinding",
            "rb",
            "--role=r",
            "--serviceaccount=kubectl-kinds:sa",
        ],
        &["create", "quota", "q", "--hard=pods=10"],
        &[
            "create",
            "poddisruptionbudget",
            "pdb",
            "--selector=app=d",
            "--min-available=1",
        ],
        &["create", "ingress", "ing", "--rule=foo.com/bar=svc:80"],
        &[
            "create",
            "clusterrole",
            "kubectl-e2e-cr",
            "--verb=list",
            "--resource=nodes",
        ],
        &[
            "create",
            "clusterrolebinding",
            "kubectl-e2e-crb",
            "--clusterrole=kubectl-e2e-cr",
            "--user=u",
        ],
    ];
    for command in commands {
        let args = [command, &["-n", ns]].concat();
        let out = ok(&backend, &args).await.expect("kubectl");
        assert!(out.contains("created"), "{name}: {args:?}: {out}");
    }
    let out = ok(
        &backend,
        &["create", "priorityclass", "kubectl-e2e-pc", "--value=1000"],
    )
    .await
    .expect("kubectl");
    assert!(out.contains("created"), "{name}: {out}");

    // What each generator wrote is stored as it wrote it.
    let client = backend.client();
    let job: Job = Api::namespaced(client.clone(), ns).get("j").await.unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("busybox"),
        "{name}"
    );
    let cron: CronJob = Api::namespaced(client.clone(), ns).get("cj").await.unwrap();
    assert_eq!(cron.spec.schedule, "*/5 * * * *", "{name}");
    let from_cron: Job = Api::namespaced(client.clone(), ns).get("j2").await.unwrap();
    let annotations = from_cron.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("cronjob.kubernetes.io/instantiate")
            .map(String::as_str),
        Some("manual"),
        "{name}"
    );
    let owner = &from_cron.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("CronJob", "cj"),
        "{name}"
    );
    let role: Role = Api::namespaced(client.clone(), ns).get("r").await.unwrap();
    let rule = &role.rules.unwrap()[0];
    assert_eq!(
        (rule.verbs.clone(), rule.resources.clone()),
        (vec!["get".to_owned()], Some(vec!["pods".to_owned()])),
        "{name}"
    );
    let binding: RoleBinding = Api::namespaced(client.clone(), ns).get("rb").await.unwrap();
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.kind.as_str(), subject.name.as_str()),
        ("ServiceAccount", "sa"),
        "{name}"
    );
    let quota: ResourceQuota = Api::namespaced(client.clone(), ns).get("q").await.unwrap();
    assert_eq!(quota.spec.unwrap().hard.unwrap()["pods"].0, "10", "{name}");
    let pdb: PodDisruptionBudget = Api::namespaced(client.clone(), ns)
        .get("pdb")
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(pdb.spec.unwrap().min_available).unwrap(),
        1,
        "{name}"
    );
    let ingress: Ingress = Api::namespaced(client.clone(), ns)
        .get("ing")
        .await
        .unwrap();
    let rules = ingress.spec.unwrap().rules.unwrap();
    assert_eq!(rules[0].host.as_deref(), Some("foo.com"), "{name}");
    let pc: PriorityClass = Api::all(client.clone())
        .get("kubectl-e2e-pc")
        .await
        .unwrap();
    assert_eq!(pc.value, Some(1000), "{name}");

    // `get all`: the kinds in the `all` category, found through discovery.
    let all = ok(&backend, &["get", "all", "-n", ns, "-o", "name"])
        .await
        .expect("kubectl");
    for expected in [
        "service/svc",
        "deployment.apps/d",
        "job.batch/j",
        "job.batch/j2",
        "cronjob.batch/cj",
    ] {
        assert!(
            all.lines().any(|l| l == expected),
            "{name}: {expected} in {all}"
        );
    }
    assert!(
        !all.contains("role"),
        "{name}: roles are not in `all`: {all}"
    );
}

both!(kubectl_creates_the_built_in_kinds);

const GROUP: &str = "kubectl.e2e.example.com";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.kubectl.e2e.example.com
spec:
  group: kubectl.e2e.example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

const GIZMO: &str = "apiVersion: kubectl.e2e.example.com/v1
kind: Gizmo
metadata: {name: g1}
spec: {size: 3}
";

/// A raw GET: the status and the body as text.
async fn get(client: &kube::Client, path: &str) -> (u16, String) {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn a_crd_applied_by_kubectl_serves_its_resources(backend: Backend) {
    let name = backend.name();
    let ns = "kubectl-crd";
    if ok(&backend, &["create", "namespace", ns]).await.is_none() {
        return;
    }
    let files = tempfile::tempdir().expect("a temporary folder");
    let crd_file = write_file(files.path(), "crd.yaml", CRD);
    let gizmo_file = write_file(files.path(), "gizmo.yaml", GIZMO);
    let (crd_file, gizmo_file) = (crd_file.to_str().unwrap(), gizmo_file.to_str().unwrap());
    let out = ok(&backend, &apply_args(&backend, crd_file, None))
        .await
        .expect("kubectl");
    assert!(out.contains("created"), "{name}: {out}");
    ok(
        &backend,
        &[
            "wait",
            "--for=condition=established",
            "crd/gizmos.kubectl.e2e.example.com",
            "--timeout=60s",
        ],
    )
    .await
    .expect("kubectl");
    let out = ok(&backend, &apply_args(&backend, gizmo_file, Some(ns)))
        .await
        .expect("kubectl");
    assert!(
        out.contains("gizmo.kubectl.e2e.example.com/g1 created"),
        "{name}: {out}"
    );

    // Patched as kubectl patches: a merge patch and a label apply; the default strategic
    // merge patch is refused, in the real server's words.
    let patch = [
        "patch",
        "gizmo",
        "g1",
        "-n",
        ns,
        "--type=merge",
        "-p",
        r#"{"spec":{"size":4}}"#,
    ];
    ok(&backend, &patch).await.expect("kubectl");
    let (patched, refusal) = backend
        .kubectl_result(&[
            "patch",
            "gz",
            "g1",
            "-n",
            ns,
            "-p",
            r#"{"spec":{"size":5}}"#,
        ])
        .await
        .expect("kubectl");
    assert!(
        !patched,
        "{name}: a strategic merge patch of a custom resource: {refusal}"
    );
    assert!(
        refusal.contains("application/strategic-merge-patch+json is not supported by kubectl.e2e.example.com/v1, Kind=Gizmo"),
        "{name}: {refusal}"
    );
    ok(&backend, &["label", "gizmo", "g1", "-n", ns, "tier=one"])
        .await
        .expect("kubectl");
    let read = ok(
        &backend,
        &[
            "get",
            "gz",
            "g1",
            "-n",
            ns,
            "-o",
            "jsonpath={.spec.size}/{.metadata.labels.tier}",
        ],
    )
    .await
    .expect("kubectl");
    assert_eq!(read.trim(), "4/one", "{name}");

    // Deleting the CRD deletes its objects (a watch sees each go) and its API.
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Gizmo"), "gizmos");
    let gizmos: Api<DynamicObject> = Api::namespaced_with(backend.client(), ns, &resource);
    let list: ObjectList<DynamicObject> = gizmos.list(&Default::default()).await.unwrap();
    let version = list.metadata.resource_version.unwrap();
    let mut watch = gizmos
        .watch(&WatchParams::default().timeout(60), &version)
        .await
        .unwrap()
        .boxed();
    let out = ok(
        &backend,
        &["delete", "crd", "gizmos.kubectl.e2e.example.com"],
    )
    .await
    .expect("kubectl");
    assert!(out.contains("deleted"), "{name}: {out}");
    let mut deleted = None;
    while let Some(event) = watch.next().await {
        if let WatchEvent::Deleted(object) = event.unwrap() {
            deleted = object.metadata.name;
            break;
        }
    }
    assert_eq!(
        deleted.as_deref(),
        Some("g1"),
        "{name}: the watch saw g1 deleted"
    );
    // The group is served no more: the real server's mux answers in plain text.
    let mut status = 0;
    let mut body = String::new();
    for _ in 0..600 {
        (status, body) = get(
            &backend.client(),
            &format!("/apis/{GROUP}/v1/namespaces/{ns}/gizmos"),
        )
        .await;
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!((status, body.trim()), (404, "404 page not found"), "{name}");
}

both!(a_crd_applied_by_kubectl_serves_its_resources);
