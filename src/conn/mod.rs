//! One connection to one master: the commands it has sent and the replies
//! it still owes us, over a [`Transport`].
//!
//! Commands may be pipelined: a new command can be written while replies to
//! earlier ones are still on their way, because Redis answers in order and
//! [`Conn`] knows exactly which command each reply belongs to. Every command
//! carries a tag its positive answer must echo (see `command`), so a reply
//! is never counted for a command it does not answer, whatever the timing.
//! A connection that sent something malformed, mistyped, unsolicited or
//! carrying the wrong tag, that failed its handshake, that failed in any
//! other way, or whose server stopped answering altogether (see
//! `fanout::lag_limit`), is discarded (closed, buffers dropped), never
//! resynchronised.
//!
//! Script commands whose server lost its script cache (`NOSCRIPT`) are
//! re-sent as `EVAL` here, whether or not anybody still waits for their
//! answer: a release that nobody awaits must still run.

use crate::command::rights::{refused_script, Lack, Probe};
mod buffer;
mod node;
#[cfg(feature = "tls")]
mod tls;
mod transport;

pub(crate) use node::{redact, Node};
#[cfg(feature = "tls")]
pub(crate) use tls::Options as TlsOptions;
pub(crate) use transport::Transport;

use crate::command::{
    check_tag, encode_script_head, is_noscript, judge_publish, judge_script, judge_set,
    judge_tagged_script, Capabilities, Encoded, Form, ScriptId, Vote,
};
use crate::error::{NodeError, Phase, ProtocolError, ServerError};
use crate::resp::{decode, encode_args, encode_array_header, Arg, Decoded, Reply, ServerErrorKind};
use node::HandshakeStep;

use std::collections::VecDeque;
use std::fmt;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Most replies a connection may owe before no new acquisition is sent on
/// it. A server that lags (busy, or starved of CPU) keeps receiving
/// commands, in order, so that each release follows its acquisition on the
/// same connection; this bound only caps what a frozen server makes us
/// hold. An acquisition owes one or two replies (`SET` and `ECHO`).
pub(crate) const MAX_OWED_ACQUIRE: usize = 2048;

/// The same bound for releases and extensions: twice as high, so that every
/// acquisition that was sent always has room for its release behind it.
pub(crate) const MAX_OWED: usize = 2 * MAX_OWED_ACQUIRE;

/// Room for owed replies allocated up front: enough for a server that falls
/// a hundred commands behind for a moment, as the slowest masters do when
/// the client returns at quorum and they lose the CPU for a few
/// milliseconds, so that steady-state locking never grows the queue. A
/// stalled server grows it (once) up to [`MAX_OWED`].
const OWED_CAPACITY: usize = 256;

/// The tag of the handshake's `ECHO` probe; commands use tags from 1.
const PROBE_TAG: u64 = 0;

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
enum Expect {
    /// A handshake command.
    Handshake(HandshakeStep),
    /// The `SET` of an acquisition: its vote is held until the `ECHO` that
    /// follows carries the tag back.
    Set { tag: u64 },
    /// A script call; its arguments (`args` of them, `tail_len` bytes) are
    /// kept in [`Conn::tails`] until it is answered, to re-send it as EVAL.
    /// A plain script's vote is held until its `ECHO` (if `echo`: a command
    /// nobody waits for is sent without); a tagged script's reply carries
    /// the tag itself.
    Script {
        id: ScriptId,
        tag: u64,
        args: u8,
        tail_len: u32,
        echo: bool,
    },
    /// `ECHO tag` after a command (`follows`), or `PING tag`.
    Tag { tag: u64, follows: bool },
    /// `PUBLISH`: nobody waits for it, so it needs no tag check.
    Publish { tag: u64 },
}

