//! A key's hash slot: CRC16 (XMODEM) of the key, or of its hash tag, modulo
//! 16384, exactly as Redis and Valkey compute it (`keyHashSlot` in their
//! `cluster.c`). A client that computes another slot than the server sends
//! every command to the wrong node, so the rule is reproduced to the byte.

/// The number of hash slots of a Redis or Valkey Cluster. Fixed by the
/// cluster protocol (the bus messages carry a 16384-bit bitmap per node).
pub const SLOTS: usize = 16384;

/// The CRC16 lookup table: polynomial 0x1021, no reflection (the XMODEM
/// variant, the one `crc16.c` of the servers implements), built at compile
/// time so that nothing runs at start-up and the table sits in read-only
/// memory.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// CRC16-XMODEM of `data` (initial value 0, no final XOR): `"123456789"`
/// gives 0x31C3. A `const fn` so that the hash-tag table (`tags.rs`) can
/// be computed by the compiler.
pub const fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    let mut i = 0;
    while i < data.len() {
        let index = ((crc >> 8) as u8 ^ data[i]) as usize;
        crc = (crc << 8) ^ CRC16_TABLE[index];
        i += 1;
    }
    crc
}

/// The part of `key` that is hashed: the hash tag when there is one, else
/// the whole key. The servers' rule: find the first `{`; then the first `}`
/// after it; if there is such a `}` and at least one byte between the two,
/// those bytes are the tag. So `{}x` hashes whole (an empty tag does not
/// count), `a}b` has no tag, `{{a}}` has the tag `{a`, and only the first
/// `{` counts (`x{}{a}` hashes whole).
pub fn hashed_part(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

/// The hash slot of `key`: the one node of a cluster that may hold it owns
/// this slot. No allocation; linear in the key's length.
pub fn key_slot(key: &[u8]) -> u16 {
    // 16384 is a power of two: the low 14 bits are the remainder.
    crc16(hashed_part(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit by bit, the definition of the CRC, for checking the table.
    fn crc16_bitwise(data: &[u8]) -> u16 {
        let mut crc: u16 = 0;
        for &byte in data {
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

    #[test]
    fn crc16_check_value_of_the_spec() {
        // The Redis Cluster specification's test vector ("CRC16 ... XMODEM
        // ... Check: 0x31C3").
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn crc16_table_agrees_with_the_bitwise_definition() {
        let mut data = Vec::new();
        for i in 0..2000u32 {
            assert_eq!(crc16(&data), crc16_bitwise(&data), "{data:?}");
            data.push((i.wrapping_mul(2_654_435_761) >> 13) as u8);
        }
        for byte in 0..=255u8 {
            assert_eq!(crc16(&[byte]), crc16_bitwise(&[byte]));
        }
    }

    #[test]
    fn key_slot_of_keys_whose_slot_the_servers_told() {
        // Slots as `CLUSTER KEYSLOT` answers them (Redis 7.0.15; the rule is
        // the same in Valkey), and the examples of the cluster tutorial.
        let cases: &[(&[u8], u16)] = &[
            (b"foo", 12182),
            (b"bar", 5061),
            (b"hello", 866),
            (b"somekey", 11058),
            (b"123456789", 12739),
            (b"", 0),
            (b"{user1000}.following", 3443),
            (b"{user1000}.followers", 3443),
            (b"user1000", 3443),
        ];
        for &(key, slot) in cases {
            assert_eq!(key_slot(key), slot, "{}", key.escape_ascii());
        }
    }

    #[test]
    fn hash_tag_rule_edge_cases() {
        let cases: &[(&[u8], &[u8])] = &[
            // No `{` at all, or no `}` after the first `{`: the whole key.
            (b"plain", b"plain"),
            (b"a}b", b"a}b"),
            (b"{a", b"{a"),
            (b"}{a", b"}{a"),
            // An empty tag counts as no tag: the whole key.
            (b"x{}y", b"x{}y"),
            (b"{}", b"{}"),
            (b"{}{a}", b"{}{a}"),
            // The first `{` and the first `}` after it.
            (b"{a}", b"a"),
            (b"{{a}}", b"{a"),
            (b"x{a}{b}", b"a"),
            (b"{a}}", b"a"),
            (b"{a{b}c}", b"a{b"),
            (b"prefix{tag}suffix", b"tag"),
            // Binary keys: bytes, not characters.
            (b"\xff{\x00\x01}\xfe", b"\x00\x01"),
            (b"\x00{", b"\x00{"),
        ];
        for &(key, part) in cases {
            assert_eq!(hashed_part(key), part, "{}", key.escape_ascii());
            assert_eq!(key_slot(key), crc16(part) & 0x3FFF);
        }
    }

    #[test]
    fn key_slot_of_edge_cases_as_the_servers_computed_them() {
        // `CLUSTER KEYSLOT` on Redis 7.0.15 (and Valkey 8.1, 9.1: equal).
        let cases: &[(&[u8], u16)] = &[
            (b"a}b", 7866),
            (b"x{}y", 16116),
            (b"{{a}}", 10276),
            (b"{a", 10276),
            (b"{}", 15257),
            (b"{a}", 15495),
        ];
        for &(key, slot) in cases {
            assert_eq!(key_slot(key), slot, "{}", key.escape_ascii());
        }
    }

    #[test]
    fn every_slot_is_below_16384() {
        let mut key = [0u8; 3];
        for i in 0..70_000u32 {
            key.copy_from_slice(&i.to_le_bytes()[..3]);
            assert!(usize::from(key_slot(&key)) < SLOTS);
        }
    }
}
