//! An operating-system error on a socket, as a node's failure keeps it
//! (cloneable and comparable, unlike `std::io::Error`).

use std::fmt;
use std::io;

/// An operating-system error on a socket, kept as the OS reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoError {
    kind: io::ErrorKind,
    pub(super) code: Option<i32>,
}

impl IoError {
    /// The error's kind.
    pub fn kind(&self) -> io::ErrorKind {
        self.kind
    }

    /// The OS error code (`errno`), if the error came from the OS.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.code
    }
}

impl From<&io::Error> for IoError {
    fn from(e: &io::Error) -> IoError {
        IoError {
            kind: e.kind(),
            code: e.raw_os_error(),
        }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => io::Error::from_raw_os_error(code).fmt(f),
            None => io::Error::from(self.kind).fmt(f),
        }
    }
}
