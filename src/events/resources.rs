//! The resources an event concerns ([`Resources`]): one lock's name, or
//! every name of a set, borrowed from the lock (no copy, no allocation),
//! and shown in a log line with a bound however large the set.

use crate::names::Keys;
use std::fmt;

/// How many names of a set [`Resources`]' `Display` shows before it says
/// how many more there are.
const SHOWN_NAMES: usize = 8;

/// How many bytes of each name of a set `Display` shows (a longer name is
/// cut, and ends with `...`).
const SHOWN_BYTES: usize = 64;

/// The resources an event concerns ([`RoundEvent::resources`],
/// [`WaitEvent::resources`], [`LeaseEvent::resources`]): a set's names,
/// sorted by their bytes and each once, as
/// [`LockSet::resources`](crate::LockSet::resources) gives them; a lock
/// on one resource (and a set of one) is a set of one name.
///
/// It borrows from the lock: copy out what a hook keeps
/// ([`Resources::iter`]).
///
/// Its `Display` is what the `log` feature's lines (and the `tracing`
/// feature's `resource` field) show: one resource as its name, a set of
/// two or more as `{a, b, c}`, each name escaped (printable ASCII as is,
/// other bytes as `\xff`). However large the set, at most its first 8
/// names are shown, each cut to its first 64 bytes (then `...`), and then
/// how many more there are: `{f0, f1, f2, f3, f4, f5, f6, f7, ... 992
/// more}` for a set of 1000.
///
/// ```
/// use redlock_sync::{HandleEvent, RoundEvent};
///
/// /// Logs the rounds that concern `account:17`, whether alone or in a set.
/// struct Watch;
///
/// impl HandleEvent for Watch {
///     fn handle_round(&self, event: RoundEvent<'_>) {
///         let resources = event.resources();
///         if resources.contains("account:17") {
///             eprintln!(
///                 "{:?} {resources} ({} names): {:?}",
///                 event.operation(),
///                 resources.len(),
///                 event.outcome()
///             );
///         }
///     }
/// }
/// ```
///
/// [`RoundEvent::resources`]: crate::RoundEvent::resources
/// [`WaitEvent::resources`]: crate::WaitEvent::resources
/// [`LeaseEvent::resources`]: crate::LeaseEvent::resources
#[derive(Clone, Copy)]
pub struct Resources<'a>(Names<'a>);

#[derive(Clone, Copy)]
enum Names<'a> {
    One(&'a [u8]),
    /// Two names or more.
    Set(Keys<'a>),
}

impl<'a> Resources<'a> {
    /// The one resource of a lock.
    pub(crate) fn one(name: &'a [u8]) -> Resources<'a> {
        Resources(Names::One(name))
    }

    /// The names of a set, sorted and each once (one name at least).
    pub(crate) fn set(keys: Keys<'a>) -> Resources<'a> {
        match keys.len() {
            1 => Resources::one(keys.iter().next().unwrap_or_default()),
            _ => Resources(Names::Set(keys)),
        }
    }

    /// How many resources: 1 for a lock on one resource, the set's size
    /// for a set (its distinct names).
    pub fn len(&self) -> usize {
        match self.0 {
            Names::One(_) => 1,
            Names::Set(keys) => keys.len(),
        }
    }

    /// Always false: an event concerns one resource at least.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first name in order: the one resource of a lock, a set's
    /// smallest name (what the events' `resource()` gives).
    pub fn first(&self) -> &'a [u8] {
        self.get(0).unwrap_or_default()
    }

    /// The `i`th name in order, if the set has that many.
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        match self.0 {
            Names::One(name) => (i == 0).then_some(name),
            Names::Set(keys) => keys.get(i),
        }
    }

    /// The names, in order (sorted by their bytes, each once).
    ///
    /// ```
    /// use redlock_sync::{HandleEvent, LeaseEvent};
    ///
    /// /// Prints every resource a lease event concerns, one per line.
    /// struct Every;
    ///
    /// impl HandleEvent for Every {
    ///     fn handle_lease(&self, event: LeaseEvent<'_>) {
    ///         for name in event.resources().iter() {
    ///             eprintln!("{}: {:?}", name.escape_ascii(), event.change());
    ///         }
    ///     }
    /// }
    /// ```
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + ExactSizeIterator + Clone + 'a {
        let this = *self;
        (0..this.len()).map(move |i| this.get(i).unwrap_or_default())
    }

    /// Whether `name` is one of the resources (a binary search: a set's
    /// names are sorted).
    pub fn contains(&self, name: impl AsRef<[u8]>) -> bool {
        let name = name.as_ref();
        match self.0 {
            Names::One(one) => one == name,
            Names::Set(keys) => {
                let (mut low, mut high) = (0, keys.len());
                while low < high {
                    let mid = low + (high - low) / 2;
                    match keys.get(mid).unwrap_or_default().cmp(name) {
                        std::cmp::Ordering::Less => low = mid + 1,
                        std::cmp::Ordering::Greater => high = mid,
                        std::cmp::Ordering::Equal => return true,
                    }
                }
                false
            }
        }
    }
}

