//! A node URL parsed: `redis://[[user]:password@]host[:port][/db]`, IPv6
//! hosts in brackets, user and password percent-decoded; `rediss://` for
//! TLS. What errors may show of a URL is `redact`'s business: a
//! [`ParsedUrl`] holds the password and is never shown.

use std::net::IpAddr;

const DEFAULT_PORT: u16 = 6379;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Host<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

/// The parts of a node URL. Not `Debug`: it holds the password.
pub(super) struct ParsedUrl<'a> {
    /// `rediss://`: TLS.
    pub(super) secure: bool,
    pub(super) user: Option<Vec<u8>>,
    pub(super) password: Option<Vec<u8>>,
    pub(super) host: Host<'a>,
    pub(super) port: u16,
    pub(super) db: u32,
}

impl<'a> ParsedUrl<'a> {
    pub(super) fn parse(url: &'a str) -> Result<ParsedUrl<'a>, &'static str> {
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
    use crate::conn::test_node;
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
        let err = test_node("redis://u:hunter2@h:0", true, true, false).unwrap_err();
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
            let err = test_node(url, true, true, false).unwrap_err();
            let text = format!("{err} {err:?} {}", Error::from(err.clone()));
            for secret in ["hunter2", "hun,ter2", "hun ter2", "p@ss"] {
                assert!(!text.contains(secret), "{url}: {text}");
            }
        }
    }
}
