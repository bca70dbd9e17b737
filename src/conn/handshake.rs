//! What each command of a connection's set-up (its handshake, see
//! `node`) must answer, and what the answer teaches the connection; and
//! what the identity probes tell when read again (see `identity`).

use super::expect::Step;
use super::node::HandshakeStep;
use crate::command::fence::FenceCheck;
use crate::command::identity::IdentityProbe;
use crate::command::{Native, Role};
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::Reply;

/// Judges the answer to handshake command `step`.
pub(super) fn judge(step: HandshakeStep, reply: &Reply<'_>) -> Result<Step, NodeError> {
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
        (HandshakeStep::FenceProbe, reply) => Ok(Step::Fence(FenceCheck::from_probe(reply))),
        (HandshakeStep::Native(form), reply) => {
            Ok(Step::NativeProbe(form, form.judge_probe(reply)))
        }
        (HandshakeStep::ClusterSetProbe, reply) => Ok(Step::NativeProbe(
            Native::MSetEx,
            Native::judge_cluster_set_probe(reply),
        )),
        (HandshakeStep::Identity(probe), reply) => probe.judge(reply).map(Step::Identity),
        // A Sentinel voter's master must show that it is one.
        (HandshakeStep::Role, reply) => match Role::judge(reply)?.refusal() {
            Some(refusal) => Err(refusal),
            None => Ok(Step::RoleChecked),
        },
        (_, other) => Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
            format!("{} to a handshake command", crate::command::describe(other)),
        ))),
    }
}

/// Judges the answer to an identity probe read again: what it told, or
/// that the server is no voter of its kind now (a change, not an error of
/// the connection).
pub(super) fn judge_reread(probe: IdentityProbe, reply: &Reply<'_>) -> Result<Step, NodeError> {
    match probe.judge(reply) {
        Ok(told) => Ok(Step::Reread(Some(told))),
        Err(NodeError::NotAVoter(_)) => Ok(Step::Reread(None)),
        Err(e) => Err(e),
    }
}
