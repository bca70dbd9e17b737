//! What a connection is owed, entry by entry: who waits for each reply
//! ([`Purpose`]), what shape it must have ([`Expect`]), and what one reply
//! told once judged ([`Step`]). Plain types, shared by the ledger (`owed`)
//! and the modules that record or judge replies of their own kinds
//! (`cluster`, `resend`).

use super::node::HandshakeStep;
use crate::cluster::Topology;
use crate::command::fence::FenceCheck;
use crate::command::identity::{Identity, IdentityProbe};
use crate::command::native::{Known, Lack};
use crate::command::rights::Probe;
use crate::command::{judge_script, judge_set, Acked, Native, ScriptId, Vote};
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::holder::Label;
use crate::resp::Reply;
use std::time::Instant;

/// Who waits for a command's answer: round `round` (numbered by the
/// session), for its operation `op`. Answers to other rounds are late: they
/// are checked and consumed, and count for nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Purpose {
    pub(crate) round: u64,
    pub(crate) op: u16,
}

/// What a reply must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expect {
    /// A handshake command.
    Handshake(HandshakeStep),
    /// The `SET` of an acquisition: its vote is held until the `ECHO` that
    /// follows carries the tag back.
    Set { tag: u64 },
    /// A `PTTL`: its answer is held until the `PING` that follows carries
    /// the tag back.
    Pttl { tag: u64 },
    /// The `GETRANGE` of the holder label between a `PTTL` and its `PING`:
    /// the label joins the `PTTL`'s held answer.
    Holder { tag: u64 },
    /// A script call; its arguments (`args` of them, `tail_len` bytes) are
    /// kept in [`Ledger::tails`] until it is answered, to re-send it as EVAL.
    /// A plain script's vote is held until its `ECHO` (if `echo`: a command
    /// nobody waits for is sent without); a tagged script's reply carries
    /// the tag itself.
    Script {
        id: ScriptId,
        tag: u64,
        args: u16,
        tail_len: u32,
        echo: bool,
    },
    /// A native form of plain script `id` (see `command::native`),
    /// answered as the script would be (`DELIFEQ`, `DELEX`) or as `SET`
    /// (`SET … IFEQ`); its vote is held until its `ECHO` if `echo`. The
    /// script's arguments are kept as for [`Expect::Script`], to re-send
    /// the command in its next form if the server refuses this one, and to
    /// publish a release's notice (`notice`) if it deleted (see `notice`).
    Native {
        form: Native,
        id: ScriptId,
        tag: u64,
        args: u16,
        tail_len: u32,
        echo: bool,
        notice: bool,
    },
    /// A run of native commands for a set (see `run`), without scripts:
    /// `DELIFEQ` (or `DELEX … IFEQ`) per key for a release, `SET … IFEQ`
    /// per key for an extension (then `SET … NX` per key if it repairs:
    /// `per_key` 2). One entry for the whole run: `left` replies are still
    /// owed; `all` stays true while every key answered as it should; its
    /// vote, the set's, is held until its `ECHO` if `echo`. A release
    /// keeps the script's arguments (`tail_len` bytes), to be sent again in
    /// its next form if the server refuses this one (see `run`); with a
    /// notice, that is at `notice_at` (0: none), the next key's channel at
    /// `cursor`.
    /// A run that follows an `ASK` redirect (`asks`) has an `ASKING` before
    /// each command after the first (the first one's was queued before the
    /// run), each answered before its command (`asking`: that answer is
    /// the next one). `ran`: some command of the run ran (answered
    /// other than by an error), so a redirect met later in it is not
    /// followed (see `run`).
    Run {
        form: Native,
        id: ScriptId,
        tag: u64,
        left: u16,
        per_key: u8,
        all: bool,
        key_ok: bool,
        tail_len: u32,
        notice_at: u32,
        cursor: u32,
        echo: bool,
        asks: bool,
        asking: bool,
        ran: bool,
    },
    /// The replica guard's `WAIT` (`WAITAOF` if `aof`) behind a command
    /// that writes (see `guard`): the command's vote waits for it, then
    /// for its `ECHO` if `echo`.
    Ack { tag: u64, echo: bool, aof: bool },
    /// `PUBSUB NUMSUB` behind a native release with a notice (see `notice`).
    Listeners { tag: u64 },
    /// The notices' `PUBLISH`es sent together (untagged; see `notice`):
    /// `left` answers still owed, one entry however many there are (a set's
    /// release publishes one per key), so that a master answering them
    /// looks no more behind than after one lock's release (see
    /// `round::held_back`). Their answers count for nothing.
    Notices { left: u32 },
    /// `ECHO tag` after a command (`follows`), or `PING tag`.
    Tag { tag: u64, follows: bool },
    /// `PUBLISH`: nobody waits for it, so it needs no tag check.
    Publish { tag: u64 },
    /// `CLUSTER SHARDS` (or `CLUSTER SLOTS` if `slots`): a cluster voter's
    /// topology, kept for the round to take (see `Conn::take_topology`).
    Topology { slots: bool, tls: bool },
    /// An identity probe (`INFO server`, `INFO replication`) read again
    /// ahead of a command on a connection that sat idle (see `identity`).
    Identity(IdentityProbe),
    /// `ASKING` before a command sent to a cluster node that an `ASK`
    /// redirect named: `+OK`, or an error (the command that follows then
    /// answers for itself, with a `MOVED` back).
    Asking,
}

