//! `informer-bench protobuf`: JSON against protobuf on a real kube-apiserver (kube-envtest):
//! the same realistic pods, listed and watched in both encodings; the bytes each takes, the
//! one-core decode rate of each (best of three passes), and an informer's first sync with
//! each; then the same for metadata only (`PartialObjectMetadata`, metadata informers).

use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ObjectList, PostParams, WatchEvent},
    core::PartialObjectMeta,
};
use kube_envtest::{Environment, EnvironmentOptions};
use kube_informer::{
    factory::{FactoryOptions, SharedInformerFactory},
    informer::SharedIndexInformer,
    protobuf::{self, ListBody, ProtoKind},
    reflector::ReflectorOptions,
};

const NS: &str = "bench";

fn best_of_three(mut pass: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut count = 0;
    for _ in 0..3 {
        let started = Instant::now();
        count = pass();
        best = best.min(started.elapsed());
    }
    (best, count)
}

async fn get(client: &kube::Client, path: &str, accept: &str) -> Result<Vec<u8>, String> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let bytes = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(|e| e.to_string())?
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    Ok(bytes.to_vec())
}

/// Creates `pods` realistic pods (with their status), 16 requests at a time.
async fn seed(client: &kube::Client, pods: usize) -> Result<(), String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    stream::iter(0..pods)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut pod: Pod =
                    serde_json::from_value(fake_apiserver::fixtures::realistic_pod(i))
                        .map_err(|e| e.to_string())?;
                pod.metadata.namespace = Some(NS.to_owned());
                pod.metadata.managed_fields = None;
                pod.metadata.resource_version = None;
                pod.metadata.uid = None;
                let status = pod.status.take();
                // The volume the ServiceAccount admission plugin (off in kube-envtest) adds.
                let spec = pod.spec.get_or_insert_with(Default::default);
                let volumes = spec.volumes.get_or_insert_with(Vec::new);
                if !volumes.iter().any(|v| v.name == "kube-api-access") {
                    let volume = serde_json::json!({"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}});
                    volumes.push(serde_json::from_value(volume).map_err(|e| e.to_string())?);
                }
                let mut created = api
                    .create(&PostParams::default(), &pod)
                    .await
                    .map_err(|e| e.to_string())?;
                created.status = status;
                let name = created.metadata.name.clone().unwrap_or_default();
                api.replace_status(&name, &PostParams::default(), &created)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Runs the comparison on `pods` pods; `save`: a folder to keep the four bodies in.
pub(crate) fn run(pods: usize, save: Option<&std::path::Path>) -> Result<(), String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(compare(pods, save))
}

async fn compare(pods: usize, save: Option<&std::path::Path>) -> Result<(), String> {
    let env = Environment::start_or_skip(EnvironmentOptions::new().audit_log(false))
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no kube-apiserver: set KUBEBUILDER_ASSETS (kube-envtest install 1.36.x)")?;
    let client = env.client();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))
        .map_err(|e| e.to_string())?;
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    seed(&client, pods).await?;
    eprintln!("{pods} pods created in {:.1?}", started.elapsed());

    let list = format!("/api/v1/namespaces/{NS}/pods");
    let watch = format!("{list}?watch=true&resourceVersion=0&timeoutSeconds=1");
    let json_list = get(&client, &list, "application/json").await?;
    let pb_list = get(&client, &list, protobuf::ACCEPT).await?;
    let json_watch = get(&client, &watch, "application/json").await?;
    let pb_watch = get(&client, &watch, protobuf::ACCEPT_WATCH).await?;
    if let Some(dir) = save {
        for (name, bytes) in [
            ("list.json", &json_list),
            ("list.pb", &pb_list),
            ("watch.jsonl", &json_watch),
            ("watch.pb", &pb_watch),
        ] {
            std::fs::write(dir.join(format!("pods-{pods}-{name}")), bytes)
                .map_err(|e| e.to_string())?;
        }
    }

    measure(pods, &json_list, &pb_list, &json_watch, &pb_watch)?;

    println!(
        "\nAn informer's first sync of the {pods} pods (a factory informer, streaming list), twice each:\n"
    );
    println!("| encoding | managedFields | synced in |\n|---|---|---:|");
    for (protobuf, strip) in [(false, false), (true, false), (false, true), (true, true)].repeat(2)
    {
        let mut options = FactoryOptions::default().protobuf(protobuf);
        if !strip {
            options = options.keep_managed_fields();
        }
        let took = first_sync(&client, options, pods, |f| f.informer::<Pod>()).await?;
        let encoding = if protobuf { "protobuf" } else { "JSON" };
        let fields = if strip { "stripped" } else { "kept" };
        println!("| {encoding} | {fields} | {took:.2?} |");
    }
    list_modes(&client, pods).await?;
    metadata_only(&client, pods, &list).await?;
    env.stop().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Metadata only: the LIST's bytes and decode rates in JSON and protobuf, and a metadata
