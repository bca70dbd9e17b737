//! What a connection is owed: the replies to the commands it sent, in
//! order, each judged against the command it answers (its shape, then its
//! tag), and what the answers teach about the connection (its
//! [`Capabilities`]). No I/O here: the connection (see `conn`) reads the
//! bytes, decodes a reply, and hands it to its [`Ledger`].
//!
//! Script commands whose server lost its script cache (`NOSCRIPT`) are
//! re-sent as `EVAL`, and native forms the server refused in their next
//! form (see `resend`), whether or not anybody still waits for their
//! answer: a release that nobody awaits must still run.

use super::cluster;
pub(crate) use super::expect::Purpose;
pub(super) use super::expect::{provisional_if, Expect, Owed, Step};
use super::node::HandshakeStep;
use crate::cluster::Topology;
use crate::command::fence::judge_reading;
use crate::command::identity::Identity;
use crate::command::{
    check_tag, judge_holder, judge_listeners, judge_pttl, judge_publish, judge_script, judge_set,
    judge_tagged_script, Capabilities, Encoded, Form, Native, ReplicaAck, Vote,
};
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{Reply, ServerErrorKind};
use std::collections::VecDeque;
use std::time::Instant;

/// Room for owed replies allocated up front: enough for a server that falls
/// a hundred commands behind for a moment, as the slowest masters do when
/// the client returns at quorum and they lose the CPU for a few
/// milliseconds, so that steady-state locking never grows the queue. A
/// stalled server grows it (once) up to [`MAX_OWED`](super::MAX_OWED).
const OWED_CAPACITY: usize = 256;

/// Room for the arguments of owed script calls allocated up front (see
/// [`Ledger::tails`]): a fenced acquisition's are about 100 bytes (two
/// keys, the value, the TTL, the tag), so this holds some forty of them,
/// as many as a master that falls behind for a moment owes, so that
/// steady-state locking never grows it (tests/allocations.rs). A release's
/// are about 60 bytes. A holder label adds up to 65 bytes to each (with
/// the longest, some twenty-five fenced acquisitions fit).
const TAILS_CAPACITY: usize = 4096;

/// The tag of the handshake's `ECHO` probe; commands use tags from 1.
const PROBE_TAG: u64 = 0;

/// A command's answer while its tag is awaited.
#[derive(Debug)]
pub(super) enum Provisional {
    Vote(Vote),
    /// The command was re-sent after NOSCRIPT: the re-sent copy votes.
    Resent,
}

/// The replies a connection is owed, in order, and what its replies have
/// taught about it.
pub(super) struct Ledger {
    pub(super) owed: VecDeque<Owed>,
    /// How many entries of `owed` were re-sent (see [`Ledger::settled_tag`]).
    pub(super) resent_owed: usize,
    pub(super) caps: Capabilities,
    /// The answer of a command whose `ECHO` has not been read yet.
    pub(super) provisional: Option<Provisional>,
    /// The arguments of the owed script calls, in order (see
    /// [`Expect::Script`]); `tails[tails_start..]` is live.
    pub(super) tails: Vec<u8>,
    pub(super) tails_start: usize,
    /// Whether any reply was decoded on this connection: garbage before the
    /// first one means the peer is not a Redis server at all.
    pub(super) answered: bool,
    /// The tag of the last command sent.
    last_tag: u64,
    /// Notices of native releases that deleted (see `notice`).
    pub(super) notices: super::pending::Notices,
    /// Whether the forms a release and an extension take here may have
    /// changed since the connection was last asked (see
    /// `Conn::take_new_forms`).
    pub(super) forms_changed: bool,
    /// The last topology a `CLUSTER SHARDS`/`SLOTS` brought, or its
    /// refusal, until the round takes it.
    pub(super) topology: Option<Result<Box<Topology>, ServerError>>,
    /// Whether the fence probe answered since the connection was last
    /// asked (see `Conn::take_fence_probe`).
    pub(super) fence_probed: bool,
    /// The replica guard (see `guard`), the node's setting.
    pub(super) guard: Option<ReplicaAck>,
    /// Why the guard's command will not run here, once the server said
    /// so: no guarded command goes out on this connection again.
    pub(super) guard_refused: Option<NodeError>,
    /// The server answered as a master that is one no more (`READONLY`,
    /// `MASTERDOWN`, `LOADING`), or its identity changed: the connection
    /// is to be opened again, through its set-up, before its next command
    /// (see `Conn::needs_recheck`).
    pub(super) recheck: bool,
    /// What the server told of itself (`run_id`, replication ids) in the
    /// handshake, kept for the connection's life (see `identity`).
    pub(super) identity: Identity,
    /// Whether the round has yet to take the identity (see
    /// `Conn::take_identity`).
    pub(super) identity_untaken: bool,
    /// A later read found another identity: no grant counts here until
    /// the connection is set up again.
    pub(super) identity_changed: bool,
    /// The first error a run (see `run`) met, given as its vote at its end.
    pub(super) run_error: Option<ServerError>,
    /// An `ASKING` is queued for the next command (a run's: for each, `run`).
    pub(super) asking: bool,
}

