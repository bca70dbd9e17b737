//! The RESP2 reply decoder: a bounded, zero-copy push parser.

use std::fmt;

/// Longest line accepted, in bytes, not counting the CRLF: the payload of a
/// simple string, an error or an integer, and every length header.
///
/// Lock replies are a few bytes; the longest thing a healthy server sends us
/// is an error message (a Lua error can quote the script name and line).
pub const MAX_LINE_LEN: usize = 4096;

/// Largest bulk string accepted, in bytes. The client reads no bulk replies on
/// its hot path; the cap only has to fit things like a script digest.
pub const MAX_BULK_LEN: usize = 64 * 1024;

/// Largest array accepted, in elements. Lock commands never return arrays.
pub const MAX_ARRAY_LEN: usize = 1024;

/// Deepest nesting accepted: a top-level array is depth 1, an array inside
/// it depth 2, and so on.
pub const MAX_DEPTH: usize = 8;

/// Largest complete reply accepted, in bytes, CRLFs and headers included.
/// With [`MAX_LINE_LEN`] it bounds how much a connection ever buffers.
pub const MAX_REPLY_LEN: usize = 1024 * 1024;

/// Largest array accepted in a cluster's topology reply
/// ([`decode_topology`]), in elements: one per slot range of `CLUSTER
/// SLOTS`, two per range of a shard's `slots` in `CLUSTER SHARDS`. A
/// cluster has 16384 slots, so no valid topology needs more (a shard
/// owning every other slot has 8192 ranges, 16384 integers).
pub const MAX_TOPOLOGY_ARRAY_LEN: usize = 16384;

/// Largest topology reply accepted, in bytes. `CLUSTER SHARDS` (servers
/// 7.0 and later) of a cluster of a thousand nodes with 16384 one-slot
/// ranges is under 1 MiB; `CLUSTER SLOTS` (older servers) repeats every
/// node once per range, about 300 bytes per range with one replica per
/// master, so 16384 ranges need about 5 MiB. Only the set-up and the
/// refreshes of a cluster voter read such a reply.
pub const MAX_TOPOLOGY_REPLY_LEN: usize = 8 * 1024 * 1024;

// The topology bounds are looser than the general ones in every
// dimension: `ArrayIter` re-reads already validated elements under them,
// which accepts whatever either bound accepted.
const _: () =
    assert!(MAX_TOPOLOGY_ARRAY_LEN >= MAX_ARRAY_LEN && MAX_TOPOLOGY_REPLY_LEN >= MAX_REPLY_LEN);

/// The smallest possible encoding of one array element (`+\r\n`), used to
/// reject an array header whose elements cannot fit in [`MAX_REPLY_LEN`].
const MIN_ELEMENT_LEN: usize = 3;

/// What [`decode`] found at the start of its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole reply, and how many bytes of the input it used.
    Complete(Reply<'a>, usize),
    /// The input is a valid beginning of a reply; more bytes are needed.
    Partial,
}

/// One RESP2 reply, borrowing its payloads from the decoded input.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `+...`: a simple string such as `OK`.
    Simple(&'a [u8]),
    /// `-...`: an error line, code and message (see [`super::split_error`]).
    Error(&'a [u8]),
    /// `:...`: a signed 64-bit integer.
    Integer(i64),
    /// `$n`: a binary-safe bulk string.
    Bulk(&'a [u8]),
    /// `$-1`: the null bulk string.
    Nil,
    /// `*n`: an array of replies (possibly nested).
    Array(Array<'a>),
    /// `*-1`: the null array.
    NilArray,
}

/// A decoded array: its element count and the already validated bytes of its
/// elements, which [`Array::iter`] decodes again on demand (no allocation).
#[derive(Clone, Copy)]
pub struct Array<'a> {
    len: usize,
    body: &'a [u8],
}

impl<'a> Array<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, in order.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            remaining: self.len,
            rest: self.body,
        }
    }
}

impl PartialEq for Array<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Array<'_> {}

