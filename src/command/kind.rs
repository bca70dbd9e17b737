//! The lock commands (`Command`), and the forms a command takes on a
//! connection (`Form`).

use super::channel::{channel_of, key_of};
use super::many::SetCommand;
use super::native::Native;
use super::scripts::ScriptId;
use crate::cluster::key_slot;
use crate::names::Names;
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
    /// given (by `SPUBLISH` on a cluster node: the channel must then share
    /// the key's slot, see `handle::notify::message`).
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
    /// how long (`Redlock::inspect`). With `holder`, `GETRANGE` between
    /// them reads the value's holder label: the bytes after the secret
    /// (`value::LABEL_RANGE`), never the secret.
    Inspect { resource: &'a [u8], holder: bool },
    /// `PUBLISH channel message` (`SPUBLISH` on a cluster node): only ever
    /// sent without waiting for the answer (which is checked when it comes,
    /// and counts for nothing).
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
    /// A command over every key of a set (see `many`), fenced or not: on
    /// a cluster voter, split in per-slot parts where its keys span slots
    /// (`round::parts`; a fenced set there is refused before any I/O).
    Set(SetCommand<'a>),
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
    /// channel (`PUBSUB SHARDNUMSUB` if `id` is sharded: a cluster node's),
    /// then `ECHO tag`. The notice itself goes out only if the
    /// compare-and-delete answered 1 and someone listens (see
    /// `conn::notice`).
    Native {
        form: Native,
        id: ScriptId,
        notice: bool,
    },
    /// A set's release or extension (plain script `id`) without scripts:
    /// a run of native form `form`, one command per key (two for an
    /// extension that repairs: `SET … IFEQ`, then `SET … NX`), then `ECHO
    /// tag` (see `conn::run`).
    Run { form: Native, id: ScriptId },
    /// `PING tag`.
    Ping,
    /// `PTTL resource` (then, with `holder`, `GETRANGE` of the value's
    /// label), then `PING tag` (not `ECHO`: connections that may not run
    /// `ECHO` use tagged scripts instead, and `PTTL` has none).
    PttlThenPing { holder: bool },
    /// `PUBLISH channel message` (`SPUBLISH` if `sharded`), untagged.
    Publish { sharded: bool },
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
            | Command::Inspect { resource, .. }
            | Command::FenceAcquire { resource, .. }
            | Command::WriteBack { resource, .. } => Some(resource),
            Command::FenceProbe { domain, .. }
            | Command::FenceBarrier { domain, .. }
            | Command::FenceAnchor { domain, .. } => Some(domain),
            Command::Publish { channel, .. } => Some(channel),
            Command::Set(set) => set.keys().iter().next(),
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
                | Command::Set(SetCommand::FenceAcquire { .. } | SetCommand::WriteBack { .. })
        )
    }

    /// The command as a voter whose keys differ sends it: with its lock
    /// key (and its notice's channel) written for the key `prefix` (a voter
    /// of the single-cluster mode, whose keys carry a hash tag of their
    /// own: see [`Command::with_key_prefix`]), and its fence domain's hash
    /// that of slot `domain_slot`, into `domain` (a cluster voter keeps one
    /// per slot; see `fence::slot_domain_key`). Each buffer is cleared
    /// first, and only touched if used. A set's keys (and its release's
    /// channels) are written into `set_keys` and `set_channels` the same
    /// way (see [`SetCommand::with_key_prefix`]).
    pub(crate) fn with_keys<'k>(
        &self,
        prefix: Option<&[u8]>,
        domain_slot: Option<u16>,
        [key, channel, domain]: [&'k mut Vec<u8>; 3],
        [set_keys, set_channels]: [&'k mut Names; 2],
    ) -> Command<'k>
    where
        'a: 'k,
    {
        let mut out: Command<'k> = match (prefix, self) {
            (Some(prefix), Command::Set(set)) => {
                Command::Set(set.with_key_prefix(prefix, set_keys, set_channels))
            }
            (Some(prefix), _) => self.with_key_prefix(prefix, key, channel),
            (None, _) => *self,
        };
        if let (Some(slot), Some(hash)) = (domain_slot, out.domain_mut()) {
            super::fence::slot_domain_key(hash, slot, domain);
            let domain: &'k [u8] = domain;
            *hash = domain;
        }
        out
    }

    /// The fence domain's hash, for the commands that name it.
    fn domain_mut(&mut self) -> Option<&mut &'a [u8]> {
        match self {
            Command::FenceAcquire { domain, .. }
            | Command::WriteBack { domain, .. }
            | Command::FenceProbe { domain, .. }
            | Command::FenceBarrier { domain, .. }
            | Command::FenceAnchor { domain, .. } => Some(domain),
            Command::Set(set) => set.domain_mut(),
            _ => None,
        }
    }

    /// The command with its lock key written as `prefix` then the key,
    /// into `key` (cleared first): for a voter whose keys carry a hash tag
    /// of their own (the single-cluster mode). A release's notice, and a
    /// waiter's message, go on that key's channel (written into `channel`:
    /// it must share the key's slot; see `channel`). Commands without a
    /// lock key are returned as they are.
    pub(crate) fn with_key_prefix<'k>(
        &self,
        prefix: &[u8],
        key: &'k mut Vec<u8>,
        channel: &'k mut Vec<u8>,
    ) -> Command<'k>
    where
        'a: 'k,
    {
        let resource = match *self {
            Command::Acquire { resource, .. }
            | Command::Release { resource, .. }
            | Command::Extend { resource, .. }
            | Command::Inspect { resource, .. }
            | Command::FenceAcquire { resource, .. }
            | Command::WriteBack { resource, .. } => resource,
            Command::Publish {
                channel: theirs, ..
            } => match key_of(theirs) {
                Some(resource) => resource,
                None => return *self,
            },
            other => return other,
        };
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(resource);
        let resource: &'k [u8] = key;
        channel.clear();
        if matches!(
            self,
            Command::Release {
                notify: Some(_),
                ..
            } | Command::Publish { .. }
        ) {
            channel_of(resource, channel);
        }
        let channel: &'k [u8] = channel;
        match *self {
            Command::Acquire { value, ttl_ms, .. } => Command::Acquire {
                resource,
                value,
                ttl_ms,
            },
            Command::Release { value, notify, .. } => Command::Release {
                resource,
                value,
                notify: notify.map(|(_, notice)| (channel, notice)),
            },
            Command::Publish { message, .. } => Command::Publish { channel, message },
            Command::Extend { value, ttl_ms, .. } => Command::Extend {
                resource,
                value,
                ttl_ms,
            },
            Command::Inspect { holder, .. } => Command::Inspect { resource, holder },
            Command::FenceAcquire {
                domain,
                value,
                ttl_ms,
                ..
            } => Command::FenceAcquire {
                resource,
                domain,
                value,
                ttl_ms,
            },
            Command::WriteBack {
                domain,
                value,
                token,
                epoch,
                ..
            } => Command::WriteBack {
                resource,
                domain,
                value,
                token,
                epoch,
            },
            other => other,
        }
    }
}

