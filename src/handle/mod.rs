//! The handle's internals: what every clone of a [`Redlock`](crate::Redlock)
//! and every lock taken through it share ([`Shared`]). Its configuration
//! (`config`), its masters and what the rounds learn about them, the
//! sessions it lends to calls (`pool`), the group commit of concurrent
//! acquisitions (`group`), the release notices its waiting
//! threads hear (`notify`), whether it was shut down (`stop`), and a place
//! for the lock layer's renewer of its leases.

pub(crate) mod config;
pub(crate) mod group;
pub(crate) mod notify;
pub(crate) mod pool;
pub(crate) mod stop;

use crate::error::{ConfigError, Error};
use crate::events::tell::Hook;
use crate::holder::Label;
use crate::os;
use crate::quorum::drift;
use crate::round::{lag_limit, Independence, Masters, NodeState, Voter};
use config::{Config, MAX_RESOURCE_LEN, MAX_TTL, MIN_TTL};
use group::Group;
use notify::{name_order, queue_master, Notices};
use pool::Pool;
use std::any::Any;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use stop::Stop;

/// What every clone of a [`Redlock`](crate::Redlock) and every
/// [`Lock`](crate::Lock) shares.
pub(crate) struct Shared {
    /// The voters: standalone masters and clusters.
    pub(crate) voters: Vec<Voter>,
    pub(crate) states: Vec<NodeState>,
    /// Which voters are refused for sharing a server or a cluster with
    /// another (see `round::independence`).
    independence: Independence,
    pub(crate) node_timeout: Duration,
    /// How long `lock` waits for a held lock: `None`, without a time
    /// limit.
    pub(crate) lock_wait: Option<Duration>,
    /// How long masters may be out of reach in a row before a wait without
    /// a time limit ends (`Builder::unreachable_limit`).
    pub(crate) unreachable_limit: Duration,
    /// Whether releases publish notices and waiters listen for them.
    pub(crate) release_notices: bool,
    /// Whether waiters take their turns in the queue (`Builder::fair_waiting`).
    pub(crate) fair_waiting: bool,
    /// Whether scripts may run (`Builder::allow_scripts`): without, only
    /// native commands are used (see `command::native`), and whatever
    /// needs a script is refused.
    pub(crate) allow_scripts: bool,
    pub(crate) notices: Notices,
    /// The masters by name (see `notify::name_order`).
    name_order: Vec<usize>,
    pub(crate) retry_delay: Duration,
    pub(crate) retry_jitter: Duration,
    pub(crate) max_extensions: u32,
    pub(crate) pool: Pool,
    /// The group commit of concurrent acquisitions, if on (see `group`).
    pub(crate) group: Option<Group>,
    /// The fence domain's key, if the handle fences (`Builder::fencing`).
    pub(crate) fence: Option<Vec<u8>>,
    /// Stored after each lock value's secret (`Builder::holder_label`).
    pub(crate) holder_label: Option<Label>,
    /// Set by `Redlock::shutdown`: waits end, acquisitions are refused.
    pub(crate) stop: Stop,
    /// What the handle tells of what it does (see `events`).
    pub(crate) events: Hook,
    /// The renewer of the handle's leases (see `lock::lease::renew`), made
    /// by the first lease. The handle keeps it without knowing what it is:
    /// it belongs to the lock layer above, which alone reads it (the one
    /// place where the handle is told of a layer above it).
    pub(crate) renewer: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl Shared {
    /// A handle of the checked configuration `config`. No connection is
    /// made: connections are opened by the first round that needs them.
    pub(crate) fn new(config: Config) -> Result<Shared, Error> {
        let Config {
            voters,
            node_timeout,
            lock_wait,
            release_notices,
            fair_waiting,
            allow_scripts,
            unreachable_limit,
            retry_delay,
            retry_jitter,
            max_extensions,
            max_idle_connections,
            group_commit,
            fence,
            holder_label,
            events,
        } = config;
        // Without this, a forked child could not tell its parent's
        // connections from its own. It fails only without memory.
        os::watch_forks().map_err(Error::System)?;
        let epoch = Instant::now();
        let events = events.built(voters.iter().map(Voter::name));
        // Fenced handles and cluster voters keep each call's own round
        // (see `group`).
        let grouped =
            group_commit && fence.is_none() && voters.iter().all(|v| v.cluster().is_none());
        Ok(Shared {
            states: voters
                .iter()
                .enumerate()
                .map(|(i, voter)| NodeState::new(epoch).telling(i, voter.name(), events.clone()))
                .collect(),
            independence: Independence::new(&voters),
            pool: Pool::new(voters.len(), max_idle_connections, lag_limit(node_timeout)),
            group: grouped.then(Group::new),
            notices: Notices::new(&voters, events.clone()).map_err(Error::System)?,
            release_notices,
            fair_waiting,
            allow_scripts,
            name_order: name_order(&voters.iter().map(Voter::name).collect::<Vec<_>>()),
            lock_wait,
            voters,
            node_timeout,
            unreachable_limit,
            retry_delay,
            retry_jitter,
            max_extensions,
            fence,
            holder_label,
            stop: Stop::default(),
            events,
            renewer: OnceLock::new(),
        })
    }

    /// The masters, for a round. Every call of the handle that talks to
    /// them (each lock, unlock, extension, ping and lease renewal) starts
    /// here, so this is also where channels that lingered past their time
    /// are unsubscribed (see `notify`): one atomic load when none is due.
    pub(crate) fn masters(&self) -> Masters<'_> {
        self.notices.tidy(&self.voters);
        Masters {
            voters: &self.voters,
            states: &self.states,
            lag_limit: lag_limit(self.node_timeout),
            independence: &self.independence,
        }
    }

