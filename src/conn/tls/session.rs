//! One TLS session over one connection: between the transport's socket and
//! its plaintext buffers, sealing what is queued and opening what arrives.

use super::config::Target;
use crate::conn::buffer::InputBuffer;
use crate::error::{NodeError, TlsError};
use rustls::{AlertDescription, CertificateError, ClientConnection};
use std::fmt;
use std::io::{self, Read, Write};
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
}
