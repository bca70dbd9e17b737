//! One configured master: its URL parsed, its address resolved, and the
//! handshake sent on every new connection to it.
//!
//! URL form: `redis://[[user]:password@]host[:port][/db]`, IPv6 hosts in
//! brackets, user and password percent-decoded; `rediss://` for TLS (with
//! the feature `tls`), the certificate checked against the host. The password only ever lives
//! inside the encoded handshake bytes, which no `Debug` or `Display` shows.

use crate::command::rights::Probe;
use crate::command::{Native, ScriptId};
use crate::error::ConfigError;
use crate::resp::{encode_command, Arg};
use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

const DEFAULT_PORT: u16 = 6379;

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
    /// compare-and-set command (see `command::native`); always last.
    Native(Native),
}

/// A master, ready to connect to.
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
            #[cfg(feature = "tls")]
            tls,
        })
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

#[derive(Debug, PartialEq, Eq)]
enum Host<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

/// The parts of a node URL. Not `Debug`: it holds the password.
struct ParsedUrl<'a> {
    /// `rediss://`: TLS.
    secure: bool,
    user: Option<Vec<u8>>,
    password: Option<Vec<u8>>,
    host: Host<'a>,
    port: u16,
    db: u32,
}

impl<'a> ParsedUrl<'a> {
    fn parse(url: &'a str) -> Result<ParsedUrl<'a>, &'static str> {
        let (secure, rest) = match (
            strip_prefix_ignore_case(url, "redis://"),
            strip_prefix_ignore_case(url, "rediss://"),
        ) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => return Err("expected a redis:// or rediss:// URL"),
        };
        if rest.contains(['?', '#']) {
            return Err("a '?' or '#' starts a query string or fragment, which are not supported; in a password, percent-encode them (%3F, %23)");
        }
        // The last '@' ends the credentials, as in WHATWG URL parsers: a
        // host never holds one, so an '@' left unencoded in a password
        // (`redis://:p@ss@host`, which should be `p%40ss`) means what its
        // writer meant.
        let (userinfo, location) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let (host_port, db) = match location.find('/') {
            Some(slash) => (&location[..slash], parse_db(&location[slash + 1..])?),
            None => (location, 0),
        };
        let (host, port) = parse_host_port(host_port)?;
        let (user, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let Some((user, password)) = info.split_once(':') else {
                    return Err("credentials need a password (user:password@ or :password@)");
                };
                let user = percent_decode(user)?;
                let password = percent_decode(password)?;
                if password.is_empty() {
                    return Err("empty password");
                }
                ((!user.is_empty()).then_some(user), Some(password))
            }
        };
        Ok(ParsedUrl {
            secure,
            user,
            password,
            host,
            port,
            db,
        })
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn parse_db(path: &str) -> Result<u32, &'static str> {
    if path.is_empty() {
        return Ok(0);
    }
    if !path.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the path must be a database number");
    }
    path.parse().map_err(|_| "database number out of range")
}

fn parse_host_port(s: &str) -> Result<(Host<'_>, u16), &'static str> {
    let (host, port) = if let Some(bracketed) = s.strip_prefix('[') {
        let Some((ip, after)) = bracketed.split_once(']') else {
            return Err("unclosed '[' in IPv6 host");
        };
        let ip: std::net::Ipv6Addr = ip.parse().map_err(|_| "invalid IPv6 address")?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or("junk after IPv6 address")?),
        };
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let (host, port) = match s.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (s, None),
        };
        if host.contains(':') {
            return Err("IPv6 addresses must be in brackets");
        }
        let host = match host.parse::<std::net::Ipv4Addr>() {
            Ok(ip) => Host::Ip(IpAddr::V4(ip)),
            Err(_) => Host::Name(host),
        };
        (host, port)
    };
    if host == Host::Name("") {
        return Err("missing host");
    }
    if let Host::Name(name) = host {
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        {
            return Err("invalid character in host name");
        }
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => match p.parse() {
            Ok(0) | Err(_) => return Err("port out of range"),
            Ok(port) => port,
        },
        Some(_) => return Err("invalid port"),
    };
    Ok((host, port))
}

