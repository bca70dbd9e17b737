//! One connection to one master: the master's address and handshake
//! (`node`), the byte stream to it (`transport`, with `buffer` and, for
//! `rediss://`, `tls`), the replies it still owes us (`owed`) and the bytes
//! of arguments it may keep for them (`kept`), what it
//! re-sends when a server refuses a command before running it (`resend`),
//! a native release's notice, sent once it deleted (`notice`), what the
//! handshake's answers teach (`handshake`), the master's identity kept
//! and read again on an idle connection (`identity`), the replica guard's
//! `WAIT` behind a write (`guard`), and one blocking exchange off the lock
//! path (`exchange`, for a Sentinel voter's watcher).
//!
//! Commands may be pipelined: a new command can be written while replies to
//! earlier ones are still on their way, because Redis answers in order and
//! the connection's ledger knows exactly which command each reply belongs
//! to. Every command carries a tag its positive answer must echo (see
//! `command`), so a reply is never counted for a command it does not
//! answer, whatever the timing. A connection that sent something
//! malformed, mistyped, unsolicited or carrying the wrong tag, that failed
//! its handshake, that failed in any other way, or whose server stopped
//! answering altogether (see `round::lag_limit`), is discarded (closed,
//! buffers dropped), never resynchronised.

mod address;
mod buffer;
mod cluster;
mod exchange;
mod expect;
mod guard;
mod handshake;
mod identity;
mod kept;
mod node;
mod notice;
mod owed;
mod pending;
mod redact;
mod resend;
mod resolve;
mod run;
#[cfg(feature = "tls")]
mod tls;
mod transport;
mod url;

pub(crate) use address::{Lookups, Why};
pub(crate) use exchange::exchange;
pub(crate) use identity::IDENTITY_IDLE;
#[cfg(test)]
pub(crate) use node::url as test_node;
pub(crate) use node::{Found, Node};
pub(crate) use owed::Purpose;
pub(crate) use resolve::Resolver;
pub use resolve::{Resolve, SystemResolver};
#[cfg(feature = "tls")]
pub(crate) use tls::Options as TlsOptions;
pub(crate) use transport::Transport;
pub(crate) use url::redact;

use crate::cluster::Topology;
use crate::command::fence::FenceCheck;
use crate::command::identity::Identity;
use crate::command::{Capabilities, CommandForm, Encoded, Vote};
use crate::error::{NodeError, Phase, ProtocolError, ServerError};
use crate::resp::{decode, decode_topology, Decoded};
use owed::{judge, Ledger};
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

/// A connection to one master (or no connection yet).
pub(crate) struct Conn {
    transport: Transport,
    /// What the connection is owed, and what it can do.
    ledger: Ledger,
}

