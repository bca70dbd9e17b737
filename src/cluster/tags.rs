//! A hash tag for every slot: three ASCII letters or digits whose CRC16
//! lands in that slot, so that a key written `prefix{TAG}suffix` lives in
//! the slot of our choosing. A cluster voter needs this twice: a release
//! notice's channel must share the lock key's slot (a script may only
//! publish to a channel of its own node), and fencing's counters must share
//! it too (one script touches both keys: no `CROSSSLOT`). Wrapping the
//! resource name itself in braces gets names such as `a}b` or `x{}y` wrong
//! (their slot is the whole name's); a tag chosen from the slot never is.
//!
//! The table is **part of the wire format**: the tags end up in key and
//! channel names that live on servers across upgrades of this crate, so the
//! rule that picks them (the first tag, in byte order over
//! `0-9A-Za-z`, of each slot) must never change. A test pins it.
//!
//! The table is computed once per process, on first use (a cluster voter's
//! set-up), not by the compiler: the search tries 69,127 candidates, which
//! takes about 0.6 ms at run time but about 1.3 s of compile-time
//! evaluation on every build of the crate (measured with rustc 1.95 on
//! this project's 2-core machine), and a checked-in table would be 48 KiB
//! of generated source. Reading it afterwards is one atomic load and an
//! index: no lock, no allocation.

use std::sync::OnceLock;

use super::slot::{crc16, key_slot, SLOTS};

/// The length of every tag, in bytes. Three is the least that covers every
/// slot over this alphabet (62² = 3844 two-byte tags reach 3492 slots).
pub const TAG_LEN: usize = 3;

/// The bytes a tag is made of, in increasing byte order: tags are plain
/// ASCII (safe in any key, channel or log line) and never contain `{` or
/// `}`, which would change which part of a key is hashed.
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// How many three-byte candidates there are; the search stops well before
/// (a test checks that every slot is reached).
const CANDIDATES: usize = ALPHABET.len() * ALPHABET.len() * ALPHABET.len();

static TAGS: OnceLock<Box<[[u8; TAG_LEN]]>> = OnceLock::new();

/// The table: for each slot, the first candidate in byte order whose CRC16
/// lands in it.
fn build() -> Box<[[u8; TAG_LEN]]> {
    // A zero byte marks a slot not reached yet: no tag contains one.
    let mut table = vec![[0u8; TAG_LEN]; SLOTS].into_boxed_slice();
    let mut filled = 0;
    let n = ALPHABET.len();
    for i in 0..CANDIDATES {
        let tag = [ALPHABET[i / (n * n)], ALPHABET[i / n % n], ALPHABET[i % n]];
        let slot = &mut table[usize::from(crc16(&tag)) % SLOTS];
        if slot[0] == 0 {
            *slot = tag;
            filled += 1;
            if filled == SLOTS {
                break;
            }
        }
    }
    // Checked by `every_slot_has_a_tag_that_hashes_to_it`; a table with a
    // hole would route keys wrongly, so never hand one out.
    assert_eq!(filled, SLOTS, "the tag alphabet must reach every slot");
    table
}

/// The hash tag of `slot` (without its braces), or `None` for a slot
/// number of 16384 or more. `key_slot(b"{" + tag + b"}")` is `slot`, and so
/// is the slot of any key with `{tag}` before any other `{`.
pub fn tag_for_slot(slot: u16) -> Option<&'static [u8; TAG_LEN]> {
    TAGS.get_or_init(build).get(usize::from(slot))
}

/// The hash tag of `key`'s slot: a key written `prefix{TAG}suffix` (no `{`
/// in `prefix`) lives in the same slot as `key`, whatever `key` holds.
pub fn tag_for_key(key: &[u8]) -> &'static [u8; TAG_LEN] {
    let table = TAGS.get_or_init(build);
    // `key_slot` is always below 16384, the table's length.
    &table[usize::from(key_slot(key)) % SLOTS]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for slot in 0..SLOTS as u16 {
            let tag = tag_for_slot(slot).expect("a slot below 16384");
            assert!(tag.iter().all(|b| ALPHABET.contains(b)), "{tag:?}");
            let mut key = Vec::from(&b"{"[..]);
            key.extend_from_slice(tag);
            key.push(b'}');
            assert_eq!(key_slot(&key), slot, "{}", key.escape_ascii());
            // As a key prefix, as the layer above builds them.
            let mut key = Vec::from(&b"redlock-sync:fence:{"[..]);
            key.extend_from_slice(tag);
            key.extend_from_slice(b"}:domain");
            assert_eq!(key_slot(&key), slot);
        }
        assert_eq!(tag_for_slot(SLOTS as u16), None);
        assert_eq!(tag_for_slot(u16::MAX), None);
    }

    #[test]
    fn tags_never_contain_braces() {
        assert!(!ALPHABET.contains(&b'{') && !ALPHABET.contains(&b'}'));
        assert!(ALPHABET.windows(2).all(|w| w[0] < w[1]), "byte order");
    }

    #[test]
    fn tag_for_key_puts_a_tagged_key_in_the_keys_slot() {
        let keys: &[&[u8]] = &[b"foo", b"a}b", b"x{}y", b"{{a}}", b"{a", b"", b"\xff\x00{"];
        for &key in keys {
            let tag = tag_for_key(key);
            let mut channel = Vec::from(&b"redlock-sync:released:{"[..]);
            channel.extend_from_slice(tag);
            channel.push(b'}');
            channel.extend_from_slice(key);
            assert_eq!(key_slot(&channel), key_slot(key), "{}", key.escape_ascii());
        }
    }

    #[test]
    fn reading_a_tag_allocates_nothing_once_the_table_is_built() {
        use crate::counting_alloc::counted;
        tag_for_slot(0); // builds the table, once per process
        let (tags, counts) = counted(|| {
            let a = tag_for_key(b"{user1000}.following");
            let b = tag_for_slot(3443).copied();
            (*a, b)
        });
        assert_eq!(Some(tags.0), tags.1);
        assert_eq!(counts.allocations, 0, "{counts:?}");
    }

    #[test]
    fn the_table_is_pinned() {
        // Tags are key names on servers: the rule must not change. A few
        // entries and a digest of the whole table (FNV-1a, 64 bits).
        assert_eq!(tag_for_slot(0), Some(b"06S"));
        assert_eq!(tag_for_slot(1), Some(b"2Gx"));
        assert_eq!(tag_for_slot(12182), Some(b"9Le"));
        assert_eq!(tag_for_slot(16383), Some(b"6ZJ"));
        assert_eq!(tag_for_key(b"foo"), b"9Le");
        let table = TAGS.get_or_init(build);
        let digest = table
            .iter()
            .flatten()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
        assert_eq!(digest, PINNED_DIGEST, "the tag table changed: {digest:#x}");
    }

    const PINNED_DIGEST: u64 = 0xa523_5cda_46cf_91b5;
}
