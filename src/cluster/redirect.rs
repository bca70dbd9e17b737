//! What a cluster node's error reply means for a round: a redirect to
//! follow (`MOVED`, `ASK`), a refusal for now (`TRYAGAIN`, `CLUSTERDOWN`,
//! `MASTERDOWN`, `LOADING`), or a command that can never run as written
//! (`CROSSSLOT`). In every one of these cases the command did not run, so
//! a round may send it again elsewhere. Everything here borrows from the
//! reply: no allocation on the path that reads it.
//!
//! The servers print a redirect as `-MOVED <slot> <endpoint>:<port>` (the
//! same line for `ASK`; `clusterRedirectClient` in Redis' and Valkey's
//! `cluster.c`), the endpoint as `endpoint.rs` describes: an IPv6 address
//! bare (`MOVED 3999 ::1:6381`, so the port is after the last `:`), a host
//! name, `?`, or nothing (`MOVED 3999 :6381`). The fixtures in
//! `fixtures/` are those lines as Redis 7.0, Valkey 8.1 and Valkey 9.1 sent
//! them.

use super::endpoint::{parse_host, EndpointRef, HostError};
use super::slot::SLOTS;
use crate::resp::{split_error, ServerErrorKind};

/// Which redirect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedirectKind {
    /// `MOVED`: the slot has a new owner; send there, and remember it.
    Moved,
    /// `ASK`: this one command goes to the named node, preceded by
    /// `ASKING` on the same connection; the slot's owner is unchanged.
    Ask,
}

/// A parsed `MOVED` or `ASK`, borrowing its host from the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Redirect<'a> {
    /// `MOVED` or `ASK`.
    pub kind: RedirectKind,
    /// The slot the command's key hashes to (below 16384).
    pub slot: u16,
    /// Where to send it: a host, the host of the node that answered
    /// (`MOVED 3999 :6381`), or unknown (`?`: a misconfigured cluster).
    pub endpoint: EndpointRef<'a>,
    /// The port to send it to (not 0).
    pub port: u16,
}

/// Why an error line that starts `MOVED` or `ASK` is not a redirect a
/// client can follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectError {
    /// Not `<code> <slot> <address>`: missing or extra words.
    #[error("a redirect is `MOVED|ASK <slot> <host>:<port>`")]
    Shape,
    /// The slot is not a decimal number below 16384.
    #[error("a redirect's slot is not a number below 16384")]
    Slot,
    /// The address has no `:` before its port.
    #[error("a redirect's address has no port")]
    NoPort,
    /// The port is not a decimal number from 1 to 65535.
    #[error("a redirect's port is not a number from 1 to 65535")]
    Port,
    /// The host is not one (see [`HostError`]).
    #[error("a redirect's host: {0}")]
    Host(HostError),
}

impl<'a> Redirect<'a> {
    /// Parses the payload of an error reply (without its `-`), which must
    /// start with `MOVED ` or `ASK `.
    pub fn parse(line: &'a [u8]) -> Result<Redirect<'a>, RedirectError> {
        let mut words = line.split(|&b| b == b' ');
        let kind = match words.next() {
            Some(b"MOVED") => RedirectKind::Moved,
            Some(b"ASK") => RedirectKind::Ask,
            _ => return Err(RedirectError::Shape),
        };
        let (Some(slot), Some(address), None) = (words.next(), words.next(), words.next()) else {
            return Err(RedirectError::Shape);
        };
        let slot = parse_decimal(slot)
            .filter(|&n| n < SLOTS as u32)
            .ok_or(RedirectError::Slot)? as u16;
        let colon = address
            .iter()
            .rposition(|&b| b == b':')
            .ok_or(RedirectError::NoPort)?;
        let port = parse_decimal(&address[colon + 1..])
            .filter(|&n| (1..=u32::from(u16::MAX)).contains(&n))
            .ok_or(RedirectError::Port)? as u16;
        let endpoint = match &address[..colon] {
            // `unknown-endpoint`: the host this reply came from.
            [] => EndpointRef::SameAsAsked,
            host => parse_host(host).map_err(RedirectError::Host)?,
        };
        Ok(Redirect {
            kind,
            slot,
            endpoint,
            port,
        })
    }
}

/// A decimal number of one to five digits (slots and ports fit), or `None`.
fn parse_decimal(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')),
    )
}

