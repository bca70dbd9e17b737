//! Cluster key slots computed by the tests themselves (CRC16 and the
//! hash-tag rule, as the servers do), so that a test can place a key on a
//! chosen master without asking the cluster, and check the client's own
//! routing against an independent implementation.

/// Number of hash slots of a Redis or Valkey Cluster.
pub const SLOTS: u16 = 16384;

/// The slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag (the
/// bytes between the first `{` and the first `}` after it, if not empty),
/// modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_part(key)) % SLOTS
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty
/// one, else the whole key.
fn hash_part(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), bit by bit:
/// slow but obviously right, which is what a test needs.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A key in `slot`: `prefix` followed by a hash tag `{tN}`, the first `N`
/// whose tag hashes into `slot` (deterministic; every slot has one below
/// a million). `prefix` must have no braces.
pub fn key_in_slot(prefix: &str, slot: u16) -> String {
    assert!(slot < SLOTS, "slot {slot} is not below {SLOTS}");
    assert!(
        !prefix.contains(['{', '}']),
        "the prefix {prefix:?} has braces: the tag would not be the one added"
    );
    (0..1_000_000u32)
        .map(|n| format!("{prefix}{{t{n}}}"))
        .find(|key| key_slot(key.as_bytes()) == slot)
        .unwrap_or_else(|| panic!("no tag below t1000000 hashes to slot {slot}"))
}

/// The channel on which `resource`'s releases are announced:
/// `redlock-sync:released:{TAG}<resource>`, where `TAG` is the first
/// three-character tag over `0-9A-Za-z` (in byte order) whose slot is
/// `resource`'s, so that the channel shares the lock key's slot. Computed
/// here independently of the crate (a test of the wire format).
pub fn release_channel(resource: &str) -> String {
    const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let slot = key_slot(resource.as_bytes());
    let tag = ALPHABET
        .iter()
        .flat_map(|&a| ALPHABET.iter().map(move |&b| (a, b)))
        .flat_map(|(a, b)| ALPHABET.iter().map(move |&c| [a, b, c]))
        .find(|tag| crc16(tag) % SLOTS == slot)
        .expect("every slot has a three-character tag");
    let tag = std::str::from_utf8(&tag).expect("ASCII");
    format!("redlock-sync:released:{{{tag}}}{resource}")
}
