//! One subscriber connection to one master or cluster node: a connection
//! in RESP2's subscribed mode, over the same [`Transport`] and bounded
//! codec as a command connection.
//!
//! Its rules differ from a command connection's: a `message` push can come
//! at any time, between the acknowledgements of our own `SUBSCRIBE` and
//! `UNSUBSCRIBE` commands, which come in order. Anything else (garbage, a
//! reply nobody asked for, a push of another kind) ends the connection. A
//! message is only ever a hint that a lock may be free: it can make a
//! waiter try sooner, never grant anything.
//!
//! A connection to a node of a cluster voter is *sharded*: it subscribes
//! with `SSUBSCRIBE` (pushes `ssubscribe`, `smessage`, `sunsubscribe`), to
//! channels in slots the node owns. Two more things happen there: a node
//! whose slot moves away ends its subscriptions to the slot's channels
//! with an `sunsubscribe` push we did not ask for, and a node that does
//! not own a channel's slot answers `SSUBSCRIBE` with a cluster error
//! (`MOVED`, `CLUSTERDOWN`, ...), or `SUNSUBSCRIBE` likewise once the slot
//! left (the subscription is gone then anyway). Both end the subscription
//! here, and are told ([`Event::Moved`]) for the channel to be followed to
//! its new owner (see `sharded`). One race is not told apart: a slot that
//! leaves just as we unsubscribe from one of its channels (no waiter left)
//! makes the node send its own `sunsubscribe` push and then its answer to
//! ours (another `sunsubscribe`, which is dropped, or an error); the push
//! is taken for our answer, and an error after it ends the connection,
//! which is made again (its subscriptions told lost, then confirmed anew).

use super::message::{fits, Message};
use crate::conn::{Node, Transport};
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{decode, encode_command, Arg, Decoded, Reply, ServerErrorKind};
use std::collections::VecDeque;
use std::fmt;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Most subscribe and unsubscribe commands a connection has unanswered:
/// more wait until some are answered, so that however many channels are
/// wanted, what we keep for the answers stays bounded.
const MAX_OWED: usize = 1024;

/// Most reads one service of the connection makes: a master that floods
/// us cannot keep the reading thread to itself (poll reports the socket
/// again), nor make one batch of events grow without bound.
const MAX_READS_PER_SERVICE: usize = 16;

/// The first reconnect waits this long after a failure, doubling up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How long a connection must have kept up with us (answered all we
/// asked) before a failure starts a new series of reconnects, the first at
/// once. A connection that fails sooner, whatever it answered first, backs
/// off further: a cause that breaks every connection the same way must
/// not make it re-dialled in a loop.
const STEADY: Duration = Duration::from_secs(1);

/// What a subscriber connection saw.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A message of ours on `channel` (see `message`).
    Message { channel: Vec<u8>, message: Message },
    /// The server confirmed our subscription to `channel`.
    Subscribed(Vec<u8>),
    /// The server refused to subscribe us (an ACL without channel rights),
    /// with this error.
    Refused(Vec<u8>, ServerError),
    /// Sharded connections only: the subscription to `channel` ended
    /// because its slot is not (or no longer) the node's: an
    /// `sunsubscribe` push we did not ask for (`None`), or a cluster error
    /// answering `SSUBSCRIBE` (`MOVED`, `CLUSTERDOWN`, ...).
    Moved(Vec<u8>, Option<ServerError>),
    /// The connection was lost, with its subscriptions to these channels.
    Lost(Vec<Vec<u8>>),
}

/// What the connection owes us, in order.
#[derive(Debug)]
enum Owed {
    Auth,
    Subscribe(Vec<u8>),
    Unsubscribe(Vec<u8>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Requested,
    Confirmed,
    Refused,
    Leaving,
}

/// A subscriber connection (or none yet).
pub(crate) struct SubConn {
    /// Whether it subscribes with `SSUBSCRIBE` (a cluster node's).
    sharded: bool,
    transport: Transport,
    owed: VecDeque<Owed>,
    /// The channels asked for on this connection, and where each stands.
    channels: Vec<(Vec<u8>, State)>,
    /// Failures in a row, and when to try connecting again.
    failures: u32,
    retry_at: Option<Instant>,
    /// When the open connection first had answered everything asked of it.
    caught_up_at: Option<Instant>,
}

impl fmt::Debug for SubConn {
    // The transport may hold the AUTH command.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubConn")
            .field("open", &self.transport.is_open())
            .field("channels", &self.channels.len())
            .field("owed", &self.owed.len())
            .finish_non_exhaustive()
    }
}

