//! What a connection holds back to send later: the notices of its native
//! releases that deleted (see `notice`, which decides when they are built
//! and sent), until its round is decided or its next command goes out.

use std::time::Instant;

/// Room for pending notices allocated up front: a notice is its channel
/// (the resource name and a prefix) and 16 bytes, and a connection rarely
/// holds more than one, so that steady-state releasing never grows it.
const PENDING_CAPACITY: usize = 512;

/// The notices of one connection's native releases that deleted.
pub(super) struct Notices {
    /// A release that deleted, whose count of listeners is not in yet: the
    /// length of its arguments, kept at the front of the ledger's tails.
    pub(super) due: Option<u32>,
    /// `PUBLISH` commands built and not yet handed to the connection's
    /// output, how many, and the latest deadline of their releases.
    pub(super) pending: Vec<u8>,
    pub(super) count: u32,
    pub(super) deadline: Option<Instant>,
    /// Whether one of them is a release's its round awaits, to be sent as
    /// soon as the release's tag came back.
    pub(super) urgent: bool,
}

impl Notices {
    pub(super) fn new() -> Notices {
        Notices {
            due: None,
            pending: Vec::with_capacity(PENDING_CAPACITY),
            count: 0,
            deadline: None,
            urgent: false,
        }
    }

    /// Forgets everything: the connection is gone.
    pub(super) fn clear(&mut self) {
        self.due = None;
        self.pending.clear();
        self.count = 0;
        self.deadline = None;
        self.urgent = false;
    }
}
