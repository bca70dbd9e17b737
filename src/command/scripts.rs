//! The Lua scripts the lock commands run (by digest with `EVALSHA`, or by
//! body with `EVAL`), and the bound that keeps a tagged script's answer
//! exact. The fencing protocol's scripts are compiled in from
//! `src/fence/*.lua` (see `fence` for their answers).

/// A Lua script and its SHA-1 digest (what EVALSHA names it by).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static [u8],
    pub(crate) digest: &'static [u8],
}

/// Compare-and-delete: deletes the key only if it still holds our value,
/// then, if a channel and a notice follow the value, publishes the release
/// notice there. The channel is an argument, never a key: on a cluster
/// node, a second key would have to share the lock key's slot, and one
/// that never exists makes the script fail with `TRYAGAIN` while the slot
/// migrates (the channel shares the slot anyway: see `handle::notify`).
/// The publish is a `pcall`: an ACL user who may not publish (Redis 7's
/// default for new users), or a server that refuses an undeclared name
/// during a migration, must not turn a done release into an error after
/// the key is gone. 1 if deleted, 0 if not ours. ARGV: value, then the
/// channel and the notice if there is a channel.
pub(crate) const RELEASE: Script = Script {
    body: b"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if ARGV[3] then redis.pcall('publish', ARGV[2], ARGV[3]) end return 1 end return 0",
    digest: b"79d323f69e29aeb6284bb7f9f509b27599a33543",
};

/// [`RELEASE`] for a cluster node: the notice goes by `SPUBLISH` (sharded
/// pub/sub, to the subscribers of the node that owns the channel's slot,
/// which is the lock key's), not by `PUBLISH` (which a cluster broadcasts
/// to every node). The same arguments.
pub(crate) const RELEASE_SHARDED: Script = Script {
    body: b"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if ARGV[3] then redis.pcall('spublish', ARGV[2], ARGV[3]) end return 1 end return 0",
    digest: b"eb4794863eb27dc2aac4a225d84239006eaae0d3",
};

/// Compare-and-pexpire: resets the key's TTL only if it still holds our
/// value. 1 if extended, 0 if not ours. ARGV: value, ttl in ms.
pub(crate) const EXTEND: Script = Script {
    body: b"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0",
    digest: b"e95849a1757fe494b3c802dc09b717d0c074eb21",
};

/// `SET key value NX PX ttl`, tagged: `2 * tag + 1` if set, `2 * tag` if
/// held. ARGV: value, ttl in ms, tag.
pub(crate) const ACQUIRE_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return t + 1 end return t",
    digest: b"8dcf61f018a9eeb23fbeb34c1403817eb528551a",
};

/// [`RELEASE`], tagged: `2 * tag + 1` if deleted, `2 * tag` if not ours.
/// ARGV: value, then the channel and the notice if there is a channel,
/// then the tag.
pub(crate) const RELEASE_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[#ARGV]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if ARGV[3] then redis.pcall('publish', ARGV[2], ARGV[3]) end return t + 1 end return t",
    digest: b"73d1aadfc999372616ceb44c769f66953f22d623",
};

/// [`RELEASE_TAGGED`] for a cluster node (`SPUBLISH`, as [`RELEASE_SHARDED`]).
pub(crate) const RELEASE_SHARDED_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[#ARGV]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if ARGV[3] then redis.pcall('spublish', ARGV[2], ARGV[3]) end return t + 1 end return t",
    digest: b"dac89bb0b6cf5dcb8df652b9a5eacd49229297a9",
};

/// [`EXTEND`], tagged: `2 * tag + 1` if extended, `2 * tag` if not ours.
/// ARGV: value, ttl in ms, tag.
pub(crate) const EXTEND_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return t + 1 end return t",
    digest: b"31e4197f956c390a314b20ec698e08f16e13cd80",
};

/// Round 1: `SET NX PX` and, if set, the domain's counter raised, atomically.
pub(crate) const FENCE_ACQUIRE: Script = Script {
    body: include_str!("../fence/acquire.lua").as_bytes(),
    digest: b"92635098ee758bd392eeb6d8848eb4e76feb0167",
};

/// Round 2: the counter raised to the token while our key is there.
pub(crate) const FENCE_WRITE_BACK: Script = Script {
    body: include_str!("../fence/write_back.lua").as_bytes(),
    digest: b"bdf2b210f7d7814df4a5830729165b7ee307bddd",
};

/// The domain's state on one master.
pub(crate) const FENCE_PROBE: Script = Script {
    body: include_str!("../fence/probe.lua").as_bytes(),
    digest: b"d280f53b3fff352e3be147b14670bac23dfd96e7",
};

/// The repair's barrier: a fresh epoch, and the counter read with it.
pub(crate) const FENCE_BARRIER: Script = Script {
    body: include_str!("../fence/barrier.lua").as_bytes(),
    digest: b"ae6d04098f7624e619bd2e9e57e8f6d2f0fe5ea6",
};

