//! How a reply to a lock command counts: a vote, a tag that comes back, or
//! a protocol error for a reply that cannot answer the command.

use super::scripts::TAG_LIMIT;
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::holder::Label;
use crate::resp::{Reply, ServerErrorKind};

/// One node's vote on a command.
#[derive(Debug)]
pub(crate) enum Vote {
    /// Done: the key was set, deleted or extended (or the ping answered).
    Yes,
    /// Refused: the key is held by another value (or, for release and
    /// extend, is not ours).
    No,
    /// `PTTL`'s answer: the key's time to live in milliseconds, `-1` for a
    /// key without one, `-2` for no key; and the holder label read with it
    /// (see [`judge_holder`]), if any.
    Pttl { ms: i64, holder: Option<Label> },
    /// The server answered with an error.
    Failed(NodeError),
    /// Done, with numbers to read: a fenced acquisition's counter and
    /// epoch, the fence probe's or the barrier's answer (see `fence`).
    Read(Reading),
}

/// What a fenced script answered, beyond yes or no.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The domain's counter (after round 1's increment; the barrier's
    /// read; the probe's).
    pub(crate) counter: u64,
    /// The domain's epoch (0 where the script does not say).
    pub(crate) epoch: u64,
    /// The probe's state: 0 no anchor, 1 valid, 2 anchored before a
    /// restart, 3 cannot tell, 4 anchored in another data set (or a
    /// replica), 5 anchored in the earlier format (0 for other scripts).
    pub(crate) state: u8,
    /// The probe's: the master's place in the fence domain
    /// (`1..=members`), how many masters the domain was initialised on,
    /// and the id `fence_init` drew for it (0 where not recorded).
    pub(crate) member: u32,
    pub(crate) members: u32,
    pub(crate) domain_id: u64,
}

fn server_error(line: &[u8]) -> Vote {
    Vote::Failed(NodeError::Server(ServerError::from_line(line)))
}

/// How a tagged script's reply counts, given the tag its command carried:
/// `Ok` with the vote, or a protocol error for a reply that cannot answer
/// this command (a wrong type, or a number that does not carry the tag).
pub(crate) fn judge_tagged_script(reply: &Reply<'_>, tag: u64) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= 0 && (n as u64) >> 1 == tag => {
            Ok(if n & 1 == 1 { Vote::Yes } else { Vote::No })
        }
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// How a plain script's reply counts, before its tag has been checked.
pub(crate) fn judge_script(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(1) => Ok(Vote::Yes),
        Reply::Integer(0) => Ok(Vote::No),
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// How the reply to a `PUBLISH` counts (nobody waits for it: an error,
/// such as an ACL's refusal, is only noted).
pub(crate) fn judge_publish(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= 0 => Ok(Vote::Yes),
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// Whether the reply to `PUBSUB NUMSUB channel` (behind a native release
/// with a notice) says someone listens on the channel. An error (an ACL
/// without `PUBSUB`) cannot say: it counts as someone.
pub(crate) fn judge_listeners(reply: &Reply<'_>) -> Result<bool, NodeError> {
    if let Reply::Array(pair) = reply {
        let mut items = pair.iter();
        if let (Some(Reply::Bulk(_)), Some(Reply::Integer(n)), None) =
            (items.next(), items.next(), items.next())
        {
            return Ok(n > 0);
        }
    }
    match reply {
        Reply::Error(_) => Ok(true),
        other => Err(unexpected(other)),
    }
}

/// How the reply to a `PTTL` counts, before its tag has been checked.
pub(crate) fn judge_pttl(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= -2 => Ok(Vote::Pttl {
            ms: n,
            holder: None,
        }),
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// The holder label in the reply to the `GETRANGE` an inspection sends
/// after its `PTTL` (the value's bytes after its secret: see
/// `value::LABEL_RANGE`). `None` for a value without a label or not ours,
/// no key, and an error reply (the key is no string, an ACL refuses
/// `GETRANGE`, a cluster redirect): the label is then unknown, and the
/// `PTTL` still counts.
pub(crate) fn judge_holder(reply: &Reply<'_>) -> Result<Option<Label>, NodeError> {
    match *reply {
        Reply::Bulk(tail) => Ok(Label::read(tail)),
        Reply::Error(_) => Ok(None),
        ref other => Err(unexpected(other)),
    }
}

/// How the reply to a `SET ... NX PX` counts, before its tag has been
/// checked.
pub(crate) fn judge_set(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Simple(b"OK") => Ok(Vote::Yes),
        Reply::Nil => Ok(Vote::No),
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// Whether a reply to `ECHO tag` or `PING tag` carries the tag: `Ok(None)`
/// if so, `Ok(Some(error))` for an error reply, and a protocol error for
/// anything else.
pub(crate) fn check_tag(reply: &Reply<'_>, tag: u64) -> Result<Option<ServerError>, NodeError> {
    match *reply {
        Reply::Bulk(bytes) if parse_tag(bytes) == Some(tag) => Ok(None),
        Reply::Error(line) => Ok(Some(ServerError::from_line(line))),
        ref other => Err(unexpected(other)),
    }
}

/// The tag in a bulk reply: decimal digits, no sign, no leading zero (as
/// the tag was sent), below [`TAG_LIMIT`].
fn parse_tag(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 16 || (bytes[0] == b'0' && bytes.len() > 1) {
        return None;
    }
    let mut n: u64 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    (n < TAG_LIMIT).then_some(n)
}

/// Whether a vote is a NOSCRIPT error (answered by re-sending with EVAL).
pub(crate) fn is_noscript(vote: &Vote) -> bool {
    matches!(vote, Vote::Failed(NodeError::Server(e)) if e.kind() == ServerErrorKind::NoScript)
}

fn unexpected(reply: &Reply<'_>) -> NodeError {
    NodeError::Protocol(ProtocolError::UnexpectedReply(describe(reply)))
}

/// A short description of an unexpected reply for error messages, with the
/// payload cut to a few bytes (it came from a server we no longer trust).
pub(crate) fn describe(reply: &Reply<'_>) -> String {
    let mut text = format!("{reply:?}");
    if text.len() > 64 {
        let mut cut = 61;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}
