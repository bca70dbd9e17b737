//! A small RESP2 codec of the tests' own, written for clarity rather than
//! speed: the admin client, the referee and the fake nodes use it, so that
//! the tests never judge the client with the client's own codec.

use std::fmt;

/// A reply (or, for the fake nodes, a command), owning its payloads.
#[derive(Clone, PartialEq, Eq)]
pub enum OwnedReply {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<OwnedReply>),
    NilArray,
}

impl fmt::Debug for OwnedReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |b: &[u8]| b.escape_ascii().to_string();
        match self {
            OwnedReply::Simple(s) => write!(f, "Simple({:?})", text(s)),
            OwnedReply::Error(e) => write!(f, "Error({:?})", text(e)),
            OwnedReply::Integer(n) => write!(f, "Integer({n})"),
            OwnedReply::Bulk(b) => write!(f, "Bulk({:?})", text(b)),
            OwnedReply::Nil => f.write_str("Nil"),
            OwnedReply::Array(a) => f.debug_list().entries(a).finish(),
            OwnedReply::NilArray => f.write_str("NilArray"),
        }
    }
}

/// A command's arguments, its name first.
pub type Command = Vec<Vec<u8>>;

/// Encodes a command: an array of bulk strings.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Parses the value at the start of `buf`: `Ok(Some((value, used)))`,
/// `Ok(None)` if more bytes are needed, or why it is malformed.
pub fn parse(buf: &[u8]) -> Result<Option<(OwnedReply, usize)>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let Some((&kind, line)) = buf[..end].split_first() else {
        return Err("empty line".into());
    };
    let after = end + 2;
    let number = || -> Result<i64, String> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad number {:?}", line.escape_ascii().to_string()))
    };
    match kind {
        b'+' => Ok(Some((OwnedReply::Simple(line.to_vec()), after))),
        b'-' => Ok(Some((OwnedReply::Error(line.to_vec()), after))),
        b':' => Ok(Some((OwnedReply::Integer(number()?), after))),
        b'$' => match number()? {
            -1 => Ok(Some((OwnedReply::Nil, after))),
            len if len >= 0 => {
                let len = len as usize;
                if buf.len() < after + len + 2 {
                    return Ok(None);
                }
                if &buf[after + len..after + len + 2] != b"\r\n" {
                    return Err("bulk string without its CRLF".into());
                }
                Ok(Some((
                    OwnedReply::Bulk(buf[after..after + len].to_vec()),
                    after + len + 2,
                )))
            }
            len => Err(format!("bulk length {len}")),
        },
        b'*' => match number()? {
            -1 => Ok(Some((OwnedReply::NilArray, after))),
            len if (0..=1_000_000).contains(&len) => {
                let mut items = Vec::new();
                let mut at = after;
                for _ in 0..len {
                    match parse(&buf[at..])? {
                        Some((item, used)) => {
                            items.push(item);
                            at += used;
                        }
                        None => return Ok(None),
                    }
                }
                Ok(Some((OwnedReply::Array(items), at)))
            }
            len => Err(format!("array length {len}")),
        },
        other => Err(format!("unknown type byte {other:#04x}")),
    }
}

/// Parses a command (a non-empty array of bulk strings) at the start of
/// `buf`, as a server would.
pub fn parse_command(buf: &[u8]) -> Result<Option<(Command, usize)>, String> {
    match parse(buf)? {
        None => Ok(None),
        Some((OwnedReply::Array(items), used)) if !items.is_empty() => {
            let args = items
                .into_iter()
                .map(|item| match item {
                    OwnedReply::Bulk(bytes) => Ok(bytes),
                    other => Err(format!("command argument is not a bulk string: {other:?}")),
                })
                .collect::<Result<_, _>>()?;
            Ok(Some((args, used)))
        }
        Some((other, _)) => Err(format!("a command must be a non-empty array: {other:?}")),
    }
}
