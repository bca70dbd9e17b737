//! Reading the parts of a topology reply: arrays, flat key/value maps (the
//! RESP2 form of a RESP3 map), numbers, slots, ports, ids, text. Each
//! reader names the element it reads, so that a reply of the wrong shape
//! gives a [`TopologyError`] that says where.

use super::endpoint::MAX_HOST_LEN;
use super::slot::SLOTS;
use super::topology::{Health, Role, TopologyError};
use crate::resp::{Array, Reply};

/// The longest node or shard id accepted: Redis and Valkey ids are 40 hex
/// digits; other servers that speak the protocol may differ a little.
const MAX_ID_LEN: usize = 64;

/// The array `reply` must be.
pub(super) fn array<'a>(reply: &Reply<'a>, what: &'static str) -> Result<Array<'a>, TopologyError> {
    match *reply {
        Reply::Array(array) => Ok(array),
        _ => Err(TopologyError::WrongType(what)),
    }
}

/// Calls `f` with each key and value of a flat key/value array. A key is
/// a bulk (or simple) string; an odd count is a wrong type.
pub(super) fn for_each_pair<'a>(
    map: &Reply<'a>,
    what: &'static str,
    mut f: impl FnMut(&'a [u8], Reply<'a>) -> Result<(), TopologyError>,
) -> Result<(), TopologyError> {
    let map = array(map, what)?;
    if map.len() % 2 != 0 {
        return Err(TopologyError::WrongType(what));
    }
    let mut items = map.iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        f(bytes(&key, what)?, value)?;
    }
    Ok(())
}

/// Remembers which of a map's known keys were seen, to refuse one twice.
#[derive(Default)]
pub(super) struct Seen(u32);

impl Seen {
    /// Marks key number `index` (below 32) seen; an error if it was.
    pub(super) fn mark(&mut self, index: u32, what: &'static str) -> Result<(), TopologyError> {
        if self.0 & (1 << index) != 0 {
            return Err(TopologyError::Duplicate(what));
        }
        self.0 |= 1 << index;
        Ok(())
    }
}

/// A bulk or simple string.
pub(super) fn bytes<'a>(reply: &Reply<'a>, what: &'static str) -> Result<&'a [u8], TopologyError> {
    match *reply {
        Reply::Bulk(b) | Reply::Simple(b) => Ok(b),
        _ => Err(TopologyError::WrongType(what)),
    }
}

/// An integer, or a string of decimal digits (some proxies and older
/// builds send numbers as strings).
pub(super) fn integer(reply: &Reply<'_>, what: &'static str) -> Result<i64, TopologyError> {
    match *reply {
        Reply::Integer(n) => Ok(n),
        Reply::Bulk(b) | Reply::Simple(b) => {
            let digits = b.strip_prefix(b"-").unwrap_or(b);
            if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
                return Err(TopologyError::WrongType(what));
            }
            let n = digits
                .iter()
                .fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
            Ok(if digits.len() < b.len() { -n } else { n })
        }
        _ => Err(TopologyError::WrongType(what)),
    }
}

/// A slot number (below 16384).
pub(super) fn slot(reply: &Reply<'_>, what: &'static str) -> Result<u16, TopologyError> {
    let n = integer(reply, what)?;
    if (0..SLOTS as i64).contains(&n) {
        Ok(n as u16)
    } else {
        Err(TopologyError::OutOfRange(what))
    }
}

/// A port: `None` for 0 (the server's "no such port").
pub(super) fn port(reply: &Reply<'_>, what: &'static str) -> Result<Option<u16>, TopologyError> {
    let n = integer(reply, what)?;
    match u16::try_from(n) {
        Ok(0) => Ok(None),
        Ok(port) => Ok(Some(port)),
        Err(_) => Err(TopologyError::OutOfRange(what)),
    }
}

/// A node id: 1 to 64 letters, digits, `-` or `_`.
pub(super) fn node_id(reply: &Reply<'_>) -> Result<String, TopologyError> {
    let id = bytes(reply, "node id")?;
    let ok = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_';
    if id.is_empty() || id.len() > MAX_ID_LEN || !id.iter().all(ok) {
        return Err(TopologyError::BadNodeId);
    }
    Ok(ascii(id))
}

/// Printable ASCII of at most 255 bytes (a host name, a shard id).
pub(super) fn text(reply: &Reply<'_>, what: &'static str) -> Result<String, TopologyError> {
    let b = bytes(reply, what)?;
    if b.len() > MAX_HOST_LEN || !b.iter().all(u8::is_ascii_graphic) {
        return Err(TopologyError::BadText(what));
    }
    Ok(ascii(b))
}

/// Bytes already checked to be ASCII, as a `String`.
fn ascii(b: &[u8]) -> String {
    b.iter().map(|&b| char::from(b)).collect()
}

/// A role word.
pub(super) fn role(reply: &Reply<'_>) -> Result<Role, TopologyError> {
    match bytes(reply, "role")? {
        b"master" | b"primary" => Ok(Role::Master),
        b"replica" | b"slave" => Ok(Role::Replica),
        _ => Err(TopologyError::UnknownRole),
    }
}

