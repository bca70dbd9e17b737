//! Lock values: unique per acquisition and unguessable.

use crate::error::Error;
use crate::os::fork_generation;
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
    /// A value straight from the operating system's generator.
    #[cfg(test)]
    pub(crate) fn random() -> Result<Value, Error> {
        let mut raw = [0u8; RANDOM_BYTES];
        fill(&mut raw)?;
        Ok(Value::from_raw(&raw))
    }

    fn from_raw(raw: &[u8; RANDOM_BYTES]) -> Value {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; RANDOM_BYTES * 2];
        for (pair, &byte) in hex.chunks_exact_mut(2).zip(raw) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        Value(hex)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Fills `bytes` from the operating system's generator.
fn fill(bytes: &mut [u8]) -> Result<(), Error> {
    getrandom::fill(bytes).map_err(|e| Error::Entropy(io::Error::other(e.to_string())))
}

/// How many values' worth of random bytes [`Values`] fetches at once.
const BATCH: usize = 16;

/// Random bytes for the next few values, fetched from the operating
/// system's generator in one call for [`BATCH`] values, so that an
/// acquisition does not make a system call of its own for its value. Each
/// value is still [`RANDOM_BYTES`] straight from the generator, never
/// derived from another, and its bytes are wiped here once taken. A forked
/// child never takes what its parent fetched: the bytes are fetched again
/// in a new process (see `os::fork_generation`).
pub(crate) struct Values {
    raw: [u8; RANDOM_BYTES * BATCH],
    /// The values taken from `raw` so far.
    taken: usize,
    /// The process generation that fetched `raw`.
    fork_generation: u64,
}

impl Default for Values {
    /// Empty: the first value fetches a batch.
    fn default() -> Values {
        Values {
            raw: [0; RANDOM_BYTES * BATCH],
            taken: BATCH,
            fork_generation: 0,
        }
    }
}

impl Values {
    /// The next value.
    pub(crate) fn next(&mut self) -> Result<Value, Error> {
        let generation = fork_generation();
        if self.taken == BATCH || self.fork_generation != generation {
            fill(&mut self.raw)?;
            (self.taken, self.fork_generation) = (0, generation);
        }
        let start = self.taken * RANDOM_BYTES;
        let raw: &mut [u8; RANDOM_BYTES] = (&mut self.raw[start..start + RANDOM_BYTES])
            .try_into()
            .expect("RANDOM_BYTES long");
        let value = Value::from_raw(raw);
        raw.fill(0);
        self.taken += 1;
        Ok(value)
    }
}

impl fmt::Debug for Values {
    // The bytes are the values of the next locks: keep them out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Values(..)")
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

    #[test]
    fn batched_values_are_hex_distinct_and_wiped_once_taken() {
        let mut batch = Values::default();
        let values: HashSet<[u8; 40]> = (0..10_000).map(|_| batch.next().unwrap().0).collect();
        assert_eq!(values.len(), 10_000);
        assert!(values.iter().all(|v| v
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
        // 10 000 = 625 batches: the last one is all taken, and all wiped.
        assert_eq!(batch.taken, BATCH);
        assert!(batch.raw.iter().all(|&b| b == 0));
        assert_eq!(format!("{batch:?}"), "Values(..)");
    }
}
