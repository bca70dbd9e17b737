//! TLS for `rediss://` masters (feature `tls`): the client configuration
//! built from the [`Builder`](crate::Builder)'s settings, and the session
//! that sits between a [`Transport`](super::transport::Transport)'s socket
//! and its plaintext buffers.
//!
//! The interface is narrow on purpose. The transport hands a [`Session`]
//! its socket (as `Read + Write`) and its two buffers; the session turns
//! queued plaintext into TLS records and received records into plaintext,
//! and answers what to poll for. Nothing above the transport knows whether
//! a connection is secured, except that its opening has a phase more
//! ([`Phase::Tls`](crate::Phase::Tls)).
//!
//! Choices made here:
//! - rustls with the *ring* provider passed explicitly
//!   (`ClientConfig::builder_with_provider`): the process-wide default
//!   provider is never consulted or installed.
//! - The server's certificate is always verified, against the configured
//!   roots and the URL's host (a DNS name or an IP address); there is no
//!   switch to turn that off. No revocation checks (CRL, OCSP).
//! - Records the server sends on its own (TLS 1.3 session tickets, key
//!   updates) are consumed inside rustls and never reach the reply decoder:
//!   only application data is plaintext.
//! - What a hostile peer can make us hold is bounded: rustls caps one
//!   record (16 KiB plus overhead) and its buffer of decrypted plaintext;
//!   the transport's input buffer keeps its own bound; one read takes at
//!   most [`MAX_RECORD_READS`] socket reads.

use super::transport::InputBuffer;
use crate::error::{ConfigError, NodeError, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, CertificateError, ClientConfig, ClientConnection, RootCertStore};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::Arc;

/// Most socket reads one [`Session::read`] makes before it lets the poll
/// loop run again: a peer that floods us with records carrying no data
/// (tickets, say) cannot keep the thread to itself.
const MAX_RECORD_READS: usize = 16;

/// The first byte of every TLS record is its content type, 20 to 24
/// (change_cipher_spec, alert, handshake, application_data, heartbeat).
fn is_tls_record_start(byte: u8) -> bool {
    (0x14..=0x18).contains(&byte)
}

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
    name: ServerName<'static>,
    config: Option<Arc<ClientConfig>>,
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
}

