//! The certificates in their Secret, shared by every replica. Writes carry the
//! `resourceVersion` they were planned from: when two replicas plan at once, one write
//! wins, the other gets a conflict and plans again from what the winner wrote — so they
//! never fight, and never make two CAs for one roll.

use std::collections::BTreeMap;

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{Api, api::PostParams};

use super::{
    CertError,
    pki::Pair,
    plan::{self, CertSpec, Step, Stored, Trusted},
};

const SERVING_CERT: &str = "tls.crt";
const SERVING_KEY: &str = "tls.key";
/// Every CA clients should trust: the `caBundle` (the key cert-manager uses for its CA).
const BUNDLE: &str = "ca.crt";
const CA_CERT: &str = "signing-ca.crt";
const CA_KEY: &str = "signing-ca.key";
const NEXT_CERT: &str = "next-ca.crt";
const NEXT_KEY: &str = "next-ca.key";
/// When the next CA entered the bundle (Unix seconds).
const NEXT_SINCE: &str = "kube-informer.io/next-ca-since";
/// Since when every webhook configuration has held the next CA (Unix seconds).
const NEXT_INJECTED: &str = "kube-informer.io/next-ca-injected-since";

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> String {
    data.get(key)
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

fn pair(data: &BTreeMap<String, ByteString>, cert: &str, key: &str) -> Option<Pair> {
    let pair = Pair {
        cert: text(data, cert),
        key: text(data, key),
    };
    (!pair.cert.is_empty()).then_some(pair)
}

pub(super) fn read(secret: &Secret) -> Stored {
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let annotation = |name: &str| -> Option<i64> {
        secret
            .metadata
            .annotations
            .as_ref()?
            .get(name)?
            .parse()
            .ok()
    };
    Stored {
        ca: pair(data, CA_CERT, CA_KEY),
        next_ca: pair(data, NEXT_CERT, NEXT_KEY).zip(annotation(NEXT_SINCE)),
        next_injected: annotation(NEXT_INJECTED),
        serving: pair(data, SERVING_CERT, SERVING_KEY),
        bundle: text(data, BUNDLE),
    }
}

/// `secret` (or a new one) holding `stored`; other keys and metadata kept.
fn write(mut secret: Secret, stored: &Stored) -> Secret {
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    let mut put = |key: &str, value: Option<&String>| match value {
        Some(v) => {
            data.insert(key.to_owned(), ByteString(v.clone().into_bytes()));
        }
        None => {
            data.remove(key);
        }
    };
    put(CA_CERT, stored.ca.as_ref().map(|p| &p.cert));
    put(CA_KEY, stored.ca.as_ref().map(|p| &p.key));
    put(NEXT_CERT, stored.next_ca.as_ref().map(|(p, _)| &p.cert));
    put(NEXT_KEY, stored.next_ca.as_ref().map(|(p, _)| &p.key));
    put(SERVING_CERT, stored.serving.as_ref().map(|p| &p.cert));
    put(SERVING_KEY, stored.serving.as_ref().map(|p| &p.key));
    put(BUNDLE, Some(&stored.bundle));
    let annotations = secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    let mut note = |name: &str, value: Option<i64>| match value {
        Some(at) => annotations.insert(name.to_owned(), at.to_string()),
        None => annotations.remove(name),
    };
    note(NEXT_SINCE, stored.next_ca.as_ref().map(|(_, since)| *since));
    note(NEXT_INJECTED, stored.next_injected);
    secret
}

/// Reads the Secret, makes what the certificates need now (the configurations trusting
/// `trusted`), and writes it back; on a lost race, again from the winner's. What the Secret
/// holds after, and the steps this replica made (none when it was already as it should
/// be, or another replica made them).
pub(super) async fn settle(
    api: &Api<Secret>,
    name: &str,
    spec: &CertSpec,
    trusted: &Trusted,
    now: impl Fn() -> i64,
) -> Result<(Stored, Vec<Step>), CertError> {
    let (pp, now) = (&PostParams::default(), &now);
    let what = || format!("the Secret {name} of the webhook certificates");
    // Another replica wrote first (409 on update, on create too): plan again from what it
    // wrote.
    super::write_again_on_conflict(what, move || async move {
        let current = api.get_opt(name).await.map_err(CertError::Secret)?;
        let stored = current.as_ref().map(read).unwrap_or_default();
        let Some((next, steps)) =
            plan::settle(&stored, now(), spec, trusted).map_err(CertError::Generate)?
        else {
            return Ok(Some((stored, Vec::new())));
        };
        let written = match current {
            Some(secret) => api.replace(name, pp, &write(secret, &next)).await,
            None => {
                let mut secret = Secret::default();
                secret.metadata.name = Some(name.to_owned());
                secret.type_ = Some("kubernetes.io/tls".to_owned());
                api.create(pp, &write(secret, &next)).await
            }
        };
        let written = super::lost_race(written).map_err(CertError::Secret)?;
        Ok(written.map(|_| (next, steps)))
    })
    .await
}