/// informer's first sync with each.
async fn metadata_only(client: &kube::Client, pods: usize, list: &str) -> Result<(), String> {
    let json_list = get(
        client,
        list,
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await?;
    let pb_list = get(client, list, protobuf::ACCEPT_METADATA_LIST).await?;
    let kind = ProtoKind::of("meta.k8s.io/v1", "PartialObjectMetadata")
        .ok_or("PartialObjectMetadata has no protobuf schema")?;
    type Meta = PartialObjectMeta<Pod>;
    let rows = [
        (
            "LIST, JSON → ObjectList<PartialObjectMeta<Pod>>",
            json_list.len(),
            best_of_three(|| {
                serde_json::from_slice::<ObjectList<Meta>>(&json_list).map_or(0, |l| l.items.len())
            }),
        ),
        (
            "LIST, protobuf → Vec<PartialObjectMeta<Pod>>",
            pb_list.len(),
            best_of_three(|| {
                ListBody::parse(&pb_list, kind)
                    .and_then(|l| l.items::<Meta>())
                    .map_or(0, |i| i.len())
            }),
        ),
    ];
    println!("\nThe same {pods} pods, metadata only, one core, best of three:\n");
    println!("| decode | bytes | pods decoded | pods/s | MB/s |\n|---|---:|---:|---:|---:|");
    for (what, bytes, (took, decoded)) in rows {
        println!(
            "| {what} | {bytes} | {decoded} | {:.0} | {:.0} |",
            decoded as f64 / took.as_secs_f64(),
            bytes as f64 / took.as_secs_f64() / 1e6
        );
    }
    println!(
        "\nA metadata informer's first sync (streaming list), four times each, interleaved:\n"
    );
    println!("| encoding | synced in |\n|---|---:|");
    for protobuf in [false, true].repeat(4) {
        let options = FactoryOptions::default().protobuf(protobuf);
        let took = first_sync(client, options, pods, |factory| {
            factory.metadata_informer::<Pod>()
        })
        .await?;
        let encoding = if protobuf { "protobuf" } else { "JSON" };
        println!("| {encoding} | {took:.2?} |");
    }
    Ok(())
}

/// How long the informer `make` asks a factory with `options` for takes to sync all `pods`.
async fn first_sync<K: kube::Resource + Clone + Send + Sync + 'static>(
    client: &kube::Client,
    options: FactoryOptions,
    pods: usize,
    make: impl FnOnce(&SharedInformerFactory) -> SharedIndexInformer<K>,
) -> Result<Duration, String> {
    let factory = SharedInformerFactory::new(client.clone(), options);
    let informer = make(&factory);
    let started = Instant::now();
    factory.start();
    informer
        .wait_for_sync(Duration::from_secs(300))
        .await
        .map_err(|e| e.to_string())?;
    let took = started.elapsed();
    let synced = informer.store().len();
    factory.shutdown().await;
    match synced == pods {
        true => Ok(took),
        false => Err(format!("synced {synced} pods, not {pods}")),
    }
}