/// A health word (an unknown one is [`Health::Other`]: not online).
pub(super) fn health(reply: &Reply<'_>) -> Result<Health, TopologyError> {
    Ok(match bytes(reply, "health")? {
        b"online" => Health::Online,
        b"fail" | b"failed" => Health::Failed,
        b"loading" => Health::Loading,
        _ => Health::Other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_from_integers_or_digit_strings() {
        assert_eq!(integer(&Reply::Integer(-5), "n"), Ok(-5));
        assert_eq!(integer(&Reply::Bulk(b"42"), "n"), Ok(42));
        assert_eq!(integer(&Reply::Simple(b"-42"), "n"), Ok(-42));
        for bad in [&b""[..], b"-", b"4x", b"+1", b"1234567890123456789"] {
            assert_eq!(
                integer(&Reply::Bulk(bad), "n"),
                Err(TopologyError::WrongType("n"))
            );
        }
        assert_eq!(
            integer(&Reply::Nil, "n"),
            Err(TopologyError::WrongType("n"))
        );
    }

    #[test]
    fn slots_and_ports_in_range() {
        assert_eq!(slot(&Reply::Integer(0), "s"), Ok(0));
        assert_eq!(slot(&Reply::Integer(16383), "s"), Ok(16383));
        assert_eq!(
            slot(&Reply::Integer(16384), "s"),
            Err(TopologyError::OutOfRange("s"))
        );
        assert_eq!(
            slot(&Reply::Integer(-1), "s"),
            Err(TopologyError::OutOfRange("s"))
        );
        assert_eq!(port(&Reply::Integer(0), "p"), Ok(None));
        assert_eq!(port(&Reply::Integer(65535), "p"), Ok(Some(65535)));
        assert_eq!(
            port(&Reply::Integer(65536), "p"),
            Err(TopologyError::OutOfRange("p"))
        );
        assert_eq!(
            port(&Reply::Integer(-1), "p"),
            Err(TopologyError::OutOfRange("p"))
        );
    }

    #[test]
    fn ids_and_text() {
        let id = [b'a'; 40];
        assert_eq!(
            node_id(&Reply::Bulk(&id)).as_deref(),
            Ok(&"a".repeat(40)[..])
        );
        assert_eq!(node_id(&Reply::Bulk(b"")), Err(TopologyError::BadNodeId));
        assert_eq!(
            node_id(&Reply::Bulk(&[b'a'; 65])),
            Err(TopologyError::BadNodeId)
        );
        assert_eq!(node_id(&Reply::Bulk(b"a b")), Err(TopologyError::BadNodeId));
        assert_eq!(
            node_id(&Reply::Integer(1)),
            Err(TopologyError::WrongType("node id"))
        );
        assert_eq!(
            text(&Reply::Bulk(b"h.example"), "t").as_deref(),
            Ok("h.example")
        );
        assert_eq!(
            text(&Reply::Bulk(b"a\xff"), "t"),
            Err(TopologyError::BadText("t"))
        );
        assert_eq!(
            text(&Reply::Bulk(&[b'h'; 256]), "t"),
            Err(TopologyError::BadText("t"))
        );
    }

    #[test]
    fn roles_and_health_words() {
        assert_eq!(role(&Reply::Bulk(b"master")), Ok(Role::Master));
        assert_eq!(role(&Reply::Bulk(b"primary")), Ok(Role::Master));
        assert_eq!(role(&Reply::Bulk(b"replica")), Ok(Role::Replica));
        assert_eq!(role(&Reply::Bulk(b"slave")), Ok(Role::Replica));
        assert_eq!(
            role(&Reply::Bulk(b"arbiter")),
            Err(TopologyError::UnknownRole)
        );
        assert_eq!(health(&Reply::Bulk(b"online")), Ok(Health::Online));
        assert_eq!(health(&Reply::Bulk(b"fail")), Ok(Health::Failed));
        assert_eq!(health(&Reply::Bulk(b"loading")), Ok(Health::Loading));
        assert_eq!(health(&Reply::Bulk(b"busy")), Ok(Health::Other));
        assert_eq!(
            health(&Reply::Integer(1)),
            Err(TopologyError::WrongType("health"))
        );
    }

    #[test]
    fn maps_pair_up_and_refuse_odd_counts_and_repeats() {
        let even = crate::resp::decode(b"*4\r\n$1\r\na\r\n:1\r\n+b\r\n:2\r\n").unwrap();
        let crate::resp::Decoded::Complete(even, _) = even else {
            panic!("complete")
        };
        let mut keys = Vec::new();
        for_each_pair(&even, "m", |k, v| {
            keys.push((k.to_vec(), v));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            keys,
            [
                (b"a".to_vec(), Reply::Integer(1)),
                (b"b".to_vec(), Reply::Integer(2))
            ]
        );
        let Ok(crate::resp::Decoded::Complete(odd, _)) = crate::resp::decode(b"*1\r\n$1\r\na\r\n")
        else {
            panic!("complete")
        };
        assert_eq!(
            for_each_pair(&odd, "m", |_, _| Ok(())),
            Err(TopologyError::WrongType("m"))
        );
        let Ok(crate::resp::Decoded::Complete(int_key, _)) =
            crate::resp::decode(b"*2\r\n:1\r\n:1\r\n")
        else {
            panic!("complete")
        };
        assert_eq!(
            for_each_pair(&int_key, "m", |_, _| Ok(())),
            Err(TopologyError::WrongType("m"))
        );
        let mut seen = Seen::default();
        assert_eq!(seen.mark(3, "k"), Ok(()));
        assert_eq!(seen.mark(4, "k"), Ok(()));
        assert_eq!(seen.mark(3, "k"), Err(TopologyError::Duplicate("k")));
        assert_eq!(
            array(&Reply::NilArray, "a"),
            Err(TopologyError::WrongType("a"))
        );
    }
}