impl Command<'_> {
    /// Whether the command may set a lock's key where it is absent: an
    /// acquisition (a single lock's, fenced or not, or a set's). The rules
    /// for sending one (a lagging master, a connection still awaiting its
    /// rights or its role, the owed limit) go by this.
    pub(crate) fn is_acquisition(&self) -> bool {
        matches!(
            self,
            Command::Acquire { .. }
                | Command::FenceAcquire { .. }
                | Command::Set(SetCommand::Acquire { .. } | SetCommand::FenceAcquire { .. })
        )
    }

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
            Command::Set(set) => set.scripts(),
            Command::Ping | Command::Inspect { .. } | Command::Publish { .. } => (None, None),
        }
    }

    /// Appends the arguments of this command's script after the script name
    /// (key count, keys, arguments; with `tag`, the tag last): the part
    /// that is the same for EVALSHA and EVAL. Returns how many it wrote.
    pub(super) fn encode_script_args(&self, tag: Option<u64>, out: &mut Vec<u8>) -> usize {
        if let Command::Set(set) = self {
            return set.encode_script_args(tag, out);
        }
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
            Command::Ping | Command::Inspect { .. } | Command::Publish { .. } | Command::Set(_) => {
                return 0
            }
        }
        if let Some(tag) = tag {
            push(Arg::Uint(tag));
        }
        encode_args(out, &args[..n]);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a set's acquisition was not one for the round's sending
    /// rules (`Round::is_acquisition_for` listed the single forms only), so
    /// it went out on a Sentinel voter's connection before its master had
    /// said it is one (`ROLE`), and had an acquisition's owed limit.
    #[test]
    fn every_form_of_acquisition_is_one_and_nothing_else_is() {
        let mut names = crate::names::Names::default();
        names.fill(["a", "b"], |_| Ok(())).expect("two names");
        let set_acquire = Command::Set(SetCommand::Acquire {
            keys: names.keys(),
            value: b"v",
            ttl_ms: 10,
        });
        assert!(set_acquire.is_acquisition());
        let single = Command::Acquire {
            resource: b"a",
            value: b"v",
            ttl_ms: 10,
        };
        assert!(single.is_acquisition());
        let extend = Command::Extend {
            resource: b"a",
            value: b"v",
            ttl_ms: 10,
        };
        assert!(!extend.is_acquisition());
    }

    #[test]
    fn a_voters_own_keys_rewrite_the_lock_key_and_the_domains_hash_of_its_slot() {
        use crate::cluster::{key_slot, tag_for_slot};
        let domain = crate::command::fence::domain_key(b"pay");
        let (mut key, mut channel, mut hash) = (Vec::new(), Vec::new(), Vec::new());
        let (mut set_keys, mut set_channels) = (Names::default(), Names::default());
        let acquire = Command::FenceAcquire {
            resource: b"user:7",
            domain: &domain,
            value: b"v",
            ttl_ms: 10,
        };
        // A cluster voter: the hash of the lock key's slot, the key as it is.
        let slot = acquire.slot().unwrap();
        assert_eq!(slot, key_slot(b"user:7"));
        let on_cluster = acquire.with_keys(
            None,
            Some(slot),
            [&mut key, &mut channel, &mut hash],
            [&mut set_keys, &mut set_channels],
        );
        let Command::FenceAcquire {
            resource,
            domain: d,
            ..
        } = on_cluster
        else {
            panic!("{on_cluster:?}")
        };
        assert_eq!((resource, key_slot(d)), (&b"user:7"[..], slot));
        let tag = tag_for_slot(slot).unwrap();
        assert_eq!(d, [&b"redlock-sync:fence:{"[..], tag, b"}:pay"].concat());
        // A voter of the single-cluster mode: both keys in its slot.
        let on_shard = acquire.with_keys(
            Some(b"{06S}"),
            Some(0),
            [&mut key, &mut channel, &mut hash],
            [&mut set_keys, &mut set_channels],
        );
        let Command::FenceAcquire {
            resource,
            domain: d,
            ..
        } = on_shard
        else {
            panic!("{on_shard:?}")
        };
        assert_eq!((key_slot(resource), key_slot(d)), (0, 0));
        assert_eq!(resource, b"{06S}user:7");
        // The operator's commands name their slot; other commands no hash.
        let probe = Command::FenceProbe {
            domain: &domain,
            slot: 4242,
        };
        assert!(probe.names_domain() && probe.slot() == Some(4242));
        let release = Command::Release {
            resource: b"user:7",
            value: b"v",
            notify: None,
        };
        assert!(!release.names_domain());
        assert_eq!(
            release.with_keys(
                None,
                Some(3),
                [&mut key, &mut channel, &mut hash],
                [&mut set_keys, &mut set_channels]
            ),
            release
        );
        assert_eq!(Command::Ping.slot(), None);
    }
}