impl fmt::Debug for Conn {
    // Hand-written: the ledger holds lock values, which let anyone release
    // a lock, and the transport may hold the AUTH command.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("transport", &self.transport)
            .field("owed", &self.ledger.len())
            .field("caps", &self.ledger.caps)
            .field("settled_tag", &self.settled_tag())
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub(crate) fn new() -> Conn {
        Conn {
            transport: Transport::new(),
            ledger: Ledger::new(),
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
        self.is_established() && self.ledger.is_empty()
    }

    /// Whether the connection is open and owes no reply but its notices'
    /// (see `notice`), which count for nothing: a round need not look at
    /// it before sending, any more than at an idle one.
    pub(crate) fn awaits_nothing(&self) -> bool {
        self.is_established() && self.ledger.owes_only_notices()
    }

    /// What the connection can do (which form each command takes on it).
    pub(crate) fn capabilities(&self) -> Capabilities {
        self.ledger.caps
    }

    /// The forms a release and an extension take here (see
    /// `Capabilities::forms`), if they may have changed since the last
    /// call: for the health view.
    pub(crate) fn take_new_forms(&mut self) -> Option<(Option<CommandForm>, Option<CommandForm>)> {
        std::mem::take(&mut self.ledger.forms_changed).then(|| self.ledger.caps.forms())
    }

    /// What the fence probe of the connection's handshake found, once,
    /// when it has answered: for the health view.
    pub(crate) fn take_fence_probe(&mut self) -> Option<FenceCheck> {
        std::mem::take(&mut self.ledger.fence_probed).then_some(self.ledger.caps.fence)
    }

    /// What the server told of itself (`run_id`, replication ids), once,
    /// when the handshake has told it: for the round, which compares
    /// voters (see `round::independence`). The connection keeps it for its
    /// own failover re-check (see `identity`).
    #[inline]
    pub(crate) fn take_identity(&mut self) -> Option<Identity> {
        // Read first: the common case (taken already) then writes nothing.
        if !self.ledger.identity_untaken {
            return None;
        }
        self.ledger.identity_untaken = false;
        Some(self.ledger.identity)
    }

    /// Queues a read of the master's identity ahead of the next command
    /// (see `identity`), due by `deadline`.
    pub(crate) fn enqueue_identity(&mut self, deadline: Instant, limit: usize) {
        let out = self.transport.output();
        self.ledger.expect_identity(deadline, limit, out);
    }

    /// Whether the server answered as a master that is one no more
    /// (`READONLY`, `MASTERDOWN`, `LOADING`), or its identity changed,
    /// since the connection's set-up: it must be opened again, its set-up
    /// checking what the server is (and, fenced, the fence domain) anew,
    /// before it is used.
    pub(crate) fn needs_recheck(&self) -> bool {
        self.ledger.recheck
    }

    /// How many replies the connection owes.
    pub(crate) fn owed_len(&self) -> usize {
        self.ledger.len()
    }

    /// Every command sent with a tag up to this one is settled: answered,
    /// or lost with a discarded connection.
    pub(crate) fn settled_tag(&self) -> u64 {
        self.ledger.settled_tag()
    }

    /// Closes the connection and forgets everything in flight. What was
    /// sent and not answered is settled as far as ordering goes: the server
    /// either ran it already or drops it with the connection (it may still
    /// run what it had received; the guide's known limits say so).
    pub(crate) fn discard(&mut self) {
        self.transport.close();
        self.ledger.clear();
    }

    /// Starts a non-blocking connect to `node` and queues its handshake, to
    /// be sent as soon as the connection is up and answered by `deadline`.
    pub(crate) fn connect(&mut self, node: &Node, deadline: Instant) -> Result<(), NodeError> {
        self.discard();
        self.ledger.caps = Capabilities::before_handshake(
            node.runs_scripts(),
            node.uses_native(),
            node.is_cluster_node(),
        );
        self.ledger.guard = node.replica_ack();
        self.ledger.caps.role_pending = node.asks_role();
        self.transport.connect(node)?;
        self.transport
            .output()
            .extend_from_slice(node.handshake_bytes());
        self.ledger
            .expect_handshake(node.handshake_steps(), deadline);
        Ok(())
    }

    /// Queues `command`, whose tag is unique on this connection and larger
    /// than any sent before, whose answer goes to `purpose` by `deadline`,
    /// and writes as much as the socket takes now. A script goes by body if
    /// `unawaited` (for a command whose answer nobody will wait for: it
    /// cannot be refused with NOSCRIPT). Refused if `limit` replies are
    /// already owed.
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
        let out = self.transport.output();
        self.ledger
            .record(command, purpose, deadline, limit, unawaited, out)
    }

    /// Queues `ASKING`, answered by `deadline`: the next command queued runs
    /// on this cluster node although its slot is still being imported here
    /// (an `ASK` redirect named the node). Refused if `limit` replies are
    /// already owed.
    pub(crate) fn enqueue_asking(
        &mut self,
        deadline: Instant,
        limit: usize,
    ) -> Result<(), NodeError> {
        let out = self.transport.output();
        // `ASKING` holds for the next command only: notices waiting to go
        // (which `record` writes ahead of the command) go ahead of it, or
        // their `PUBLISH` would take it and the command be redirected again.
        self.ledger.move_notices(out, deadline);
        let expect = expect::Expect::Asking;
        self.ledger
            .record_untagged(cluster::ASKING, expect, deadline, limit, out)?;
        self.ledger.asking = true;
        Ok(())
    }

    /// Queues `CLUSTER SHARDS` (`CLUSTER SLOTS` if `slots`), answered by
    /// `deadline`: the answer is kept until [`Conn::take_topology`].
    pub(crate) fn enqueue_topology(
        &mut self,
        slots: bool,
        deadline: Instant,
        limit: usize,
    ) -> Result<(), NodeError> {
        let tls = self.transport.is_secure();
        let out = self.transport.output();
        let (request, expect) = (
            cluster::topology_request(slots),
            expect::Expect::Topology { slots, tls },
        );
        self.ledger
            .record_untagged(request, expect, deadline, limit, out)
    }