impl fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over the elements of an [`Array`].
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    remaining: usize,
    rest: &'a [u8],
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Reply<'a>;

    fn next(&mut self) -> Option<Reply<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // The bytes were validated when the array was decoded (at a greater
        // depth than this, so within every bound, and the topology bounds
        // are the loosest), so this always succeeds; should it ever not,
        // the iteration ends instead of panicking.
        match parse::<MAX_TOPOLOGY_ARRAY_LEN, MAX_TOPOLOGY_REPLY_LEN>(self.rest, 0, 1) {
            Ok(Some((reply, end))) => {
                self.remaining -= 1;
                self.rest = &self.rest[end..];
                Some(reply)
            }
            _ => {
                self.remaining = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

impl fmt::Debug for Reply<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match self {
            Reply::Simple(s) => f.debug_tuple("Simple").field(&text(s)).finish(),
            Reply::Error(e) => f.debug_tuple("Error").field(&text(e)).finish(),
            Reply::Integer(i) => f.debug_tuple("Integer").field(i).finish(),
            Reply::Bulk(b) => f.debug_tuple("Bulk").field(&text(b)).finish(),
            Reply::Nil => f.write_str("Nil"),
            Reply::Array(a) => f.debug_tuple("Array").field(a).finish(),
            Reply::NilArray => f.write_str("NilArray"),
        }
    }
}

// `DecodeError`'s docs state the limits in figures: the constants are not
// part of the public API (the `resp` module is private without the
// `fuzzing` feature), so the docs cannot link to them.
const _: () = assert!(
    MAX_LINE_LEN == 4096
        && MAX_BULK_LEN == 64 * 1024
        && MAX_ARRAY_LEN == 1024
        && MAX_DEPTH == 8
        && MAX_REPLY_LEN == 1024 * 1024
        && MAX_TOPOLOGY_ARRAY_LEN == 16384
        && MAX_TOPOLOGY_REPLY_LEN == 8 * 1024 * 1024
);

/// Why bytes from a server are not a RESP2 reply. Each variant is final: the
/// stream cannot be resynchronised and the connection must be discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A frame began with CR or LF instead of a type byte.
    #[error("empty type byte (frame starts with a line ending)")]
    MissingType,
    /// A frame began with a byte that is no RESP type.
    #[error("unknown reply type byte 0x{0:02x}")]
    UnknownType(u8),
    /// A frame began with a RESP3 type byte; this client speaks RESP2 only.
    #[error("RESP3 reply type {:?} is not supported", char::from(*.0))]
    Resp3(u8),
    /// No CRLF within 4096 bytes (`MAX_LINE_LEN`).
    #[error("line longer than {MAX_LINE_LEN} bytes")]
    LineTooLong,
    /// A line held a bare CR or LF, or a bulk payload was not followed by CRLF.
    #[error("missing CRLF")]
    MissingCrlf,
    /// A length header was empty or held something other than digits.
    #[error("invalid length header")]
    InvalidLength,
    /// A length header does not fit in 64 bits.
    #[error("length header overflows")]
    LengthOverflow,
    /// A length header was negative but not -1.
    #[error("negative length {0}")]
    NegativeLength(i64),
    /// A bulk string header announced more than 64 KiB (`MAX_BULK_LEN`).
    #[error("bulk string of {0} bytes exceeds the {MAX_BULK_LEN}-byte limit")]
    BulkTooLong(u64),
    /// An array header announced more than 1024 elements (`MAX_ARRAY_LEN`;
    /// 16384 in a cluster's topology reply, `MAX_TOPOLOGY_ARRAY_LEN`).
    #[error("array of {0} elements exceeds the element limit ({MAX_ARRAY_LEN}; {MAX_TOPOLOGY_ARRAY_LEN} in a cluster's topology)")]
    ArrayTooLong(u64),
    /// Arrays nested deeper than 8 levels (`MAX_DEPTH`).
    #[error("arrays nested deeper than {MAX_DEPTH}")]
    TooDeep,
    /// The reply would be larger than 1 MiB (`MAX_REPLY_LEN`; 8 MiB for a
    /// cluster's topology reply, `MAX_TOPOLOGY_REPLY_LEN`).
    #[error("reply larger than the limit ({MAX_REPLY_LEN} bytes; {MAX_TOPOLOGY_REPLY_LEN} for a cluster's topology)")]
    ReplyTooLong,
    /// An integer reply was empty, held a non-digit, or overflowed 64 bits.
    #[error("invalid integer reply")]
    InvalidInteger,
}

