//! A connection's input buffer: what was read and not yet decoded, bounded
//! by the largest reply the codec accepts.

use crate::resp::MAX_REPLY_LEN;
use socket2::Socket;
use std::io::{self, Read};

/// Initial size of the input buffer; lock replies are a few bytes each.
const INPUT_BUFFER_LEN: usize = 4096;

/// Largest the input buffer ever grows: one maximal reply plus one byte, the
/// point at which the decoder has certainly answered or failed.
const MAX_INPUT_BUFFER_LEN: usize = MAX_REPLY_LEN + 1;

/// A read buffer that keeps its allocation: bytes live in `data[start..end]`,
/// reads go to `data[end..]`, and the buffer is compacted or grown (up to
/// [`MAX_INPUT_BUFFER_LEN`]) only when a reply does not fit.
pub(crate) struct InputBuffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl InputBuffer {
    pub(super) fn new() -> InputBuffer {
        InputBuffer {
            data: vec![0; INPUT_BUFFER_LEN],
            start: 0,
            end: 0,
        }
    }

    #[inline]
    pub(super) fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    #[inline]
    pub(super) fn unread(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    #[inline]
    pub(super) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.clear();
        }
    }

    /// One read: the bytes read, and whether they filled the room there was.
    #[inline]
    pub(super) fn read_from(&mut self, mut socket: &Socket) -> io::Result<(usize, bool)> {
        let spare = self.spare()?;
        let room = spare.len();
        let n = socket.read(spare)?;
        self.filled(n);
        Ok((n, n == room))
    }

    /// Room for more bytes after the unread ones: compacts or grows the
    /// buffer if it is full, and fails once a reply would exceed
    /// [`MAX_INPUT_BUFFER_LEN`]. Never empty.
    #[inline]
    pub(crate) fn spare(&mut self) -> io::Result<&mut [u8]> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < MAX_INPUT_BUFFER_LEN {
                let len = (self.data.len() * 2).min(MAX_INPUT_BUFFER_LEN);
                self.data.resize(len, 0);
            } else {
                // Unreachable with a correct decoder (it fails before a
                // reply exceeds MAX_REPLY_LEN), but never read unboundedly.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reply exceeds the input buffer",
                ));
            }
        }
        Ok(&mut self.data[self.end..])
    }

    /// The first `n` bytes of [`InputBuffer::spare`] were filled.
    #[inline]
    pub(crate) fn filled(&mut self, n: usize) {
        self.end += n;
    }
}