impl Ledger {
    pub(super) fn new() -> Ledger {
        Ledger {
            owed: VecDeque::with_capacity(OWED_CAPACITY),
            resent_owed: 0,
            caps: Capabilities::before_handshake(true, true, false),
            provisional: None,
            tails: Vec::with_capacity(TAILS_CAPACITY),
            tails_start: 0,
            answered: false,
            last_tag: 0,
            notices: super::pending::Notices::new(),
            forms_changed: false,
            topology: None,
            fence_probed: false,
            guard: None,
            guard_refused: None,
            recheck: false,
            identity: Identity::default(),
            identity_untaken: false,
            identity_changed: false,
            run_error: None,
            asking: false,
        }
    }

    /// How many replies are owed.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.owed.len()
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }

    /// What the next reply must be, if one is owed.
    #[inline]
    pub(super) fn next(&self) -> Option<Expect> {
        self.owed.front().map(|owed| owed.expect)
    }

    /// When the oldest owed reply is due.
    #[inline]
    pub(super) fn oldest_deadline(&self) -> Option<Instant> {
        self.owed.front().map(|owed| owed.deadline)
    }

    /// Whether the oldest owed reply is a cluster's topology (decoded under
    /// looser bounds: see `Conn::take_replies`).
    #[inline]
    pub(super) fn awaits_topology(&self) -> bool {
        matches!(self.next(), Some(Expect::Topology { .. }))
    }

    /// Appends `bytes`, a command without a tag whose answer nobody waits
    /// for by itself (`ASKING`, a topology request: see `cluster`), to
    /// `out`, owed as `expect` by `deadline`. Refused if `limit` replies
    /// are already owed.
    pub(super) fn record_untagged(
        &mut self,
        bytes: &[u8],
        expect: Expect,
        deadline: Instant,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), NodeError> {
        if self.owed.len() + 3 > limit {
            return Err(NodeError::Backlogged);
        }
        out.extend_from_slice(bytes);
        self.owed.push_back(Owed {
            deadline,
            purpose: None,
            expect,
            resent: false,
        });
        Ok(())
    }

    /// Whether the oldest owed reply answers a handshake command.
    #[inline]
    pub(super) fn awaits_handshake(&self) -> bool {
        matches!(self.next(), Some(Expect::Handshake(_)))
    }

    /// Every command sent with a tag up to this one is settled: answered,
    /// or lost with a discarded connection.
    #[inline]
    pub(super) fn settled_tag(&self) -> u64 {
        // Tags are sent in increasing order and answered in order, except
        // for re-sent commands, which move behind later ones.
        let oldest = if self.resent_owed == 0 {
            self.owed.iter().find_map(|owed| owed.expect.tag())
        } else {
            self.owed.iter().filter_map(|owed| owed.expect.tag()).min()
        };
        oldest.map_or(self.last_tag, |tag| tag - 1)
    }

    /// Forgets everything owed and learned: the connection is gone.
    pub(super) fn clear(&mut self) {
        self.owed.clear();
        self.resent_owed = 0;
        self.provisional = None;
        self.run_error = None;
        self.asking = false;
        self.tails.clear();
        self.tails_start = 0;
        self.notices.clear();
        // A new connection starts over from its node's settings (see
        // `Conn::connect`).
        self.caps = Capabilities::before_handshake(self.caps.scripts, true, self.caps.sharded);
        self.answered = false;
        self.fence_probed = false;
        self.guard_refused = None;
        self.forget_identity();
    }

    /// The replies of a new connection's handshake, due by `deadline`.
    pub(super) fn expect_handshake(&mut self, steps: &[HandshakeStep], deadline: Instant) {
        for step in steps {
            self.owed.push_back(Owed {
                deadline,
                purpose: None,
                expect: Expect::Handshake(*step),
                resent: false,
            });
        }
    }

    /// Appends `command` to `out` in the form the connection's capabilities
    /// allow, and what it is owed for it (see `Conn::enqueue`).
    #[inline]
    pub(super) fn record(
        &mut self,
        command: &Encoded,
        purpose: Purpose,
        deadline: Instant,
        limit: usize,
        unawaited: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), NodeError> {
        let asking = std::mem::take(&mut self.asking); // for this command only
        let guard = self.guard_for(command)?;
        if self.owed.len() + 2 + usize::from(guard.is_some()) > limit {
            return Err(NodeError::Backlogged);
        }
        self.move_notices(out, deadline); // answered before this command
        if command.is_acquire() {
            // A key set here could never be released.
            if let Some(refusal) = self.caps.refusal() {
                return Err(refusal);
            }
            // Without scripts, nothing guards a key set before the
            // handshake has said it can be released (see `round`, which
            // holds such a master back until it has).
            if self.caps.awaits_rights() {
                return Err(NodeError::Backlogged);
            }
        }
        let tag = command.tag();
        let owed = |expect| Owed {
            deadline,
            purpose: Some(purpose),
            expect,
            resent: false,
        };
        let tagged = owed(Expect::Tag { tag, follows: true });
        let form = command.form(self.caps);
        self.room_to_keep(command, form)?; // bounded in bytes too (see `kept`)
        match form.ok_or_else(|| self.caps.no_form_left(command.script_id()))? {
            form @ (Form::SetThenEcho | Form::PttlThenPing { .. }) => {
                out.extend_from_slice(command.plain());
                let answer = match form {
                    Form::SetThenEcho => Expect::Set { tag },
                    _ => Expect::Pttl { tag },
                };
                self.owed.push_back(owed(answer));
                if let Form::PttlThenPing { holder: true } = form {
                    self.owed.push_back(owed(Expect::Holder { tag }));
                }
                if let Some(guard) = guard {
                    self.expect_ack(guard, owed(answer), true, out);
                }
                out.extend_from_slice(command.echo());
                self.owed
                    .push_back(owed(Expect::Tag { tag, follows: true }));
            }
            Form::Publish { sharded } => {
                out.extend_from_slice(command.publish(sharded));
                self.owed.push_back(owed(Expect::Publish { tag }));
            }
            Form::Ping => {
                out.extend_from_slice(command.plain());
                self.owed.push_back(owed(Expect::Tag {
                    tag,
                    follows: false,
                }));
            }
            Form::ScriptThenEcho { id, by_digest } | Form::TaggedScript { id, by_digest } => {
                let echo = !id.is_tagged() && !unawaited;
                let (tail, args) = command.script_args(id);
                self.make_tail_room(tail.len());
                self.tails.extend_from_slice(tail);
                command.encode_script_call(id, by_digest && !unawaited, out);
                // Sent by body, the script is in the server's cache after.
                self.caps.set_cached(id, true);
                let call = owed(Expect::Script {
                    id,
                    tag,
                    args: args as u16,
                    tail_len: tail.len() as u32,
                    echo,
                });
                self.owed.push_back(call);
                if let Some(guard) = guard {
                    self.expect_ack(guard, call, echo, out);
                }
                if echo {
                    out.extend_from_slice(command.echo());
                    self.owed
                        .push_back(owed(Expect::Tag { tag, follows: true }));
                }
            }
            Form::Run { form, id } => {
                let how = (guard, unawaited, asking);
                self.record_run(command, (form, id), tagged, how, out)
            }
            Form::Native { form, id, notice } => {
                // The script's arguments are kept: the fallback's.
                let echo = !unawaited;
                let (tail, args) = command.script_args(id);
                self.make_tail_room(tail.len());
                self.tails.extend_from_slice(tail);
                out.extend_from_slice(command.native(form, id.is_sharded()));
                let call = owed(Expect::Native {
                    form,
                    id,
                    tag,
                    args: args as u16,
                    tail_len: tail.len() as u32,
                    echo,
                    notice,
                });
                self.owed.push_back(call);
                if notice {
                    self.owed.push_back(owed(Expect::Listeners { tag }));
                }
                if let Some(guard) = guard {
                    self.expect_ack(guard, call, echo, out);
                }
                if echo {
                    out.extend_from_slice(command.echo());
                    self.owed
                        .push_back(owed(Expect::Tag { tag, follows: true }));
                }
            }
        }
        self.last_tag = tag;
        Ok(())
    }

    /// After a probe's answer: once the handshake has answered in full, a
    /// connection that cannot release (see `Capabilities::refusal`) ends.
    fn check_rights(&mut self) -> Result<bool, NodeError> {
        if self.awaits_handshake() {
            return Ok(false);
        }
        self.forms_changed = true;
        match self.caps.refusal() {
            Some(refusal) => Err(refusal),
            None => Ok(false),
        }
    }

    /// Takes in the judgement of the oldest owed reply (see [`judge`]),
    /// which the connection has consumed: delivers the vote it completes to
    /// round `round` (see `apply`). An error: the connection must go.
    #[inline]
    pub(super) fn take(
        &mut self,
        judged: Result<Step, NodeError>,
        round: Option<u64>,
        deliver: &mut impl FnMut(u16, Vote),
        out: &mut Vec<u8>,
    ) -> Result<bool, NodeError> {
        if let Ok(step @ (Step::RunReply(_) | Step::RunAsked | Step::Noticed)) = judged {
            return self.take_part(step, round, deliver, out);
        }
        let owed = self.owed.pop_front().expect("judged an owed reply");
        self.apply(owed, judged?, round, deliver, out)
    }

    /// Acts on one judged reply to `owed`. Returns whether it wrote into
    /// `out` (a re-sent command, a notice), which the connection must send.
    #[inline]
    pub(super) fn apply(
        &mut self,
        owed: Owed,
        step: Step,
        round: Option<u64>,
        deliver: &mut impl FnMut(u16, Vote),
        out: &mut Vec<u8>,
    ) -> Result<bool, NodeError> {
        if owed.resent {
            self.resent_owed -= 1;
        }
        let vote = match step {
            Step::Done => return Ok(false),
            Step::NotLoaded(id) => {
                self.caps.set_cached(id, false);
                return Ok(false);
            }
            Step::Echo(works) => {
                self.caps.echo = works;
                return Ok(false);
            }
            Step::RoleChecked => {
                self.caps.role_pending = false;
                return self.check_rights();
            }
            Step::Identity(found) => {
                self.identity_told(found);
                return self.check_rights();
            }
            Step::Reread(now) => {
                self.identity_reread(now);
                return Ok(false);
            }
            Step::Fence(check) => {
                self.caps.fence = check;
                self.fence_probed = true;
                // It may be the set-up's last answer (see `check_rights`).
                return self.check_rights();
            }
            Step::Rights(probe, lack) => {
                self.caps.releasing = self.caps.releasing.probed(probe, lack);
                return self.check_rights();
            }
            Step::NativeProbe(form, known) => {
                self.caps.native.set(form, known);
                return self.check_rights();
            }
            Step::Listeners(listening) => {
                self.publish(&owed, round, listening);
                return Ok(false);
            }
            Step::Topology(topology) => {
                self.topology = Some(topology);
                return Ok(false);
            }
            Step::Provisional(vote) => {
                if self.resent_instead(owed, &vote, round, out)? {
                    self.provisional = Some(Provisional::Resent);
                    return Ok(true);
                }
                let vote = self.screen(owed.expect, vote);
                self.provisional = Some(Provisional::Vote(vote));
                return Ok(false);
            }
            Step::Holder(label) => {
                // Joins the PTTL's answer, held until the PING (an error
                // in place of the PTTL, a redirect say, has no label).
                if let Some(Provisional::Vote(Vote::Pttl { holder, .. })) = &mut self.provisional {
                    *holder = label;
                }
                return Ok(false);
            }
            Step::Published(vote) => vote,
            Step::RunReply(_) | Step::RunAsked | Step::Noticed => unreachable!("by `take`"),
            Step::Vote(vote) => {
                // A tagged script's vote waits for the guard's answer.
                let acked_later = self.ack_follows(owed.expect.tag());
                if self.resent_instead(owed, &vote, round, out)? {
                    if acked_later {
                        self.provisional = Some(Provisional::Resent);
                    }
                    return Ok(true);
                }
                let vote = self.screen(owed.expect, vote);
                if acked_later {
                    self.provisional = Some(Provisional::Vote(vote));
                    return Ok(false);
                }
                vote
            }
            Step::Acked(acked) => match self.take_ack(owed.expect, acked)? {
                Some(vote) => vote,
                None => return Ok(false),
            },
            Step::Tagged(error) => {
                let follows = matches!(owed.expect, Expect::Tag { follows: true, .. });
                match (self.provisional.take(), follows) {
                    // The command was re-sent: its copy will vote.
                    (Some(Provisional::Resent), true) => return Ok(false),
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
        self.note_demotion(&vote);
        match owed.purpose {
            Some(purpose) if Some(purpose.round) == round => deliver(purpose.op, vote),
            _ => {}
        }
        Ok(self.send_confirmed(&owed, out))
    }

    /// A grant counts only on a connection whose master kept its identity
    /// (see `identity`), and a fenced acquisition's only on one whose
    /// fence probe found the domain valid (see `FenceCheck::screen`).
    fn screen(&mut self, expect: Expect, vote: Vote) -> Vote {
        let vote = self.screen_identity(expect, vote);
        match expect {
            Expect::Script { id, .. } if id.is_fence_round_one() => self.caps.fence.screen(vote),
            _ => vote,
        }
    }
}

/// Judges one reply against what it must be.
pub(super) fn judge(expect: Expect, reply: &Reply<'_>) -> Result<Step, NodeError> {
    match expect {
        Expect::Handshake(step) => super::handshake::judge(step, reply),
        Expect::Set { .. } => judge_set(reply).map(Step::Provisional),
        Expect::Script { id, tag, echo, .. } if id.reads() => {
            let tag = if id.is_tagged() { tag } else { 0 };
            let vote = judge_reading(id, reply, tag);
            vote.map(if echo { Step::Provisional } else { Step::Vote })
        }
        Expect::Pttl { .. } => judge_pttl(reply).map(Step::Provisional),
        Expect::Holder { .. } => judge_holder(reply).map(Step::Holder),
        Expect::Script { id, tag, .. } if id.is_tagged() => {
            judge_tagged_script(reply, tag).map(Step::Vote)
        }
        Expect::Script { echo: true, .. } => judge_script(reply).map(Step::Provisional),
        Expect::Script { echo: false, .. } => judge_script(reply).map(Step::Vote),
        Expect::Native {
            form: Native::SetIfEq,
            echo,
            ..
        } => judge_set(reply).map(|vote| provisional_if(echo, vote)),
        Expect::Native { echo, .. } => judge_script(reply).map(|vote| provisional_if(echo, vote)),
        Expect::Run { form, asking, .. } => super::expect::judge_run(form, asking, reply),
        Expect::Ack { aof, .. } => ReplicaAck::judge(aof, reply).map(Step::Acked),
        Expect::Listeners { .. } => judge_listeners(reply).map(Step::Listeners),
        Expect::Notices { .. } => judge_publish(reply).map(|_| Step::Noticed),
        Expect::Tag { tag, .. } => check_tag(reply, tag).map(Step::Tagged),
        Expect::Publish { .. } => judge_publish(reply).map(Step::Published),
        Expect::Topology { slots, tls } => cluster::judge_topology(slots, tls, reply),
        Expect::Asking => super::expect::judge_asking(reply),
        Expect::Identity(probe) => super::handshake::judge_reread(probe, reply),
    }
}

/// Whether an error means the server will never run this command for us
/// (an ACL forbids it, or it is renamed or disabled).
fn refuses_command(error: &ServerError) -> bool {
    error.kind() == ServerErrorKind::NoPerm
        || (error.kind() == ServerErrorKind::Err && error.message().starts_with("unknown command"))
}

// The probe's tag must be what the handshake sends.
const _: () = assert!(PROBE_TAG == super::node::PROBE_TAG);
