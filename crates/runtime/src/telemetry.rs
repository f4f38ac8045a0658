//! OpenTelemetry export of the operator's spans (feature `opentelemetry`, off by default):
//! each reconcile (controller, kind, namespace, name, `reconcile_id`, `trigger`) with the API
//! requests it made as child spans, sent to an OTLP collector (Jaeger, Tempo, Honeycomb,
//! the OpenTelemetry Collector) over gRPC.
//!
//! # Setup
//!
//! ```toml
//! kube-informer-runtime = { version = "0.1", features = ["opentelemetry"] }
//! tracing-subscriber = { version = "0.3", features = ["env-filter", "fmt"] }
//! ```
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kube_informer_runtime::telemetry::Telemetry;
//! use tracing_subscriber::{EnvFilter, prelude::*};
//!
//! // OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4317) and OTEL_SERVICE_NAME are
//! // read as every OpenTelemetry SDK reads them.
//! let telemetry = Telemetry::otlp("widget-operator")?;
//! tracing_subscriber::registry()
//!     // `debug` for kube's HTTP spans (the API requests inside each reconcile).
//!     .with(EnvFilter::new("info,kube_client=debug"))
//!     .with(tracing_subscriber::fmt::layer())
//!     .with(telemetry.layer())
//!     .init();
//! // ... run the manager ...
//! telemetry.shutdown()?; // sends what is still buffered
//! # Ok(()) }
//! ```
//!
//! In the backend, search for the `reconcile` spans of a controller, or of one object by
//! `namespace` and `name`; a reconcile's trace holds its `GET`, `PATCH`... requests with
//! their status codes. The `trigger` says what queued it (`updated Pod shop/web-1 (owns)`).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::{
    Resource,
    trace::{SdkTracer, SdkTracerProvider, SpanExporter},
};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

/// Why the exporter could not start or stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The OTLP exporter could not be built (an endpoint that is not a URL).
    #[error("building the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// Flushing or stopping the exporter failed (the collector did not answer in time).
    #[error("stopping the span exporter: {0}")]
    Shutdown(#[from] opentelemetry_sdk::error::OTelSdkError),
}

/// The span pipeline: a tracer provider whose [`layer`](Self::layer) goes into the
/// `tracing` subscriber.
#[derive(Debug, Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

/// The service's resource: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` when set,
/// else `service_name`.
fn resource(service_name: &str) -> Resource {
    let builder = Resource::builder();
    match std::env::var_os("OTEL_SERVICE_NAME") {
        Some(_) => builder.build(),
        None => builder.with_service_name(service_name.to_owned()).build(),
    }
}

impl Telemetry {
    /// Spans batched to an OTLP collector over gRPC. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`TelemetryError::Exporter`] when the endpoint is not usable.
    pub fn otlp(service_name: &str) -> Result<Self, TelemetryError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource(service_name))
            .build();
        Ok(Self { provider })
    }

    /// Spans sent, one by one as they end, to `exporter` (any OpenTelemetry exporter: an
    /// in-memory one in tests, stdout while debugging).
    pub fn with_exporter(service_name: &str, exporter: impl SpanExporter + 'static) -> Self {
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter)
            .with_resource(resource(service_name))
            .build();
        Self { provider }
    }

    /// The `tracing` layer that turns spans into OpenTelemetry spans.
    pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer("kube-informer-runtime");
        tracing_opentelemetry::layer().with_tracer(tracer)
    }

    /// Sends the spans still buffered.
    ///
    /// # Errors
    /// [`TelemetryError::Shutdown`] when the collector did not take them.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        Ok(self.provider.force_flush()?)
    }

    /// Sends the spans still buffered and stops. It blocks: on a current-thread runtime,
    /// call it from `spawn_blocking` (the exporter needs the runtime to send).
    ///
    /// # Errors
    /// [`TelemetryError::Shutdown`] when the collector did not take them in time.
    pub fn shutdown(&self) -> Result<(), TelemetryError> {
        Ok(self.provider.shutdown()?)
    }
}