/// One TLS session over one connection.
pub(crate) struct Session {
    conn: ClientConnection,
    /// The first byte the server sent (a TLS server's is a record type).
    first_byte: Option<u8>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("handshaking", &self.conn.is_handshaking())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A client session to `target`, its ClientHello queued.
    pub(crate) fn new(target: &Target) -> Result<Session, NodeError> {
        let config = target
            .config
            .as_ref()
            .ok_or_else(|| NodeError::Tls(TlsError::Other("not configured".into())))?;
        let conn = ClientConnection::new(Arc::clone(config), target.name.clone())
            .map_err(|e| classify(&e, None))?;
        Ok(Session {
            conn,
            first_byte: None,
        })
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Whether the server has sent anything at all.
    pub(crate) fn has_answered(&self) -> bool {
        self.first_byte.is_some()
    }

    /// What to poll for while the handshake runs: (read, write).
    pub(crate) fn handshake_interest(&self) -> (bool, bool) {
        (self.conn.wants_read(), self.conn.wants_write())
    }

    /// Whether records are waiting to be written.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Seals as much of `plain` as rustls takes (all of it, unless its
    /// buffer of unsent records is full), removes that from `plain`, and
    /// writes records until the socket would block. During the handshake
    /// `plain` waits: only handshake records go out.
    pub(crate) fn write(
        &mut self,
        io: &mut (impl Read + Write),
        plain: &mut Vec<u8>,
    ) -> Result<(), NodeError> {
        if !self.conn.is_handshaking() && !plain.is_empty() {
            let taken = self
                .conn
                .writer()
                .write(plain)
                .map_err(|e| NodeError::from_io(&e))?;
            plain.drain(..taken);
        }
        self.write_records(io)
    }

    /// Writes queued records until none is left or the socket would block.
    fn write_records(&mut self, io: &mut (impl Read + Write)) -> Result<(), NodeError> {
        while self.conn.wants_write() {
            match self.conn.write_tls(io) {
                Ok(0) => return Err(NodeError::Closed),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(NodeError::from_io(&e)),
            }
        }
        Ok(())
    }

    /// Reads what the socket holds (at most [`MAX_RECORD_READS`] reads,
    /// and none once plaintext came), drives the handshake, answers what
    /// must be answered, and moves the plaintext that came into `input`.
    /// Returns whether any did; a closed stream or a TLS failure is an
    /// error, reported by the next call when plaintext came first (so that
    /// replies sent just before a close are read, as on a plain socket).
    pub(crate) fn read(
        &mut self,
        io: &mut (impl Read + Write),
        input: &mut InputBuffer,
    ) -> Result<bool, NodeError> {
        if self.take_plaintext(input)? {
            return Ok(true);
        }
        for _ in 0..MAX_RECORD_READS {
            let mut recorder = FirstByte {
                io: &mut *io,
                first: &mut self.first_byte,
            };
            match self.conn.read_tls(&mut recorder) {
                Ok(0) => {
                    if self.is_plaintext_peer() {
                        return Err(NodeError::Tls(TlsError::NotTls));
                    }
                    return Err(NodeError::Closed);
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(NodeError::from_io(&e)),
            }
            // A plaintext server behind a rediss:// URL: say so, whatever
            // rustls would make of its bytes.
            if self.is_plaintext_peer() {
                return Err(NodeError::Tls(TlsError::NotTls));
            }
            if let Err(e) = self.conn.process_new_packets() {
                // rustls queued an alert telling the server why; best effort.
                let _ = self.write_records(io);
                return Err(classify(&e, self.first_byte));
            }
            // Handshake messages, or a reply to a key update.
            self.write_records(io)?;
            if self.take_plaintext(input)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the server's first byte shows it does not speak TLS.
    fn is_plaintext_peer(&self) -> bool {
        self.conn.is_handshaking() && self.first_byte.is_some_and(|b| !is_tls_record_start(b))
    }

    /// Moves all decrypted plaintext into `input` (which fails once a reply
    /// would exceed its bound). Returns whether there was any.
    fn take_plaintext(&mut self, input: &mut InputBuffer) -> Result<bool, NodeError> {
        let mut got = false;
        loop {
            let spare = match input.spare() {
                Ok(spare) => spare,
                // Full: the decoder judges what is there (and fails a
                // reply beyond its bound).
                Err(_) if got => return Ok(true),
                Err(e) => return Err(NodeError::from_io(&e)),
            };
            match self.conn.reader().read(spare) {
                // The server closed the TLS session (close_notify); what
                // came before it is read first.
                Ok(0) if got => return Ok(true),
                Ok(0) => return Err(NodeError::Closed),
                Ok(n) => {
                    input.filled(n);
                    got = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(got),
                Err(_) if got => return Ok(true),
                Err(e) => return Err(NodeError::from_io(&e)),
            }
        }
    }
}

/// Reads through to the socket, noting the first byte ever received.
struct FirstByte<'a, T> {
    io: &'a mut T,
    first: &'a mut Option<u8>,
}

impl<T: Read> Read for FirstByte<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.io.read(buf)?;
        if n > 0 && self.first.is_none() {
            *self.first = Some(buf[0]);
        }
        Ok(n)
    }
}

/// The typed error for a rustls failure.
fn classify(e: &rustls::Error, first_byte: Option<u8>) -> NodeError {
    use rustls::Error as E;
    let tls = match e {
        E::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer => TlsError::UnknownIssuer,
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => TlsError::Expired,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsError::NameMismatch
            }
            // webpki names no variant for it: it reads only X.509 v3.
            other if other.to_string().contains("UnsupportedCertVersion") => {
                TlsError::BadCertificate(
                    "it is not X.509 v3 (openssl x509 -req writes v1 without extensions), which \
                     rustls cannot use; re-issue it as v3: -extfile with subjectAltName = the host"
                        .into(),
                )
            }
            other => TlsError::BadCertificate(other.to_string()),
        },
        E::AlertReceived(AlertDescription::CertificateRequired) => {
            TlsError::ClientCertificateRequired
        }
        E::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied),
        ) => TlsError::ClientCertificateRejected(format!("{alert:?}")),
        E::InvalidMessage(_) if first_byte.is_some_and(|b| !is_tls_record_start(b)) => {
            TlsError::NotTls
        }
        other => TlsError::Other(other.to_string()),
    };
    NodeError::Tls(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_failures_map_to_typed_errors() {
        let cert = |e| classify(&rustls::Error::InvalidCertificate(e), Some(0x16));
        assert_eq!(
            cert(CertificateError::UnknownIssuer),
            NodeError::Tls(TlsError::UnknownIssuer)
        );
        assert_eq!(
            cert(CertificateError::Expired),
            NodeError::Tls(TlsError::Expired)
        );
        assert_eq!(
            cert(CertificateError::NotValidForName),
            NodeError::Tls(TlsError::NameMismatch)
        );
        assert!(matches!(
            cert(CertificateError::BadSignature),
            NodeError::Tls(TlsError::BadCertificate(_))
        ));
        let alert = |a| classify(&rustls::Error::AlertReceived(a), Some(0x15));
        assert_eq!(
            alert(AlertDescription::CertificateRequired),
            NodeError::Tls(TlsError::ClientCertificateRequired)
        );
        assert!(matches!(
            alert(AlertDescription::UnknownCA),
            NodeError::Tls(TlsError::ClientCertificateRejected(_))
        ));
        // Garbage from a peer whose first byte is no TLS record type.
        let garbage = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert_eq!(
            classify(&garbage, Some(b'-')),
            NodeError::Tls(TlsError::NotTls)
        );
        assert!(matches!(
            classify(&garbage, Some(0x16)),
            NodeError::Tls(TlsError::Other(_))
        ));
        for permanent in [TlsError::UnknownIssuer, TlsError::NotTls, TlsError::Expired] {
            assert!(NodeError::Tls(permanent).is_permanent());
        }
        assert!(!NodeError::Tls(TlsError::Other("x".into())).is_permanent());
    }

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