impl Expect {
    /// The tag of the command this reply belongs to (none for the
    /// handshake).
    fn tag(self) -> Option<u64> {
        match self {
            Expect::Handshake(_) => None,
            Expect::Set { tag }
            | Expect::Script { tag, .. }
            | Expect::Tag { tag, .. }
            | Expect::Publish { tag } => Some(tag),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Owed {
    deadline: Instant,
    /// `None` for the handshake, which nobody waits for by itself.
    purpose: Option<Purpose>,
    expect: Expect,
    /// Re-sent after NOSCRIPT: it sits behind commands with later tags.
    resent: bool,
}

/// What one reply told us, decided before the connection acts on it (the
/// reply borrows the input buffer, the action needs the whole connection).
enum Step {
    /// A handshake command succeeded.
    Done,
    /// SCRIPT LOAD was refused (an ACL may forbid SCRIPT but allow EVAL).
    NotLoaded(ScriptId),
    /// The ECHO probe answered (true) or was refused (false).
    Echo(bool),
    /// A rights probe answered: what it found missing, if anything.
    Rights(Probe, Option<Lack>),
    /// A command answered; its vote waits for the tag.
    Provisional(Vote),
    /// The tag came back (`None`), or an error came instead.
    Tagged(Option<ServerError>),
    /// A command answered, and nothing more is owed for it.
    Vote(Vote),
    /// A `PUBLISH` answered.
    Published(Vote),
}

/// A command's answer while its tag is awaited.
#[derive(Debug)]
enum Provisional {
    Vote(Vote),
    /// The command was re-sent after NOSCRIPT: the re-sent copy votes.
    Resent,
}

/// A connection to one master (or no connection yet).
pub(crate) struct Conn {
    transport: Transport,
    owed: VecDeque<Owed>,
    /// How many entries of `owed` were re-sent (see [`Conn::settled_tag`]).
    resent_owed: usize,
    caps: Capabilities,
    /// The answer of a command whose `ECHO` has not been read yet.
    provisional: Option<Provisional>,
    /// The arguments of the owed script calls, in order (see
    /// [`Expect::Script`]); `tails[tails_start..]` is live.
    tails: Vec<u8>,
    tails_start: usize,
    /// Whether any reply was decoded on this connection: garbage before the
    /// first one means the peer is not a Redis server at all.
    answered: bool,
    /// The tag of the last command sent.
    last_tag: u64,
}

impl fmt::Debug for Conn {
    // Hand-written: `tails` holds lock values, which let anyone release a
    // lock, and the transport may hold the AUTH command.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("transport", &self.transport)
            .field("owed", &self.owed.len())
            .field("caps", &self.caps)
            .field("settled_tag", &self.settled_tag())
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub(crate) fn new() -> Conn {
        Conn {
            transport: Transport::new(),
            owed: VecDeque::with_capacity(OWED_CAPACITY),
            resent_owed: 0,
            caps: Capabilities::before_handshake(),
            provisional: None,
            tails: Vec::with_capacity(1024),
            tails_start: 0,
            answered: false,
            last_tag: 0,
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.transport.is_open()
    }

    /// Whether the connection is open and its connect has finished.
    pub(crate) fn is_established(&self) -> bool {
        self.transport.is_established()
    }

    /// Whether the connection is open and owes nothing: nothing should
    /// arrive on it until it is sent a command.
    pub(crate) fn is_idle(&self) -> bool {
        self.is_established() && self.owed.is_empty()
    }

    /// What the connection can do (which form each command takes on it).
    pub(crate) fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// How many replies the connection owes.
    pub(crate) fn owed_len(&self) -> usize {
        self.owed.len()
    }

    /// Every command sent with a tag up to this one is settled: answered,
    /// or lost with a discarded connection.
    pub(crate) fn settled_tag(&self) -> u64 {
        // Tags are sent in increasing order and answered in order, except
        // for re-sent commands, which move behind later ones.
        let oldest = if self.resent_owed == 0 {
            self.owed.iter().find_map(|owed| owed.expect.tag())
        } else {
            self.owed.iter().filter_map(|owed| owed.expect.tag()).min()
        };
        oldest.map_or(self.last_tag, |tag| tag - 1)
    }

    /// Closes the connection and forgets everything in flight. What was
    /// sent and not answered is settled as far as ordering goes: the server
    /// either ran it already or drops it with the connection (it may still
    /// run what it had received; the README's known limits say so).
    pub(crate) fn discard(&mut self) {
        self.transport.close();
        self.owed.clear();
        self.resent_owed = 0;
        self.provisional = None;
        self.tails.clear();
        self.tails_start = 0;
        self.caps = Capabilities::before_handshake();
        self.answered = false;
    }

    /// Starts a non-blocking connect to `node` and queues its handshake, to
    /// be sent as soon as the connection is up and answered by `deadline`.
    pub(crate) fn connect(&mut self, node: &Node, deadline: Instant) -> Result<(), NodeError> {
        self.discard();
        self.transport.connect(node)?;
        self.transport
            .output()
            .extend_from_slice(node.handshake_bytes());
        for step in node.handshake_steps() {
            self.owed.push_back(Owed {
                deadline,
                purpose: None,
                expect: Expect::Handshake(*step),
                resent: false,
            });
        }
        Ok(())
    }

    /// Queues `command`, whose tag is unique on this connection and larger
    /// than any sent before, whose answer goes to `purpose` by `deadline`,
    /// and writes as much as the socket takes now. A script goes by body if `by_body` (for a
    /// command whose answer nobody will wait for: it cannot be refused with
    /// NOSCRIPT). Refused if `limit` replies are already owed.
    pub(crate) fn send(
        &mut self,
        command: &Encoded,
        purpose: Purpose,
        deadline: Instant,
        limit: usize,
        unawaited: bool,
    ) -> Result<(), NodeError> {
        self.enqueue(command, purpose, deadline, limit, unawaited)?;
        self.transport.flush()
    }

    /// Like [`Conn::send`], without writing: several commands queued this
    /// way go out in one write, with [`Conn::flush`].
    pub(crate) fn enqueue(
        &mut self,
        command: &Encoded,
        purpose: Purpose,
        deadline: Instant,
        limit: usize,
        unawaited: bool,
    ) -> Result<(), NodeError> {
        if self.owed.len() + 2 > limit {
            return Err(NodeError::Backlogged);
        }
        if command.is_acquire() {
            // A key set here could never be released.
            if let Some(refusal) = self.caps.releasing.refusal() {
                return Err(refusal);
            }
        }
        let tag = command.tag();
        let owed = |expect| Owed {
            deadline,
            purpose: Some(purpose),
            expect,
            resent: false,
        };
        match command.form(self.caps) {
            Form::SetThenEcho => {
                let out = self.transport.output();
                out.extend_from_slice(command.plain());
                out.extend_from_slice(command.echo());
                self.owed.push_back(owed(Expect::Set { tag }));
                self.owed
                    .push_back(owed(Expect::Tag { tag, follows: true }));
            }
            Form::Publish => {
                self.transport.output().extend_from_slice(command.plain());
                self.owed.push_back(owed(Expect::Publish { tag }));
            }
            Form::Ping => {
                self.transport.output().extend_from_slice(command.plain());
                self.owed.push_back(owed(Expect::Tag {
                    tag,
                    follows: false,
                }));
            }
            Form::ScriptThenEcho { id, by_digest } | Form::TaggedScript { id, by_digest } => {
                let echo = !id.is_tagged() && !unawaited;
                let (tail, args) = command.script_args(id);
                self.tails.extend_from_slice(tail);
                let out = self.transport.output();
                command.encode_script_call(id, by_digest && !unawaited, out);
                if echo {
                    out.extend_from_slice(command.echo());
                }
                // Sent by body, the script is in the server's cache after.
                self.caps.set_cached(id, true);
                self.owed.push_back(owed(Expect::Script {
                    id,
                    tag,
                    args: args as u8,
                    tail_len: tail.len() as u32,
                    echo,
                }));
                if echo {
                    self.owed
                        .push_back(owed(Expect::Tag { tag, follows: true }));
                }
            }
        }
        self.last_tag = tag;
        Ok(())
    }

    /// Writes what is queued, as far as the socket takes it now.
    pub(crate) fn flush(&mut self) -> Result<(), NodeError> {
        self.transport.flush()
    }

    /// The socket became writable: finish a connect, then flush.
    pub(crate) fn on_writable(&mut self) -> Result<(), NodeError> {
        self.transport.on_writable()
    }

    /// The socket became readable: take in what has arrived (one read; poll
    /// reports the socket again if more is waiting).
    pub(crate) fn on_readable(&mut self) -> Result<(), NodeError> {
        self.read_once().map(|_| ())
    }

    /// One read, see [`Transport::read_once`]. A plaintext connection
    /// closed before any answer is more likely a TLS port than a Redis
    /// server: the error says so.
    fn read_once(&mut self) -> Result<bool, NodeError> {
        self.transport.read_once().map_err(|e| {
            if e == NodeError::Closed && !self.answered && !self.transport.is_secure() {
                NodeError::Protocol(ProtocolError::ClosedBeforeAnswer)
            } else {
                e
            }
        })
    }

    /// An idle connection became readable: the server closed it (an idle
    /// timeout, a restart), or sent something nobody asked for. Either way
    /// it must not carry the next command: the error says which.
    pub(crate) fn probe_idle(&mut self) -> Option<NodeError> {
        match self.read_once() {
            Ok(true) => Some(NodeError::Protocol(ProtocolError::Unsolicited)),
            Ok(false) => None, // a spurious wake-up
            Err(e) => Some(e),
        }
    }

    /// Reads and checks, without waiting, the replies to earlier commands
    /// that have arrived but were not read: after a round that returned at
    /// quorum and an idle spell, they sit in the socket past their deadline
    /// although the server answered in time.
    pub(crate) fn catch_up(&mut self) -> Result<(), NodeError> {
        // Each read either takes bytes or ends the loop; the replies it
        // completes are consumed so the buffer never fills.
        while !self.owed.is_empty() && self.read_once()? {
            self.take_replies(None, &mut |_, _| {})?;
        }
        Ok(())
    }

    /// Consumes every complete reply in the input, in order, checking each
    /// against the command it answers. For each command of round `round`
    /// that this completes, calls `deliver(op, vote)`. Answers to other
    /// rounds are checked and dropped; NOSCRIPT answers are re-sent as EVAL.
    /// An error means the connection must be discarded.
    pub(crate) fn take_replies(
        &mut self,
        round: Option<u64>,
        deliver: &mut impl FnMut(u16, Vote),
    ) -> Result<(), NodeError> {
        loop {
            let (judged, used) = match decode(self.transport.unread()) {
                Ok(Decoded::Partial) => return Ok(()),
                Err(_) if !self.answered && looks_like_tls(self.transport.unread()) => {
                    return Err(NodeError::Protocol(ProtocolError::LooksLikeTls))
                }
                Err(e) if !self.answered => {
                    return Err(NodeError::Protocol(ProtocolError::NotRedis(e)))
                }
                Err(e) => return Err(NodeError::Protocol(ProtocolError::Malformed(e))),
                Ok(Decoded::Complete(reply, used)) => {
                    let owed = self
                        .owed
                        .front()
                        .ok_or(NodeError::Protocol(ProtocolError::Unsolicited))?;
                    (judge(owed.expect, &reply), used)
                }
            };
            // Consumed whatever the verdict: a reply is judged once.
            self.answered = true;
            self.transport.consume(used);
            let owed = self.owed.pop_front().expect("judged an owed reply");
            self.apply(owed, judged?, round, deliver)?;
            // Bytes beyond the last owed reply are unsolicited; left in
            // place they would be read as the answer to the next command
            // (and fail its tag check then; better to know now).
            if self.owed.is_empty() && !self.transport.unread().is_empty() {
                return Err(NodeError::Protocol(ProtocolError::Unsolicited));
            }
        }
    }

    /// Acts on one judged reply to `owed`.
    fn apply(
        &mut self,
        owed: Owed,
        step: Step,
        round: Option<u64>,
        deliver: &mut impl FnMut(u16, Vote),
    ) -> Result<(), NodeError> {
        if owed.resent {
            self.resent_owed -= 1;
        }
        let vote = match step {
            Step::Done => return Ok(()),
            Step::NotLoaded(id) => {
                self.caps.set_cached(id, false);
                return Ok(());
            }
            Step::Echo(works) => {
                self.caps.echo = works;
                return Ok(());
            }
            Step::Rights(probe, lack) => {
                self.caps.releasing = self.caps.releasing.probed(probe, lack);
                return match self.caps.releasing.refusal() {
                    Some(refusal) if probe.is_last() => Err(refusal),
                    _ => Ok(()),
                };
            }
            Step::Provisional(vote) => {
                if let Expect::Script { tail_len, .. } = owed.expect {
                    if let Some(refusal) = script_refusal(&vote) {
                        return Err(refusal);
                    }
                    if is_noscript(&vote) {
                        self.resend_as_eval(owed)?;
                        self.provisional = Some(Provisional::Resent);
                        return Ok(());
                    }
                    self.drop_tail(tail_len as usize);
                }
                self.provisional = Some(Provisional::Vote(vote));
                return Ok(());
            }
            Step::Published(vote) => vote,
            Step::Vote(vote) => {
                let Expect::Script { tail_len, .. } = owed.expect else {
                    unreachable!("a final vote comes from a script reply")
                };
                if let Some(refusal) = script_refusal(&vote) {
                    return Err(refusal);
                }
                if is_noscript(&vote) {
                    return self.resend_as_eval(owed);
                }
                self.drop_tail(tail_len as usize);
                vote
            }
            Step::Tagged(error) => {
                let follows = matches!(owed.expect, Expect::Tag { follows: true, .. });
                match (self.provisional.take(), follows) {
                    // The command was re-sent: its copy will vote.
                    (Some(Provisional::Resent), true) => return Ok(()),
                    (Some(Provisional::Vote(vote)), true) => match error {
                        None => vote,
                        Some(error) => {
                            // ECHO answered the handshake's probe but is
                            // refused now (an ACL changed): use the tagged
                            // scripts from now on.
                            if refuses_command(&error) {
                                self.caps.echo = false;
                            }
                            Vote::Failed(NodeError::Server(error))
                        }
                    },
                    (None, false) => match error {
                        None => Vote::Yes,
                        Some(error) => Vote::Failed(NodeError::Server(error)),
                    },
                    _ => {
                        return Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
                            "a tag without its command".into(),
                        )))
                    }
                }
            }
        };
        match owed.purpose {
            Some(purpose) if Some(purpose.round) == round => deliver(purpose.op, vote),
            _ => {}
        }
        Ok(())
    }

    /// The server answered NOSCRIPT (its script cache was flushed): sends
    /// the same call as EVAL (and, for a plain script, its `ECHO` again),
    /// behind whatever was sent since, for the same purpose. EVAL also puts
    /// the script back in the cache, so later calls go by digest again.
    fn resend_as_eval(&mut self, owed: Owed) -> Result<(), NodeError> {
        let Expect::Script {
            id,
            tag,
            args,
            tail_len,
            echo,
        } = owed.expect
        else {
            unreachable!("only script calls are re-sent")
        };
        let (start, len) = (self.tails_start, tail_len as usize);
        let out = self.transport.output();
        encode_script_head(id, false, usize::from(args), out);
        out.extend_from_slice(&self.tails[start..start + len]);
        if echo {
            encode_echo(tag, out);
        }
        // The call moves to the back of the queue: so do its arguments.
        self.tails.extend_from_within(start..start + len);
        self.drop_tail(len);
        let resent = Owed {
            resent: true,
            ..owed
        };
        self.owed.push_back(resent);
        self.resent_owed += 1;
        if echo {
            self.owed.push_back(Owed {
                expect: Expect::Tag { tag, follows: true },
                ..resent
            });
            self.resent_owed += 1;
        }
        self.transport.flush()
    }

    /// Forgets the arguments of the oldest owed script call.
    fn drop_tail(&mut self, len: usize) {
        self.tails_start += len;
        if self.tails_start == self.tails.len() {
            self.tails.clear();
            self.tails_start = 0;
        } else if self.tails_start > self.tails.len() / 2 {
            // Never empty for long under load: compact instead of growing.
            self.tails.drain(..self.tails_start);
            self.tails_start = 0;
        }
    }

    /// Whether the connection is beyond saving at `now`: a connect that did
    /// not finish by its deadline, or a server whose oldest owed reply is
    /// more than `lag_limit` overdue (frozen, or gone without a word).
    pub(crate) fn is_dead(&self, now: Instant, lag_limit: Duration) -> bool {
        let Some(oldest) = self.owed.front() else {
            return false;
        };
        if self.transport.is_connecting() {
            oldest.deadline <= now
        } else {
            oldest
                .deadline
                .checked_add(lag_limit)
                .is_some_and(|limit| limit <= now)
        }
    }

    /// Whether an established connection's oldest owed reply is past its
    /// deadline at `now`: the server missed it (it lags, or is stalled).
    pub(crate) fn is_overdue(&self, now: Instant) -> bool {
        self.is_established()
            && self
                .owed
                .front()
                .is_some_and(|oldest| oldest.deadline <= now)
    }

    /// The latest deadline of the replies still owed (for settling).
    pub(crate) fn last_deadline(&self) -> Option<Instant> {
        self.owed.back().map(|owed| owed.deadline)
    }

    /// The phase the connection is in, for a timeout error.
    pub(crate) fn phase(&self) -> Phase {
        if let Some(opening) = self.transport.opening_phase() {
            opening
        } else if matches!(
            self.owed.front(),
            Some(Owed {
                expect: Expect::Handshake(_),
                ..
            })
        ) {
            Phase::Handshake
        } else {
            Phase::Reply
        }
    }

    /// Whether the connection's opening (connect, TLS handshake) is still
    /// under way.
    pub(crate) fn is_opening(&self) -> bool {
        self.transport.is_connecting()
    }

    /// What to poll this connection for: (read, write).
    pub(crate) fn interest(&self) -> (bool, bool) {
        self.transport.interest(!self.owed.is_empty())
    }

    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        self.transport.raw_fd()
    }
}