fn percent_decode(s: &str) -> Result<Vec<u8>, &'static str> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            const BAD: &str = "a '%' in the credentials must start an escape such as %40; write a '%' itself as %25";
            let hex = bytes.get(i + 1..i + 3).ok_or(BAD)?;
            let hex = std::str::from_utf8(hex).map_err(|_| BAD)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(BAD);
            }
            out.push(u8::from_str_radix(hex, 16).map_err(|_| BAD)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// The URL as errors and `Debug` may show it, whatever it holds (see
/// `redact::shown`): whether it parses says where its credentials end.
pub(crate) fn redact(url: &str) -> String {
    super::redact::shown(url, ParsedUrl::parse(url).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn parse(url: &str) -> ParsedUrl<'_> {
        ParsedUrl::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn parses_the_url_forms() {
        let u = parse("redis://127.0.0.1");
        assert_eq!(
            (u.host, u.port, u.db),
            (Host::Ip([127, 0, 0, 1].into()), 6379, 0)
        );
        assert!(u.user.is_none() && u.password.is_none());

        let u = parse("redis://:s3cret@10.0.0.7:7001/3");
        assert_eq!((u.port, u.db), (7001, 3));
        assert_eq!(u.password.as_deref(), Some(&b"s3cret"[..]));
        assert!(u.user.is_none());

        let u = parse("redis://alice:p%40ss%3Aw%2Fd@cache.example:6380");
        assert_eq!(u.user.as_deref(), Some(&b"alice"[..]));
        assert_eq!(u.password.as_deref(), Some(&b"p@ss:w/d"[..]));
        assert_eq!(u.host, Host::Name("cache.example"));

        let u = parse("redis://[::1]:7002/");
        assert_eq!(
            (u.host, u.port, u.db),
            (Host::Ip("::1".parse().unwrap()), 7002, 0)
        );
        let u = parse("REDIS://[fe80::1]");
        assert_eq!(u.port, 6379);
        // An unescaped '@' in the password still parses: the last '@' wins.
        let u = parse("redis://:a@b@host");
        assert_eq!(u.password.as_deref(), Some(&b"a@b"[..]));
        let u = parse("redis://:p@ss@host:6379");
        assert_eq!(u.password.as_deref(), Some(&b"p@ss"[..]));
        assert_eq!((u.host, u.port), (Host::Name("host"), 6379));
    }

    #[test]
    fn rejects_bad_urls_with_a_reason() {
        for url in [
            "127.0.0.1:6379",
            "http://h",
            "rediss://",
            "redis://",
            "redis://h:0",
            "redis://h:65536",
            "redis://h:x",
            "redis://h:",
            "redis://::1",
            "redis://[::1",
            "redis://[zz]:1",
            "redis://h/x",
            "redis://h/99999999999",
            "redis://h?db=1",
            "redis://user@h",
            "redis://:@h",
            "redis://:%4@h",
            "redis://:%zz@h",
            "redis://ho st",
        ] {
            assert!(ParsedUrl::parse(url).is_err(), "{url} should be rejected");
        }
    }

    #[test]
    fn redaction_hides_credentials() {
        assert_eq!(redact("redis://alice:hunter2@h:1/2"), "redis://***@h:1/2");
        assert_eq!(redact("redis://:a@b@h"), "redis://***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        let err = Node::from_url("redis://u:hunter2@h:0", true, true).unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"));
    }

    /// Passwords with a `,`, a blank, an `@` or a `%` are accepted as they
    /// are written (percent-decoded), and shown as `***`.
    #[test]
    fn passwords_may_hold_commas_blanks_ats_and_escapes() {
        for (url, password) in [
            ("redis://:hun,ter2@h:1", &b"hun,ter2"[..]),
            ("redis://:hun ter2@h:1", b"hun ter2"),
            ("redis://alice:p@ss,w rd@h:1", b"p@ss,w rd"),
            ("redis://:100%25,%20x@h:1", b"100%, x"),
        ] {
            assert_eq!(parse(url).password.as_deref(), Some(password), "{url}");
            assert_eq!(redact(url).split_once("***@").map(|p| p.1), Some("h:1"));
        }
    }

    /// A URL that does not parse shows a scheme and a host at most, never
    /// what lies between `://` and the host, nor after the host: where its
    /// credentials end cannot be known (issue 31, item 5: "redis://:hunter2"
    /// was shown whole).
    #[test]
    fn an_invalid_url_shows_no_part_that_may_be_a_password() {
        for (url, shown) in [
            ("redis://:hunter2", "redis://***"),
            ("redis://:hun,ter2", "redis://***"),
            ("redis://:hun ter2", "redis://***"),
            ("redis://alice:hunter2", "redis://alice:***"),
            ("redis://alice:hunter2/0", "redis://alice:***"),
            ("redis://:hunter2@h:0", "redis://***@h:***"),
            ("redis://:hun ter2@h:99999", "redis://***@h:***"),
            ("redis://:p@ss,hunter2@", "redis://***@"),
            ("redis://:hunter2%zz@h", "redis://***@h"),
            ("redis://:hunter2%@h", "redis://***@h"),
            ("redis://:p@ss hunter2", "redis://***@***"),
            ("redis://:a#hunter2", "redis://***"),
            ("redis://u:p@h?hunter2", "redis://***@h?***"),
            ("hunter2", "***"),
            ("hun,ter2@h", "***@***"),
            ("127.0.0.1:6379", "127.0.0.1:***"),
            ("http://127.0.0.1", "http://127.0.0.1"),
        ] {
            assert!(ParsedUrl::parse(url).is_err(), "{url} parses");
            assert_eq!(redact(url), shown, "{url}");
            let err = Node::from_url(url, true, true).unwrap_err();
            let text = format!("{err} {err:?} {}", Error::from(err.clone()));
            for secret in ["hunter2", "hun,ter2", "hun ter2", "p@ss"] {
                assert!(!text.contains(secret), "{url}: {text}");
            }
        }
    }

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
