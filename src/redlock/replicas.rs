//! The [`Builder`](crate::Builder)'s settings for masters that have
//! replicas: the replica guard (`replica_ack`, `replica_ack_aof`: a grant
//! counts only once the master's replicas have it) and Sentinel voters
//! (`sentinel`, `sentinel_master_auth`). Beside `builder`, which keeps
//! every other setting, so that neither file grows past what a reader
//! holds.

use super::builder::Builder;
use crate::handle::config::VoterUrls;
use std::time::Duration;

impl Builder {
    /// One voter that is a master [Redis Sentinel](https://redis.io/docs/latest/operate/oss_and_stack/management/sentinel/)
    /// watches: the master the sentinels at `sentinel_urls` know as
    /// `master_name` (their `sentinel monitor <master_name> ...`). It casts
    /// one vote, whichever node is its master now.
    ///
    /// The client asks the sentinels (`SENTINEL GET-MASTER-ADDR-BY-NAME`,
    /// each in turn until one answers) for the current master, and asks
    /// that node `ROLE`: only a node that says it is a master is sent lock
    /// commands, and every new connection to it asks again (`INFO`, then
    /// `ROLE`), before its first acquisition goes out. It follows a
    /// failover: a connection lost, a `READONLY`, `LOADING` or
    /// `MASTERDOWN` answer, or a set-up that finds a replica
    /// ([`NotAVoter::Replica`](crate::NotAVoter::Replica)) has the
    /// sentinels asked again at once, and they
    /// are asked every second anyway. The asking is done by a thread of
    /// the voter's own (named `redlock-sentinel`), at most every 100 ms,
    /// each exchange bounded by the node timeout (at least 250 ms); a
    /// round never waits for it: while no master is known, the voter fails
    /// at once with [`NodeError::NoMaster`](crate::NodeError::NoMaster),
    /// like a master that is down. `build()` asks once (bounded the same
    /// way), so that the first round finds the master.
    ///
    /// Credentials: a sentinel URL's user and password (and `rediss://`)
    /// are the sentinels'. The master is reached with those of the first
    /// sentinel URL (its database too), unless
    /// [`Builder::sentinel_master_auth`] gives the masters' own.
    ///
    /// A Sentinel failover promotes a replica, which may lack a lock's key
    /// its master granted just before it died: use
    /// [`Builder::replica_ack`] so that a grant counts only once a replica
    /// has it (the guide's "Replicas, failover and Sentinel",
    /// docs/guide/replicas.md).
    ///
    /// ```no_run
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .sentinel(["redis://10.0.1.1:26379", "redis://10.0.1.2:26379"], "locks-a")
    ///     .sentinel(["redis://10.0.2.1:26379", "redis://10.0.2.2:26379"], "locks-b")
    ///     .sentinel(["redis://10.0.3.1:26379", "redis://10.0.3.2:26379"], "locks-c")
    ///     .sentinel_master_auth(None, Some("masters-password"))
    ///     .build()?;
    /// assert_eq!(redlock.quorum(), 2); // three voters
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn sentinel<I>(mut self, sentinel_urls: I, master_name: impl AsRef<str>) -> Builder
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.settings.voters.push(VoterUrls::Sentinel(
            sentinel_urls
                .into_iter()
                .map(|u| u.as_ref().to_string())
                .collect(),
            master_name.as_ref().to_string(),
        ));
        self
    }

    /// The credentials of every Sentinel voter's master
    /// ([`Builder::sentinel`]), apart from the sentinels' (which their
    /// URLs carry): the ACL `user` (or `None` for the default user) and
    /// `password`, or `None` for masters without one. Without this
    /// setting, a master takes the credentials of its voter's first
    /// sentinel URL. Never shown in `Debug` or errors.
    pub fn sentinel_master_auth(mut self, user: Option<&str>, password: Option<&str>) -> Builder {
        self.settings.sentinel_master_auth =
            Some((user.map(str::to_string), password.map(str::to_string)));
        self
    }

    /// The replica guard (default: off): a master's grant counts only when
    /// at least `replicas` of its replicas confirm, within `timeout`, that
    /// they received the write. For masters that have replicas and may fail
    /// over to one (Sentinel, a managed service, a cluster voter's shards):
    /// a master that acknowledged a lock's `SET` and died before its
    /// replica had it would otherwise let the promoted replica grant the
    /// lock again.
    ///
    /// Every command that sets a key or its TTL (an acquisition's `SET NX`
    /// or its script, fencing's round 1 and write-back, an extension, and
    /// the `SET NX` an extension sends where the acquisition left the key
    /// out) is followed on the same connection, in the same write, by
    /// `WAIT replicas t` (`WAIT` counts only the writes of the connection
    /// that sends it). `t` is `timeout`, cut to what is left of the round
    /// (the node timeout, or less when the TTL leaves less): give the node
    /// timeout room for the master's round trip plus its replicas'. A master
    /// whose replicas do not confirm in time fails for the round with
    /// [`NodeError::ReplicasBehind`](crate::NodeError::ReplicasBehind), and
    /// the key it may have set is released as for any master that failed.
    /// Releases are not guarded: a release a failover loses leaves the key
    /// to its TTL, which delays the next holder and endangers nobody.
    ///
    /// What it promises and what it cannot: a grant that counted was on
    /// `replicas` replicas as well when the master answered, so a failover
    /// to one of them keeps the key. `WAIT` is not consensus: a replica
    /// that confirmed and then died with its master, or a failover that
    /// promotes a replica that had not confirmed (with more replicas than
    /// `replicas`), still loses the key; and replicas confirm receipt, not a
    /// write to disk (see [`Builder::replica_ack_aof`]). Cost: one more
    /// command and reply per master in the same write, and the replicas'
    /// round trip in every acquisition (docs/performance.md, and the
    /// guide's "Replicas, failover and Sentinel", docs/guide/replicas.md).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// // Three masters, each with one replica that a failover may promote.
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
    ///     .node_timeout(Duration::from_millis(100))
    ///     .replica_ack(1, Duration::from_millis(50))
    ///     .build()?;
    /// # drop(redlock);
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    ///
    /// [`Builder::build`](crate::Builder::build) refuses a zero `timeout`,
    /// and zero `replicas` unless [`Builder::replica_ack_aof`] asks for the
    /// master's own fsync.
    pub fn replica_ack(mut self, replicas: u32, timeout: Duration) -> Builder {
        self.settings.replica_ack = Some((replicas, timeout));
        self
    }

    /// Makes the replica guard ([`Builder::replica_ack`]) wait with
    /// `WAITAOF` instead of `WAIT`: the replicas must have fsynced the write
    /// to their append-only file, and with `local` this master too (which
    /// needs `appendonly yes` on it). For deployments where a master or its
    /// replica may restart from disk. `WAITAOF` needs Redis 7.2+ or Valkey
    /// 7.2+; where a master lacks it or may not run it, no grant of that
    /// master counts: it fails with
    /// [`NodeError::ReplicaAckRefused`](crate::NodeError::ReplicaAckRefused)
    /// ([permanent](crate::NodeError::is_permanent)), whose message says so.
    /// Replicas without `appendonly yes` never confirm. Refused by
    /// [`Builder::build`](crate::Builder::build) without `replica_ack`.
    pub fn replica_ack_aof(mut self, local: bool) -> Builder {
        self.settings.replica_ack_aof = Some(local);
        self
    }
}