/// Judges one reply against what it must be.
fn judge(expect: Expect, reply: &Reply<'_>) -> Result<Step, NodeError> {
    match expect {
        Expect::Handshake(step) => judge_handshake(step, reply),
        Expect::Set { .. } => judge_set(reply).map(Step::Provisional),
        Expect::Script { id, tag, .. } if id.is_tagged() => {
            judge_tagged_script(reply, tag).map(Step::Vote)
        }
        Expect::Script { echo: true, .. } => judge_script(reply).map(Step::Provisional),
        Expect::Script { echo: false, .. } => judge_script(reply).map(Step::Vote),
        Expect::Tag { tag, .. } => check_tag(reply, tag).map(Step::Tagged),
        Expect::Publish { .. } => judge_publish(reply).map(Step::Published),
    }
}

/// Whether bytes that are not RESP look like the start of a TLS record
/// (an alert or a handshake message, TLS 1.0 to 1.3): a TLS port behind a
/// `redis://` URL.
fn looks_like_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, 0x00..=0x04, ..])
}

/// Appends `ECHO tag`.
fn encode_echo(tag: u64, out: &mut Vec<u8>) {
    encode_array_header(out, 2);
    encode_args(out, &[Arg::Bytes(b"ECHO"), Arg::Uint(tag)]);
}

