//! The client configuration every `rediss://` master is reached with, built
//! once from the builder's TLS settings, and each master's target (the name
//! its certificate must be valid for).

use crate::error::ConfigError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// The TLS settings gathered by the builder.
#[derive(Clone, Default)]
pub(crate) struct Options {
    /// PEM texts of the CAs to trust, as given.
    roots_pem: Vec<Vec<u8>>,
    identity: Option<Identity>,
    #[cfg(feature = "tls-webpki-roots")]
    webpki_roots: bool,
    #[cfg(feature = "tls-native-roots")]
    native_roots: bool,
}

/// A client certificate chain and its private key, as PEM.
#[derive(Clone)]
struct Identity {
    chain_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl fmt::Debug for Options {
    // Hand-written: the identity holds the private key. Only counts and
    // switches are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("TlsOptions");
        s.field("root_ca_pems", &self.roots_pem.len());
        s.field(
            "client_identity",
            &self.identity.as_ref().map(|_| "<set, key withheld>"),
        );
        #[cfg(feature = "tls-webpki-roots")]
        s.field("webpki_roots", &self.webpki_roots);
        #[cfg(feature = "tls-native-roots")]
        s.field("native_roots", &self.native_roots);
        s.finish()
    }
}

impl Options {
    pub(crate) fn add_root_pem(&mut self, pem: &[u8]) {
        self.roots_pem.push(pem.to_vec());
    }

    pub(crate) fn set_identity(&mut self, chain_pem: &[u8], key_pem: &[u8]) {
        self.identity = Some(Identity {
            chain_pem: chain_pem.to_vec(),
            key_pem: key_pem.to_vec(),
        });
    }

    #[cfg(feature = "tls-webpki-roots")]
    pub(crate) fn use_webpki_roots(&mut self) {
        self.webpki_roots = true;
    }

    #[cfg(feature = "tls-native-roots")]
    pub(crate) fn use_native_roots(&mut self) {
        self.native_roots = true;
    }

    /// Whether any TLS setting was given.
    pub(crate) fn is_set(&self) -> bool {
        #[allow(unused_mut)] // without the roots features
        let mut set = !self.roots_pem.is_empty() || self.identity.is_some();
        #[cfg(feature = "tls-webpki-roots")]
        {
            set |= self.webpki_roots;
        }
        #[cfg(feature = "tls-native-roots")]
        {
            set |= self.native_roots;
        }
        set
    }

    /// The client configuration for every `rediss://` master. Fails for
    /// PEM that does not parse, a key that does not fit its certificate,
    /// or no roots at all.
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>, ConfigError> {
        let invalid = |what: String| ConfigError::InvalidTls(what);
        let mut roots = RootCertStore::empty();
        for (n, pem) in self.roots_pem.iter().enumerate() {
            let certs = parse_certificates(pem)
                .map_err(|why| invalid(format!("tls_root_ca_pem (call {}): {why}", n + 1)))?;
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    invalid(format!(
                        "tls_root_ca_pem (call {}): not a usable CA certificate: {e}",
                        n + 1
                    ))
                })?;
            }
        }
        #[cfg(feature = "tls-webpki-roots")]
        if self.webpki_roots {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        #[cfg(feature = "tls-native-roots")]
        if self.native_roots {
            let found = rustls_native_certs::load_native_certs();
            let before = roots.len();
            let _ = roots.add_parsable_certificates(found.certs);
            if roots.len() == before {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_string(), ToString::to_string);
                return Err(invalid(format!(
                    "tls_native_roots: no usable certificate in the platform's store ({why})"
                )));
            }
        }
        if roots.is_empty() {
            return Err(ConfigError::TlsNoRoots);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("protocol versions: {e}")))?
            .with_root_certificates(roots);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some(identity) => {
                let chain = parse_certificates(&identity.chain_pem)
                    .map_err(|why| invalid(format!("tls_client_identity_pem: chain: {why}")))?;
                // rustls would say only that the key does not fit (it
                // cannot read the certificate to compare).
                if let Some(version @ (1 | 2)) = chain.first().and_then(|leaf| x509_version(leaf)) {
                    return Err(invalid(format!(
                        "tls_client_identity_pem: the certificate is X.509 v{version} (what openssl \
                         x509 -req writes without extensions), which rustls cannot use; re-issue it \
                         as v3: openssl x509 -req ... -extfile with extendedKeyUsage = clientAuth"
                    )));
                }
                // The parser's error never quotes the input; still, say
                // only what is wrong, never what the key text was.
                let key = PrivateKeyDer::from_pem_slice(&identity.key_pem).map_err(|_| {
                    invalid(
                        "tls_client_identity_pem: the private key is not a PEM PKCS#8, \
                         PKCS#1 (RSA) or SEC1 (EC) key"
                            .into(),
                    )
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    invalid(format!(
                        "tls_client_identity_pem: the key does not fit the certificate ({e})"
                    ))
                })?
            }
        };
        Ok(Arc::new(config))
    }
}

