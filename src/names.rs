//! The resources of a lock on several at once: their names read from the
//! caller, checked against the limits, and put in one canonical order
//! (sorted, each once), in one byte buffer plus one range per name
//! ([`Names`]); the borrowed view a set command carries ([`Keys`]).
//!
//! The order is what makes a set one value whatever order the caller names
//! it in: the same command bytes to every master, the same notices. It is
//! not what prevents deadlock (an acquisition holds nothing it did not win
//! in full on a master; see `lock::many`).

use crate::error::ConfigError;

/// The most names a set may be given (duplicates count: the limit is on
/// what the caller hands over, before duplicates are removed).
///
/// ```no_run
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// use redlock_sync::{ConfigError, Error, MAX_SET_LEN};
/// let names: Vec<String> = (0..=MAX_SET_LEN).map(|i| format!("file:{i}")).collect();
/// let refused = redlock.try_lock_many(&names, std::time::Duration::from_secs(5));
/// assert!(matches!(refused, Err(Error::Config(ConfigError::ResourceSetTooLarge { .. }))));
/// # Ok::<(), redlock_sync::Error>(())
/// ```
pub const MAX_SET_LEN: usize = 1024;

/// The most bytes of names a set may be given, all names together, counted
/// as given (duplicates count).
///
/// ```
/// // 1024 names of 256 bytes fit; longer names mean fewer of them.
/// assert_eq!(redlock_sync::MAX_SET_BYTES, 1024 * 256);
/// ```
pub const MAX_SET_BYTES: usize = 256 * 1024;

/// An owned set of names: sorted by their bytes, each once. Its buffers
/// keep their capacity when it is filled again (a session lends one to
/// each set it takes, so that steady-state locking does not allocate).
#[derive(Default)]
pub(crate) struct Names {
    bytes: Vec<u8>,
    /// Start and end of each name in `bytes`, in sorted order.
    ranges: Vec<(u32, u32)>,
}

/// A borrowed view of [`Names`]: what a set command carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Keys<'a> {
    bytes: &'a [u8],
    ranges: &'a [(u32, u32)],
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Names")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Names {
    /// Reads `names` in place of what the set held, checking each with
    /// `check` (the single lock's rule for a name) and the set's limits as
    /// it goes, then sorts them and drops duplicates. Fails before reading
    /// more than [`MAX_SET_LEN`] names or [`MAX_SET_BYTES`] bytes of them;
    /// an empty iterator is [`ConfigError::ResourceSetEmpty`]. On error
    /// the set is left empty.
    pub(crate) fn fill<I, R>(
        &mut self,
        names: I,
        check: impl Fn(&[u8]) -> Result<(), ConfigError>,
    ) -> Result<(), ConfigError>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        self.clear();
        let read = self.read(names, check);
        if read.is_err() {
            self.clear();
        }
        read?;
        let bytes = &self.bytes;
        let name = |&(start, end): &(u32, u32)| &bytes[start as usize..end as usize];
        self.ranges.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        self.ranges.dedup_by(|a, b| name(a) == name(b));
        Ok(())
    }

    fn read<I, R>(
        &mut self,
        names: I,
        check: impl Fn(&[u8]) -> Result<(), ConfigError>,
    ) -> Result<(), ConfigError>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let mut given = 0usize;
        for name in names {
            let name = name.as_ref();
            given += 1;
            if given > MAX_SET_LEN {
                return Err(ConfigError::ResourceSetTooLarge {
                    given,
                    max: MAX_SET_LEN,
                });
            }
            check(name)?;
            let bytes = self.bytes.len() + name.len();
            if bytes > MAX_SET_BYTES {
                return Err(ConfigError::ResourceSetNamesTooLong {
                    bytes,
                    max: MAX_SET_BYTES,
                });
            }
            // Both fit in u32: MAX_SET_BYTES does.
            self.ranges.push((self.bytes.len() as u32, bytes as u32));
            self.bytes.extend_from_slice(name);
        }
        if given == 0 {
            return Err(ConfigError::ResourceSetEmpty);
        }
        Ok(())
    }

    /// Appends one entry that `write` writes (for a list that is not a
    /// set: a set release's channels, one per key, in the keys' order).
    pub(crate) fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        write(&mut self.bytes);
        self.ranges.push((start as u32, self.bytes.len() as u32));
    }

    /// Holds the same names as `other`, in its buffers.
    pub(crate) fn copy_from(&mut self, other: &Names) {
        self.clear();
        self.bytes.extend_from_slice(&other.bytes);
        self.ranges.extend_from_slice(&other.ranges);
    }

    /// Forgets the names, keeping the buffers' capacity.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ranges.clear();
    }

    /// Frees what a buffer holds beyond `bytes` bytes of names (and as
    /// many ranges as [`MAX_SET_LEN`]), before it is kept for later.
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        self.bytes.shrink_to(bytes);
        self.ranges.shrink_to(MAX_SET_LEN);
    }

    /// The view a command carries.
    pub(crate) fn keys(&self) -> Keys<'_> {
        Keys {
            bytes: &self.bytes,
            ranges: &self.ranges,
        }
    }

    /// How many distinct names.
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The first name in order (`None` for an empty set).
    pub(crate) fn first(&self) -> Option<&[u8]> {
        self.keys().iter().next()
    }
}

