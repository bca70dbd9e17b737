//! The RESP2 encoder: commands as arrays of bulk strings, and (for tests,
//! fuzzing and the scripted fake server) replies.

use super::decode::Reply;

/// One command argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg<'a> {
    /// Raw bytes, sent as they are (CR, LF, NUL and non-UTF-8 are all fine).
    Bytes(&'a [u8]),
    /// An unsigned integer, sent in decimal (such as the `PX` milliseconds).
    Uint(u64),
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Arg::Bytes(bytes)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Arg<'a> {
    fn from(bytes: &'a [u8; N]) -> Self {
        Arg::Bytes(bytes)
    }
}

impl From<u64> for Arg<'_> {
    fn from(n: u64) -> Self {
        Arg::Uint(n)
    }
}

/// A number formatted in decimal on the stack: `-42` for `signed(-42)`,
/// `18446744073709551615` for `unsigned(u64::MAX)` (see the unit tests).
#[derive(Clone, Copy, Debug)]
pub struct Decimal {
    // Both u64::MAX and i64::MIN take 20 characters.
    buf: [u8; 20],
    start: usize,
}

impl Decimal {
    /// Formats an unsigned number.
    pub fn unsigned(n: u64) -> Decimal {
        Decimal::format(false, n)
    }

    /// Formats a signed number.
    pub fn signed(n: i64) -> Decimal {
        Decimal::format(n < 0, n.unsigned_abs())
    }

    fn format(negative: bool, mut n: u64) -> Decimal {
        let mut buf = [0u8; 20];
        if n < 10 && !negative {
            // Most numbers sent are short lengths: skip the loop.
            buf[19] = b'0' + n as u8;
            return Decimal { buf, start: 19 };
        }
        let mut start = buf.len();
        loop {
            start -= 1;
            buf[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if negative {
            start -= 1;
            buf[start] = b'-';
        }
        Decimal { buf, start }
    }

    /// The digits (and sign).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// Number of decimal digits of `n`.
fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Encoded size of one bulk string of `len` bytes: `$len\r\n`, payload, `\r\n`.
fn bulk_len(len: usize) -> usize {
    1 + digits(len as u64) + 2 + len + 2
}

fn arg_payload_len(arg: &Arg<'_>) -> usize {
    match arg {
        Arg::Bytes(bytes) => bytes.len(),
        Arg::Uint(n) => digits(*n),
    }
}

/// The exact number of bytes [`encode_command`] appends for `args`.
pub fn command_len(args: &[Arg<'_>]) -> usize {
    let header = 1 + digits(args.len() as u64) + 2;
    header
        + args
            .iter()
            .map(|arg| bulk_len(arg_payload_len(arg)))
            .sum::<usize>()
}

/// Appends `args` to `out` as one RESP command (an array of bulk strings).
///
/// The frame length is computed first and reserved once, so a reused buffer
/// with enough capacity is never reallocated.
///
/// `PEXPIRE k 500` becomes `*3\r\n$7\r\nPEXPIRE\r\n$1\r\nk\r\n$3\r\n500\r\n`
/// (see the unit tests).
pub fn encode_command(out: &mut Vec<u8>, args: &[Arg<'_>]) {
    out.reserve(command_len(args));
    push_header(out, b'*', args.len() as u64);
    encode_args(out, args);
}

/// Appends the header of a command of `n` arguments (`*n\r\n`): with
/// [`encode_args`] or [`encode_bulk`], a command can be written in parts
/// (a shared tail kept apart from the head that names the command).
pub fn encode_array_header(out: &mut Vec<u8>, n: usize) {
    push_header(out, b'*', n as u64);
}

/// Appends one bulk string (`$len\r\npayload\r\n`).
pub fn encode_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    push_bulk(out, bytes);
}

/// Appends `args` as bulk strings, without the array header.
pub fn encode_args(out: &mut Vec<u8>, args: &[Arg<'_>]) {
    out.reserve(args.iter().map(|arg| bulk_len(arg_payload_len(arg))).sum());
    for arg in args {
        match arg {
            Arg::Bytes(bytes) => push_bulk(out, bytes),
            Arg::Uint(n) => {
                push_header(out, b'$', digits(*n) as u64);
                push_number_line(out, None, *n);
            }
        }
    }
}

/// Appends `reply` to `out` in its canonical RESP2 encoding.
pub fn encode_reply(out: &mut Vec<u8>, reply: &Reply<'_>) {
    match reply {
        Reply::Simple(line) => push_line(out, b'+', line),
        Reply::Error(line) => push_line(out, b'-', line),
        Reply::Integer(n) => push_line(out, b':', Decimal::signed(*n).as_bytes()),
        Reply::Bulk(bytes) => push_bulk(out, bytes),
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
        Reply::Array(array) => {
            push_header(out, b'*', array.len() as u64);
            for element in array.iter() {
                encode_reply(out, &element);
            }
        }
    }
}

fn push_header(out: &mut Vec<u8>, kind: u8, len: u64) {
    push_number_line(out, Some(kind), len);
}

/// Appends `prefix` (if any), `n` in decimal and `\r\n`. Every
/// length header is one, so this is the encoder's hot spot: the line is
/// formatted on the stack and appended in one copy.
fn push_number_line(out: &mut Vec<u8>, prefix: Option<u8>, mut n: u64) {
    // A prefix byte, up to 20 digits (u64::MAX), CRLF.
    let mut buf = [0u8; 23];
    let mut start = buf.len() - 2;
    buf[start..].copy_from_slice(b"\r\n");
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if let Some(byte) = prefix {
        start -= 1;
        buf[start] = byte;
    }
    out.extend_from_slice(&buf[start..]);
}

fn push_line(out: &mut Vec<u8>, kind: u8, line: &[u8]) {
    out.push(kind);
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

fn push_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    push_header(out, b'$', bytes.len() as u64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}
