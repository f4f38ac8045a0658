//! Making a CA and serving certificates (ECDSA P-256, as kube-apiserver's own), and reading
//! when a certificate expires.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use time::OffsetDateTime;

/// A certificate and its private key, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Pair {
    pub(super) cert: String,
    pub(super) key: String,
}

/// Certificates start a minute in the past, for clocks a little behind ours.
const SKEW: Duration = Duration::from_secs(60);

fn validity(params: &mut CertificateParams, now: i64, lasts: Duration, cap: Option<i64>) {
    let now =
        OffsetDateTime::from_unix_timestamp(now).unwrap_or_else(|_| OffsetDateTime::now_utc());
    params.not_before = now - SKEW;
    let mut until = now + lasts;
    if let Some(cap) = cap.and_then(|c| OffsetDateTime::from_unix_timestamp(c).ok()) {
        until = until.min(cap);
    }
    params.not_after = until;
}

/// A new CA named `name`, valid for `lasts` from `now` (Unix seconds).
pub(super) fn new_ca(name: &str, now: i64, lasts: Duration) -> Result<Pair, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{name}-ca"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, now, lasts, None);
    let cert = params.self_signed(&key)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A serving certificate for `names` signed by `ca`, valid for `lasts` from `now` but never
/// past the CA.
pub(super) fn new_serving(
    ca: &Pair,
    names: &[String],
    now: i64,
    lasts: Duration,
) -> Result<Pair, rcgen::Error> {
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, KeyPair::from_pem(&ca.key)?)?;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(names.to_vec())?;
    let common_name = names
        .first()
        .cloned()
        .unwrap_or_else(|| "webhook".to_owned());
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, now, lasts, not_after(&ca.cert));
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// Each certificate of a PEM bundle, with when it expires (Unix seconds). Blocks that are
/// not certificates, or do not parse, are left out.
pub(super) fn certificates(bundle: &str) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for pem in x509_parser::pem::Pem::iter_from_buffer(bundle.as_bytes()).flatten() {
        if pem.label != "CERTIFICATE" {
            continue;
        }
        if let Ok(cert) = pem.parse_x509() {
            let expires = cert.validity().not_after.timestamp();
            let text = pem_block(&pem.contents);
            found.push((text, expires));
        }
    }
    found
}

/// When the first certificate of `pem` expires (Unix seconds).
pub(super) fn not_after(pem: &str) -> Option<i64> {
    certificates(pem).first().map(|(_, expires)| *expires)
}

/// The names (DNS and IP) a certificate is for.
pub(super) fn names(pem: &str) -> Vec<String> {
    let Some(Ok(pem)) = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).next() else {
        return Vec::new();
    };
    let Ok(cert) = pem.parse_x509() else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            x509_parser::extensions::GeneralName::IPAddress(ip) => match ip.len() {
                4 => Some(std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]).to_string()),
                16 => <[u8; 16]>::try_from(*ip)
                    .ok()
                    .map(|b| std::net::Ipv6Addr::from(b).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A certificate's DER as one PEM block.
fn pem_block(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serving_certificate_is_for_its_names_and_never_outlives_its_ca() {
        let now = 1_800_000_000;
        let ca = new_ca("widgets", now, Duration::from_secs(3600)).unwrap();
        assert_eq!(not_after(&ca.cert), Some(now + 3600));
        let names = ["webhook.system.svc".to_owned(), "127.0.0.1".to_owned()];
        let serving = new_serving(&ca, &names, now, Duration::from_secs(7200)).unwrap();
        assert_eq!(
            not_after(&serving.cert),
            Some(now + 3600),
            "capped at the CA's end"
        );
        assert_eq!(super::names(&serving.cert), names);
        let short = new_serving(&ca, &names, now, Duration::from_secs(60)).unwrap();
        assert_eq!(not_after(&short.cert), Some(now + 60));
    }

    #[test]
    fn a_bundle_is_split_into_its_certificates_and_their_expiries() {
        let a = new_ca("a", 1_800_000_000, Duration::from_secs(100)).unwrap();
        let b = new_ca("b", 1_800_000_000, Duration::from_secs(200)).unwrap();
        let bundle = format!("{}{}", a.cert, b.cert);
        let found = certificates(&bundle);
        let expiries: Vec<i64> = found.iter().map(|(_, e)| *e).collect();
        assert_eq!(expiries, [1_800_000_100, 1_800_000_200]);
        assert_eq!(
            certificates(&found[1].0),
            [found[1].clone()],
            "blocks round-trip"
        );
        assert!(certificates("not a certificate").is_empty());
    }
}
