//! The release channel of a lock key: `redlock-sync:released:{TAG}<key>`,
//! where `TAG` is the three-character hash tag of the key's cluster slot
//! (`cluster::tag_for_key`). The channel lives in the lock key's slot,
//! whatever the key holds (braces included), so that on a cluster node the
//! release script may `SPUBLISH` to it (a script may publish only to a
//! channel of its own slot) and a waiter subscribes to it on the node that
//! owns the key. A key is the resource's name, or, for a voter whose keys
//! carry a hash tag of their own (the single-cluster mode), that tag then
//! the name: each voter's channel is then its own key's. Standalone masters
//! use the same rule, so a resource has one channel there and on clusters.
//! The name is part of the wire format: clients of one deployment must
//! agree on it. (What is said on it: see `handle::notify::message`.)

use crate::cluster::{tag_for_key, TAG_LEN};

/// The prefix of every channel (no `{` in it: the tag that follows is the
/// name's hash tag).
pub(crate) const CHANNEL_PREFIX: &[u8] = b"redlock-sync:released:";

/// The length of the tag part of a channel's name, braces included (also
/// the length of a voter's own key prefix, `{TAG}`).
pub(crate) const TAG_PART: usize = TAG_LEN + 2;

/// Appends the channel of lock key `key` to `out`.
pub(crate) fn channel_of(key: &[u8], out: &mut Vec<u8>) {
    out.reserve(channel_len(key));
    out.extend_from_slice(CHANNEL_PREFIX);
    out.push(b'{');
    out.extend_from_slice(tag_for_key(key));
    out.push(b'}');
    out.extend_from_slice(key);
}

/// The length of `key`'s channel name.
pub(crate) fn channel_len(key: &[u8]) -> usize {
    CHANNEL_PREFIX.len() + TAG_PART + key.len()
}

/// The lock key whose channel is `channel`, if it is one of ours.
pub(crate) fn key_of(channel: &[u8]) -> Option<&[u8]> {
    let rest = channel.strip_prefix(CHANNEL_PREFIX)?;
    let (tag, key) = rest.split_at_checked(TAG_PART)?;
    let well_formed =
        tag[0] == b'{' && tag[TAG_PART - 1] == b'}' && tag[1..TAG_PART - 1] == tag_for_key(key)[..];
    well_formed.then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::key_slot;

    #[test]
    fn a_channel_lives_in_its_keys_slot_and_names_its_key() {
        let keys: &[&[u8]] = &[b"orders:1", b"a}b", b"x{}y", b"{user1}.x", b"", b"\xff{"];
        for &key in keys {
            let mut channel = Vec::new();
            channel_of(key, &mut channel);
            assert_eq!(channel.len(), channel_len(key));
            assert_eq!(key_slot(&channel), key_slot(key), "{channel:?}");
            assert_eq!(key_of(&channel), Some(key));
        }
        let mut channel = Vec::new();
        channel_of(b"foo", &mut channel);
        // The wire format: the tag of "foo"'s slot (12182) is "9Le".
        assert_eq!(channel, b"redlock-sync:released:{9Le}foo");
        // A voter's own key (`{TAG}` then the name): its tag's slot.
        channel.clear();
        channel_of(b"{06S}foo", &mut channel);
        assert_eq!(channel, b"redlock-sync:released:{06S}{06S}foo");
        assert_eq!(key_slot(&channel), 0);
        // Not ours: another prefix, a missing or wrong tag.
        assert_eq!(key_of(b"redlock-sync:released:foo"), None);
        assert_eq!(key_of(b"redlock-sync:released:{9Le}bar"), None);
        assert_eq!(key_of(b"redlock-sync:released:{9Le"), None);
        assert_eq!(key_of(b"other:{9Le}foo"), None);
    }
}
