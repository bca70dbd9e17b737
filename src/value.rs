//! Lock values: unique per acquisition and unguessable, with the handle's
//! holder label after the secret if it has one (see `holder`).

use crate::error::Error;
use crate::holder::{Label, MAX_HOLDER_LABEL_LEN, SEPARATOR};
use crate::os::fork_generation;
use std::fmt;
use std::io;

/// Random bytes per value, as the Redlock spec asks ("20 bytes from
/// /dev/urandom"): 160 bits, so values never repeat in practice.
const RANDOM_BYTES: usize = 20;

/// The length of a value's secret: [`RANDOM_BYTES`], hex-encoded. The
/// rest of a value, if any, is [`SEPARATOR`] and the holder label.
pub(crate) const SECRET_LEN: usize = RANDOM_BYTES * 2;

/// The longest value: the secret, the separator and the longest label.
const MAX_VALUE_LEN: usize = SECRET_LEN + 1 + MAX_HOLDER_LABEL_LEN;
const _: () = assert!(MAX_VALUE_LEN <= u8::MAX as usize);

/// The bytes of a value an inspection reads (`GETRANGE key start end`,
/// both included): from the separator on, never a byte of the secret, and
/// one byte more than any label, so that a longer value (not ours) is told
/// from one with the longest label (see `Label::read`).
pub(crate) const LABEL_RANGE: (usize, usize) = (SECRET_LEN, MAX_VALUE_LEN);

/// A lock value: [`RANDOM_BYTES`] from the operating system's generator,
/// hex-encoded (so it reads cleanly in `redis-cli` and `MONITOR`), then,
/// for a handle with a holder label, `|` and the label. Held inline, so
/// that making one allocates nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Value {
    bytes: [u8; MAX_VALUE_LEN],
    len: u8,
}

impl Value {
    /// A value straight from the operating system's generator.
    #[cfg(test)]
    pub(crate) fn random() -> Result<Value, Error> {
        let mut raw = [0u8; RANDOM_BYTES];
        fill(&mut raw)?;
        Ok(Value::from_raw(&raw, None))
    }

    fn from_raw(raw: &[u8; RANDOM_BYTES], label: Option<&Label>) -> Value {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = [0u8; MAX_VALUE_LEN];
        for (pair, &byte) in bytes[..SECRET_LEN].chunks_exact_mut(2).zip(raw) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        let mut len = SECRET_LEN;
        if let Some(label) = label {
            let label = label.as_bytes();
            bytes[len] = SEPARATOR;
            bytes[len + 1..len + 1 + label.len()].copy_from_slice(label);
            len += 1 + label.len();
        }
        Value {
            bytes,
            len: len as u8, // at most MAX_VALUE_LEN, 105
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
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
    /// The next value, with `label` after its secret if given.
    pub(crate) fn next(&mut self, label: Option<&Label>) -> Result<Value, Error> {
        let generation = fork_generation();
        if self.taken == BATCH || self.fork_generation != generation {
            fill(&mut self.raw)?;
            (self.taken, self.fork_generation) = (0, generation);
        }
        let start = self.taken * RANDOM_BYTES;
        let raw: &mut [u8; RANDOM_BYTES] = (&mut self.raw[start..start + RANDOM_BYTES])
            .try_into()
            .expect("RANDOM_BYTES long");
        let value = Value::from_raw(raw, label);
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
        let values: HashSet<Vec<u8>> = (0..10_000)
            .map(|_| Value::random().expect("getrandom").as_bytes().to_vec())
            .collect();
        assert_eq!(values.len(), 10_000);
        assert!(values.iter().all(|v| v.len() == SECRET_LEN
            && v.iter()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
        assert_eq!(format!("{:?}", Value::random().unwrap()), "Value(..)");
    }

    #[test]
    fn batched_values_are_hex_distinct_and_wiped_once_taken() {
        let mut batch = Values::default();
        let values: HashSet<Vec<u8>> = (0..10_000)
            .map(|_| batch.next(None).unwrap().as_bytes().to_vec())
            .collect();
        assert_eq!(values.len(), 10_000);
        assert!(values.iter().all(|v| v
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
        // 10 000 = 625 batches: the last one is all taken, and all wiped.
        assert_eq!(batch.taken, BATCH);
        assert!(batch.raw.iter().all(|&b| b == 0));
        assert_eq!(format!("{batch:?}"), "Values(..)");
    }

    #[test]
    fn a_label_follows_the_secret_and_its_separator() {
        let mut batch = Values::default();
        let label = Label::new(&"h".repeat(MAX_HOLDER_LABEL_LEN)).unwrap();
        let (a, b) = (
            batch.next(Some(&label)).unwrap(),
            batch.next(Some(&label)).unwrap(),
        );
        assert_ne!(a.as_bytes()[..SECRET_LEN], b.as_bytes()[..SECRET_LEN]);
        let (secret, tail) = a.as_bytes().split_at(SECRET_LEN);
        assert!(secret.iter().all(u8::is_ascii_hexdigit));
        assert_eq!(tail, [&b"|"[..], label.as_bytes()].concat());
        assert_eq!(a.as_bytes().len(), MAX_VALUE_LEN);
        // What an inspection reads is the tail, and gives the label back.
        let (start, end) = LABEL_RANGE;
        let read = &a.as_bytes()[start..=end.min(a.as_bytes().len() - 1)];
        assert_eq!(read, tail);
        assert_eq!(Label::read(read), Some(label));
        assert_eq!(
            format!("{a:?}"),
            "Value(..)",
            "the label is no reason to show the secret"
        );
    }
}