/// Every `CERTIFICATE` block of a PEM text; at least one.
fn parse_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not valid PEM ({e})"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block found".into());
    }
    Ok(certs)
}

/// The X.509 version of a DER certificate (1 to 3), if it parses that far:
/// a v1 certificate has no explicit version field (what OpenSSL's `x509
/// -req` writes when no extensions are asked for), and rustls refuses it.
fn x509_version(der: &[u8]) -> Option<u64> {
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] EXPLICIT
    // version INTEGER DEFAULT v1, serialNumber INTEGER, ... }, ... }
    let (0x30, certificate, _) = der_item(der)? else {
        return None;
    };
    let (0x30, tbs, _) = der_item(certificate)? else {
        return None;
    };
    match der_item(tbs)? {
        (0xa0, version, _) => match der_item(version)? {
            (0x02, &[v], _) if v < 3 => Some(u64::from(v) + 1),
            _ => None,
        },
        (0x02, _, _) => Some(1),
        _ => None,
    }
}

/// The first DER item of `input`: its tag, its contents, and what follows.
fn der_item(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let bytes = rest.get(..n)?;
            let len = bytes
                .iter()
                .fold(0usize, |len, &b| (len << 8) | usize::from(b));
            (len, &rest[n..])
        }
        _ => return None,
    };
    let contents = rest.get(..len)?;
    Some((tag, contents, &rest[len..]))
}

/// Where a `rediss://` URL leads: the name the certificate must be valid
/// for, and (once the builder has made it) the client configuration.
#[derive(Clone)]
pub(crate) struct Target {
    pub(super) name: ServerName<'static>,
    pub(super) config: Option<Arc<ClientConfig>>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The target for a URL host: an IP address or a DNS name.
    pub(crate) fn for_ip(ip: IpAddr) -> Target {
        Target {
            name: ServerName::IpAddress(ip.into()),
            config: None,
        }
    }

    /// The target for a DNS host name; `None` if it is not a valid one.
    pub(crate) fn for_name(name: &str) -> Option<Target> {
        let name = ServerName::try_from(name).ok()?.to_owned();
        Some(Target { name, config: None })
    }

    pub(crate) fn configure(&mut self, config: &Arc<ClientConfig>) {
        self.config = Some(Arc::clone(config));
    }

    /// Takes `other`'s client configuration (another node of one cluster).
    pub(crate) fn inherit(&mut self, other: &Target) {
        self.config.clone_from(&other.config);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_x509_version_is_read_from_the_der() {
        // The starts of a v3 and a v1 certificate (lengths as in real ones).
        let v3 = [
            0x30, 0x82, 0x01, 0x0b, 0x30, 0x81, 0xb2, 0xa0, 0x03, 0x02, 0x01, 0x02,
        ];
        let v1 = [0x30, 0x82, 0x01, 0x19, 0x30, 0x81, 0xbf, 0x02, 0x14, 0x57];
        let padded = |start: &[u8]| [start, &[0; 300][..]].concat();
        assert_eq!(x509_version(&padded(&v3)), Some(3));
        assert_eq!(x509_version(&padded(&v1)), Some(1));
        // Anything else is left to rustls.
        for garbage in [
            &b""[..],
            b"\x30",
            b"\x30\x85\x00",
            b"\x02\x01\x01",
            &v1[..6],
        ] {
            assert_eq!(x509_version(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn options_debug_withholds_the_key() {
        let mut options = Options::default();
        options.set_identity(b"CHAIN", b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n");
        let shown = format!("{options:?}");
        assert!(
            !shown.contains("c2VjcmV0") && !shown.contains("PRIVATE"),
            "{shown}"
        );
        assert!(options.is_set());
        assert!(!Options::default().is_set());
    }
}
