//! Who holds a lock: the holder label a handle stores with its locks
//! (`Builder::holder_label`), checked when the handle is built, and read
//! back from another holder's lock value by an inspection. The label is
//! the part of the value after the secret and one [`SEPARATOR`]; nothing
//! here ever sees the secret.

use crate::error::ConfigError;
use std::fmt;

/// The longest holder label accepted, in bytes: a host name and a process
/// id fit, and a lock's value stays under 110 bytes.
pub const MAX_HOLDER_LABEL_LEN: usize = 64;

/// The byte between a lock value's secret and its label: in neither the
/// hex alphabet of the secret nor a label.
pub(crate) const SEPARATOR: u8 = b'|';

/// A holder label: 1 to [`MAX_HOLDER_LABEL_LEN`] bytes of UTF-8 without
/// control characters or [`SEPARATOR`]. Kept inline, so that a value is
/// made with it without allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label {
    len: u8,
    bytes: [u8; MAX_HOLDER_LABEL_LEN],
}

impl Label {
    /// The label `text`, if it is one (see [`Label`]).
    pub(crate) fn new(text: &str) -> Result<Label, ConfigError> {
        if text.is_empty() {
            return Err(ConfigError::HolderLabelEmpty);
        }
        if text.len() > MAX_HOLDER_LABEL_LEN {
            return Err(ConfigError::HolderLabelTooLong(text.len()));
        }
        if let Some(c) = text.chars().find(|&c| !allowed(c)) {
            return Err(ConfigError::HolderLabelCharacter(c));
        }
        let mut bytes = [0; MAX_HOLDER_LABEL_LEN];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Ok(Label {
            len: text.len() as u8, // at most 64
            bytes,
        })
    }

    /// The label in `tail`, the part of a lock value that follows its
    /// secret as an inspection reads it (the separator first, then the
    /// label, and one byte more if the value is longer than any this crate
    /// writes). `None` unless it is exactly a separator and a label: a
    /// value without a label, or one some other client wrote.
    pub(crate) fn read(tail: &[u8]) -> Option<Label> {
        let (&first, rest) = tail.split_first()?;
        if first != SEPARATOR {
            return None;
        }
        Label::new(std::str::from_utf8(rest).ok()?).ok()
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("checked as UTF-8 when made")
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Whether a label may hold `c`: printable (no control character, which a
/// terminal or a log would act on) and not the separator.
fn allowed(c: char) -> bool {
    !c.is_control() && c != char::from(SEPARATOR)
}

impl fmt::Debug for Label {
    // The label is no secret: who holds a lock is what it is for.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Label({:?})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_checked() {
        let label = Label::new("web-3 pid 4242").unwrap();
        assert_eq!(label.as_str(), "web-3 pid 4242");
        assert_eq!(format!("{label:?}"), r#"Label("web-3 pid 4242")"#);
        assert_eq!(
            Label::new("é".repeat(32).as_str())
                .unwrap()
                .as_bytes()
                .len(),
            64
        );
        assert_eq!(Label::new(""), Err(ConfigError::HolderLabelEmpty));
        assert_eq!(
            Label::new(&"x".repeat(65)),
            Err(ConfigError::HolderLabelTooLong(65))
        );
        assert_eq!(
            Label::new("a|b"),
            Err(ConfigError::HolderLabelCharacter('|'))
        );
        assert_eq!(
            Label::new("a\nb"),
            Err(ConfigError::HolderLabelCharacter('\n'))
        );
        assert_eq!(
            Label::new("a\u{1b}[2J"),
            Err(ConfigError::HolderLabelCharacter('\u{1b}'))
        );
    }

    #[test]
    fn a_label_is_read_only_after_its_separator() {
        assert_eq!(Label::read(b"|web-3").unwrap().as_str(), "web-3");
        assert_eq!(Label::read(b""), None, "a value without a label");
        assert_eq!(Label::read(b"|"), None);
        assert_eq!(Label::read(b"0web-3"), None, "not our separator");
        let longest = [&b"|"[..], &[b'x'; 64]].concat();
        assert!(Label::read(&longest).is_some());
        let longer = [&b"|"[..], &[b'x'; 65]].concat();
        assert_eq!(Label::read(&longer), None, "longer than any we write");
        assert_eq!(Label::read(b"|a\xffb"), None, "not UTF-8");
        assert_eq!(Label::read(b"|a\x07"), None, "a control character");
    }
}