impl SubConn {
    /// A connection (not yet made) to a standalone master, or, if
    /// `sharded`, to a cluster node.
    pub(crate) fn new(sharded: bool) -> SubConn {
        SubConn {
            sharded,
            transport: Transport::new(),
            owed: VecDeque::new(),
            channels: Vec::new(),
            failures: 0,
            retry_at: None,
            caught_up_at: None,
        }
    }

    /// Brings the connection in line with `wanted` (the channels waiters
    /// need): connects if needed and allowed, subscribes to the missing
    /// channels (but never one whose name we could not read back: see
    /// [`super::message::can_subscribe`]), unsubscribes from the unwanted ones, as
    /// far as [`MAX_OWED`] allows (the rest on a later call, once answers
    /// came in). Writes what it can without blocking.
    pub(crate) fn maintain(&mut self, node: &Node, wanted: &[&[u8]], now: Instant) {
        if !self.transport.is_open() {
            if wanted.is_empty() || self.retry_at.is_some_and(|at| now < at) {
                return;
            }
            if let Err(e) = self.connect(node) {
                self.fail(now, &e);
                return;
            }
        }
        for channel in wanted {
            if self.owed.len() >= MAX_OWED {
                break;
            }
            if fits(channel) && !self.channels.iter().any(|(c, _)| c == channel) {
                self.send(
                    if self.sharded {
                        b"SSUBSCRIBE"
                    } else {
                        b"SUBSCRIBE"
                    },
                    channel,
                );
                self.owed.push_back(Owed::Subscribe(channel.to_vec()));
                self.channels.push((channel.to_vec(), State::Requested));
            }
        }
        let leaving: Vec<Vec<u8>> = self
            .channels
            .iter()
            // Also one not yet confirmed: the server runs our commands in
            // order, and its confirmation may never be read before we are
            // asked to leave (nobody reads while nobody waits).
            .filter(|(c, s)| {
                matches!(s, State::Confirmed | State::Requested) && !wanted.contains(&c.as_slice())
            })
            .map(|(c, _)| c.clone())
            .collect();
        for channel in leaving {
            if self.owed.len() >= MAX_OWED {
                break;
            }
            let verb: &[u8] = if self.sharded {
                b"SUNSUBSCRIBE"
            } else {
                b"UNSUBSCRIBE"
            };
            self.send(verb, &channel);
            self.set_state(&channel, State::Leaving);
            self.owed.push_back(Owed::Unsubscribe(channel));
        }
        // A refused channel that nobody wants any more is forgotten.
        self.channels
            .retain(|(c, s)| *s != State::Refused || wanted.contains(&c.as_slice()));
        if let Err(e) = self.transport.flush() {
            self.fail(now, &e);
        }
    }

    fn connect(&mut self, node: &Node) -> Result<(), NodeError> {
        self.close();
        self.transport.connect(node)?;
        let auth = node.auth_bytes();
        if !auth.is_empty() {
            self.transport.output().extend_from_slice(auth);
            self.owed.push_back(Owed::Auth);
        }
        Ok(())
    }

    fn send(&mut self, verb: &[u8], channel: &[u8]) {
        encode_command(
            self.transport.output(),
            &[Arg::Bytes(verb), Arg::Bytes(channel)],
        );
    }

    /// Whether the connection is subscribed to `channel`, or has asked to
    /// be (not refused, not leaving).
    pub(crate) fn has(&self, channel: &[u8]) -> bool {
        self.channels
            .iter()
            .any(|(c, s)| c == channel && matches!(s, State::Requested | State::Confirmed))
    }