impl<'a> Keys<'a> {
    /// How many names.
    pub(crate) fn len(self) -> usize {
        self.ranges.len()
    }

    /// The `i`th name in order, if there are that many.
    pub(crate) fn get(self, i: usize) -> Option<&'a [u8]> {
        let &(start, end) = self.ranges.get(i)?;
        self.bytes.get(start as usize..end as usize)
    }

    /// The names, in order.
    pub(crate) fn iter(self) -> impl ExactSizeIterator<Item = &'a [u8]> + Clone {
        let bytes = self.bytes;
        self.ranges
            .iter()
            .map(move |&(start, end)| &bytes[start as usize..end as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(_: &[u8]) -> Result<(), ConfigError> {
        Ok(())
    }

    fn names_of(names: &Names) -> Vec<&[u8]> {
        names.keys().iter().collect()
    }

    #[test]
    fn any_order_and_repeats_give_one_sorted_set() {
        let (mut one, mut two) = (Names::default(), Names::default());
        one.fill(["b", "a", "c", "a"], ok).unwrap();
        two.fill(["c", "b", "b", "a"], ok).unwrap();
        assert_eq!(names_of(&one), [&b"a"[..], b"b", b"c"]);
        assert_eq!(one.keys().iter().collect::<Vec<_>>(), names_of(&two));
        assert_eq!((one.len(), one.keys().len()), (3, 3));
        // Only duplicates: one name.
        one.fill(["x", "x", "x"], ok).unwrap();
        assert_eq!(names_of(&one), [&b"x"[..]]);
        // Prefixes sort before what they start.
        one.fill(["ab", "a", "abc", ""], |_| Ok(())).unwrap();
        assert_eq!(names_of(&one), [&b""[..], b"a", b"ab", b"abc"]);
    }

    #[test]
    fn limits_count_names_as_given_and_leave_the_set_empty() {
        let mut names = Names::default();
        assert_eq!(
            names.fill(Vec::<&[u8]>::new(), ok),
            Err(ConfigError::ResourceSetEmpty)
        );
        let many = vec!["a"; MAX_SET_LEN + 1];
        assert_eq!(
            names.fill(&many, ok),
            Err(ConfigError::ResourceSetTooLarge {
                given: MAX_SET_LEN + 1,
                max: MAX_SET_LEN
            })
        );
        assert_eq!(names.len(), 0);
        names.fill(&many[..MAX_SET_LEN], ok).unwrap();
        assert_eq!(names.len(), 1);
        let long = vec![0u8; MAX_SET_BYTES / 2 + 1];
        assert_eq!(
            names.fill([&long, &long], ok),
            Err(ConfigError::ResourceSetNamesTooLong {
                bytes: 2 * long.len(),
                max: MAX_SET_BYTES
            })
        );
        assert_eq!(names.len(), 0);
        // The per-name rule is the caller's.
        let refuse = |name: &[u8]| match name {
            b"" => Err(ConfigError::EmptyResource),
            _ => Ok(()),
        };
        assert_eq!(
            names.fill(["a", ""], refuse),
            Err(ConfigError::EmptyResource)
        );
        assert_eq!(names.len(), 0);
    }

    #[test]
    fn exactly_max_set_len_names_and_max_set_bytes_bytes_are_taken() {
        let mut names = Names::default();
        let distinct: Vec<String> = (0..MAX_SET_LEN).map(|i| format!("{i:04}")).collect();
        names.fill(&distinct, ok).unwrap();
        assert_eq!(names.len(), MAX_SET_LEN);
        let quarter = vec![b'x'; MAX_SET_BYTES / 4];
        let four: Vec<Vec<u8>> = (0..4u8)
            .map(|i| [&[i][..], &quarter[1..]].concat())
            .collect();
        names.fill(&four, ok).unwrap();
        assert_eq!((names.len(), names.bytes.len()), (4, MAX_SET_BYTES));
    }

    #[test]
    fn a_refill_keeps_the_buffers() {
        let mut names = Names::default();
        names.fill(["k1", "k2", "k3"], ok).unwrap();
        let (bytes, ranges) = (names.bytes.capacity(), names.ranges.capacity());
        names.fill(["k3", "k2"], ok).unwrap();
        assert_eq!(
            (names.bytes.capacity(), names.ranges.capacity()),
            (bytes, ranges)
        );
        assert_eq!(names.first(), Some(&b"k2"[..]));
    }
}
