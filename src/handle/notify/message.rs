//! What is said on a resource's channel (one letter, then a 16-character
//! id: anything else is not ours and is dropped), and the channel's name.
//!
//! | message        | sent by                         | on                  |
//! | -------------- | ------------------------------- | ------------------- |
//! | `r` + notice   | the release script              | every master        |
//! | `w` + waiter   | a client that starts waiting    | the queue's master  |
//! | `t` + waiter + notice | a waiter that took the lock (whose release notice that is) | the queue's master |
//! | `g` + waiter   | a waiter that gave up           | the queue's master  |
//!
//! A release's notice is the start of the released lock's value, so the
//! copies from different masters are recognised as one release. A waiter
//! id is random, one per waiting call.
//!
//! The channel of a resource is `redlock-sync:released:{TAG}<resource>`,
//! where `TAG` is the three-character hash tag of the resource's cluster
//! slot (`cluster::tag_for_key`): the channel lives in the lock key's slot,
//! whatever the resource's name holds (braces included), so that on a
//! cluster node the release script may `SPUBLISH` to it (a script may only
//! publish to a channel of its own slot), and a waiter subscribes to it on
//! the node that owns the key. Standalone masters use the same name, so a
//! resource has one channel everywhere. The name is part of the wire
//! format: clients of one deployment must agree on it.

use crate::cluster::{tag_for_key, TAG_LEN};
use crate::resp::MAX_BULK_LEN;

/// The prefix of the channel of a resource (no `{` in it: the tag that
/// follows is the name's hash tag).
pub(crate) const CHANNEL_PREFIX: &[u8] = b"redlock-sync:released:";

/// The length of the tag part of a channel's name, braces included.
const TAG_PART: usize = TAG_LEN + 2;

/// Appends the channel of `resource` to `out`.
pub(crate) fn channel_of(resource: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(CHANNEL_PREFIX);
    out.push(b'{');
    out.extend_from_slice(tag_for_key(resource));
    out.push(b'}');
    out.extend_from_slice(resource);
}

/// The length of `resource`'s channel name.
pub(crate) fn channel_len(resource: &[u8]) -> usize {
    CHANNEL_PREFIX.len() + TAG_PART + resource.len()
}

/// The resource whose channel is `channel`, if it is one of ours.
pub(crate) fn resource_of(channel: &[u8]) -> Option<&[u8]> {
    let rest = channel.strip_prefix(CHANNEL_PREFIX)?;
    let (tag, resource) = rest.split_at_checked(TAG_PART)?;
    let well_formed = tag[0] == b'{'
        && tag[TAG_PART - 1] == b'}'
        && tag[1..TAG_PART - 1] == tag_for_key(resource)[..];
    well_formed.then_some(resource)
}

/// Whether waiters can hear `resource`'s channel. The server names the
/// channel in every acknowledgement and message, so a channel name longer
/// than the codec reads (64 KiB) would break the subscriber connection
/// that all of a handle's channels share: such a resource is never
/// subscribed, and its waiters wait by the fallback timer.
pub(crate) fn can_subscribe(resource: &[u8]) -> bool {
    channel_len(resource) <= MAX_BULK_LEN
}

/// Whether the channel named `channel` can be subscribed (see
/// [`can_subscribe`]).
pub(super) fn fits(channel: &[u8]) -> bool {
    channel.len() <= MAX_BULK_LEN
}

/// Length of a notice or a waiter id.
pub(crate) const ID_LEN: usize = 16;

/// A release notice or a waiter id.
pub(crate) type Id = [u8; ID_LEN];

/// Length of an encoded message: the longest, `t`.
pub(crate) const MESSAGE_LEN: usize = 1 + 2 * ID_LEN;

/// One message on a resource's channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Message {
    /// A master ran the release of the lock whose value starts with this.
    Released(Id),
    /// A client started waiting for the lock.
    Waiting(Id),
    /// A waiter took the lock; its release will carry this notice (so a
    /// `t` heard after that release is known to be late).
    Took { waiter: Id, lock: Id },
    /// A waiter stopped waiting without the lock.
    Left(Id),
}

impl Message {
    /// The message in `payload`, if it is one of ours.
    pub(crate) fn parse(payload: &[u8]) -> Option<Message> {
        let (&kind, rest) = payload.split_first()?;
        if kind == b't' {
            let (waiter, lock) = rest.split_at_checked(ID_LEN)?;
            return Some(Message::Took {
                waiter: waiter.try_into().ok()?,
                lock: lock.try_into().ok()?,
            });
        }
        let id: Id = rest.try_into().ok()?;
        match kind {
            b'r' => Some(Message::Released(id)),
            b'w' => Some(Message::Waiting(id)),
            b'g' => Some(Message::Left(id)),
            _ => None,
        }
    }

