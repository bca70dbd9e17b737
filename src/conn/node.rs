//! One configured master: its URL parsed, its address resolved, and the
//! handshake sent on every new connection to it.
//!
//! URL form: `redis://[[user]:password@]host[:port][/db]`, IPv6 hosts in
//! brackets, user and password percent-decoded; `rediss://` for TLS (with
//! the feature `tls`), the certificate checked against the host. The password only ever lives
//! inside the encoded handshake bytes, which no `Debug` or `Display` shows.

use super::url::{redact, Host, ParsedUrl};
use crate::command::identity::Section;
use crate::command::rights::Probe;
use crate::command::{Native, ReplicaAck, Role, ScriptId};
use crate::error::ConfigError;
use crate::resp::{encode_command, Arg};
use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// The tag of the handshake's `ECHO` probe (commands use tags from 1).
pub(crate) const PROBE_TAG: u64 = 0;

/// One command of the handshake, in the order they are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandshakeStep {
    /// `AUTH [user] password`: must answer `+OK`.
    Auth,
    /// `SELECT db`: must answer `+OK`.
    Select,
    /// `SCRIPT LOAD` of a script: its digest, or an error (an ACL may forbid
    /// SCRIPT; the connection then sends scripts by body).
    Load(ScriptId),
    /// `ECHO 0`: whether acquisitions may be `SET` then `ECHO tag` here.
    Probe,
    /// Whether the connection may run what releases and extends locks
    /// (see `command::rights`): without it, nothing is locked through it.
    Rights(Probe),
    /// Fenced handles only: the fence domain's state on this server run
    /// (`probe.lua`, by body): whether the connection's round-1 grants
    /// count (see `command::fence::FenceCheck`).
    FenceProbe,
    /// Whether the server has a native compare-and-delete or
    /// compare-and-set command (see `command::native`).
    Native(Native),
    /// `ROLE`: whether the server is a master (see `command::role`); a
    /// replica or a Sentinel ends the connection. `strict` (a Sentinel
    /// voter's master): no acquisition goes out before it answered, and a
    /// refused `ROLE` ends the connection too.
    Role { strict: bool },
    /// `INFO server`, `INFO replication`: the master's identity (run id,
    /// replication id), recorded for the connection's later checks (see
    /// `command::identity`).
    Identity(Section),
}

/// A master, ready to connect to.
#[derive(Clone)]
pub(crate) struct Node {
    /// `host:port` as written in the URL (IPv6 in brackets): how errors name it.
    pub(crate) name: String,
    pub(crate) addr: SocketAddr,
    /// The handshake, encoded once, sent first on every new connection
    /// (pipelined with the first command).
    handshake: Vec<u8>,
    /// One entry per command in `handshake`, in order.
    steps: Vec<HandshakeStep>,
    /// The length of `handshake`'s leading `AUTH` command (0 without a
    /// password): all a subscriber connection sends before `SUBSCRIBE`.
    auth_len: usize,
    /// Whether scripts may be used (`Builder::allow_scripts`): without,
    /// the handshake neither loads nor probes them.
    scripts: bool,
    /// Whether native commands are used (`Builder::native_commands`):
    /// without, the handshake does not probe them.
    native: bool,
    /// The replica guard (`Builder::replica_ack`), if on.
    replica_ack: Option<ReplicaAck>,
    /// Whether the handshake asks `ROLE` strictly (see
    /// [`HandshakeStep::Role`]).
    role_strict: bool,
    /// For a `rediss://` URL: the name its certificate must be valid for,
    /// and the client configuration (set by the builder).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::tls::Target>,
}

impl fmt::Debug for Node {
    // Hand-written: `handshake` holds the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Node");
        s.field("name", &self.name).field("addr", &self.addr);
        #[cfg(feature = "tls")]
        s.field("tls", &self.tls.is_some());
        s.finish_non_exhaustive()
    }
}

impl Node {
    /// Parses a node URL and resolves its host (once, here: a blocking DNS
    /// lookup never happens inside a lock round). `scripts`, `native`:
    /// whether scripts and native commands may be used (see
    /// `Builder::allow_scripts` and `Builder::native_commands`).
    pub(crate) fn from_url(url: &str, scripts: bool, native: bool) -> Result<Node, ConfigError> {
        let invalid = |reason| ConfigError::InvalidUrl {
            url: redact(url),
            reason,
        };
        let parsed = ParsedUrl::parse(url).map_err(invalid)?;
        #[cfg(not(feature = "tls"))]
        if parsed.secure {
            return Err(ConfigError::TlsNotEnabled(redact(url)));
        }
        #[cfg(feature = "tls")]
        let tls = match (parsed.secure, &parsed.host) {
            (false, _) => None,
            (true, Host::Ip(ip)) => Some(super::tls::Target::for_ip(*ip)),
            (true, Host::Name(name)) => Some(
                super::tls::Target::for_name(name)
                    .ok_or_else(|| invalid("the host is not a valid TLS server name"))?,
            ),
        };
        let name = match parsed.host {
            Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]:{}", parsed.port),
            Host::Ip(IpAddr::V4(ip)) => format!("{ip}:{}", parsed.port),
            Host::Name(name) => format!("{name}:{}", parsed.port),
        };
        let addr = match parsed.host {
            Host::Ip(ip) => SocketAddr::new(ip, parsed.port),
            Host::Name(host) => (host, parsed.port)
                .to_socket_addrs()
                .map_err(|e| ConfigError::Unresolvable {
                    node: name.clone(),
                    reason: e.to_string(),
                })?
                .next()
                .ok_or_else(|| ConfigError::Unresolvable {
                    node: name.clone(),
                    reason: "no addresses".into(),
                })?,
        };