impl fmt::Display for Resources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = match self.0 {
            // As the single lock's lines have always shown it.
            Names::One(name) => return fmt::Display::fmt(&name.escape_ascii(), f),
            Names::Set(keys) => keys,
        };
        f.write_str("{")?;
        for (i, name) in keys.iter().take(SHOWN_NAMES).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match name.get(..SHOWN_BYTES) {
                Some(start) if name.len() > SHOWN_BYTES => {
                    write!(f, "{}...", start.escape_ascii())?
                }
                _ => write!(f, "{}", name.escape_ascii())?,
            }
        }
        if keys.len() > SHOWN_NAMES {
            write!(f, ", ... {} more", keys.len() - SHOWN_NAMES)?;
        }
        f.write_str("}")
    }
}

/// As `Display`, quoted: bounded the same way.
impl fmt::Debug for Resources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Names as Owned;

    fn set(names: &[&str]) -> Owned {
        let mut set = Owned::default();
        set.fill(names, |_| Ok(())).unwrap();
        set
    }

    #[test]
    fn one_resource_is_a_set_of_one_shown_as_its_name() {
        let one = Resources::one(b"job\xff");
        assert_eq!((one.len(), one.is_empty()), (1, false));
        assert_eq!(one.first(), b"job\xff");
        assert_eq!(one.iter().collect::<Vec<_>>(), [&b"job\xff"[..]]);
        assert!(one.contains(b"job\xff") && !one.contains("job"));
        assert_eq!(one.to_string(), "job\\xff");
        assert_eq!(format!("{one:?}"), "\"job\\xff\"");
        // A set of one is the same.
        let names = set(&["a", "a"]);
        let of_one = Resources::set(names.keys());
        assert_eq!((of_one.len(), of_one.to_string()), (1, "a".to_string()));
    }

    #[test]
    fn a_set_shows_every_name_in_braces_and_finds_each() {
        let names = set(&["c", "a", "b"]);
        let resources = Resources::set(names.keys());
        assert_eq!(resources.to_string(), "{a, b, c}");
        assert_eq!(resources.len(), 3);
        assert_eq!(resources.first(), b"a");
        assert_eq!(resources.get(2), Some(&b"c"[..]));
        assert_eq!(resources.get(3), None);
        assert_eq!(
            resources.iter().rev().collect::<Vec<_>>(),
            [&b"c"[..], b"b", b"a"]
        );
        for name in ["a", "b", "c"] {
            assert!(resources.contains(name), "{name}");
        }
        for name in ["", "0", "ab", "d"] {
            assert!(!resources.contains(name), "{name}");
        }
    }

    #[test]
    fn a_large_set_or_long_names_show_a_bounded_line() {
        let many: Vec<String> = (0..1000).map(|i| format!("file:{i:04}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let names = set(&many);
        let resources = Resources::set(names.keys());
        assert_eq!(
            resources.to_string(),
            "{file:0000, file:0001, file:0002, file:0003, file:0004, file:0005, file:0006, \
             file:0007, ... 992 more}"
        );
        assert!(resources.contains("file:0999") && resources.contains("file:0500"));
        assert_eq!(resources.iter().count(), 1000);
        // Names cut to their first 64 bytes: at most 8 x 64 bytes (x 4
        // escaped) of names however long they are.
        let long = [&"x".repeat(65_000)[..], &"y".repeat(65_000)[..]];
        let names = set(&long);
        let shown = Resources::set(names.keys()).to_string();
        assert_eq!(
            shown,
            format!("{{{}..., {}...}}", "x".repeat(64), "y".repeat(64))
        );
        let wide = vec![vec![0xffu8; 200], vec![0xfe; 200]];
        let names = {
            let mut set = Owned::default();
            set.fill(&wide, |_| Ok(())).unwrap();
            set
        };
        let shown = Resources::set(names.keys()).to_string();
        assert!(
            shown.len() <= 2 + 2 * (4 * SHOWN_BYTES + 3) + 2,
            "{}",
            shown.len()
        );
    }
}