/// The factory's default first sync (a streaming list) against a paged LIST (a consistent
/// one, pages of 500, as kube-rs and client-node list) and a LIST at `"0"` (served whole
/// from the watch cache, the page size ignored), protobuf and managedFields left out in
/// all, three times each, interleaved.
async fn list_modes(client: &kube::Client, pods: usize) -> Result<(), String> {
    println!(
        "\nA factory informer's first sync of the {pods} pods: streaming list (its default), paged LIST, LIST at \"0\"; three times each, interleaved:\n"
    );
    println!("| first sync | synced in |\n|---|---:|");
    let modes = [
        ("streaming list", true, false),
        ("paged LIST (500, consistent)", false, true),
        ("LIST at \"0\" (watch cache, whole)", false, false),
    ];
    for (mode, streaming, consistent) in modes.repeat(3) {
        let reflector = ReflectorOptions::default()
            .streaming_lists(streaming)
            .consistent_first_list(consistent)
            .page_size(500);
        let options = FactoryOptions::default().reflector(reflector);
        let took = first_sync(client, options, pods, |f| f.informer::<Pod>()).await?;
        println!("| {mode} | {took:.2?} |");
    }
    Ok(())
}

/// The decode rates of the four bodies, one core, best of three; printed as a table.
fn measure(
    pods: usize,
    json_list: &[u8],
    pb_list: &[u8],
    json_watch: &[u8],
    pb_watch: &[u8],
) -> Result<(), String> {
    let kind = ProtoKind::of_type::<Pod>().ok_or("Pod has no protobuf schema")?;
    let lines: Vec<&[u8]> = json_watch
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let (frames, _) =
        protobuf::split_frames(pb_watch, protobuf::MAX_FRAME).map_err(|e| e.to_string())?;
    let rows = [
        (
            "LIST, JSON → ObjectList<Pod>",
            json_list.len(),
            best_of_three(|| {
                serde_json::from_slice::<ObjectList<Pod>>(json_list).map_or(0, |l| l.items.len())
            }),
        ),
        (
            "LIST, protobuf → Vec<Pod>",
            pb_list.len(),
            best_of_three(|| {
                ListBody::parse(pb_list, kind)
                    .and_then(|l| l.items::<Pod>())
                    .map_or(0, |i| i.len())
            }),
        ),
        (
            "LIST, protobuf, managedFields skipped",
            pb_list.len(),
            best_of_three(|| {
                let kind = kind.without_managed_fields();
                ListBody::parse(pb_list, kind)
                    .and_then(|l| l.items::<Pod>())
                    .map_or(0, |i| i.len())
            }),
        ),
        (
            "watch, JSON lines → WatchEvent<Pod>",
            json_watch.len(),
            best_of_three(|| {
                lines
                    .iter()
                    .filter(|l| serde_json::from_slice::<WatchEvent<Pod>>(l).is_ok())
                    .count()
            }),
        ),
        (
            "watch, protobuf frames → WatchEvent<Pod>",
            pb_watch.len(),
            best_of_three(|| {
                frames
                    .iter()
                    .filter(|f| protobuf::decode_watch_event::<Pod>(f, kind).is_ok())
                    .count()
            }),
        ),
        (
            "watch, protobuf, managedFields skipped",
            pb_watch.len(),
            best_of_three(|| {
                let kind = kind.without_managed_fields();
                frames
                    .iter()
                    .filter(|f| protobuf::decode_watch_event::<Pod>(f, kind).is_ok())
                    .count()
            }),
        ),
    ];
    println!(
        "\n{pods} realistic pods from kube-apiserver v1.36 (kube-envtest), one core, best of three:\n"
    );
    println!("| decode | bytes | pods decoded | pods/s | MB/s |\n|---|---:|---:|---:|---:|");
    for (what, bytes, (took, decoded)) in rows {
        println!(
            "| {what} | {bytes} | {decoded} | {:.0} | {:.0} |",
            decoded as f64 / took.as_secs_f64(),
            bytes as f64 / took.as_secs_f64() / 1e6
        );
    }
    Ok(())
}

/// [`measure`] on bodies saved by an earlier run (`--save`), without a server.
pub(crate) fn measure_saved(dir: &std::path::Path, pods: usize) -> Result<(), String> {
    let read = |name: &str| {
        std::fs::read(dir.join(format!("pods-{pods}-{name}"))).map_err(|e| format!("{name}: {e}"))
    };
    let (json_list, pb_list) = (read("list.json")?, read("list.pb")?);
    let (json_watch, pb_watch) = (read("watch.jsonl")?, read("watch.pb")?);
    measure(pods, &json_list, &pb_list, &json_watch, &pb_watch)
}
