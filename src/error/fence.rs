//! Why a master's fenced answers do not count (see `docs/fencing.md`,
//! "Counter loss" and "Eviction policies"): what its connection's probe of
//! the fence domain found, each with what the operator does.

/// Why a master is left out of fenced acquisitions (`Builder::fencing`):
/// found by the probe each new connection makes of the fence domain. (A
/// master without an anchor answers the acquisition itself with the server
/// error `NOANCHOR`.) Its
/// acquisition counts as failed, and its key there is released like any
/// other; the lock still works while a quorum of masters counts. Fixed by
/// the operator: [permanent](super::NodeError::is_permanent) until then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FenceFault {
    /// The anchor predates a restart of the server: its counter may have
    /// gone back (persistence rolls back to the last save).
    #[error("fence anchor predates a restart of this master: run Redlock::fence_repair")]
    Restarted,
    /// The server refuses `INFO` inside scripts, so a restart cannot be
    /// told: fencing needs it (`ACL SETUSER <user> +info`).
    #[error("INFO is refused, so restarts cannot be told: fencing needs +info (ACL SETUSER <user> +info)")]
    InfoRefused,
    /// The master's `maxmemory-policy` is `allkeys-*`, which may evict the
    /// fence counter at any moment: set `noeviction` or a `volatile-*`
    /// policy.
    #[error(
        "maxmemory-policy {0} may evict the fence counter: set noeviction or a volatile-* policy"
    )]
    EvictingPolicy(EvictingPolicy),
    /// The probe itself failed (a script error, a refused `EVAL`).
    #[error(
        "the fence probe failed on this master: fencing needs EVAL and the domain key in the ACL"
    )]
    ProbeFailed,
}

/// A `maxmemory-policy` that may evict any key, the fence counter too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvictingPolicy {
    /// `allkeys-lru`.
    AllkeysLru,
    /// `allkeys-lfu`.
    AllkeysLfu,
    /// `allkeys-random`.
    AllkeysRandom,
    /// Another `allkeys-*` policy (a newer server's).
    OtherAllkeys,
}

impl EvictingPolicy {
    /// The policy named `name`, if it may evict keys without a TTL.
    pub(crate) fn from_name(name: &[u8]) -> Option<EvictingPolicy> {
        match name {
            b"allkeys-lru" => Some(EvictingPolicy::AllkeysLru),
            b"allkeys-lfu" => Some(EvictingPolicy::AllkeysLfu),
            b"allkeys-random" => Some(EvictingPolicy::AllkeysRandom),
            _ if name.starts_with(b"allkeys-") => Some(EvictingPolicy::OtherAllkeys),
            _ => None,
        }
    }
}

impl std::fmt::Display for EvictingPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EvictingPolicy::AllkeysLru => "allkeys-lru",
            EvictingPolicy::AllkeysLfu => "allkeys-lfu",
            EvictingPolicy::AllkeysRandom => "allkeys-random",
            EvictingPolicy::OtherAllkeys => "allkeys-*",
        })
    }
}
