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
//!   most `session::MAX_RECORD_READS` socket reads.

mod config;
mod session;

pub(crate) use config::{Options, Target};
pub(crate) use session::Session;