fn judge_handshake(step: HandshakeStep, reply: &Reply<'_>) -> Result<Step, NodeError> {
    match (step, reply) {
        (HandshakeStep::Auth | HandshakeStep::Select, Reply::Simple(b"OK")) => Ok(Step::Done),
        // Servers echo a refused command's arguments in the message, and
        // AUTH's arguments are the credentials: keep only what is safe.
        (HandshakeStep::Auth, Reply::Error(line)) => {
            Err(NodeError::Handshake(ServerError::from_line_redacted(line)))
        }
        (HandshakeStep::Select, Reply::Error(line)) => {
            Err(NodeError::Handshake(ServerError::from_line(line)))
        }
        (HandshakeStep::Load(id), Reply::Bulk(digest)) if *digest == id.script().digest => {
            Ok(Step::Done)
        }
        // A script that cannot be loaded (an ACL may forbid SCRIPT) is not
        // fatal: it goes by body (EVAL) the first time, which caches it.
        (HandshakeStep::Load(id), Reply::Error(_)) => Ok(Step::NotLoaded(id)),
        (HandshakeStep::Probe, Reply::Bulk(b"0")) => Ok(Step::Echo(true)),
        (HandshakeStep::Probe, Reply::Error(_)) => Ok(Step::Echo(false)),
        (HandshakeStep::Rights(probe), reply) => Ok(Step::Rights(probe, probe.judge(reply))),
        (_, other) => Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
            format!("{} to a handshake command", crate::command::describe(other)),
        ))),
    }
}

