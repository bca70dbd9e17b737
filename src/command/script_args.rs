//! The arguments each lock command's script takes (key count, keys,
//! values; the tag last for a tagged script): the part of a script call
//! that is the same by digest and by body, and for a release's sharded
//! twin.

use super::{Command, ScriptId};
use crate::resp::{encode_args, Arg};

impl Command<'_> {
    /// The plain script and the tagged script this command runs (none for
    /// an acquisition's plain form, which is `SET`, and for PING).
    pub(super) fn scripts(&self) -> (Option<ScriptId>, Option<ScriptId>) {
        match self {
            Command::Acquire { .. } => (None, Some(ScriptId::AcquireTagged)),
            Command::Release { .. } => (Some(ScriptId::Release), Some(ScriptId::ReleaseTagged)),
            Command::Extend { .. } => (Some(ScriptId::Extend), Some(ScriptId::ExtendTagged)),
            Command::FenceAcquire { .. } => (
                Some(ScriptId::FenceAcquire),
                Some(ScriptId::FenceAcquireTagged),
            ),
            Command::WriteBack { .. } => {
                (Some(ScriptId::WriteBack), Some(ScriptId::WriteBackTagged))
            }
            // The operator's calls: always followed by ECHO (an ACL that
            // refuses ECHO fails them on that master).
            Command::FenceProbe { .. } => (Some(ScriptId::FenceProbe), None),
            Command::FenceBarrier { .. } => (Some(ScriptId::FenceBarrier), None),
            Command::FenceAnchor { .. } => (Some(ScriptId::FenceAnchor), None),
            Command::Ping | Command::Inspect { .. } | Command::Publish { .. } => (None, None),
        }
    }

    /// Appends the arguments of this command's script after the script name
    /// (key count, keys, arguments; with `tag`, the tag last): the part
    /// that is the same for EVALSHA and EVAL. Returns how many it wrote.
    pub(super) fn encode_script_args(&self, tag: Option<u64>, out: &mut Vec<u8>) -> usize {
        let mut args: [Arg<'_>; 8] = [Arg::Bytes(b""); 8];
        let mut n = 0;
        let mut push = |arg| {
            args[n] = arg;
            n += 1;
        };
        match *self {
            Command::Acquire {
                resource,
                value,
                ttl_ms,
            }
            | Command::Extend {
                resource,
                value,
                ttl_ms,
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(value));
                push(Arg::Uint(ttl_ms));
            }
            Command::Release {
                resource,
                value,
                notify: None,
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(value));
            }
            // The channel is an argument, never a key (see `scripts`).
            Command::Release {
                resource,
                value,
                notify: Some((channel, notice)),
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(value));
                push(Arg::Bytes(channel));
                push(Arg::Bytes(notice));
            }
            Command::FenceAcquire {
                resource,
                domain,
                value,
                ttl_ms,
            } => {
                push(Arg::Bytes(b"2"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(domain));
                push(Arg::Bytes(value));
                push(Arg::Uint(ttl_ms));
            }
            Command::WriteBack {
                resource,
                domain,
                value,
                token,
                epoch,
            } => {
                push(Arg::Bytes(b"2"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(domain));
                push(Arg::Bytes(value));
                push(Arg::Uint(token));
                push(Arg::Uint(epoch));
            }
            Command::FenceProbe { domain } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(domain));
            }
            Command::FenceBarrier {
                domain,
                epoch,
                place: (domain_id, members),
                member,
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(domain));
                push(Arg::Uint(epoch));
                push(Arg::Uint(domain_id));
                push(Arg::Uint(u64::from(members)));
                push(Arg::Uint(u64::from(member)));
            }
            Command::FenceAnchor {
                domain,
                counter,
                epoch,
                place: (domain_id, members),
                member,
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(domain));
                push(Arg::Uint(counter));
                push(Arg::Uint(epoch));
                push(Arg::Uint(domain_id));
                push(Arg::Uint(u64::from(members)));
                push(Arg::Uint(u64::from(member)));
            }
            Command::Ping | Command::Inspect { .. } | Command::Publish { .. } => return 0,
        }
        if let Some(tag) = tag {
            push(Arg::Uint(tag));
        }
        encode_args(out, &args[..n]);
        n
    }
}
