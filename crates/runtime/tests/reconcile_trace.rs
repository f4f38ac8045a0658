//! A reconcile's span, as a tracing (or OpenTelemetry) backend receives it: the controller,
//! the kind, the object, a reconcile id and what queued it, with every API request the
//! reconcile makes (kube's `HTTP` spans) as its child.

mod common;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use common::{server, until};
use fake_apiserver::Gvr;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tracing::{
    Subscriber,
    field::{Field, Visit},
    span::{Attributes, Id, Record},
};
use tracing_subscriber::{Layer, layer::Context, prelude::*, registry::LookupSpan};

/// A span as the backend got it.
#[derive(Clone, Debug)]
struct Recorded {
    id: u64,
    parent: Option<u64>,
    name: &'static str,
    fields: HashMap<String, String>,
}

#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Recorded>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Collect {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .map(|p| p.id().into_u64());
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().push(Recorded {
            id: id.into_u64(),
            parent,
            name: attrs.metadata().name(),
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}

#[tokio::test]
async fn a_reconcile_span_names_its_object_and_trigger_and_holds_its_api_calls() {
    let collect = Collect::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(collect.clone()));
    let server = server().await;
    let cms = Gvr::core("configmaps");
    let a = server
        .create(&cms, Some("shop"), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let client = server.client().unwrap();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let controller =
        Controller::<ConfigMap>::new(&factory, ControllerOptions::default().name("traced"))
            .owns::<Secret>();
    let reconciled = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        {
            let (client, reconciled) = (client.clone(), reconciled.clone());
            move |cm: Cached<ConfigMap>, _: Arc<()>| {
                let (client, reconciled) = (client.clone(), reconciled.clone());
                async move {
                    // One API call from inside the reconcile.
                    let api: Api<ConfigMap> = Api::namespaced(client, "shop");
                    let Cached::Present(_) = cm else {
                        return Ok(Action::Done);
                    };
                    api.get("a").await?;
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
    until("a reconciled", || reconciled.load(Ordering::SeqCst) == 1).await;
    // A child appears: it queues its owner.
    let uid = a["metadata"]["uid"].as_str().unwrap();
    server
        .create(&Gvr::core("secrets"), Some("shop"), json!({"metadata": {"name": "child",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": uid, "controller": true}]}}))
        .unwrap();
    until("a reconciled again", || {
        reconciled.load(Ordering::SeqCst) == 2
    })
    .await;
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;

    let spans = collect.0.lock().clone();
    let reconciles: Vec<&Recorded> = spans.iter().filter(|s| s.name == "reconcile").collect();
    assert_eq!(reconciles.len(), 2, "{reconciles:#?}");
    for span in &reconciles {
        let field = |name: &str| span.fields.get(name).map(String::as_str);
        assert_eq!(field("controller"), Some("traced"));
        assert_eq!(field("kind"), Some("ConfigMap"));
        assert_eq!(field("namespace"), Some("shop"));
        assert_eq!(field("name"), Some("a"));
        assert_eq!(field("reconcile_id").map(str::len), Some(16));
    }
    assert_ne!(
        reconciles[0].fields["reconcile_id"],
        reconciles[1].fields["reconcile_id"]
    );
    assert_eq!(reconciles[0].fields["trigger"], "listed ConfigMap");
    assert_eq!(
        reconciles[1].fields["trigger"],
        "added Secret shop/child (owns)"
    );
    // Each reconcile's GET is a child of its span.
    for span in reconciles {
        let calls: Vec<&Recorded> = spans
            .iter()
            .filter(|s| s.parent == Some(span.id) && s.name == "HTTP")
            .collect();
        assert_eq!(calls.len(), 1, "{calls:#?}");
        let url = &calls[0].fields["http.url"];
        assert!(
            url.contains("/api/v1/namespaces/shop/configmaps/a"),
            "{url}"
        );
        assert_eq!(
            calls[0].fields.get("http.method").map(String::as_str),
            Some("GET")
        );
    }
}
