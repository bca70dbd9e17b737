//! One configured master: its URL parsed, its address resolved (and kept
//! up to date: see `address`), and the handshake sent on every new
//! connection to it.
//!
//! URL form: `redis://[[user]:password@]host[:port][/db]`, IPv6 hosts in
//! brackets, user and password percent-decoded; `rediss://` for TLS (with
//! the feature `tls`), the certificate checked against the host. The password only ever lives
//! inside the encoded handshake bytes, which no `Debug` or `Display` shows.

use super::address::{Address, Lookups, Why};
use super::url::{redact, Host, ParsedUrl};
use crate::command::identity::{GivenAs, IdentityProbe};
use crate::command::rights::Probe;
use crate::command::{Native, ReplicaAck, Role, ScriptId};
use crate::error::ConfigError;
use crate::resp::{encode_command, Arg};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// The tag of the handshake's `ECHO` probe (commands use tags from 1).
pub(crate) const PROBE_TAG: u64 = 0;

/// How a cluster node met by name finds its address (see `Node::sibling`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Found {
    /// A known node of the same host has this IP: no lookup.
    SameHost(IpAddr),
    /// Look it up now (a handle being built).
    Now,
    /// Look it up away from the round that met it (at this instant).
    Later(Instant),
}

/// One command of the handshake, in the order they are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandshakeStep {
    /// `AUTH [user] password`: must answer `+OK`.
    Auth,
    /// `SELECT db`: must answer `+OK`.
    Select,
    /// `INFO server` or `INFO replication`: what the server is (see
    /// `command::identity`): a node that may not be a voter ends the
    /// connection; its run id and replication ids are kept for the round
    /// and for the connection's failover re-check (see `conn::identity`).
    Identity(IdentityProbe),
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
    /// A cluster node's `MSETEX` probe: whether the server has it and
    /// checks its keys' slots (see `Native::encode_cluster_set_probe`).
    ClusterSetProbe,
    /// `ROLE`, a Sentinel voter's master only (see `command::role`): a
    /// master, or the connection ends (a replica, a Sentinel, or a `ROLE`
    /// refused); no acquisition goes out before it answered.
    Role,
}

/// A master, ready to connect to.
#[derive(Clone)]
pub(crate) struct Node {
    /// `host:port` as written in the URL (IPv6 in brackets): how errors name it.
    pub(crate) name: String,
    /// Where it is now: the address a new connection dials.
    pub(crate) address: Arc<Address>,
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
    /// Whether it is a node of a cluster voter: its connections release
    /// with the sharded script, which the handshake loads (see
    /// `command::rights::Capabilities::sharded`).
    cluster: bool,
    /// The replica guard (`Builder::replica_ack`), if on.
    replica_ack: Option<ReplicaAck>,
    /// Whether the handshake asks `ROLE` (see [`HandshakeStep::Role`]).
    asks_role: bool,
    /// For a `rediss://` URL: the name its certificate must be valid for,
    /// and the client configuration (set by the builder).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::tls::Target>,
}

impl fmt::Debug for Node {
    // Hand-written: `handshake` holds the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Node");
        s.field("name", &self.name).field("addr", &self.addr());
        #[cfg(feature = "tls")]
        s.field("tls", &self.tls.is_some());
        s.finish_non_exhaustive()
    }
}