    /// Whether the server confirmed our subscription to `channel` here.
    pub(crate) fn hears(&self, channel: &[u8]) -> bool {
        self.channels
            .iter()
            .any(|(c, s)| c == channel && *s == State::Confirmed)
    }

    /// Whether the connection has nothing to do: no channel, nothing owed.
    pub(crate) fn is_idle(&self) -> bool {
        self.channels.is_empty() && self.owed.is_empty()
    }

    fn set_state(&mut self, channel: &[u8], state: State) {
        if let Some(entry) = self.channels.iter_mut().find(|(c, _)| c == channel) {
            entry.1 = state;
        }
    }

    /// Closes the connection; its subscriptions are gone with it.
    fn close(&mut self) {
        self.transport.close();
        self.owed.clear();
        self.channels.clear();
        self.caught_up_at = None;
    }

    /// The connection failed: close it, and wait before the next connect
    /// (at once after a connection that was [`STEADY`], longer and longer
    /// after each failure in a row).
    fn fail(&mut self, now: Instant, _cause: &NodeError) {
        let steady = self
            .caught_up_at
            .is_some_and(|at| now.saturating_duration_since(at) >= STEADY);
        if steady {
            self.failures = 0;
        }
        self.close();
        self.failures = self.failures.saturating_add(1);
        let wait = match self.failures {
            1 => Duration::ZERO,
            n => FIRST_BACKOFF
                .saturating_mul(1 << (n - 2).min(16))
                .min(MAX_BACKOFF),
        };
        self.retry_at = Some(now + wait);
    }

