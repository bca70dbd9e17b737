//! One blocking exchange with a server, off the lock path: a new
//! connection (TLS too, as any other), the node's `AUTH` if it has one,
//! the caller's commands in the same write, and their replies handed to
//! the caller one by one, all within a deadline; then the connection is
//! closed. What a Sentinel voter's watcher uses to ask the sentinels for
//! the master and the master for its role (`round::sentinel`), never a
//! round.

use super::node::Node;
use super::transport::Transport;
use crate::error::{NodeError, Phase, ProtocolError, ServerError};
use crate::os::PollSet;
use crate::resp::{decode, Decoded, Reply};
use std::time::Instant;

/// Sends `commands` (`count` of them, encoded) to `node` after its `AUTH`
/// (if its URL has credentials), and hands each reply to `read` with its
/// index, in order, until all came or `read` says it has what it wanted
/// (`Ok(false)`). An `AUTH` refused is [`NodeError::Handshake`]; nothing
/// past `deadline`.
pub(crate) fn exchange(
    node: &Node,
    commands: &[u8],
    count: usize,
    deadline: Instant,
    mut read: impl FnMut(usize, &Reply<'_>) -> Result<bool, NodeError>,
) -> Result<(), NodeError> {
    let mut transport = Transport::new();
    transport.connect(node)?;
    let auth = node.auth_bytes();
    transport.output().extend_from_slice(auth);
    transport.output().extend_from_slice(commands);
    let mut owed_auth = !auth.is_empty();
    let mut index = 0;
    let mut poll = PollSet::default();
    transport.flush()?;
    loop {
        while index < count {
            let (used, more) = match decode(transport.unread()) {
                Ok(Decoded::Complete(reply, used)) => {
                    let more = if owed_auth {
                        owed_auth = false;
                        match reply {
                            Reply::Simple(b"OK") => true,
                            Reply::Error(line) => {
                                let refused = ServerError::from_line_redacted(line);
                                return Err(NodeError::Handshake(refused));
                            }
                            other => {
                                return Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
                                    format!("{} to AUTH", crate::command::describe(&other)),
                                )))
                            }
                        }
                    } else {
                        index += 1;
                        read(index - 1, &reply)?
                    };
                    (used, more)
                }
                Ok(Decoded::Partial) => break,
                Err(e) => return Err(NodeError::Protocol(ProtocolError::Malformed(e))),
            };
            transport.consume(used);
            if !more {
                return Ok(());
            }
        }
        if index >= count {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            let phase = transport.opening_phase().unwrap_or(Phase::Reply);
            return Err(NodeError::TimedOut(phase));
        }
        let Some(fd) = transport.raw_fd() else {
            return Err(NodeError::Closed);
        };
        let (want_read, want_write) = transport.interest(true);
        poll.clear();
        poll.add(fd, want_read, want_write);
        if poll.wait(deadline - now).is_err() {
            continue;
        }
        let ready = poll.ready(0);
        if ready.writable {
            transport.on_writable()?;
        }
        if ready.readable {
            transport.read_once()?;
        }
    }
}
