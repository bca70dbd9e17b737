//! What is said on a resource's channel (one letter, then a 16-character
//! id: anything else is not ours and is dropped), and the channel's name.
//!
//! | message        | sent by                         | on                  |
//! | -------------- | ------------------------------- | ------------------- |
//! | `r` + notice   | the release script              | every master        |
//! | `w` + waiter   | a client that starts waiting    | the queue's master  |
//! | `t` + waiter + notice | a waiter that took the lock (whose release notice that is) | the queue's master |
//! | `g` + waiter   | a waiter that gave up           | the queue's master  |
//! | `s` + waiter   | a waiter of a set of resources (its held turn: see `lock::wait::set_turn`), again every 500 ms while it heads the queue | the queue's master |
//!
//! A release's notice is the start of the released lock's value, so the
//! copies from different masters are recognised as one release. A waiter
//! id is random, one per waiting call.
//!
//! The channel of a resource is named after its lock key (see
//! `command::channel`): `redlock-sync:released:{TAG}<resource>`, `TAG` the
//! resource's slot tag; a voter whose keys carry a tag of their own (the
//! single-cluster mode) has a channel of its own key's.

use crate::command::channel::{channel_len, TAG_PART};
use crate::resp::MAX_BULK_LEN;

/// Whether waiters can hear `resource`'s channel. The server names the
/// channel in every acknowledgement and message, so a channel name longer
/// than the codec reads (64 KiB) would break the subscriber connection
/// that all of a handle's channels share: such a resource is never
/// subscribed, and its waiters wait by the fallback timer. (Counted with
/// a voter's own key prefix, which the single-cluster mode adds.)
pub(crate) fn can_subscribe(resource: &[u8]) -> bool {
    channel_len(resource) + TAG_PART <= MAX_BULK_LEN
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
    /// A waiter of a set of resources is waiting (or, when it heads the
    /// queue, still alive): while it heads the queue, the others hold back
    /// (see `Channel::held_turn`).
    SetWaiting(Id),
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
            b's' => Some(Message::SetWaiting(id)),
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
            Message::SetWaiting(id) => (b's', id),
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
            Message::SetWaiting(id),
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
    fn a_release_notice_is_the_start_of_the_value() {
        let notice = release_notice(b"0123456789abcdef0123456789abcdef01234567");
        assert_eq!(&notice, b"r0123456789abcdef");
        assert_eq!(&release_notice(b"short"), b"rshort00000000000");
    }
}
