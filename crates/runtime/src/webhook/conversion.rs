//! The conversion route: a `ConversionReview`'s objects, each converted to the version the
//! API server wants by the user's function, or the reason the first one could not be.

use std::{fmt::Display, panic::AssertUnwindSafe, sync::Arc};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use kube::core::{
    Status,
    conversion::{ConversionRequest, ConversionResponse, ConversionReview},
};
use serde_json::Value;

use super::{Route, panic_message};

type Convert = Arc<dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync>;

pub(super) struct ConversionRoute {
    convert: Convert,
}

impl ConversionRoute {
    pub(super) fn new<F, E>(convert: F) -> Self
    where
        F: Fn(Value, &str) -> Result<Value, E> + Send + Sync + 'static,
        E: Display,
    {
        ConversionRoute {
            convert: Arc::new(move |object, to| convert(object, to).map_err(|e| e.to_string())),
        }
    }
}

impl Route for ConversionRoute {
    fn answer(&self, body: Bytes, _: super::Budget) -> BoxFuture<'static, Vec<u8>> {
        let convert = self.convert.clone();
        Box::pin(async move {
            let request = match serde_json::from_slice::<ConversionReview>(&body)
                .map_err(|e| format!("cannot decode the ConversionReview: {e}"))
                .and_then(|review| {
                    ConversionRequest::from_review(review)
                        .map_err(|_| "the ConversionReview has no request".to_owned())
                }) {
                Ok(request) => request,
                Err(message) => {
                    let mut response = ConversionResponse::invalid(failed(400, &message));
                    response.uid = super::http::uid_of(&body);
                    return encode(response);
                }
            };
            let desired = request.desired_api_version.clone();
            let objects = request.objects.clone();
            let response = ConversionResponse::for_request(request);
            let mut converted = Vec::with_capacity(objects.len());
            for object in objects {
                let name = describe(&object);
                match convert_one(&*convert, object, &desired) {
                    Ok(object) => converted.push(object),
                    Err(error) => {
                        let message = format!("converting {name} to {desired}: {error}");
                        return encode(response.failure(failed(500, &message)));
                    }
                }
            }
            encode(response.success(converted))
        })
    }

    fn failure(&self, uid: &str, code: u16, message: &str) -> Vec<u8> {
        let mut response = ConversionResponse::invalid(failed(code, message));
        response.uid = uid.to_owned();
        encode(response)
    }
}

/// One object through the user's function (a panic is its error), stamped with the version
/// it was converted to.
fn convert_one(
    convert: &(dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync),
    object: Value,
    desired: &str,
) -> Result<Value, String> {
    let mut converted =
        std::panic::catch_unwind(AssertUnwindSafe(|| convert(object, desired)))
            .map_err(|panic| format!("the converter panicked: {}", panic_message(&*panic)))??;
    let Some(fields) = converted.as_object_mut() else {
        return Err("the converter returned something other than an object".to_owned());
    };
    fields.insert("apiVersion".to_owned(), Value::String(desired.to_owned()));
    Ok(converted)
}

/// `kind namespace/name` of an object, for errors.
fn describe(object: &Value) -> String {
    let text = |pointer| object.pointer(pointer).and_then(Value::as_str);
    let kind = text("/kind").unwrap_or("object");
    match (text("/metadata/namespace"), text("/metadata/name")) {
        (Some(namespace), Some(name)) => format!("{kind} {namespace}/{name}"),
        (None, Some(name)) => format!("{kind} {name}"),
        _ => kind.to_owned(),
    }
}

fn failed(code: u16, message: &str) -> Status {
    Status::failure(message, "").with_code(code)
}

fn encode(response: ConversionResponse) -> Vec<u8> {
    serde_json::to_vec(&response.into_review()).unwrap_or_default()
}