    /// The topology (or the refusal) the last `CLUSTER SHARDS` or `CLUSTER
    /// SLOTS` on this connection brought, if not taken yet.
    pub(crate) fn take_topology(&mut self) -> Option<Result<Box<Topology>, ServerError>> {
        self.ledger.topology.take()
    }

    /// Writes what is queued, as far as the socket takes it now.
    pub(crate) fn flush(&mut self) -> Result<(), NodeError> {
        self.transport.flush()
    }

    /// Sends the notices of native releases that deleted, if any wait (see
    /// `notice`), their answers owed by `deadline`: a round does once it is
    /// decided.
    pub(crate) fn send_notices(&mut self, deadline: Instant) -> Result<(), NodeError> {
        if !self.ledger.has_notices() || !self.transport.is_open() {
            return Ok(());
        }
        self.ledger.move_notices(self.transport.output(), deadline);
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
            if e == NodeError::Closed && !self.ledger.answered && !self.transport.is_secure() {
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
        while !self.ledger.is_empty() && self.read_once()? {
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
            // A cluster's topology is the one reply read under looser bounds.
            let decoded = if self.ledger.awaits_topology() {
                decode_topology(self.transport.unread())
            } else {
                decode(self.transport.unread())
            };
            let (judged, used) = match decoded {
                Ok(Decoded::Partial) => return Ok(()),
                Err(_) if !self.ledger.answered && looks_like_tls(self.transport.unread()) => {
                    return Err(NodeError::Protocol(ProtocolError::LooksLikeTls))
                }
                Err(e) if !self.ledger.answered => {
                    return Err(NodeError::Protocol(ProtocolError::NotRedis(e)))
                }
                Err(e) => return Err(NodeError::Protocol(ProtocolError::Malformed(e))),
                Ok(Decoded::Complete(reply, used)) => {
                    let expect = self
                        .ledger
                        .next()
                        .ok_or(NodeError::Protocol(ProtocolError::Unsolicited))?;
                    (judge(expect, &reply), used)
                }
            };
            // Consumed whatever the verdict: a reply is judged once.
            self.ledger.answered = true;
            self.transport.consume(used);
            let out = self.transport.output();
            if self.ledger.take(judged, round, deliver, out)? {
                self.transport.flush()?;
            }
            // Bytes beyond the last owed reply are unsolicited; left in
            // place they would be read as the answer to the next command
            // (and fail its tag check then; better to know now).
            if self.ledger.is_empty() && !self.transport.unread().is_empty() {
                return Err(NodeError::Protocol(ProtocolError::Unsolicited));
            }
        }
    }

    /// Whether the connection is beyond saving at `now`: a connect that did
    /// not finish by its deadline, or a server whose oldest owed reply is
    /// more than `lag_limit` overdue (frozen, or gone without a word).
    pub(crate) fn is_dead(&self, now: Instant, lag_limit: Duration) -> bool {
        let Some(oldest) = self.ledger.oldest_deadline() else {
            return false;
        };
        if self.transport.is_connecting() {
            oldest <= now
        } else {
            oldest
                .checked_add(lag_limit)
                .is_some_and(|limit| limit <= now)
        }
    }

    /// Whether an established connection's oldest owed reply is past its
    /// deadline at `now`: the server missed it (it lags, or is stalled).
    pub(crate) fn is_overdue(&self, now: Instant) -> bool {
        self.is_established()
            && self
                .ledger
                .oldest_deadline()
                .is_some_and(|oldest| oldest <= now)
    }

    /// The phase the connection is in, for a timeout error.
    pub(crate) fn phase(&self) -> Phase {
        if let Some(opening) = self.transport.opening_phase() {
            opening
        } else if self.ledger.awaits_handshake() {
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
        self.transport.interest(!self.ledger.is_empty())
    }

    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        self.transport.raw_fd()
    }
}

/// Whether bytes that are not RESP look like the start of a TLS record
/// (an alert or a handshake message, TLS 1.0 to 1.3): a TLS port behind a
/// `redis://` URL.
fn looks_like_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, 0x00..=0x04, ..])
}

#[cfg(test)]
mod tests;
