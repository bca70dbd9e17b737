//! Why a master's fenced answers do not count (see `docs/fencing.md`,
//! "Counter loss" and "Eviction policies"): what its connection's probe of
//! the fence domain found, or what its answers showed, each with what the
//! operator does.

/// Why a master is left out of fenced acquisitions (`Builder::fencing`):
/// found by the probe each new connection makes of the fence domain, by
/// the scripts themselves (a master without an anchor answers with the
/// server error `NOANCHOR`, one whose data set changed with `FENCESTALE`),
/// or by comparing the masters' epochs. Its acquisition counts as failed,
/// and its key there is released like any other; the lock still works
/// while a quorum of masters counts. Fixed by the operator:
/// [permanent](super::NodeError::is_permanent) until then.
/// [`NodeHealth::fence_fault`](crate::NodeHealth::fence_fault) shows it,
/// and the event hook hears of it once
/// ([`MasterChange::FenceLeftOut`](crate::MasterChange::FenceLeftOut)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FenceFault {
    /// The fence domain has no anchor on this master: it lost its data (a
    /// restart without persistence, `FLUSHALL`, an eviction), or the
    /// domain was never initialised.
    #[error("no fence anchor on this master (it lost its data, or the domain was never initialised): run Redlock::fence_repair (redlock fence repair), or fence_init for a new domain")]
    Unanchored,
    /// The anchor predates a restart of the server: its counter may have
    /// gone back (persistence rolls back to the last save). On a cluster
    /// voter, also a slot's counter that moved here from another node (it
    /// names that node's run).
    #[error("fence anchor predates a restart of this master (or, on a cluster, its slot moved here from another node): run Redlock::fence_repair (redlock fence repair)")]
    Restarted,
    /// The server is the process that anchored, but its data set changed
    /// since (its replication id is new): it was made a replica and
    /// promoted again (a fail-back, which reloads an older copy), promoted
    /// from a replica, or its replication backlog was created anew; or it
    /// is a replica now. Its counter may have gone back. On a cluster
    /// voter, also a shard failed over, or a slot's counter that moved here
    /// from another node (round 1 cannot tell these apart).
    #[error("fence anchor is not of this master's data set (new replication id: promoted, failed back, or a replica now; on a cluster, a failover or a slot moved here): run Redlock::fence_repair (redlock fence repair)")]
    ReplicationChanged,
    /// The anchor was written by an earlier version of this library,
    /// which did not record the data set (replication id): it cannot tell
    /// a fail-back, so it counts only once a repair upgraded it.
    #[error("fence anchor written by an earlier redlock-sync, which could not tell a rollback: run Redlock::fence_repair (redlock fence repair) once to upgrade it")]
    OldAnchor,
    /// The master is anchored in another fence epoch than the others,
    /// and no epoch has a quorum of masters: a repair's barrier missed it
    /// (or two repairs ran at once).
    #[error("in another fence epoch than the other masters (a repair missed it): run Redlock::fence_repair (redlock fence repair) once every master answers")]
    OtherEpoch,
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

impl FenceFault {
    /// A number for each fault, never 0 or 1 (kept in an atomic by the
    /// health view, where those mean "not known" and "counts").
    pub(crate) fn code(self) -> u8 {
        match self {
            FenceFault::Unanchored => 2,
            FenceFault::Restarted => 3,
            FenceFault::ReplicationChanged => 4,
            FenceFault::OldAnchor => 5,
            FenceFault::OtherEpoch => 6,
            FenceFault::InfoRefused => 7,
            FenceFault::ProbeFailed => 8,
            FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLru) => 9,
            FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLfu) => 10,
            FenceFault::EvictingPolicy(EvictingPolicy::AllkeysRandom) => 11,
            FenceFault::EvictingPolicy(EvictingPolicy::OtherAllkeys) => 12,
        }
    }

    /// The fault of [`FenceFault::code`] `code`.
    pub(crate) fn from_code(code: u8) -> Option<FenceFault> {
        Some(match code {
            2 => FenceFault::Unanchored,
            3 => FenceFault::Restarted,
            4 => FenceFault::ReplicationChanged,
            5 => FenceFault::OldAnchor,
            6 => FenceFault::OtherEpoch,
            7 => FenceFault::InfoRefused,
            8 => FenceFault::ProbeFailed,
            9 => FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLru),
            10 => FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLfu),
            11 => FenceFault::EvictingPolicy(EvictingPolicy::AllkeysRandom),
            12 => FenceFault::EvictingPolicy(EvictingPolicy::OtherAllkeys),
            _ => return None,
        })
    }
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