impl Node {
    /// Parses a node URL and resolves its host with `lookups` (here, when
    /// a handle is built: a blocking lookup never happens inside a lock
    /// round; later lookups run away from the rounds, see `address`), as
    /// a node of group `group` (its voter as the builder was told it).
    /// `scripts`, `native`: whether scripts and native commands may be
    /// used (see `Builder::allow_scripts` and `Builder::native_commands`);
    /// `cluster`: whether it is a seed of a cluster voter.
    pub(crate) fn from_url(
        url: &str,
        scripts: bool,
        native: bool,
        cluster: bool,
        lookups: &Arc<Lookups>,
        group: usize,
    ) -> Result<Node, ConfigError> {
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
        let (host, addr) = match parsed.host {
            Host::Ip(ip) => (None, SocketAddr::new(ip, parsed.port)),
            Host::Name(host) => {
                let addr = lookups.resolve_now(host, parsed.port).map_err(|reason| {
                    ConfigError::Unresolvable {
                        node: name.clone(),
                        reason,
                    }
                })?;
                (Some(host), addr)
            }
        };
        let address = Address::new(lookups, group, name.clone(), host, parsed.port, Some(addr));

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
        // First, so that a node that may not vote is known before the
        // answer to the command sent behind the handshake. A cluster's
        // nodes are checked as cluster nodes, a replica being a member like
        // any other (see `command::identity`).
        let given_as = match cluster {
            true => GivenAs::ClusterNode,
            false => GivenAs::Standalone,
        };
        for probe in IdentityProbe::both(given_as) {
            probe.encode(&mut handshake);
            steps.push(HandshakeStep::Identity(probe));
        }
        let preloaded: &[ScriptId] = if scripts {
            ScriptId::preloaded(cluster)
        } else {
            &[]
        };
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
            // A cluster node's MSETEX must be seen to check its keys' slots.
            if form == Native::MSetEx && cluster {
                Native::encode_cluster_set_probe(&mut handshake);
                steps.push(HandshakeStep::ClusterSetProbe);
                continue;
            }
            form.encode_probe(&mut handshake);
            steps.push(HandshakeStep::Native(form));
        }
        Ok(Node {
            name,
            address,
            handshake,
            steps,
            auth_len,
            scripts,
            native,
            cluster,
            replica_ack: None,
            asks_role: false,
            #[cfg(feature = "tls")]
            tls,
        })
    }

    /// The address a new connection to it dials now (`None`: a cluster
    /// node whose host name has not resolved yet).
    #[inline]
    pub(crate) fn addr(&self) -> Option<SocketAddr> {
        self.address.current()
    }

    /// Another node of the same cluster, at `host:port` (as a cluster's
    /// topology or a redirect names it), with this node's credentials,
    /// handshake and TLS settings; a TLS certificate must then be valid for
    /// `host`. A host name is resolved as `found` says: at `found`'s IP
    /// (a node of the same host, at another port), now (when a handle is
    /// built), or later, away from the round that met it (see `address`):
    /// until then, connecting to it fails with `NodeError::Unresolved`.
    pub(crate) fn sibling(&self, host: &str, port: u16, found: Found) -> Result<Node, ConfigError> {
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
        let lookups = self.address.lookups();
        let group = self.address.group();
        let address = match ip {
            Some(ip) => Address::new(
                lookups,
                group,
                name.clone(),
                None,
                port,
                Some((ip, port).into()),
            ),
            None => {
                if host.is_empty()
                    || !host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
                {
                    return Err(unresolvable("not an address or a host name".into()));
                }
                let addr = match found {
                    Found::SameHost(ip) => Some(SocketAddr::new(ip, port)),
                    Found::Now => Some(lookups.resolve_now(host, port).map_err(unresolvable)?),
                    Found::Later(_) => None,
                };
                let address = Address::new(lookups, group, name.clone(), Some(host), port, addr);
                if let Found::Later(now) = found {
                    address.readdress(Why::New, now);
                }
                address
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
            address,
            handshake: self.handshake.clone(),
            steps: self.steps.clone(),
            auth_len: self.auth_len,
            scripts: self.scripts,
            native: self.native,
            cluster: self.cluster,
            replica_ack: self.replica_ack,
            asks_role: self.asks_role,
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
            address: self.address.clone(),
            handshake,
            steps,
            auth_len,
            scripts: self.scripts,
            native: self.native,
            cluster: self.cluster,
            replica_ack: self.replica_ack,
            asks_role: self.asks_role,
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
        }
    }

    /// Adds `ROLE` to the handshake (see [`HandshakeStep::Role`]), for a
    /// Sentinel voter's masters: last, after the fence probe.
    pub(crate) fn check_role(&mut self) {
        Role::encode(&mut self.handshake);
        self.steps.push(HandshakeStep::Role);
        self.asks_role = true;
    }

    /// Whether no acquisition may go out on a new connection before its
    /// `ROLE` answered (see [`HandshakeStep::Role`]).
    pub(crate) fn asks_role(&self) -> bool {
        self.asks_role
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

    /// Whether it is a node of a cluster voter (its notices go by sharded
    /// pub/sub).
    pub(crate) fn is_cluster_node(&self) -> bool {
        self.cluster
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
    /// (see [`HandshakeStep::FenceProbe`]), for a fenced handle; `None`
    /// for a cluster node, which keeps a hash per slot: its probe names
    /// none and learns the node's part only (`INFO`, the eviction policy),
    /// the scripts checking each slot's hash on every call (docs/fencing.md,
    /// "Fencing on cluster voters"). Its siblings inherit it.
    pub(crate) fn probe_fence(&mut self, domain: Option<&[u8]>) {
        let body = ScriptId::FenceProbe.script().body;
        let mut args = [
            Arg::Bytes(b"EVAL"),
            Arg::Bytes(body),
            Arg::Bytes(b"0"),
            Arg::Bytes(b""),
        ];
        let n = match domain {
            Some(domain) => {
                args[2] = Arg::Bytes(b"1");
                args[3] = Arg::Bytes(domain);
                4
            }
            None => 3,
        };
        encode_command(&mut self.handshake, &args[..n]);
        self.steps.push(HandshakeStep::FenceProbe);
    }

    /// What each handshake command must answer, in order.
    pub(crate) fn handshake_steps(&self) -> &[HandshakeStep] {
        &self.steps
    }
}

/// A node of `url`, resolved by the system's resolver, for tests
/// (`cluster`: a seed of a cluster voter).
#[cfg(test)]
pub(crate) fn url(
    url: &str,
    scripts: bool,
    native: bool,
    cluster: bool,
) -> Result<Node, ConfigError> {
    let lookups = Lookups::new(Default::default(), Default::default());
    Node::from_url(url, scripts, native, cluster, &lookups, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_authenticates_selects_loads_scripts_and_probes_echo_and_rights() {
        let node = url("redis://alice:pw@127.0.0.1:7001/2", true, true, false).unwrap();
        assert_eq!(node.name, "127.0.0.1:7001");
        assert_eq!(node.steps.len(), 13);
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
        let plain = url("redis://[::1]:7001", true, true, false).unwrap();
        assert_eq!(plain.name, "[::1]:7001");
        assert_eq!(
            plain.steps,
            [
                HandshakeStep::Identity(IdentityProbe::both(GivenAs::Standalone)[0]),
                HandshakeStep::Identity(IdentityProbe::both(GivenAs::Standalone)[1]),
                HandshakeStep::Load(ScriptId::Release),
                HandshakeStep::Load(ScriptId::Extend),
                HandshakeStep::Probe,
                HandshakeStep::Rights(Probe::Evalsha),
                HandshakeStep::Rights(Probe::Eval),
                HandshakeStep::Native(Native::DelIfEq),
                HandshakeStep::Native(Native::DelEx),
                HandshakeStep::Native(Native::SetIfEq),
                HandshakeStep::Native(Native::MSetEx),
            ]
        );
        // Without scripts: nothing loaded, no script probed.
        let native = url("redis://[::1]:7001", false, true, false).unwrap();
        assert_eq!(
            native.steps[2..],
            [
                HandshakeStep::Probe,
                HandshakeStep::Native(Native::DelIfEq),
                HandshakeStep::Native(Native::DelEx),
                HandshakeStep::Native(Native::SetIfEq),
                HandshakeStep::Native(Native::MSetEx),
            ]
        );
        assert!(!String::from_utf8_lossy(&native.handshake).contains("EVAL"));
    }

    #[test]
    fn the_handshake_asks_first_what_the_server_is_as_what_it_was_given() {
        let node = url("redis://:pw@127.0.0.1:7001/1", true, true, false).unwrap();
        // After AUTH and SELECT.
        let info =
            b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n";
        let auth_select = node.auth_len + b"*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n".len();
        assert!(node.handshake[auth_select..].starts_with(info));
        let given = |node: &Node| -> Vec<GivenAs> {
            node.steps
                .iter()
                .filter_map(|step| match step {
                    HandshakeStep::Identity(probe) => Some(probe.given_as),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(given(&node), [GivenAs::Standalone; 2]);
        let seed = url("redis://:pw@127.0.0.1:7001/1", true, true, true).unwrap();
        assert_eq!(given(&seed), [GivenAs::ClusterNode; 2]);
        // A node the cluster names is checked as a cluster node too.
        let met = seed.sibling("127.0.0.1", 7002, Found::Now).unwrap();
        assert_eq!(given(&met), [GivenAs::ClusterNode; 2]);
    }
}
