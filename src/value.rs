//! Lock values: unique per acquisition and unguessable.

use crate::error::Error;
use std::fmt;
use std::io;

/// Random bytes per value, as the Redlock spec asks ("20 bytes from
/// /dev/urandom"): 160 bits, so values never repeat in practice.
const RANDOM_BYTES: usize = 20;

/// A lock value: [`RANDOM_BYTES`] from the operating system's generator,
/// hex-encoded (so it reads cleanly in `redis-cli` and `MONITOR`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Value([u8; RANDOM_BYTES * 2]);

impl Value {
    pub(crate) fn random() -> Result<Value, Error> {
        let mut raw = [0u8; RANDOM_BYTES];
        getrandom::fill(&mut raw).map_err(|e| Error::Entropy(io::Error::other(e.to_string())))?;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; RANDOM_BYTES * 2];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(raw) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        Ok(Value(hex))
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Value {
    // Knowing a lock's value lets anyone release it: keep it out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Value(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn values_are_hex_and_distinct() {
        let values: HashSet<[u8; 40]> = (0..10_000)
            .map(|_| Value::random().expect("getrandom").0)
            .collect();
        assert_eq!(values.len(), 10_000);
        assert!(values.iter().all(|v| v
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
        assert_eq!(format!("{:?}", Value::random().unwrap()), "Value(..)");
    }
}