/// Decodes the reply at the start of `input`.
///
/// Returns [`Decoded::Complete`] with the reply and the number of bytes it
/// used, [`Decoded::Partial`] if `input` is a strict prefix of a valid reply,
/// or the first error found. Payloads borrow from `input`; nothing is copied
/// or allocated, and no bound is ever waited for.
pub fn decode(input: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    match parse::<MAX_ARRAY_LEN, MAX_REPLY_LEN>(input, 0, 0)? {
        Some((reply, used)) => Ok(Decoded::Complete(reply, used)),
        None => Ok(Decoded::Partial),
    }
}

/// Decodes a cluster's topology reply (`CLUSTER SHARDS`, `CLUSTER SLOTS`)
/// at the start of `input`: as [`decode`], under the same line, bulk and
/// depth bounds, but with arrays of up to [`MAX_TOPOLOGY_ARRAY_LEN`]
/// elements in a reply of up to [`MAX_TOPOLOGY_REPLY_LEN`] bytes, which a
/// large or fragmented cluster needs. Only for those replies: everything
/// else a connection reads keeps the tighter bounds.
pub fn decode_topology(input: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    match parse::<MAX_TOPOLOGY_ARRAY_LEN, MAX_TOPOLOGY_REPLY_LEN>(input, 0, 0)? {
        Some((reply, used)) => Ok(Decoded::Complete(reply, used)),
        None => Ok(Decoded::Partial),
    }
}

/// Parses one reply starting at `input[start..]`, `depth` arrays deep,
/// within `ARRAY` elements per array and `REPLY` bytes in all. `Ok(None)`
/// means "need more bytes". The returned offset is where the reply ends,
/// relative to `input`. The bounds are const parameters, so [`decode`]'s
/// code is the same as if they were written in: the hot path pays nothing
/// for the topology's looser ones.
fn parse<const ARRAY: usize, const REPLY: usize>(
    input: &[u8],
    start: usize,
    depth: usize,
) -> Result<Option<(Reply<'_>, usize)>, DecodeError> {
    let Some(&kind) = input.get(start) else {
        return Ok(None);
    };
    // Judge the type byte before waiting for the rest of its line.
    let kind = Kind::from_byte(kind)?;
    let Some((line, next)) = read_line::<REPLY>(input, start + 1)? else {
        return Ok(None);
    };
    let reply = match kind {
        Kind::Simple => Reply::Simple(line),
        Kind::Error => Reply::Error(line),
        Kind::Integer => Reply::Integer(parse_integer(line)?),
        Kind::Bulk => {
            let Some(len) = parse_length(line)? else {
                return Ok(Some((Reply::Nil, next)));
            };
            if len > MAX_BULK_LEN as u64 {
                return Err(DecodeError::BulkTooLong(len));
            }
            let len = len as usize; // <= MAX_BULK_LEN, so it fits
            let end = next + len + 2;
            if end > REPLY {
                return Err(DecodeError::ReplyTooLong);
            }
            if input.len() < end {
                return Ok(None);
            }
            if &input[next + len..end] != b"\r\n" {
                return Err(DecodeError::MissingCrlf);
            }
            return Ok(Some((Reply::Bulk(&input[next..next + len]), end)));
        }
        Kind::Array => {
            let Some(len) = parse_length(line)? else {
                return Ok(Some((Reply::NilArray, next)));
            };
            if len > ARRAY as u64 {
                return Err(DecodeError::ArrayTooLong(len));
            }
            if depth + 1 > MAX_DEPTH {
                return Err(DecodeError::TooDeep);
            }
            let len = len as usize; // <= ARRAY, so it fits
            if next + len * MIN_ELEMENT_LEN > REPLY {
                return Err(DecodeError::ReplyTooLong);
            }
            let mut end = next;
            for _ in 0..len {
                match parse::<ARRAY, REPLY>(input, end, depth + 1)? {
                    Some((_, element_end)) => end = element_end,
                    None => return Ok(None),
                }
            }
            let body = &input[next..end];
            return Ok(Some((Reply::Array(Array { len, body }), end)));
        }
    };
    Ok(Some((reply, next)))
}

