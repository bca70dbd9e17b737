//! What the cluster tests do to a [`RedisCluster`]: move a slot to another
//! master (the legacy way: `SETSLOT IMPORTING/MIGRATING`, `MIGRATE`,
//! `SETSLOT NODE`), stop a migration halfway so that clients meet `ASK`,
//! and fail a master over to its replica (killed, or by `CLUSTER FAILOVER`).
//!
//! Each operation ends by waiting until every running node agrees on the
//! new map (`RedisCluster::wait_ready`), so a client that learnt the map
//! before holds a stale one afterwards: that is how a test makes one.

use super::cluster::{RedisCluster, POLL, READY_TIMEOUT};
use super::resp::OwnedReply;
use std::time::{Duration, Instant};

/// How many keys one `CLUSTER GETKEYSINSLOT` + `MIGRATE` moves.
const MIGRATE_BATCH: usize = 100;
/// `MIGRATE`'s own timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: &str = "5000";
/// How long a failover may take (about 2.5 node timeouts unloaded).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(40);

/// A slot being moved from `source` to `target` (node indexes): `source`
/// has it `MIGRATING`, `target` `IMPORTING`. A key of the slot that is
/// still on the source is served there; a key that is not gets `ASK`
/// towards the target, which serves it after `ASKING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    pub slot: u16,
    pub source: usize,
    pub target: usize,
}

/// A master replaced by one of its replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    pub old_master: usize,
    pub new_master: usize,
    /// From the kill (or `CLUSTER FAILOVER`) until the replica first said
    /// `ROLE` master (observed every 20 ms, so at most that late).
    pub promoted_after: Duration,
    /// From the kill until every surviving node was seen ready (state ok,
    /// one map, the slots on the new master).
    pub ready_after: Duration,
}

impl RedisCluster {
    /// Moves `slot` with all its keys to the master `target` and waits
    /// until every node agrees (the legacy way, as `redis-cli --cluster
    /// reshard` does). Keys keep their values and TTLs.
    pub fn move_slot(&self, slot: u16, target: usize) {
        let migration = self.begin_migration(slot, target);
        self.finish_migration(migration);
    }