    /// The payload that says this message, in a buffer; the length used.
    pub(crate) fn encode(self) -> ([u8; MESSAGE_LEN], usize) {
        let mut out = [0; MESSAGE_LEN];
        let (kind, id) = match self {
            Message::Released(id) => (b'r', id),
            Message::Waiting(id) => (b'w', id),
            Message::Left(id) => (b'g', id),
            Message::Took { waiter, lock } => {
                out[0] = b't';
                out[1..=ID_LEN].copy_from_slice(&waiter);
                out[1 + ID_LEN..].copy_from_slice(&lock);
                return (out, MESSAGE_LEN);
            }
        };
        out[0] = kind;
        out[1..=ID_LEN].copy_from_slice(&id);
        (out, 1 + ID_LEN)
    }
}

/// What identifies the lock whose value is `value` in its release notice.
pub(crate) fn notice_of(value: &[u8]) -> Id {
    let mut id = [b'0'; ID_LEN];
    let n = value.len().min(ID_LEN);
    id[..n].copy_from_slice(&value[..n]);
    id
}

/// The payload of the notice of a release of the lock whose value is
/// `value`.
pub(crate) fn release_notice(value: &[u8]) -> [u8; 1 + ID_LEN] {
    let mut out = [0; 1 + ID_LEN];
    out[0] = b'r';
    out[1..].copy_from_slice(&notice_of(value));
    out
}

/// A fresh waiter id: random, in hex. Without entropy, one from the clock
/// and a counter: ids only order waiters, they protect nothing.
pub(crate) fn new_waiter_id() -> Id {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let raw = getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos
            ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(32)
            ^ u64::from(std::process::id())
    });
    let mut id = [0u8; ID_LEN];
    for (i, digit) in id.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[((raw >> (60 - 4 * i)) & 0xf) as usize];
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_strangers_are_dropped() {
        let id = new_waiter_id();
        for message in [
            Message::Released(id),
            Message::Waiting(id),
            Message::Took {
                waiter: id,
                lock: new_waiter_id(),
            },
            Message::Left(id),
        ] {
            let (bytes, len) = message.encode();
            assert_eq!(Message::parse(&bytes[..len]), Some(message));
        }
        assert_eq!(
            Message::parse(b"t0123456789abcdef"),
            None,
            "a t without its lock"
        );
        assert_eq!(Message::parse(b""), None);
        assert_eq!(Message::parse(b"r"), None);
        assert_eq!(Message::parse(b"x0123456789abcdef"), None);
        assert_eq!(Message::parse(b"r0123456789abcdef0"), None, "too long");
        assert_eq!(Message::parse(b"r0123456789abcde"), None, "too short");
        assert_ne!(new_waiter_id(), new_waiter_id());
    }

    #[test]
    fn a_channel_lives_in_its_resources_slot_and_names_its_resource() {
        use crate::cluster::key_slot;
        let resources: &[&[u8]] = &[b"orders:1", b"a}b", b"x{}y", b"{user1}.x", b"", b"\xff{"];
        for &resource in resources {
            let mut channel = Vec::new();
            channel_of(resource, &mut channel);
            assert_eq!(channel.len(), channel_len(resource));
            assert_eq!(key_slot(&channel), key_slot(resource), "{channel:?}");
            assert_eq!(resource_of(&channel), Some(resource));
        }
        let mut channel = Vec::new();
        channel_of(b"foo", &mut channel);
        // The wire format: the tag of "foo"'s slot (12182) is "9Le".
        assert_eq!(channel, b"redlock-sync:released:{9Le}foo");
        // Not ours: another prefix, a missing or wrong tag.
        assert_eq!(resource_of(b"redlock-sync:released:foo"), None);
        assert_eq!(resource_of(b"redlock-sync:released:{9Le}bar"), None);
        assert_eq!(resource_of(b"redlock-sync:released:{9Le"), None);
        assert_eq!(resource_of(b"other:{9Le}foo"), None);
    }

    #[test]
    fn a_release_notice_is_the_start_of_the_value() {
        let notice = release_notice(b"0123456789abcdef0123456789abcdef01234567");
        assert_eq!(&notice, b"r0123456789abcdef");
        assert_eq!(&release_notice(b"short"), b"rshort00000000000");
    }
}
