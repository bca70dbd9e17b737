//! Before a round's commands go out: one look, without waiting, at the
//! connections that may have something to read (replies that arrived
//! unread, or a server that closed an idle connection), so that a command
//! is queued only behind replies still genuinely in flight.

use super::connections::Connections;
use super::plan::Masters;
use crate::error::NodeError;
use std::time::{Duration, Instant};

/// How long a connection must have been quiet (nothing sent on it) before a
/// round looks at it before sending (see `Connections::look_before_sending`).
/// Back-to-back calls skip the look, saving a system call per round, since
/// what it looks for (a server that closed the connection, replies that
/// have arrived unread) takes a pause to arise. Skipping it is safe: a
/// surplus reply that arrives in the meantime fails the next tag check.
const QUIET: Duration = Duration::from_millis(1);

impl Connections {
    /// Before the round's commands go out, looks without waiting (one
    /// `poll(2)` for all of them) at every established connection that owes
    /// replies or has been [`QUIET`] for a while. On one that owes nothing,
    /// anything readable means the server closed it (an idle timeout or a
    /// restart: it is replaced in this very round) or sent an unsolicited
    /// reply. On one that owes replies, the replies that have arrived are
    /// read and checked now, so that the connection counts as free if it
    /// caught up and the new command is queued only behind replies still
    /// genuinely in flight.
    ///
    /// A connection that read answers it owed shows its node answers (see
    /// `NodeState::caught_up`); one still owing an answer past its deadline
    /// shows that its node missed it, although the round that sent the
    /// command was decided without it.
    pub(super) fn look_before_sending(&mut self, masters: Masters<'_>, now: Instant) {
        self.poll.clear();
        self.polled.clear();
        for (lane, conn) in self.conns.iter().enumerate() {
            // Owing only notices' answers (see `conn::notice`) is as good
            // as idle: they count for nothing, and the round reads them.
            let quiet = now.saturating_duration_since(self.last_sent[lane]) >= QUIET;
            let look = !conn.awaits_nothing() || quiet;
            if let (true, true, Some(fd)) = (look, conn.is_established(), conn.raw_fd()) {
                self.poll.add(fd, true, false);
                self.polled.push(lane);
            }
        }
        if self.polled.is_empty() || self.poll.check().is_err() {
            return;
        }
        for slot in 0..self.polled.len() {
            let lane = self.polled[slot];
            if self.poll.ready(slot).readable {
                self.read_before_sending(masters, lane, now);
            }
            // What had arrived is read: an answer still owed past its
            // deadline was missed.
            if self.conns[lane].is_overdue(now) {
                let phase = self.conns[lane].phase();
                let i = self.lane(lane).voter.into();
                self.missed_deadline(masters, i, NodeError::TimedOut(phase), now);
            }
        }
    }

    /// Reads what arrived on `lane`'s connection before a round's send
    /// (see `look_before_sending`).
    fn read_before_sending(&mut self, masters: Masters<'_>, lane: usize, now: Instant) {
        let i: usize = self.lane(lane).voter.into();
        let conn = &mut self.conns[lane];
        let problem = if conn.is_idle() {
            conn.probe_idle()
        } else {
            let owed = conn.owed_len();
            match conn.catch_up() {
                Ok(()) => {
                    if conn.owed_len() < owed {
                        masters.states[i].caught_up();
                    }
                    if let Some(forms) = conn.take_new_forms() {
                        masters.states[i].uses(forms);
                    }
                    // The owed answers were all there; the server may have
                    // closed the connection after them.
                    if conn.is_idle() {
                        conn.probe_idle()
                    } else {
                        None
                    }
                }
                Err(e) => Some(e),
            }
        };
        if let Some(error) = problem {
            conn.discard();
            // A server that closed an idle connection is not
            // necessarily failing; one that talks out of turn is.
            if error != NodeError::Closed {
                self.lane_failed(masters, lane, now, &error);
            }
        }
    }
}