    /// The TTL in whole milliseconds (as sent with PX), checked against the
    /// limits.
    pub(crate) fn ttl_millis(&self, ttl: Duration) -> Result<u64, ConfigError> {
        if ttl > MAX_TTL {
            return Err(ConfigError::TtlTooLong(ttl));
        }
        if ttl < MIN_TTL {
            return Err(ConfigError::TtlTooShort(ttl));
        }
        Ok(ttl.as_millis() as u64) // <= MAX_TTL, so it fits
    }

    /// How long a round that sets or extends keys with `ttl` may take: the
    /// node timeout, or less if that is all the TTL leaves (a quorum
    /// reached later would leave no validity).
    pub(crate) fn round_budget(&self, ttl: Duration) -> Duration {
        self.node_timeout
            .min(ttl.saturating_sub(drift(ttl)))
            .max(Duration::from_millis(1))
    }

    /// The pause before a retry: the delay plus a random jitter of up to
    /// `retry_jitter` (none if the OS generator fails: jitter only spreads
    /// clients apart, it protects nothing).
    pub(crate) fn retry_pause(&self) -> Duration {
        let max = u64::try_from(self.retry_jitter.as_nanos()).unwrap_or(u64::MAX);
        let jitter = match max {
            0 => 0,
            max => getrandom::u64().unwrap_or(0) % max.saturating_add(1),
        };
        self.retry_delay
            .saturating_add(Duration::from_nanos(jitter))
    }

    /// Shuts the handle down: every wait ends (its acquisition then fails
    /// with `Error::ShutDown`), and every later acquisition fails so at
    /// once (see `Redlock::shutdown`).
    pub(crate) fn shut_down(&self) {
        self.stop.set();
        self.notices.interrupt();
        if let Some(group) = &self.group {
            group.shut_down();
        }
    }

    /// Checks a resource name: the key the lock is stored under must not be
    /// empty, and its release channel must fit what the codec reads back
    /// ([`MAX_RESOURCE_LEN`]).
    pub(crate) fn check_resource(resource: &[u8]) -> Result<(), ConfigError> {
        if resource.is_empty() {
            return Err(ConfigError::EmptyResource);
        }
        if resource.len() > MAX_RESOURCE_LEN {
            return Err(ConfigError::ResourceTooLong(resource.len()));
        }
        Ok(())
    }

    /// The master whose messages order `resource`'s waiters (see `notify`).
    pub(crate) fn queue_master(&self, resource: &[u8]) -> usize {
        queue_master(resource, &self.name_order)
    }
}

impl Drop for Shared {
    /// The last handle is gone: let the connections finish what they were
    /// sent (at most one node timeout in all), then close them.
    fn drop(&mut self) {
        self.pool.close_all(self.node_timeout);
    }
}

#[cfg(test)]
mod tests;
