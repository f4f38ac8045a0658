//! The runtime's spans as an OpenTelemetry backend receives them (feature `opentelemetry`,
//! an in-memory exporter in place of the OTLP one): one reconcile is one span with the
//! controller, kind, object, reconcile id and trigger as attributes, and the API request it
//! made is a client span of the same trace, its child.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use e2e::eventually;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions},
    telemetry::Telemetry,
};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData};
use serde_json::json;
use tracing_subscriber::prelude::*;

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[tokio::test]
async fn a_reconcile_and_its_api_call_are_exported_as_one_trace() {
    let exporter = InMemorySpanExporter::default();
    let telemetry = Telemetry::with_exporter("otel-test", exporter.clone());
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(telemetry.layer()));
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"]))
        .await
        .unwrap();
    server
        .create(
            &Gvr::core("configmaps"),
            Some("shop"),
            json!({"metadata": {"name": "a"}}),
        )
        .unwrap();
    let client = server.client().unwrap();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let controller =
        Controller::<ConfigMap>::new(&factory, ControllerOptions::default().name("exported"));
    let reconciled = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        {
            let (client, reconciled) = (client.clone(), reconciled.clone());
            move |_: Cached<ConfigMap>, _: Arc<()>| {
                let (client, reconciled) = (client.clone(), reconciled.clone());
                async move {
                    Api::<ConfigMap>::namespaced(client, "shop")
                        .get("a")
                        .await?;
                    reconciled.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, kube::Error>(Action::Done)
                }
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    factory.start();
    eventually("the reconcile", || reconciled.load(Ordering::SeqCst) == 1).await;
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    telemetry.flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let reconcile = spans
        .iter()
        .find(|s| s.name == "reconcile")
        .unwrap_or_else(|| {
            panic!(
                "no reconcile span in {:#?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    for (key, want) in [
        ("controller", "exported"),
        ("kind", "ConfigMap"),
        ("namespace", "shop"),
        ("name", "a"),
        ("trigger", "listed ConfigMap"),
    ] {
        assert_eq!(attribute(reconcile, key).as_deref(), Some(want), "{key}");
    }
    assert_eq!(
        attribute(reconcile, "reconcile_id").map(|id| id.len()),
        Some(16)
    );
    let context = &reconcile.span_context;
    let calls: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.parent_span_id == context.span_id())
        .collect();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let call = calls[0];
    assert_eq!(call.span_context.trace_id(), context.trace_id());
    assert_eq!(call.span_kind, opentelemetry::trace::SpanKind::Client);
    assert_eq!(attribute(call, "http.method").as_deref(), Some("GET"));
    assert_eq!(attribute(call, "http.status_code").as_deref(), Some("200"));
    assert!(
        attribute(call, "http.url")
            .unwrap()
            .ends_with("/api/v1/namespaces/shop/configmaps/a")
    );
}
