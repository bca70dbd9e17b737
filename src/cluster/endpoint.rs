//! Where a cluster node says it can be reached: a host to dial, "the host
//! you asked", or nothing usable. Servers print a node's address in three
//! places (a `MOVED`/`ASK` redirect, `CLUSTER SHARDS`, `CLUSTER SLOTS`), as
//! the server's `cluster-preferred-endpoint-type` says: its IP (IPv6 bare,
//! `::1`, never in brackets), its announced host name, `?` when the type is
//! `hostname` but the node announced none, or nothing at all (an empty
//! string, or a null in `CLUSTER SLOTS`) for `unknown-endpoint`, which the
//! servers' docs define as "the endpoint the client used for its last
//! request, with the port given".

use std::fmt;

/// The longest host accepted, in bytes: a DNS name is at most 253, an
/// IPv6 address with a zone far less.
pub const MAX_HOST_LEN: usize = 255;

/// A node's endpoint, owned (kept in a [`super::Topology`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// Dial this host: an IP address (IPv6 without brackets) or a name.
    Host(String),
    /// Dial the host that gave this answer, at the node's port: the
    /// server's `unknown-endpoint` type (nodes behind one address), or a
    /// wildcard address (`0.0.0.0`, `::`), which no client can dial.
    SameAsAsked,
    /// No address a client can use: `?` (the `hostname` type without an
    /// announced name), or an empty IP (a node that has not learnt its own
    /// address yet). Such a node is not usable until a later refresh.
    Unknown,
}

/// A node's endpoint, borrowed from a reply (a redirect's target): no
/// allocation on the path that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointRef<'a> {
    /// See [`Endpoint::Host`].
    Host(&'a str),
    /// See [`Endpoint::SameAsAsked`].
    SameAsAsked,
    /// See [`Endpoint::Unknown`].
    Unknown,
}

impl Endpoint {
    /// The same endpoint, borrowed (to compare with a redirect's target).
    pub fn as_ref(&self) -> EndpointRef<'_> {
        match self {
            Endpoint::Host(host) => EndpointRef::Host(host),
            Endpoint::SameAsAsked => EndpointRef::SameAsAsked,
            Endpoint::Unknown => EndpointRef::Unknown,
        }
    }

    /// Whether a client can dial this endpoint (given the host it asked).
    pub fn is_dialable(&self) -> bool {
        !matches!(self, Endpoint::Unknown)
    }
}

impl EndpointRef<'_> {
    /// The same endpoint, owned.
    pub fn to_owned(self) -> Endpoint {
        match self {
            EndpointRef::Host(host) => Endpoint::Host(host.to_owned()),
            EndpointRef::SameAsAsked => Endpoint::SameAsAsked,
            EndpointRef::Unknown => Endpoint::Unknown,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Host(host) => f.write_str(host),
            Endpoint::SameAsAsked => f.write_str("(the host asked)"),
            Endpoint::Unknown => f.write_str("(unknown)"),
        }
    }
}

/// Why bytes are not a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Longer than 255 bytes.
    #[error("host longer than {MAX_HOST_LEN} bytes")]
    TooLong,
    /// Not printable ASCII: a space, a control byte or a non-ASCII byte
    /// (host names and IP addresses are ASCII; an internationalised name is
    /// announced in its `xn--` form).
    #[error("host with a byte that is not printable ASCII")]
    NotPrintable,
    /// It has a `:`, so it must be an IPv6 address (host names have none),
    /// and it is not one.
    #[error("host with a `:` that is no IPv6 address")]
    BadIpv6,
}

/// Reads a non-empty host as a server prints it: `?` is
/// [`EndpointRef::Unknown`], a wildcard address is
/// [`EndpointRef::SameAsAsked`], an IPv6 address in brackets loses them
/// (servers never add them; a proxy might), anything else printable is a
/// host. The empty string means different things in different replies, so
/// each caller decides it before calling this.
pub(super) fn parse_host(bytes: &[u8]) -> Result<EndpointRef<'_>, HostError> {
    if bytes.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong);
    }
    if !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(HostError::NotPrintable);
    }
    let bytes = match bytes {
        [b'[', inner @ .., b']'] if !inner.is_empty() => inner,
        _ => bytes,
    };
    // Printable ASCII, so valid UTF-8; the error arm is never taken.
    let Ok(host) = std::str::from_utf8(bytes) else {
        return Err(HostError::NotPrintable);
    };
    if host.contains(':') {
        // A zone (`fe80::1%eth0`) is not part of the address syntax.
        let address = host.split_once('%').map_or(host, |(address, _)| address);
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(HostError::BadIpv6);
        }
    }
    Ok(match host {
        "?" => EndpointRef::Unknown,
        "0.0.0.0" | "::" => EndpointRef::SameAsAsked,
        host => EndpointRef::Host(host),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_as_servers_print_them() {
        let host = |b: &'static [u8]| parse_host(b);
        assert_eq!(host(b"127.0.0.1"), Ok(EndpointRef::Host("127.0.0.1")));
        assert_eq!(host(b"::1"), Ok(EndpointRef::Host("::1")));
        assert_eq!(host(b"[::1]"), Ok(EndpointRef::Host("::1")));
        assert_eq!(host(b"fe80::1%eth0"), Ok(EndpointRef::Host("fe80::1%eth0")));
        assert_eq!(
            host(b"node-2.example"),
            Ok(EndpointRef::Host("node-2.example"))
        );
        assert_eq!(host(b"?"), Ok(EndpointRef::Unknown));
        assert_eq!(host(b"0.0.0.0"), Ok(EndpointRef::SameAsAsked));
        assert_eq!(host(b"::"), Ok(EndpointRef::SameAsAsked));
        assert_eq!(host(b"[]"), Ok(EndpointRef::Host("[]")));
    }

    #[test]
    fn hosts_that_are_not() {
        assert_eq!(parse_host(b"a b"), Err(HostError::NotPrintable));
        assert_eq!(parse_host(b"a\x00"), Err(HostError::NotPrintable));
        assert_eq!(parse_host(b"h\xc3\xa9"), Err(HostError::NotPrintable));
        assert_eq!(parse_host(&[b'a'; 256]), Err(HostError::TooLong));
        assert_eq!(parse_host(b":"), Err(HostError::BadIpv6));
        assert_eq!(parse_host(b"h:1"), Err(HostError::BadIpv6));
        assert_eq!(parse_host(b"[h:1]"), Err(HostError::BadIpv6));
        assert_eq!(parse_host(b"1::2::3"), Err(HostError::BadIpv6));
        assert!(parse_host(&[b'a'; 255]).is_ok());
    }

    #[test]
    fn owned_and_borrowed_agree() {
        for e in [
            Endpoint::Host("h".into()),
            Endpoint::SameAsAsked,
            Endpoint::Unknown,
        ] {
            assert_eq!(e.as_ref().to_owned(), e);
            assert_eq!(e.is_dialable(), e != Endpoint::Unknown);
            assert!(!e.to_string().is_empty());
        }
    }
}