/// The repair's and the initialisation's anchor.
pub(crate) const FENCE_ANCHOR: Script = Script {
    body: include_str!("../fence/anchor.lua").as_bytes(),
    digest: b"7d6be7b843d7a692acf57981442ad9beaea2de51",
};

/// A set's acquisition: all its keys set, or none (`src/many/acquire.lua`).
/// Plain or tagged by its first argument.
pub(crate) const ACQUIRE_SET: Script = Script {
    body: include_str!("../many/acquire.lua").as_bytes(),
    digest: b"c301ec794513d733b12bdbf029235d2cfae4b714",
};

/// A set's release: every key still ours deleted, a notice on each
/// deleted key's channel (`src/many/release.lua`).
pub(crate) const RELEASE_SET: Script = Script {
    body: include_str!("../many/release.lua").as_bytes(),
    digest: b"8b1d0bcf11072db8a64463c7db715d54a525146f",
};

/// [`RELEASE_SET`] for a cluster node: its notices by `SPUBLISH`
/// (`src/many/release_sharded.lua`), as [`RELEASE_SHARDED`].
pub(crate) const RELEASE_SET_SHARDED: Script = Script {
    body: include_str!("../many/release_sharded.lua").as_bytes(),
    digest: b"1ebcabd879db2d124095fe6567e6a526cec5e12d",
};

/// A set's extension: every key's TTL set anew, or none
/// (`src/many/extend.lua`).
pub(crate) const EXTEND_SET: Script = Script {
    body: include_str!("../many/extend.lua").as_bytes(),
    digest: b"c03c72426efc7fdccc9f9e7a6d2ab775c01fd06e",
};

/// A fenced set's round 1: all its keys set with `NX` or none, then the
/// domain's counter raised once (`src/fence/acquire_set.lua`).
pub(crate) const FENCE_ACQUIRE_SET: Script = Script {
    body: include_str!("../fence/acquire_set.lua").as_bytes(),
    digest: b"9affc12454fae53d787a8b92ca5a4914f01f2360",
};

/// A fenced set's round 2: the counter raised to the token while every
/// key of the set is ours (`src/fence/write_back_set.lua`).
pub(crate) const FENCE_WRITE_BACK_SET: Script = Script {
    body: include_str!("../fence/write_back_set.lua").as_bytes(),
    digest: b"af1ad22c0d713903b6eb62569a6d7336c8760321",
};

/// A script, by its index in [`ScriptId::script`]'s table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptId {
    Release = 0,
    Extend = 1,
    AcquireTagged = 2,
    ReleaseTagged = 3,
    ExtendTagged = 4,
    /// Fencing's round 1 (`SET NX` and the count), plain: its reply is
    /// checked by the `ECHO` that follows.
    FenceAcquire = 5,
    /// The same script with the tag as its last argument.
    FenceAcquireTagged = 6,
    /// Fencing's round 2 (the write-back), plain.
    WriteBack = 7,
    /// The same script with the tag as its last argument.
    WriteBackTagged = 8,
    /// The fence domain's state (per connection, and for the repair).
    FenceProbe = 9,
    /// The repair's barrier.
    FenceBarrier = 10,
    /// The repair's and the initialisation's anchor.
    FenceAnchor = 11,
    /// [`ScriptId::Release`] on a cluster node (its notice by `SPUBLISH`).
    ReleaseSharded = 12,
    /// [`ScriptId::ReleaseTagged`] on a cluster node.
    ReleaseShardedTagged = 13,
    /// A set's acquisition (see `many`), plain: checked by its `ECHO`.
    AcquireSet = 14,
    /// The same script, answering `2 * tag + status`.
    AcquireSetTagged = 15,
    /// A set's release, plain.
    ReleaseSet = 16,
    /// The same script, tagged.
    ReleaseSetTagged = 17,
    /// A set's extension, plain.
    ExtendSet = 18,
    /// The same script, tagged.
    ExtendSetTagged = 19,
    /// [`ScriptId::ReleaseSet`] on a cluster node (its notices by
    /// `SPUBLISH`).
    ReleaseSetSharded = 20,
    /// [`ScriptId::ReleaseSetTagged`] on a cluster node.
    ReleaseSetShardedTagged = 21,
    /// A fenced set's round 1 (all keys or none, the count once), plain.
    FenceAcquireSet = 22,
    /// The same script with the tag as its last argument.
    FenceAcquireSetTagged = 23,
    /// A fenced set's write-back (every key checked), plain.
    WriteBackSet = 24,
    /// The same script with the tag as its last argument.
    WriteBackSetTagged = 25,
}

impl ScriptId {
    /// The scripts every new connection to a standalone master loads
    /// (SCRIPT LOAD, pipelined with its first command). The tagged ones are
    /// rarely needed: they go by body the first time a connection uses
    /// them, which caches them.
    pub(crate) const PRELOADED: [ScriptId; 2] = [ScriptId::Release, ScriptId::Extend];

