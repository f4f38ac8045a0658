//! The keys and certificates an environment needs, generated in-process: a CA, a serving
//! certificate for `127.0.0.1`/`localhost` signed by it, a service-account signing key pair
//! (all ECDSA P-256) and a random admin token.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use ring::rand::SecureRandom as _;

use crate::Error;

/// Everything kube-apiserver and its clients need to trust each other, as PEM text.
pub(crate) struct Pki {
    /// The CA certificate clients trust.
    pub(crate) ca_pem: String,
    /// The serving certificate (SANs 127.0.0.1, ::1, localhost), signed by the CA.
    pub(crate) serving_cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub(crate) serving_key_pem: String,
    /// The service-account token signing key (PKCS#8).
    pub(crate) sa_private_pem: String,
    /// Its public half (SubjectPublicKeyInfo), for verifying tokens.
    pub(crate) sa_public_pem: String,
    /// The admin bearer token (32 hex digits).
    pub(crate) token: String,
}

impl Pki {
    pub(crate) fn generate() -> Result<Pki, Error> {
        let serving = ServingCerts::generate("kube-apiserver")?;
        let sa_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
            .map_err(cert_err("service-account signing key"))?;
        Ok(Pki {
            ca_pem: serving.ca_pem,
            serving_cert_pem: serving.cert_pem,
            serving_key_pem: serving.key_pem,
            sa_private_pem: sa_key.serialize_pem(),
            sa_public_pem: sa_key.public_key_pem(),
            token: random_token()?,
        })
    }
}

fn cert_err(what: &'static str) -> impl Fn(rcgen::Error) -> Error {
    move |source| Error::Certificate { what, source }
}

/// A fresh CA and a serving certificate it signed for `127.0.0.1`, `::1` and `localhost`
/// (ECDSA P-256), as PEM: what a webhook server under test presents, with the CA as the
/// `caBundle` of the webhook configuration the API server calls it through (as
/// controller-runtime's envtest generates for webhooks).
///
/// ```
/// let certs = kube_envtest::ServingCerts::for_loopback()?;
/// assert!(certs.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// # Ok::<(), kube_envtest::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServingCerts {
    /// The CA certificate (the webhook configuration's `caBundle`, base64-encoded:
    /// [`ca_bundle`](Self::ca_bundle)).
    pub ca_pem: String,
    /// The serving certificate, signed by the CA.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl ServingCerts {
    /// A new CA and serving certificate for loopback.
    ///
    /// # Errors
    /// [`Error::Certificate`] if generating a key or certificate fails.
    pub fn for_loopback() -> Result<ServingCerts, Error> {
        Self::generate("kube-envtest serving")
    }

    /// The CA as a webhook configuration's `caBundle` wants it: the PEM, base64-encoded.
    ///
    /// ```
    /// use base64::Engine as _;
    ///
    /// let certs = kube_envtest::ServingCerts::for_loopback()?;
    /// let decoded = base64::engine::general_purpose::STANDARD.decode(certs.ca_bundle()).unwrap();
    /// assert_eq!(decoded, certs.ca_pem.as_bytes());
    /// # Ok::<(), kube_envtest::Error>(())
    /// ```
    pub fn ca_bundle(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// Writes `tls.crt`, `tls.key` and `ca.crt` into `dir` (the names of a mounted
    /// `kubernetes.io/tls` Secret), replacing each file whole (written aside, then renamed).
    ///
    /// # Errors
    /// The I/O error of the first file that could not be written.
    pub fn write_to(&self, dir: &std::path::Path) -> std::io::Result<()> {
        for (name, pem) in [
            ("tls.crt", &self.cert_pem),
            ("tls.key", &self.key_pem),
            ("ca.crt", &self.ca_pem),
        ] {
            let aside = dir.join(format!(".{name}.tmp"));
            std::fs::write(&aside, pem)?;
            std::fs::rename(&aside, dir.join(name))?;
        }
        Ok(())
    }

    fn generate(common_name: &str) -> Result<ServingCerts, Error> {
        let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(cert_err("CA key"))?;
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).map_err(cert_err("CA certificate"))?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "kube-envtest CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .map_err(cert_err("CA certificate"))?;
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(cert_err("serving key"))?;
        let names = ["127.0.0.1", "::1", "localhost"].map(String::from).to_vec();
        let mut serving_params =
            CertificateParams::new(names).map_err(cert_err("serving certificate"))?;
        serving_params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        serving_params.use_authority_key_identifier_extension = true;
        serving_params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving_params
            .signed_by(&serving_key, &issuer)
            .map_err(cert_err("serving certificate"))?;
        Ok(ServingCerts {
            ca_pem: ca_cert.pem(),
            cert_pem: serving_cert.pem(),
            key_pem: serving_key.serialize_pem(),
        })
    }
}

fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_distinct_pem_material() {
        let a = Pki::generate().unwrap();
        let b = Pki::generate().unwrap();
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(a.serving_key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(a.sa_public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(a.token.len(), 32);
        assert_ne!(a.token, b.token);
        assert_ne!(a.ca_pem, b.ca_pem);
    }
}