impl Expect {
    /// The tag of the command this reply belongs to (none for the
    /// handshake).
    pub(super) fn tag(self) -> Option<u64> {
        match self {
            Expect::Handshake(_)
            | Expect::Notices { .. }
            | Expect::Asking
            | Expect::Topology { .. }
            | Expect::Identity(_) => None,
            Expect::Set { tag }
            | Expect::Pttl { tag }
            | Expect::Holder { tag }
            | Expect::Script { tag, .. }
            | Expect::Native { tag, .. }
            | Expect::Run { tag, .. }
            | Expect::Ack { tag, .. }
            | Expect::Listeners { tag }
            | Expect::Tag { tag, .. }
            | Expect::Publish { tag } => Some(tag),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Owed {
    pub(super) deadline: Instant,
    /// `None` for the handshake, which nobody waits for by itself.
    pub(super) purpose: Option<Purpose>,
    pub(super) expect: Expect,
    /// Re-sent after NOSCRIPT: it sits behind commands with later tags.
    pub(super) resent: bool,
}

/// What one reply told us, decided before the ledger acts on it (the reply
/// borrows the connection's input buffer, which is consumed first).
pub(super) enum Step {
    /// A handshake command succeeded, or a notice's `PUBLISH` answered.
    Done,
    /// SCRIPT LOAD was refused (an ACL may forbid SCRIPT but allow EVAL).
    NotLoaded(ScriptId),
    /// The ECHO probe answered (true) or was refused (false).
    Echo(bool),
    /// An identity probe answered: what it told of the server.
    Identity(Identity),
    /// A rights probe answered: what it found missing, if anything.
    Rights(Probe, Option<Lack>),
    /// The fence probe answered: whether round-1 grants count here.
    Fence(FenceCheck),
    /// A native command's probe answered.
    NativeProbe(Native, Known),
    /// The replica guard's `WAIT` answered.
    Acked(Acked),
    /// The handshake's `ROLE` said the server is a master.
    RoleChecked,
    /// An identity probe read again (see `identity`) answered: what it
    /// told, or `None` if the server is no voter of its kind now (a
    /// replica, say).
    Reread(Option<Identity>),
    /// Whether anyone listens for a native release's notice.
    Listeners(bool),
    /// A topology request answered: the topology, or the server's refusal.
    Topology(Result<Box<Topology>, ServerError>),
    /// One reply of a run (see [`Expect::Run`]): whether it did what the
    /// run asks of it, or the server's error.
    RunReply(Result<bool, ServerError>),
    /// The `ASKING` before a command of a run answered (see
    /// [`Expect::Run`]).
    RunAsked,
    /// A notice's `PUBLISH` answered (see [`Expect::Notices`]).
    Noticed,
    /// A command answered; its vote waits for the tag.
    Provisional(Vote),
    /// The holder label read after a `PTTL`, if there is one.
    Holder(Option<Label>),
    /// The tag came back (`None`), or an error came instead.
    Tagged(Option<ServerError>),
    /// A command answered, and nothing more is owed for it.
    Vote(Vote),
    /// A `PUBLISH` answered.
    Published(Vote),
}

/// A command's answer: provisional until its `ECHO` if one follows.
pub(super) fn provisional_if(echo: bool, vote: Vote) -> Step {
    if echo {
        Step::Provisional(vote)
    } else {
        Step::Vote(vote)
    }
}

/// Judges one reply of a run of `form`: whether it did what the run asks
/// (deleted; reset or set the TTL), or the server's error; or, if
/// `asking`, the answer to the `ASKING` before its next command.
pub(super) fn judge_run(form: Native, asking: bool, reply: &Reply<'_>) -> Result<Step, NodeError> {
    if asking {
        return judge_asking(reply).map(|_| Step::RunAsked);
    }
    let vote = match form {
        Native::SetIfEq => judge_set(reply)?,
        _ => judge_script(reply)?,
    };
    Ok(Step::RunReply(match vote {
        Vote::Failed(NodeError::Server(error)) => Err(error),
        vote => Ok(matches!(vote, Vote::Yes)),
    }))
}

/// Judges the answer to `ASKING`: `+OK`, or an error (the command that
/// follows then answers for itself, with a `MOVED` back).
pub(super) fn judge_asking(reply: &Reply<'_>) -> Result<Step, NodeError> {
    match reply {
        Reply::Simple(b"OK") | Reply::Error(_) => Ok(Step::Done),
        other => Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
            format!("{} to ASKING", crate::command::describe(other)),
        ))),
    }
}
