//! What is said to a master: the lock commands and the form each takes on
//! a connection (here), the scripts they run (`scripts`), the native
//! commands that do the same without a script (`native`), how a reply
//! counts (`reply`), what a connection can do (`rights`), what a server
//! says it is (`identity`: whether it may be a voter, and who it is, for
//! the failover re-check; `role`: whether it is a master, as a Sentinel
//! voter's master must show), and the replica guard's `WAIT` behind a
//! write (`replica_ack`).
//!
//! Every command carries a *tag*, a number unique on its connection, that
//! comes back in the last reply the command gets: a command is followed by
//! `ECHO tag`, and its own reply counts only once the echo has come back.
//! RESP2 has no request ids, so this is what makes "a reply answers exactly
//! the command it is matched to" hold for any timing: a surplus or stale
//! reply shifts the stream by one, and the shifted stream fails the tag
//! check before any vote is counted. `ECHO` costs a server about a quarter
//! of a microsecond (INFO commandstats), less than folding the tag into the
//! scripts (about 2.5 µs more per call, measured the same way).
//!
//! A connection whose ACL refuses `ECHO` (the handshake probes it) uses
//! *tagged* scripts instead, which return `2 * tag + status`; so does the
//! first acquisition on a new connection, sent before the probe's answer.
//! Error replies carry no tag, but an error only ever counts against a
//! command, never for it.

pub(crate) mod channel;
mod encoded;
pub(crate) mod fence;
pub(crate) mod identity;
mod kind;
mod many;
pub(crate) mod native;
mod reencode;
mod replica_ack;
mod reply;
pub(crate) mod rights;
mod role;
mod scripts;

pub(crate) use encoded::Encoded;
pub(crate) use kind::{Command, Form};
pub(crate) use many::SetCommand;
pub use native::CommandForm;
pub(crate) use native::Native;
pub(crate) use reencode::{
    encode_native_from_script_args, encode_notice_from_script_args,
    encode_release_run_from_script_args, encode_script_head, encode_set_from_script_args,
};
pub(crate) use replica_ack::{Acked, ReplicaAck};
pub(crate) use reply::{
    check_tag, describe, is_noscript, judge_holder, judge_listeners, judge_pttl, judge_publish,
    judge_script, judge_set, judge_tagged_script, Vote,
};
pub(crate) use rights::Capabilities;
pub(crate) use role::Role;
pub(crate) use scripts::{ScriptId, TAG_LIMIT};

#[cfg(test)]
mod sharded_tests;
#[cfg(test)]
mod tests;