    /// When the connection may be tried again, if it is waiting to.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|_| !self.transport.is_open())
    }

    /// What to poll for: (fd, read, write).
    pub(crate) fn interest(&self) -> Option<(RawFd, bool, bool)> {
        let fd = self.transport.raw_fd()?;
        let (read, write) = self.transport.interest(true);
        Some((fd, read, write))
    }

    /// The socket is ready: finishes a connect, writes, reads, and hands
    /// each event to `event`. A connection that fails is closed (an
    /// [`Event::Lost`] says so).
    pub(crate) fn service(
        &mut self,
        writable: bool,
        readable: bool,
        now: Instant,
        event: &mut impl FnMut(Event),
    ) {
        let result = (|| {
            if writable {
                self.transport.on_writable()?;
            }
            if readable {
                for _ in 0..MAX_READS_PER_SERVICE {
                    if !self.transport.read_once()? {
                        break;
                    }
                    self.take_replies(now, event)?;
                    // Poll tells when more comes: no read that would find
                    // nothing.
                    if self.transport.drained() {
                        break;
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            let lost: Vec<Vec<u8>> = self.channels.iter().map(|(c, _)| c.clone()).collect();
            self.fail(now, &e);
            if !lost.is_empty() {
                event(Event::Lost(lost));
            }
        }
    }

    /// Consumes every complete reply in the input, read at `now`.
    fn take_replies(
        &mut self,
        now: Instant,
        event: &mut impl FnMut(Event),
    ) -> Result<(), NodeError> {
        loop {
            if self.owed.is_empty() && self.caught_up_at.is_none() {
                self.caught_up_at = Some(now);
            }
            let (step, used) = match decode(self.transport.unread()) {
                Ok(Decoded::Partial) => return Ok(()),
                Err(e) => return Err(NodeError::Protocol(ProtocolError::Malformed(e))),
                Ok(Decoded::Complete(reply, used)) => (classify(&reply, self.sharded), used),
            };
            self.transport.consume(used);
            match step {
                Step::Message(channel, message) => {
                    // Only channels we asked for count; anything else is
                    // dropped (a late one after UNSUBSCRIBE, or a liar).
                    let ours = self
                        .channels
                        .iter()
                        .any(|(c, s)| *c == channel && *s != State::Refused);
                    if let (true, Some(message)) = (ours, message) {
                        event(Event::Message { channel, message });
                    }
                }
                Step::Ack(kind, channel) => match (self.owed.pop_front(), kind) {
                    (Some(Owed::Subscribe(c)), AckKind::Subscribe) if c == channel => {
                        if self
                            .channels
                            .iter()
                            .any(|(x, s)| *x == c && *s == State::Requested)
                        {
                            self.set_state(&c, State::Confirmed);
                        }
                        event(Event::Subscribed(c));
                    }
                    (Some(Owed::Unsubscribe(c)), AckKind::Unsubscribe) if c == channel => {
                        self.channels.retain(|(x, _)| *x != c);
                    }
                    (owed, AckKind::Unsubscribe) if self.sharded => {
                        // Not the answer to an `SUNSUBSCRIBE` of ours: the
                        // node gave the channel's slot away (see the module
                        // docs).
                        if let Some(owed) = owed {
                            self.owed.push_front(owed);
                        }
                        if self.hears(&channel) {
                            self.channels.retain(|(x, _)| *x != channel);
                            event(Event::Moved(channel, None));
                        }
                        // Else one we are leaving (our own `SUNSUBSCRIBE`
                        // answers later) or do not have: nothing changes.
                    }
                    _ => return Err(unexpected("an acknowledgement out of turn")),
                },
                Step::Ok => match self.owed.pop_front() {
                    Some(Owed::Auth) => {}
                    _ => return Err(unexpected("+OK out of turn")),
                },
                Step::Error(error) => match self.owed.pop_front() {
                    Some(Owed::Subscribe(c)) if self.sharded && is_cluster_error(&error) => {
                        self.channels.retain(|(x, _)| *x != c);
                        event(Event::Moved(c, Some(error)));
                    }
                    Some(Owed::Subscribe(c)) => {
                        self.set_state(&c, State::Refused);
                        event(Event::Refused(c, error));
                    }
                    // The node no longer owns the channel's slot: the
                    // subscription ended when the slot left.
                    Some(Owed::Unsubscribe(c)) if self.sharded && is_cluster_error(&error) => {
                        self.channels.retain(|(x, _)| *x != c);
                    }
                    // A refused AUTH, or a refused UNSUBSCRIBE: the
                    // connection cannot be trusted to follow our channels.
                    _ => return Err(unexpected("an error to AUTH or UNSUBSCRIBE")),
                },
                Step::Other => return Err(unexpected("a reply that is no pub/sub push")),
            }
        }
    }
}

/// Whether `error` is a cluster node's refusal of a command for a slot it
/// does not serve now (the command did not run).
fn is_cluster_error(error: &ServerError) -> bool {
    matches!(
        error.kind(),
        ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
    )
}

fn unexpected(what: &str) -> NodeError {
    NodeError::Protocol(ProtocolError::UnexpectedReply(what.into()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckKind {
    Subscribe,
    Unsubscribe,
}

/// What one reply is, owning what is kept of it.
#[derive(Debug)]
enum Step {
    /// A message on a channel: ours if it parses.
    Message(Vec<u8>, Option<Message>),
    Ack(AckKind, Vec<u8>),
    Ok,
    Error(ServerError),
    Other,
}

/// What `reply` is, on a connection that subscribes by `SSUBSCRIBE`
/// (`sharded`: its pushes are `ssubscribe`, `smessage`, `sunsubscribe`) or
/// by `SUBSCRIBE`: a push of the other kind is none of ours.
fn classify(reply: &Reply<'_>, sharded: bool) -> Step {
    let (message, subscribe, unsubscribe): (&[u8], &[u8], &[u8]) = if sharded {
        (b"smessage", b"ssubscribe", b"sunsubscribe")
    } else {
        (b"message", b"subscribe", b"unsubscribe")
    };
    match reply {
        Reply::Simple(b"OK") => Step::Ok,
        Reply::Error(line) => Step::Error(ServerError::from_line(line)),
        Reply::Array(array) if array.len() == 3 => {
            let mut items = array.iter();
            let (Some(kind), Some(channel), Some(third)) =
                (items.next(), items.next(), items.next())
            else {
                return Step::Other;
            };
            match (kind, channel, third) {
                (Reply::Bulk(kind), Reply::Bulk(channel), Reply::Bulk(payload))
                    if *kind == *message =>
                {
                    Step::Message(channel.to_vec(), Message::parse(payload))
                }
                (Reply::Bulk(kind), Reply::Bulk(channel), Reply::Integer(_))
                    if *kind == *subscribe =>
                {
                    Step::Ack(AckKind::Subscribe, channel.to_vec())
                }
                (Reply::Bulk(kind), Reply::Bulk(channel), Reply::Integer(_))
                    if *kind == *unsubscribe =>
                {
                    Step::Ack(AckKind::Unsubscribe, channel.to_vec())
                }
                _ => Step::Other,
            }
        }
        _ => Step::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(items: &[&[u8]], count: Option<i64>) -> Vec<u8> {
        let mut out = format!("*{}\r\n", items.len() + usize::from(count.is_some())).into_bytes();
        for item in items {
            out.extend_from_slice(format!("${}\r\n", item.len()).as_bytes());
            out.extend_from_slice(item);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(n) = count {
            out.extend_from_slice(format!(":{n}\r\n").as_bytes());
        }
        out
    }

    fn steps(bytes: &[u8]) -> Vec<String> {
        steps_of(bytes, false)
    }

    fn steps_of(bytes: &[u8], sharded: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Ok(Decoded::Complete(reply, used)) = decode(rest) {
            out.push(format!("{:?}", classify(&reply, sharded)));
            rest = &rest[used..];
        }
        out
    }

    #[test]
    fn a_sharded_connection_reads_only_sharded_pushes() {
        let bytes = [
            array(&[b"ssubscribe", b"ch"], Some(1)),
            array(&[b"smessage", b"ch", b"r0123456789abcdef"], None),
            array(&[b"sunsubscribe", b"ch"], Some(0)),
            array(&[b"message", b"ch", b"r0123456789abcdef"], None),
            array(&[b"subscribe", b"ch"], Some(1)),
        ]
        .concat();
        let got = steps_of(&bytes, true);
        assert_eq!(got.len(), 5, "{got:?}");
        assert!(got[0].starts_with("Ack(Subscribe"), "{got:?}");
        assert!(got[1].contains("Some(Released("), "{got:?}");
        assert!(got[2].starts_with("Ack(Unsubscribe"), "{got:?}");
        // A classic push on a sharded connection is none of ours, and the
        // other way round.
        assert_eq!(&got[3..], ["Other", "Other"]);
        let classic = steps_of(&bytes, false);
        assert_eq!(&classic[..3], ["Other", "Other", "Other"]);
        // The cluster errors that end a subscription, and those that do not.
        for line in [
            "MOVED 1 127.0.0.1:7001",
            "ASK 1 h:1",
            "TRYAGAIN x",
            "CLUSTERDOWN x",
        ] {
            assert!(is_cluster_error(&ServerError::from_line(line.as_bytes())));
        }
        for line in ["NOPERM no", "ERR x", "LOADING x"] {
            assert!(!is_cluster_error(&ServerError::from_line(line.as_bytes())));
        }
    }

    #[test]
    fn tells_pushes_acknowledgements_and_strays_apart() {
        let got = steps(
            &[
                array(&[b"subscribe", b"ch"], Some(1)),
                array(&[b"message", b"ch", b"r0123456789abcdef"], None),
                array(&[b"message", b"ch", b"0123456789abcdef-not-ours"], None),
                array(&[b"unsubscribe", b"ch"], Some(0)),
                b"+OK\r\n-NOPERM no\r\n:1\r\n".to_vec(),
                array(&[b"pmessage", b"p", b"ch"], None),
            ]
            .concat(),
        );
        assert_eq!(got.len(), 8, "{got:?}");
        assert!(got[0].starts_with("Ack(Subscribe"), "{got:?}");
        assert!(got[1].contains("Some(Released("), "{got:?}");
        assert!(
            got[2].starts_with("Message(") && got[2].ends_with("None)"),
            "{got:?}"
        );
        assert!(got[3].starts_with("Ack(Unsubscribe"), "{got:?}");
        assert_eq!(got[4], "Ok");
        assert!(
            got[5].starts_with("Error(") && got[5].contains("NoPerm"),
            "{got:?}"
        );
        assert_eq!(&got[6..], ["Other", "Other"]);
    }
}