    /// Marks `slot` `IMPORTING` on `target` and `MIGRATING` on its current
    /// master, and returns that state: no key has moved yet.
    pub fn begin_migration(&self, slot: u16, target: usize) -> Migration {
        assert!(!self.shared, "a shared cluster must not be changed");
        let source = self.master_of_slot(slot);
        assert_ne!(source, target, "slot {slot} is already on node {target}");
        assert!(
            self.masters().contains(&target),
            "node {target} is not a master"
        );
        let slot_arg = slot.to_string();
        let (source_id, target_id) = (self.node_id(source), self.node_id(target));
        self.ok(
            target,
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &source_id],
        );
        self.ok(
            source,
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target_id],
        );
        Migration {
            slot,
            source,
            target,
        }
    }

    /// The keys of `slot` stored on `node` (at most 1000: test data).
    pub fn keys_in_slot(&self, node: usize, slot: u16) -> Vec<Vec<u8>> {
        let slot = slot.to_string();
        match self
            .node(node)
            .cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "1000"])
        {
            OwnedReply::Array(keys) => keys
                .into_iter()
                .map(|key| match key {
                    OwnedReply::Bulk(key) => key,
                    other => self.fail(&format!("GETKEYSINSLOT: element {other:?}")),
                })
                .collect(),
            other => self.fail(&format!("GETKEYSINSLOT {slot}: {other:?}")),
        }
    }

    /// Moves `keys` (of the migrating slot) from the source to the target
    /// with one `MIGRATE … KEYS`; keys that are gone meanwhile (expired,
    /// released, moved already) are skipped.
    pub fn migrate_keys(&self, migration: &Migration, keys: &[&[u8]]) {
        self.migrate_between(migration.source, migration.target, keys, false);
    }

    /// Moves up to `n` keys of the migrating slot to the target; returns
    /// how many were on the source to move.
    pub fn migrate_some(&self, migration: &Migration, n: usize) -> usize {
        let keys = self.keys_in_slot(migration.source, migration.slot);
        let some: Vec<&[u8]> = keys.iter().take(n).map(Vec::as_slice).collect();
        self.migrate_keys(migration, &some);
        some.len()
    }

    /// Moves the keys left on the source, gives the slot to the target on
    /// the target, the source and the other masters (in that order), and
    /// waits until every node agrees that the target serves it.
    pub fn finish_migration(&self, migration: Migration) {
        let Migration {
            slot,
            source,
            target,
        } = migration;
        loop {
            let keys = self.keys_in_slot(source, slot);
            if keys.is_empty() {
                break;
            }
            for batch in keys.chunks(MIGRATE_BATCH) {
                let batch: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                self.migrate_keys(&migration, &batch);
            }
        }
        let slot_arg = slot.to_string();
        let target_id = self.node_id(target);
        let setslot = ["CLUSTER", "SETSLOT", &slot_arg, "NODE", &target_id];
        self.ok(target, &setslot);
        self.ok(source, &setslot);
        for master in self.masters() {
            if master != source && master != target {
                self.ok(master, &setslot);
            }
        }
        self.wait_for_owner(slot, target);
    }

    /// Undoes a migration: clears the source's mark (`SETSLOT STABLE`: it
    /// serves the whole slot again), moves the keys already on the target
    /// back (`ASKING` + `MIGRATE` on the target, which still imports),
    /// clears the target's mark and waits until the nodes agree, the source
    /// still serving the slot. (While the source is `MIGRATING` it would
    /// answer the returning keys with `ASK`.)
    pub fn roll_back_migration(&self, migration: Migration) {
        let Migration {
            slot,
            source,
            target,
        } = migration;
        let slot_arg = slot.to_string();
        self.ok(source, &["CLUSTER", "SETSLOT", &slot_arg, "STABLE"]);
        loop {
            let keys = self.keys_in_slot(target, slot);
            if keys.is_empty() {
                break;
            }
            for batch in keys.chunks(MIGRATE_BATCH) {
                let batch: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                self.migrate_between(target, source, &batch, true);
            }
        }
        self.ok(target, &["CLUSTER", "SETSLOT", &slot_arg, "STABLE"]);
        self.wait_for_owner(slot, source);
    }

    /// Kills `master` with SIGKILL and waits until one of its replicas has
    /// taken its slots and every surviving node is ready again. Panics if
    /// it has no replica, or (with the logs) if that takes over 40 s.
    pub fn fail_over(&mut self, master: usize) -> Failover {
        assert!(!self.shared, "a shared cluster must not be changed");
        let replicas = self.replicas_of(master);
        assert!(
            !replicas.is_empty(),
            "node {master} has no replica to promote"
        );
        let (first_slot, _) = self.slots_of(master)[0];
        self.nodes[master].kill();
        let killed = Instant::now();
        self.await_takeover(master, &replicas, first_slot, killed)
    }

    /// A manual failover: `CLUSTER FAILOVER` on `replica` (its master stops
    /// writes, the replica catches up and takes over; nothing is lost), then
    /// waits until every node agrees.
    pub fn fail_over_to(&self, replica: usize) -> Failover {
        assert!(!self.shared, "a shared cluster must not be changed");
        let master = self
            .masters()
            .into_iter()
            .find(|&m| self.replicas_of(m).contains(&replica))
            .unwrap_or_else(|| self.fail(&format!("node {replica} is not a replica")));
        let (first_slot, _) = self.slots_of(master)[0];
        let asked = Instant::now();
        self.ok(replica, &["CLUSTER", "FAILOVER"]);
        self.await_takeover(master, &[replica], first_slot, asked)
    }

    fn await_takeover(
        &self,
        master: usize,
        replicas: &[usize],
        slot: u16,
        since: Instant,
    ) -> Failover {
        let ports: Vec<u16> = replicas.iter().map(|&r| self.node(r).port()).collect();
        let mut promoted_after = None;
        let mut new_master = None;
        let started = Instant::now();
        loop {
            let views = self.views();
            for (node, view) in self.running().zip(&views) {
                if promoted_after.is_none()
                    && ports.contains(&node.port())
                    && view.as_ref().is_some_and(|v| v.is_master)
                {
                    promoted_after = Some(since.elapsed());
                }
            }
            let owner = views
                .iter()
                .flatten()
                .next()
                .and_then(|v| v.map.owner(slot));
            if let Some(owner) = owner.filter(|p| ports.contains(p)) {
                if Self::is_ready(&views) {
                    new_master = Some(self.index_of(owner));
                }
            }
            if let Some(new_master) = new_master {
                let ready_after = since.elapsed();
                return Failover {
                    old_master: master,
                    new_master,
                    promoted_after: promoted_after.unwrap_or(ready_after),
                    ready_after,
                };
            }
            if started.elapsed() > FAILOVER_TIMEOUT {
                let mut why = format!(
                    "no replica of node {master} took slot {slot} over within \
                     {FAILOVER_TIMEOUT:?}; nodes:"
                );
                for (node, view) in self.running().zip(&views) {
                    use std::fmt::Write as _;
                    let _ = write!(why, "\n  :{} {view:?}", node.port());
                }
                self.fail(&why);
            }
            std::thread::sleep(POLL);
        }
    }

    /// `CLUSTER MYID` of node `index`.
    pub fn node_id(&self, index: usize) -> String {
        match self.node(index).cmd(&["CLUSTER", "MYID"]) {
            OwnedReply::Bulk(id) => String::from_utf8_lossy(&id).into_owned(),
            other => self.fail(&format!("CLUSTER MYID on node {index}: {other:?}")),
        }
    }

    /// Waits until the nodes are ready and agree that `owner` serves `slot`.
    fn wait_for_owner(&self, slot: u16, owner: usize) {
        let port = self.node(owner).port();
        self.wait_until(
            &format!("every node agrees that :{port} serves slot {slot}"),
            READY_TIMEOUT,
            |views| {
                Self::is_ready(views)
                    && views
                        .iter()
                        .flatten()
                        .all(|v| v.map.owner(slot) == Some(port))
            },
        )
        .unwrap_or_else(|why| self.fail(&why));
    }

    /// `MIGRATE` of `keys` from node `from` to node `to`; `asking` sends
    /// `ASKING` first on the same connection (for a node that imports the
    /// slot and does not serve it yet).
    fn migrate_between(&self, from: usize, to: usize, keys: &[&[u8]], asking: bool) {
        if keys.is_empty() {
            return;
        }
        let port = self.node(to).port().to_string();
        let mut migrate: Vec<&[u8]> = vec![
            b"MIGRATE",
            b"127.0.0.1",
            port.as_bytes(),
            b"",
            b"0",
            MIGRATE_TIMEOUT_MS.as_bytes(),
        ];
        let auth = self.node(to).admin_auth();
        match auth {
            [] => {}
            [password] => migrate.extend([&b"AUTH"[..], password.as_bytes()]),
            [user, password, ..] => {
                migrate.extend([&b"AUTH2"[..], user.as_bytes(), password.as_bytes()])
            }
        }
        migrate.push(b"KEYS");
        migrate.extend_from_slice(keys);
        let mut commands: Vec<&[&[u8]]> = Vec::new();
        if asking {
            commands.push(&[b"ASKING"]);
        }
        commands.push(&migrate);
        let replies = self
            .node(from)
            .pipeline(&commands)
            .unwrap_or_else(|e| self.fail(&e));
        match replies.last() {
            Some(OwnedReply::Simple(s)) if s == b"OK" || s == b"NOKEY" => {}
            other => self.fail(&format!(
                "MIGRATE of {} keys from node {from} to node {to}: {other:?}",
                keys.len()
            )),
        }
    }

    /// A command on node `index` that must answer `+OK`.
    fn ok(&self, index: usize, args: &[&str]) {
        match self.node(index).cmd(args) {
            OwnedReply::Simple(s) if s == b"OK" => {}
            other => self.fail(&format!("{args:?} on node {index}: {other:?}")),
        }
    }
}
