//! The Lua scripts the lock commands run (by digest with `EVALSHA`, or by
//! body with `EVAL`), and the bound that keeps a tagged script's answer
//! exact.

/// A Lua script and its SHA-1 digest (what EVALSHA names it by).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static [u8],
    pub(crate) digest: &'static [u8],
}

/// Compare-and-delete: deletes the key only if it still holds our value,
/// then, if a channel is given as a second key, publishes a release notice
/// there. The publish is a `pcall`: an ACL user who may not publish (Redis
/// 7's default for new users) must not turn a done release into an error
/// after the key is gone. 1 if deleted, 0 if not ours. ARGV: value, then
/// the notice if there is a channel.
pub(crate) const RELEASE: Script = Script {
    body: b"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return 1 end return 0",
    digest: b"268962138ed6167e6a7285adc3a9619ca64b2c20",
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
/// ARGV: value, then the notice if there is a channel, then the tag.
pub(crate) const RELEASE_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[#ARGV]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return t + 1 end return t",
    digest: b"bab843d58ffb5e77c9bc7938256d1542d2598e72",
};

/// [`EXTEND`], tagged: `2 * tag + 1` if extended, `2 * tag` if not ours.
/// ARGV: value, ttl in ms, tag.
pub(crate) const EXTEND_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return t + 1 end return t",
    digest: b"31e4197f956c390a314b20ec698e08f16e13cd80",
};

/// A script, by its index in [`ScriptId::script`]'s table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptId {
    Release = 0,
    Extend = 1,
    AcquireTagged = 2,
    ReleaseTagged = 3,
    ExtendTagged = 4,
}

impl ScriptId {
    /// The scripts every new connection loads (SCRIPT LOAD, pipelined with
    /// its first command). The tagged ones are rarely needed: they go by
    /// body the first time a connection uses them, which caches them.
    pub(crate) const PRELOADED: [ScriptId; 2] = [ScriptId::Release, ScriptId::Extend];

    pub(crate) fn script(self) -> &'static Script {
        const SCRIPTS: [&Script; 5] = [
            &RELEASE,
            &EXTEND,
            &ACQUIRE_TAGGED,
            &RELEASE_TAGGED,
            &EXTEND_TAGGED,
        ];
        SCRIPTS[self as usize]
    }

    /// Its bit in `Capabilities::cached` (see `rights`).
    pub(super) fn bit(self) -> u8 {
        1 << self as u8
    }

    /// Whether the script returns a tagged number (see the module docs).
    pub(crate) fn is_tagged(self) -> bool {
        matches!(
            self,
            ScriptId::AcquireTagged | ScriptId::ReleaseTagged | ScriptId::ExtendTagged
        )
    }
}

/// Tags stay below 2^52 so that `2 * tag + 1`, computed by Lua in a double,
/// is exact. A connection would need 2^52 commands to wrap.
pub(crate) const TAG_LIMIT: u64 = 1 << 52;