/// What a cluster error reply means for the round that got it. In every
/// case the command did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterError<'a> {
    /// `MOVED` or `ASK`: send the command there (within the round's
    /// deadline and redirect budget).
    Redirect(Redirect<'a>),
    /// A `MOVED` or `ASK` that cannot be followed: a "no" for this round,
    /// and a reason to refresh the slot map.
    BadRedirect(RedirectError),
    /// `TRYAGAIN` (a multi-key command during a slot's migration),
    /// `CLUSTERDOWN` (the cluster or the slot is not served), `MASTERDOWN`,
    /// `LOADING`: this voter's "no" for this round; a later round may
    /// succeed (the usual retry, never inside a round past its deadline).
    NotNow(ServerErrorKind),
    /// `CROSSSLOT`: the command's keys are in different slots. It never
    /// runs as written: a key was built without the right hash tag.
    CrossSlot,
}

/// Classifies the payload of an error reply (without its `-`): `None` for
/// an error that is not about the cluster (`ERR`, `NOSCRIPT`, `WRONGTYPE`,
/// ...), which keeps its usual meaning.
pub fn classify(line: &[u8]) -> Option<ClusterError<'_>> {
    let (kind, _, _) = split_error(line);
    Some(match kind {
        ServerErrorKind::Moved | ServerErrorKind::Ask => match Redirect::parse(line) {
            Ok(redirect) => ClusterError::Redirect(redirect),
            Err(e) => ClusterError::BadRedirect(e),
        },
        ServerErrorKind::TryAgain
        | ServerErrorKind::ClusterDown
        | ServerErrorKind::MasterDown
        | ServerErrorKind::Loading => ClusterError::NotNow(kind),
        ServerErrorKind::CrossSlot => ClusterError::CrossSlot,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(slot: u16, endpoint: EndpointRef<'_>, port: u16) -> Redirect<'_> {
        Redirect {
            kind: RedirectKind::Moved,
            slot,
            endpoint,
            port,
        }
    }

    #[test]
    fn redirects_as_servers_print_them() {
        let host = EndpointRef::Host;
        let cases: &[(&[u8], Redirect<'_>)] = &[
            (
                b"MOVED 3999 127.0.0.1:6381",
                moved(3999, host("127.0.0.1"), 6381),
            ),
            (
                b"ASK 3999 127.0.0.1:6381",
                Redirect {
                    kind: RedirectKind::Ask,
                    ..moved(3999, host("127.0.0.1"), 6381)
                },
            ),
            (b"MOVED 0 :1", moved(0, EndpointRef::SameAsAsked, 1)),
            (b"MOVED 16383 ::1:65535", moved(16383, host("::1"), 65535)),
            (b"MOVED 5 [::1]:7000", moved(5, host("::1"), 7000)),
            (
                b"MOVED 5 fe80::1:2:3:7000",
                moved(5, host("fe80::1:2:3"), 7000),
            ),
            (
                b"MOVED 16000 node-2.example:21002",
                moved(16000, host("node-2.example"), 21002),
            ),
            (b"MOVED 7 ?:7000", moved(7, EndpointRef::Unknown, 7000)),
            (
                b"MOVED 7 0.0.0.0:7000",
                moved(7, EndpointRef::SameAsAsked, 7000),
            ),
            (b"MOVED 00007 h:07000", moved(7, host("h"), 7000)),
        ];
        for (line, redirect) in cases {
            assert_eq!(
                Redirect::parse(line),
                Ok(*redirect),
                "{}",
                line.escape_ascii()
            );
            assert_eq!(classify(line), Some(ClusterError::Redirect(*redirect)));
        }
    }

    #[test]
    fn malformed_redirects_give_their_reason() {
        let cases: &[(&[u8], RedirectError)] = &[
            (b"MOVED", RedirectError::Shape),
            (b"MOVED 1", RedirectError::Shape),
            (b"MOVED 1 h:1 extra", RedirectError::Shape),
            (b"MOVED  1 h:1", RedirectError::Shape),
            (b"MOVED 1 h:1 ", RedirectError::Shape),
            (b"MOVE 1 h:1", RedirectError::Shape),
            (b"moved 1 h:1", RedirectError::Shape),
            (b"MOVED 16384 h:1", RedirectError::Slot),
            (b"MOVED 99999 h:1", RedirectError::Slot),
            (b"MOVED 100000 h:1", RedirectError::Slot),
            (b"MOVED -1 h:1", RedirectError::Slot),
            (b"MOVED +1 h:1", RedirectError::Slot),
            (b"MOVED  h:1", RedirectError::Slot),
            (b"MOVED x h:1", RedirectError::Slot),
            (b"MOVED 1 h", RedirectError::NoPort),
            (b"MOVED 1 h:", RedirectError::Port),
            (b"MOVED 1 h:0", RedirectError::Port),
            (b"MOVED 1 h:65536", RedirectError::Port),
            (b"MOVED 1 h:123456", RedirectError::Port),
            (b"MOVED 1 h:-1", RedirectError::Port),
            (b"MOVED 1 h:1:", RedirectError::Port),
            (b"MOVED 1 ::1", RedirectError::Host(HostError::BadIpv6)),
            (
                b"ASK 1 h\x01:1",
                RedirectError::Host(HostError::NotPrintable),
            ),
        ];
        for (line, error) in cases {
            assert_eq!(
                Redirect::parse(line),
                Err(*error),
                "{}",
                line.escape_ascii()
            );
        }
        // Through the classifier: a redirect that cannot be followed.
        assert_eq!(
            classify(b"MOVED 16384 h:1"),
            Some(ClusterError::BadRedirect(RedirectError::Slot))
        );
        let long = [&b"ASK 1 "[..], &[b'h'; 256], b":1"].concat();
        assert_eq!(
            Redirect::parse(&long),
            Err(RedirectError::Host(HostError::TooLong))
        );
    }

    #[test]
    fn cluster_errors_are_classified_and_others_are_not() {
        let cases: &[(&[u8], Option<ClusterError<'_>>)] = &[
            (
                b"TRYAGAIN Multiple keys request during rehashing of slot",
                Some(ClusterError::NotNow(ServerErrorKind::TryAgain)),
            ),
            (
                b"CLUSTERDOWN The cluster is down",
                Some(ClusterError::NotNow(ServerErrorKind::ClusterDown)),
            ),
            (
                b"CLUSTERDOWN Hash slot not served",
                Some(ClusterError::NotNow(ServerErrorKind::ClusterDown)),
            ),
            (
                b"MASTERDOWN Link with MASTER is down",
                Some(ClusterError::NotNow(ServerErrorKind::MasterDown)),
            ),
            (
                b"LOADING Redis is loading the dataset in memory",
                Some(ClusterError::NotNow(ServerErrorKind::Loading)),
            ),
            (
                b"CROSSSLOT Keys in request don't hash to the same slot",
                Some(ClusterError::CrossSlot),
            ),
            (b"ERR unknown command", None),
            (b"NOSCRIPT No matching script", None),
            (
                b"READONLY You can't write against a read only replica.",
                None,
            ),
            (b"", None),
            (b"MOVEDX 1 h:1", None),
        ];
        for (line, expected) in cases {
            assert_eq!(classify(line), *expected, "{}", line.escape_ascii());
        }
    }

    #[test]
    fn the_servers_own_lines_parse() {
        // Every error line the three servers sent (fixtures/*.resp whose
        // reply is an error): none is left unclassified or malformed.
        let mut seen = 0;
        for (name, bytes) in super::super::fixtures::ALL {
            let Some(line) = bytes
                .strip_prefix(b"-")
                .and_then(|b| b.strip_suffix(b"\r\n"))
            else {
                continue;
            };
            seen += 1;
            let class = classify(line);
            match *name {
                n if n.contains("myshardid") => assert_eq!(class, None, "{n}"),
                n if n.contains("moved") || n.contains("ask") => {
                    let Some(ClusterError::Redirect(r)) = class else {
                        panic!("{n}: {class:?}");
                    };
                    let want = if n.contains("-ask") {
                        RedirectKind::Ask
                    } else {
                        RedirectKind::Moved
                    };
                    assert_eq!(r.kind, want, "{n}");
                    let endpoint = match n {
                        n if n.ends_with("moved-hostname-missing") => EndpointRef::Unknown,
                        n if n.ends_with("moved-unknown-endpoint") => EndpointRef::SameAsAsked,
                        n if n.ends_with("moved-hostname") => EndpointRef::Host("node-2.example"),
                        n if n.ends_with("moved-ipv6") => EndpointRef::Host("::1"),
                        _ => EndpointRef::Host("127.0.0.1"),
                    };
                    assert_eq!(r.endpoint, endpoint, "{n}");
                }
                n if n.contains("tryagain") || n.contains("clusterdown") => {
                    assert!(matches!(class, Some(ClusterError::NotNow(_))), "{n}")
                }
                n if n.contains("crossslot") => assert_eq!(class, Some(ClusterError::CrossSlot)),
                n => panic!("an error fixture no test expects: {n}"),
            }
        }
        assert!(seen >= 3 * 10, "error fixtures: {seen}");
    }

    #[test]
    fn classifying_allocates_nothing() {
        use crate::counting_alloc::counted;
        let lines: &[&[u8]] = &[
            b"MOVED 3999 127.0.0.1:6381",
            b"ASK 3999 ::1:6381",
            b"MOVED 3999 :6381",
            b"MOVED 16384 h:1",
            b"TRYAGAIN x",
            b"ERR x",
        ];
        let (found, counts) = counted(|| lines.iter().filter_map(|l| classify(l)).count());
        assert_eq!(found, 5);
        assert_eq!(counts.allocations, 0, "{counts:?}");
    }
}