/// The RESP2 reply types, from a frame's first byte.
#[derive(Clone, Copy)]
enum Kind {
    Simple,
    Error,
    Integer,
    Bulk,
    Array,
}

impl Kind {
    fn from_byte(byte: u8) -> Result<Kind, DecodeError> {
        match byte {
            b'+' => Ok(Kind::Simple),
            b'-' => Ok(Kind::Error),
            b':' => Ok(Kind::Integer),
            b'$' => Ok(Kind::Bulk),
            b'*' => Ok(Kind::Array),
            b'\r' | b'\n' => Err(DecodeError::MissingType),
            b'_' | b',' | b'#' | b'!' | b'=' | b'(' | b'%' | b'~' | b'>' | b'|' => {
                Err(DecodeError::Resp3(byte))
            }
            other => Err(DecodeError::UnknownType(other)),
        }
    }
}

/// Finds the CRLF-terminated line starting at `input[start..]`. Returns the
/// line without its CRLF and the offset just past the CRLF, or `Ok(None)` if
/// the line is not complete yet (and still within `REPLY` bytes).
fn read_line<const REPLY: usize>(
    input: &[u8],
    start: usize,
) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let rest = input.get(start..).unwrap_or_default();
    // Look one byte past the longest allowed line, for its CR.
    let window = &rest[..rest.len().min(MAX_LINE_LEN + 1)];
    match window.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) if window[i] == b'\n' => Err(DecodeError::MissingCrlf),
        Some(i) => match rest.get(i + 1) {
            None => Ok(None),
            Some(b'\n') => {
                let next = start + i + 2;
                if next > REPLY {
                    return Err(DecodeError::ReplyTooLong);
                }
                Ok(Some((&rest[..i], next)))
            }
            Some(_) => Err(DecodeError::MissingCrlf),
        },
        None if window.len() > MAX_LINE_LEN => Err(DecodeError::LineTooLong),
        None if start + window.len() > REPLY => Err(DecodeError::ReplyTooLong),
        None => Ok(None),
    }
}

/// Parses a bulk or array length header. `Ok(None)` is the null marker `-1`.
fn parse_length(line: &[u8]) -> Result<Option<u64>, DecodeError> {
    match line {
        b"-1" => Ok(None),
        [b'-', digits @ ..] => match parse_digits(digits) {
            Ok(n) => Err(DecodeError::NegativeLength(
                i64::try_from(n).map_or(i64::MIN, |n| -n),
            )),
            Err(e) => Err(e),
        },
        digits => parse_digits(digits).map(Some),
    }
}

/// Parses a non-empty run of ASCII digits as a `u64`.
fn parse_digits(digits: &[u8]) -> Result<u64, DecodeError> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(DecodeError::InvalidLength);
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(DecodeError::LengthOverflow)
    })
}

/// Parses the payload of an integer reply: an optional `-`, then digits.
fn parse_integer(line: &[u8]) -> Result<i64, DecodeError> {
    let (negative, digits) = match line {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(DecodeError::InvalidInteger);
    }
    // Accumulate towards the sign so that i64::MIN parses without overflow.
    digits
        .iter()
        .try_fold(0i64, |n, &d| {
            let d = i64::from(d - b'0');
            let n = n.checked_mul(10)?;
            if negative {
                n.checked_sub(d)
            } else {
                n.checked_add(d)
            }
        })
        .ok_or(DecodeError::InvalidInteger)
}