/// If a script's answer shows that scripts cannot run on the connection any
/// more (see `rights`): the error that ends it, so that no acquisition goes
/// out on it again.
fn script_refusal(vote: &Vote) -> Option<NodeError> {
    match vote {
        Vote::Failed(NodeError::Server(error)) => refused_script(error),
        _ => None,
    }
}

/// Whether an error means the server will never run this command for us
/// (an ACL forbids it, or it is renamed or disabled).
fn refuses_command(error: &ServerError) -> bool {
    error.kind() == ServerErrorKind::NoPerm
        || (error.kind() == ServerErrorKind::Err && error.message().starts_with("unknown command"))
}

// The probe's tag must be what the handshake sends.
const _: () = assert!(PROBE_TAG == node::PROBE_TAG);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn encoded(command: Command<'_>, tag: u64) -> Encoded {
        let mut encoded = Encoded::default();
        encoded.reset(&command, tag);
        encoded.prepare(&command, Capabilities::before_handshake());
        let echo = Capabilities {
            echo: true,
            ..Capabilities::before_handshake()
        };
        encoded.prepare(&command, echo);
        encoded
    }

    fn node(url: &str) -> Node {
        Node::from_url(url).expect("valid URL")
    }

    /// A connection to a listener we play the server on, with the
    /// handshake already answered (scripts loaded, ECHO works).
    fn connected() -> (Conn, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let node = node(&format!("redis://{}", listener.local_addr().unwrap()));
        let mut conn = Conn::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        conn.connect(&node, deadline).expect("connect started");
        let (mut server, _) = listener.accept().expect("accept");
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        wait_writable(&mut conn);
        let mut replies = Vec::new();
        for step in node.handshake_steps() {
            match step {
                HandshakeStep::Load(id) => {
                    replies.extend_from_slice(b"$40\r\n");
                    replies.extend_from_slice(id.script().digest);
                    replies.extend_from_slice(b"\r\n");
                }
                HandshakeStep::Probe => replies.extend_from_slice(b"$1\r\n0\r\n"),
                HandshakeStep::Rights(_) => replies.extend_from_slice(
                    b"-ERR Number of keys can't be greater than number of args\r\n",
                ),
                _ => replies.extend_from_slice(b"+OK\r\n"),
            }
        }
        server.write_all(&replies).unwrap();
        read_all(&mut conn, 0, &mut |_, _| {});
        received(&mut server); // the handshake
        assert_eq!(conn.owed_len(), 0);
        assert!(conn.caps.echo && conn.caps.is_cached(ScriptId::Release));
        (conn, server)
    }

    fn wait_writable(conn: &mut Conn) {
        let limit = Instant::now() + Duration::from_secs(5);
        while conn.transport.is_connecting() {
            assert!(Instant::now() < limit);
            let _ = conn.on_writable();
            std::thread::sleep(Duration::from_millis(1));
        }
        conn.on_writable().unwrap();
    }

    /// Reads until nothing more is owed for `round` or 5 s pass.
    fn read_all(conn: &mut Conn, round: u64, deliver: &mut impl FnMut(u16, Vote)) {
        let limit = Instant::now() + Duration::from_secs(5);
        while conn.owed_len() > 0 {
            assert!(Instant::now() < limit, "still owed: {conn:?}");
            conn.transport.read_once().expect("read");
            conn.take_replies(Some(round), deliver)
                .expect("replies fit");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn received(server: &mut TcpStream) -> Vec<u8> {
        std::thread::sleep(Duration::from_millis(20));
        server.set_nonblocking(true).unwrap();
        let mut buf = vec![0; 65536];
        let n = server.read(&mut buf).unwrap_or(0);
        server.set_nonblocking(false).unwrap();
        buf.truncate(n);
        buf
    }

    const DEADLINE: Duration = Duration::from_secs(5);
    const ROUND: Purpose = Purpose { round: 1, op: 0 };

    #[test]
    fn debug_output_never_shows_the_handshake_or_values() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "redis://alice:hunter2@{}",
            listener.local_addr().expect("addr")
        );
        let mut conn = Conn::new();
        let deadline = Instant::now() + DEADLINE;
        conn.connect(&node(&url), deadline)
            .expect("connect started");
        let release = Command::Release {
            resource: b"r",
            value: b"secret-value",
            notify: None,
        };
        let _ = conn.send(&encoded(release, 1), ROUND, deadline, MAX_OWED, false);
        let shown = format!("{conn:?}");
        for secret in ["hunter2", "alice", "secret-value"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn an_acquisition_counts_only_once_its_tag_is_back() {
        let (mut conn, mut server) = connected();
        let acquire = Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1000,
        };
        let deadline = Instant::now() + DEADLINE;
        conn.send(&encoded(acquire, 7), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        assert!(received(&mut server).ends_with(b"$4\r\nECHO\r\n$1\r\n7\r\n"));
        // The SET's answer alone is not a vote.
        server.write_all(b"+OK\r\n").unwrap();
        let mut votes = Vec::new();
        std::thread::sleep(Duration::from_millis(20));
        conn.transport.read_once().unwrap();
        conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
            .unwrap();
        assert!(votes.is_empty());
        server.write_all(b"$1\r\n7\r\n").unwrap();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
        assert_eq!(conn.settled_tag(), 7);
    }

    #[test]
    fn a_surplus_reply_before_the_answer_fails_the_tag_check() {
        let (mut conn, mut server) = connected();
        let acquire = Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1000,
        };
        conn.send(
            &encoded(acquire, 8),
            ROUND,
            Instant::now() + DEADLINE,
            MAX_OWED,
            false,
        )
        .unwrap();
        // A surplus "+OK" arrives first, then the real "held" and its tag.
        server.write_all(b"+OK\r\n$-1\r\n$1\r\n8\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.transport.read_once().unwrap();
        let mut votes = Vec::new();
        let result = conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)));
        assert!(
            matches!(
                result,
                Err(NodeError::Protocol(ProtocolError::UnexpectedReply(_)))
            ),
            "{result:?}"
        );
        assert!(votes.is_empty(), "{votes:?}");
    }

    #[test]
    fn noscript_is_answered_with_eval_even_when_nobody_waits() {
        let (mut conn, mut server) = connected();
        let release = Command::Release {
            resource: b"res",
            value: b"val",
            notify: None,
        };
        // Round 1 sends the release; nobody waits for round 1 any more.
        conn.send(
            &encoded(release, 3),
            ROUND,
            Instant::now() + DEADLINE,
            MAX_OWED,
            false,
        )
        .unwrap();
        let first = received(&mut server);
        assert!(
            first.starts_with(b"*5\r\n$7\r\nEVALSHA\r\n"),
            "{}",
            first.escape_ascii()
        );
        assert!(first.ends_with(b"*2\r\n$4\r\nECHO\r\n$1\r\n3\r\n"));
        server
            .write_all(b"-NOSCRIPT No matching script.\r\n$1\r\n3\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.catch_up().unwrap();
        let resent = received(&mut server);
        let expected = {
            let mut out = Vec::new();
            let release = encoded(release, 3);
            release.encode_script_call(ScriptId::Release, false, &mut out);
            out.extend_from_slice(release.echo());
            out
        };
        assert_eq!(resent, expected, "{}", resent.escape_ascii());
        assert_eq!(conn.owed_len(), 2);
        assert_eq!(conn.settled_tag(), 2, "not settled until EVAL answers");
        server.write_all(b":1\r\n$1\r\n3\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.catch_up().unwrap();
        assert_eq!((conn.owed_len(), conn.settled_tag()), (0, 3));
    }

    #[test]
    fn a_resent_command_keeps_later_ones_from_counting_as_settled() {
        // A release re-sent after NOSCRIPT goes behind a later command:
        // that command's answer must not make the release count as settled.
        let (mut conn, mut server) = connected();
        let release = Command::Release {
            resource: b"res",
            value: b"val",
            notify: None,
        };
        let acquire = Command::Acquire {
            resource: b"other",
            value: b"val",
            ttl_ms: 1000,
        };
        let deadline = Instant::now() + DEADLINE;
        conn.send(&encoded(release, 3), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        conn.send(&encoded(acquire, 4), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        received(&mut server);
        // NOSCRIPT and its echo, then the acquisition's answer and echo.
        server
            .write_all(b"-NOSCRIPT x\r\n$1\r\n3\r\n+OK\r\n$1\r\n4\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.catch_up().unwrap();
        assert_eq!(
            conn.settled_tag(),
            2,
            "the re-sent release (3) is still owed"
        );
        server.write_all(b":1\r\n$1\r\n3\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.catch_up().unwrap();
        assert_eq!(conn.settled_tag(), 4);
    }

    #[test]
    fn tls_records_are_told_from_resp() {
        // An alert and a handshake record, TLS 1.0 to 1.3 headers.
        assert!(looks_like_tls(&[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]));
        assert!(looks_like_tls(&[0x16, 0x03, 0x03, 0x00]));
        for resp in [
            &b"+OK\r\n"[..],
            b"-ERR x\r\n",
            b"$1\r\n",
            b"\x16",
            b"\x16\x03",
        ] {
            assert!(!looks_like_tls(resp), "{}", resp.escape_ascii());
        }
    }

    #[test]
    fn a_failed_handshake_ends_the_connection_without_echoing_the_password() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("redis://:hunter2@{}", listener.local_addr().unwrap());
        let mut conn = Conn::new();
        conn.connect(&node(&url), Instant::now() + DEADLINE)
            .unwrap();
        let (mut server, _) = listener.accept().unwrap();
        wait_writable(&mut conn);
        server
            .write_all(b"-ERR unknown command 'AUTH', with args beginning with: 'hunter2' \r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.transport.read_once().unwrap();
        let err = conn
            .take_replies(None, &mut |_, _| {})
            .expect_err("handshake refused");
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, NodeError::Handshake(_)), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(err.breaks_connection());
        // The refusal was consumed: nothing is judged twice.
        assert!(conn.transport.unread().is_empty());
    }
}
