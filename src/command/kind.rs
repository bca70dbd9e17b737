//! The lock commands (`Command`), and the forms a command takes on a
//! connection (`Form`).

use super::native::Native;
use super::scripts::ScriptId;
use crate::cluster::key_slot;
use crate::resp::{encode_args, Arg};

/// A lock command for one resource and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command<'a> {
    /// Set the key if it is absent (`SET resource value NX PX ttl`).
    Acquire {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// Compare-and-delete, publishing `notify.1` on channel `notify.0` if
    /// given.
    Release {
        resource: &'a [u8],
        value: &'a [u8],
        notify: Option<(&'a [u8], &'a [u8])>,
    },
    /// Compare-and-pexpire.
    Extend {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// `PING tag`: answers with the tag (a health check).
    Ping,
    /// `PTTL resource`, then `PING tag`: whether the key exists, and for
    /// how long (`Redlock::inspect`). Never reads the key's value.
    Inspect { resource: &'a [u8] },
    /// `PUBLISH channel message`: only ever sent without waiting for the
    /// answer (which is checked when it comes, and counts for nothing).
    Publish {
        channel: &'a [u8],
        message: &'a [u8],
    },
    /// Fencing's round 1 (`acquire.lua`): set the key if it is absent and,
    /// if set, raise the counter of the fence domain (the hash `domain`).
    FenceAcquire {
        resource: &'a [u8],
        domain: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// Fencing's round 2 (`write_back.lua`): raise the counter to `token`
    /// while the key holds `value`, in `epoch`.
    WriteBack {
        resource: &'a [u8],
        domain: &'a [u8],
        value: &'a [u8],
        token: u64,
        epoch: u64,
    },
    /// The fence domain's state (`probe.lua`). The operator's three fence
    /// commands name the `slot` whose hash they mean on a cluster voter
    /// (which keeps one per slot); a standalone master has one hash, and
    /// a voter of the single-cluster mode the one of its own slot.
    FenceProbe { domain: &'a [u8], slot: u16 },
    /// The repair's barrier (`barrier.lua`): move to `epoch`, read the
    /// counter; an anchor of the earlier format records the domain's
    /// `place` (its id, how many members) and becomes member `member`.
    FenceBarrier {
        domain: &'a [u8],
        slot: u16,
        epoch: u64,
        place: (u64, u32),
        member: u32,
    },
    /// Anchor the domain (`anchor.lua`) with at least `counter` in `epoch`,
    /// as member `member` of the domain `place` (its id, how many members).
    FenceAnchor {
        domain: &'a [u8],
        slot: u16,
        counter: u64,
        epoch: u64,
        place: (u64, u32),
        member: u32,
    },
}

/// How a connection sends a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `SET ... NX PX`, then `ECHO tag`.
    SetThenEcho,
    /// A plain script, by digest (`EVALSHA`) or by body (`EVAL`), then
    /// `ECHO tag`.
    ScriptThenEcho { id: ScriptId, by_digest: bool },
    /// A tagged script, by digest or by body.
    TaggedScript { id: ScriptId, by_digest: bool },
    /// A native command instead of the plain script `id` (see `native`),
    /// then, for a release with a notice (`notice`), `PUBSUB NUMSUB` of its
    /// channel, then `ECHO tag`. The notice itself goes out only if the
    /// compare-and-delete answered 1 and someone listens (see
    /// `conn::notice`).
    Native {
        form: Native,
        id: ScriptId,
        notice: bool,
    },
    /// `PING tag`.
    Ping,
    /// `PTTL resource`, then `PING tag` (not `ECHO`: connections that may
    /// not run `ECHO` use tagged scripts instead, and `PTTL` has none).
    PttlThenPing,
    /// `PUBLISH channel message`, untagged.
    Publish,
}

impl<'a> Command<'a> {
    /// The key the command is about, which decides where it goes on a
    /// cluster voter (`None`: a command without a key, such as `PING`).
    #[inline]
    pub(crate) fn key(&self) -> Option<&'a [u8]> {
        match *self {
            Command::Acquire { resource, .. }
            | Command::Release { resource, .. }
            | Command::Extend { resource, .. }
            | Command::Inspect { resource }
            | Command::FenceAcquire { resource, .. }
            | Command::WriteBack { resource, .. } => Some(resource),
            Command::FenceProbe { domain, .. }
            | Command::FenceBarrier { domain, .. }
            | Command::FenceAnchor { domain, .. } => Some(domain),
            Command::Publish { channel, .. } => Some(channel),
            Command::Ping => None,
        }
    }

    /// The slot the command's keys are in on a cluster voter: the one its
    /// fence commands name, or its key's (`None`: a command without a
    /// key). Computed, not stored: only rounds with a cluster voter ask.
    pub(crate) fn slot(&self) -> Option<u16> {
        match *self {
            Command::FenceProbe { slot, .. }
            | Command::FenceBarrier { slot, .. }
            | Command::FenceAnchor { slot, .. } => Some(slot),
            _ => self.key().map(key_slot),
        }
    }

    /// Whether the command names a fence domain's hash, whose key depends
    /// on the voter (see [`Command::with_keys`]).
    #[inline]
    pub(crate) fn names_domain(&self) -> bool {
        matches!(
            self,
            Command::FenceAcquire { .. }
                | Command::WriteBack { .. }
                | Command::FenceProbe { .. }
                | Command::FenceBarrier { .. }
                | Command::FenceAnchor { .. }
        )
    }

    /// The command as a voter whose keys differ sends it: its lock key
    /// written as `prefix` then the key, into `key` (a voter of the
    /// single-cluster mode, whose keys carry a hash tag of their own), and
    /// its fence domain's hash that of slot `domain_slot`, into `domain`
    /// (a cluster voter keeps one per slot; see `fence::slot_domain_key`).
    /// Each buffer is cleared first, and only touched if used.
    pub(crate) fn with_keys<'k>(
        &self,
        prefix: Option<&[u8]>,
        domain_slot: Option<u16>,
        key: &'k mut Vec<u8>,
        domain: &'k mut Vec<u8>,
    ) -> Command<'k>
    where
        'a: 'k,
    {
        let mut out: Command<'k> = *self;
        if let (Some(prefix), Some(resource)) = (prefix, out.resource_mut()) {
            key.clear();
            key.extend_from_slice(prefix);
            key.extend_from_slice(resource);
            let key: &'k [u8] = key;
            *resource = key;
        }
        if let (Some(slot), Some(hash)) = (domain_slot, out.domain_mut()) {
            super::fence::slot_domain_key(hash, slot, domain);
            let domain: &'k [u8] = domain;
            *hash = domain;
        }
        out
    }

    /// The lock key, for the commands that have one.
    fn resource_mut(&mut self) -> Option<&mut &'a [u8]> {
        match self {
            Command::Acquire { resource, .. }
            | Command::Release { resource, .. }
            | Command::Extend { resource, .. }
            | Command::Inspect { resource }
            | Command::FenceAcquire { resource, .. }
            | Command::WriteBack { resource, .. } => Some(resource),
            _ => None,
        }
    }

    /// The fence domain's hash, for the commands that name it.
    fn domain_mut(&mut self) -> Option<&mut &'a [u8]> {
        match self {
            Command::FenceAcquire { domain, .. }
            | Command::WriteBack { domain, .. }
            | Command::FenceProbe { domain, .. }
            | Command::FenceBarrier { domain, .. }
            | Command::FenceAnchor { domain, .. } => Some(domain),
            _ => None,
        }
    }
}

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
            Command::Release {
                resource,
                value,
                notify: Some((channel, notice)),
            } => {
                push(Arg::Bytes(b"2"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(channel));
                push(Arg::Bytes(value));
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
            Command::FenceProbe { domain, .. } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(domain));
                // The operator's: no policy, nothing read of an absent hash
                // (a connection's handshake probes with its own call).
                push(Arg::Bytes(b"1"));
            }
            Command::FenceBarrier {
                domain,
                epoch,
                place: (domain_id, members),
                member,
                ..
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
                ..
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