    /// The same for a cluster node, which releases with the sharded script.
    pub(crate) const PRELOADED_SHARDED: [ScriptId; 2] =
        [ScriptId::ReleaseSharded, ScriptId::Extend];

    /// The scripts a new connection loads: to a cluster node (`sharded`)
    /// or to a standalone master.
    pub(crate) fn preloaded(sharded: bool) -> &'static [ScriptId; 2] {
        if sharded {
            &ScriptId::PRELOADED_SHARDED
        } else {
            &ScriptId::PRELOADED
        }
    }

    pub(crate) fn script(self) -> &'static Script {
        const SCRIPTS: [&Script; 26] = [
            &RELEASE,
            &EXTEND,
            &ACQUIRE_TAGGED,
            &RELEASE_TAGGED,
            &EXTEND_TAGGED,
            &FENCE_ACQUIRE,
            &FENCE_ACQUIRE,
            &FENCE_WRITE_BACK,
            &FENCE_WRITE_BACK,
            &FENCE_PROBE,
            &FENCE_BARRIER,
            &FENCE_ANCHOR,
            &RELEASE_SHARDED,
            &RELEASE_SHARDED_TAGGED,
            &ACQUIRE_SET,
            &ACQUIRE_SET,
            &RELEASE_SET,
            &RELEASE_SET,
            &EXTEND_SET,
            &EXTEND_SET,
            &RELEASE_SET_SHARDED,
            &RELEASE_SET_SHARDED,
            &FENCE_ACQUIRE_SET,
            &FENCE_ACQUIRE_SET,
            &FENCE_WRITE_BACK_SET,
            &FENCE_WRITE_BACK_SET,
        ];
        SCRIPTS[self as usize]
    }

    /// The script a cluster node runs instead (see [`RELEASE_SHARDED`]):
    /// the release's sharded twin, with the same arguments; any other
    /// script is itself.
    pub(crate) fn sharded(self) -> ScriptId {
        match self {
            ScriptId::Release => ScriptId::ReleaseSharded,
            ScriptId::ReleaseTagged => ScriptId::ReleaseShardedTagged,
            ScriptId::ReleaseSet => ScriptId::ReleaseSetSharded,
            ScriptId::ReleaseSetTagged => ScriptId::ReleaseSetShardedTagged,
            other => other,
        }
    }

    /// Whether the script publishes by `SPUBLISH` (a cluster node's).
    pub(crate) fn is_sharded(self) -> bool {
        matches!(
            self,
            ScriptId::ReleaseSharded
                | ScriptId::ReleaseShardedTagged
                | ScriptId::ReleaseSetSharded
                | ScriptId::ReleaseSetShardedTagged
        )
    }

    /// Its bit in `Capabilities::cached` (see `rights`).
    pub(super) fn bit(self) -> u32 {
        1 << self as u32
    }

    /// Whether the script returns a tagged number (see the module docs).
    pub(crate) fn is_tagged(self) -> bool {
        matches!(
            self,
            ScriptId::AcquireTagged
                | ScriptId::ReleaseTagged
                | ScriptId::ReleaseShardedTagged
                | ScriptId::ExtendTagged
                | ScriptId::FenceAcquireTagged
                | ScriptId::WriteBackTagged
                | ScriptId::AcquireSetTagged
                | ScriptId::ReleaseSetTagged
                | ScriptId::ReleaseSetShardedTagged
                | ScriptId::ExtendSetTagged
                | ScriptId::FenceAcquireSetTagged
                | ScriptId::WriteBackSetTagged
        )
    }

    /// Whether the script is a fenced acquisition's round 1 (a single
    /// lock's or a set's), whose grant counts only on a connection whose
    /// probe found the domain valid (`FenceCheck::screen`).
    pub(crate) fn is_fence_round_one(self) -> bool {
        matches!(
            self,
            ScriptId::FenceAcquire
                | ScriptId::FenceAcquireTagged
                | ScriptId::FenceAcquireSet
                | ScriptId::FenceAcquireSetTagged
        )
    }

    /// Whether the script answers with numbers to read (see
    /// `fence::judge_reading`) rather than a plain yes or no.
    pub(crate) fn reads(self) -> bool {
        matches!(
            self,
            ScriptId::FenceAcquire
                | ScriptId::FenceAcquireTagged
                | ScriptId::FenceAcquireSet
                | ScriptId::FenceAcquireSetTagged
                | ScriptId::FenceProbe
                | ScriptId::FenceBarrier
        )
    }
}

/// Tags stay below 2^52 so that `2 * tag + 1`, computed by Lua in a double,
/// is exact. A connection would need 2^52 commands to wrap.
pub(crate) const TAG_LIMIT: u64 = 1 << 52;