        let mut handshake = Vec::new();
        let mut steps = Vec::new();
        if let Some(password) = &parsed.password {
            match &parsed.user {
                Some(user) => encode_command(
                    &mut handshake,
                    &[Arg::Bytes(b"AUTH"), Arg::Bytes(user), Arg::Bytes(password)],
                ),
                None => {
                    encode_command(&mut handshake, &[Arg::Bytes(b"AUTH"), Arg::Bytes(password)])
                }
            }
            steps.push(HandshakeStep::Auth);
        }
        let auth_len = handshake.len();
        if parsed.db != 0 {
            encode_command(
                &mut handshake,
                &[Arg::Bytes(b"SELECT"), Arg::Uint(parsed.db.into())],
            );
            steps.push(HandshakeStep::Select);
        }
        let preloaded: &[ScriptId] = if scripts { &ScriptId::PRELOADED } else { &[] };
        for &id in preloaded {
            encode_command(
                &mut handshake,
                &[
                    Arg::Bytes(b"SCRIPT"),
                    Arg::Bytes(b"LOAD"),
                    Arg::Bytes(id.script().body),
                ],
            );
            steps.push(HandshakeStep::Load(id));
        }
        encode_command(&mut handshake, &[Arg::Bytes(b"ECHO"), Arg::Uint(PROBE_TAG)]);
        steps.push(HandshakeStep::Probe);
        if scripts {
            for probe in Probe::ALL {
                probe.encode(&mut handshake);
                steps.push(HandshakeStep::Rights(probe));
            }
        }
        let probed: &[Native] = if native { &Native::ALL } else { &[] };
        for &form in probed {
            form.encode_probe(&mut handshake);
            steps.push(HandshakeStep::Native(form));
        }
        Ok(Node {
            name,
            addr,
            handshake,
            steps,
            auth_len,
            scripts,
            native,
            replica_ack: None,
            role_strict: false,
            #[cfg(feature = "tls")]
            tls,
        })
    }

    /// Another node of the same cluster, at `host:port` (as a cluster's
    /// topology or a redirect names it), with this node's credentials,
    /// handshake and TLS settings; a TLS certificate must then be valid for
    /// `host`. A host name is resolved here (a blocking lookup: a new node
    /// is met when the topology changes, not on the lock path).
    pub(crate) fn sibling(&self, host: &str, port: u16) -> Result<Node, ConfigError> {
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let ip = host.parse::<IpAddr>().ok();
        let name = match ip {
            Some(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
            _ => format!("{host}:{port}"),
        };
        let unresolvable = |reason: String| ConfigError::Unresolvable {
            node: name.clone(),
            reason,
        };
        let addr = match ip {
            Some(ip) => SocketAddr::new(ip, port),
            None => {
                if host.is_empty()
                    || !host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
                {
                    return Err(unresolvable("not an address or a host name".into()));
                }
                (host, port)
                    .to_socket_addrs()
                    .map_err(|e| unresolvable(e.to_string()))?
                    .next()
                    .ok_or_else(|| unresolvable("no addresses".into()))?
            }
        };
        #[cfg(feature = "tls")]
        let tls = match &self.tls {
            None => None,
            Some(template) => {
                let mut target = match ip {
                    Some(ip) => super::tls::Target::for_ip(ip),
                    None => super::tls::Target::for_name(host)
                        .ok_or_else(|| unresolvable("not a valid TLS server name".into()))?,
                };
                target.inherit(template);
                Some(target)
            }
        };
        Ok(Node {
            name,
            addr,
            handshake: self.handshake.clone(),
            steps: self.steps.clone(),
            auth_len: self.auth_len,
            scripts: self.scripts,
            native: self.native,
            replica_ack: self.replica_ack,
            role_strict: self.role_strict,
            #[cfg(feature = "tls")]
            tls,
        })
    }

    /// The same node with other credentials for its `AUTH` (none if
    /// `password` is `None`): a Sentinel voter's masters, whose
    /// credentials are not the sentinels'.
    pub(crate) fn with_credentials(&self, user: Option<&[u8]>, password: Option<&[u8]>) -> Node {
        let mut handshake = Vec::new();
        let mut steps = Vec::new();
        if let Some(password) = password {
            let mut args = vec![Arg::Bytes(b"AUTH")];
            args.extend(user.map(Arg::Bytes));
            args.push(Arg::Bytes(password));
            encode_command(&mut handshake, &args);
            steps.push(HandshakeStep::Auth);
        }
        let auth_len = handshake.len();
        handshake.extend_from_slice(&self.handshake[self.auth_len..]);
        steps.extend(
            self.steps
                .iter()
                .filter(|s| **s != HandshakeStep::Auth)
                .copied(),
        );
        Node {
            name: self.name.clone(),
            addr: self.addr,
            handshake,
            steps,
            auth_len,
            scripts: self.scripts,
            native: self.native,
            replica_ack: self.replica_ack,
            role_strict: self.role_strict,
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
        }
    }

    /// Adds `ROLE` to the handshake (see [`HandshakeStep::Role`]): a
    /// replica or a Sentinel named as a master is refused; `strict` for a
    /// Sentinel voter's master. Then the master's identity, which an idle
    /// connection checks again before its next command.
    pub(crate) fn check_role(&mut self, strict: bool) {
        Role::encode(&mut self.handshake);
        self.steps.push(HandshakeStep::Role { strict });
        self.role_strict = strict;
        for section in Section::BOTH {
            section.encode(&mut self.handshake);
            self.steps.push(HandshakeStep::Identity(section));
        }
    }

    /// Whether no acquisition may go out on a new connection before its
    /// `ROLE` answered (see [`HandshakeStep::Role`]).
    pub(crate) fn role_strict(&self) -> bool {
        self.role_strict
    }

    /// The `AUTH` command alone (empty without a password), for a
    /// subscriber connection: channels are not per database, and a
    /// subscribed connection runs no scripts.
    pub(crate) fn auth_bytes(&self) -> &[u8] {
        &self.handshake[..self.auth_len]
    }

    /// The handshake's bytes (they hold the password: never show them).
    pub(crate) fn handshake_bytes(&self) -> &[u8] {
        &self.handshake
    }

    /// Whether scripts may be used on connections to it.
    pub(crate) fn runs_scripts(&self) -> bool {
        self.scripts
    }

    /// Whether native commands are used on connections to it.
    pub(crate) fn uses_native(&self) -> bool {
        self.native
    }

    /// The replica guard its connections apply, if any.
    pub(crate) fn replica_ack(&self) -> Option<ReplicaAck> {
        self.replica_ack
    }

    /// Sets the replica guard (`Builder::replica_ack`) of its connections.
    pub(crate) fn guard_replicas(&mut self, guard: ReplicaAck) {
        self.replica_ack = Some(guard);
    }

    /// Whether the URL is `rediss://`.
    pub(crate) fn is_secure(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        return false;
    }

    /// Adds the fence probe of the domain hash `domain` to the handshake
    /// (see [`HandshakeStep::FenceProbe`]), for a fenced handle.
    pub(crate) fn probe_fence(&mut self, domain: &[u8]) {
        let body = ScriptId::FenceProbe.script().body;
        encode_command(
            &mut self.handshake,
            &[
                Arg::Bytes(b"EVAL"),
                Arg::Bytes(body),
                Arg::Bytes(b"1"),
                Arg::Bytes(domain),
            ],
        );
        self.steps.push(HandshakeStep::FenceProbe);
    }

    /// What each handshake command must answer, in order.
    pub(crate) fn handshake_steps(&self) -> &[HandshakeStep] {
        &self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_authenticates_selects_loads_scripts_and_probes_echo_and_rights() {
        let node = Node::from_url("redis://alice:pw@127.0.0.1:7001/2", true, true).unwrap();
        assert_eq!(node.name, "127.0.0.1:7001");
        assert_eq!(node.steps.len(), 10);
        assert!(node
            .handshake
            .starts_with(b"*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$2\r\npw\r\n"));
        let mut probes = Vec::new();
        Probe::Evalsha.encode(&mut probes);
        Probe::Eval.encode(&mut probes);
        for form in Native::ALL {
            form.encode_probe(&mut probes);
        }
        let echo: &[u8] = b"*2\r\n$4\r\nECHO\r\n$1\r\n0\r\n";
        assert!(node.handshake.ends_with(&[echo, &probes].concat()));
        assert!(!format!("{node:?}").contains("pw"));
        let plain = Node::from_url("redis://[::1]:7001", true, true).unwrap();
        assert_eq!(plain.name, "[::1]:7001");
        assert_eq!(
            plain.steps,
            [
                HandshakeStep::Load(ScriptId::Release),
                HandshakeStep::Load(ScriptId::Extend),
                HandshakeStep::Probe,
                HandshakeStep::Rights(Probe::Evalsha),
                HandshakeStep::Rights(Probe::Eval),
                HandshakeStep::Native(Native::DelIfEq),
                HandshakeStep::Native(Native::DelEx),
                HandshakeStep::Native(Native::SetIfEq),
            ]
        );
        // Without scripts: nothing loaded, no script probed.
        let native = Node::from_url("redis://[::1]:7001", false, true).unwrap();
        assert_eq!(
            native.steps,
            [
                HandshakeStep::Probe,
                HandshakeStep::Native(Native::DelIfEq),
                HandshakeStep::Native(Native::DelEx),
                HandshakeStep::Native(Native::SetIfEq),
            ]
        );
        assert!(!String::from_utf8_lossy(&native.handshake).contains("EVAL"));
    }
}
