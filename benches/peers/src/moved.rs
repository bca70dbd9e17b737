//! What a `MOVED` costs `ours` on cluster voters, and the slot map refresh
//! that follows it (`--scenarios moved`).
//!
//! Three clusters of three masters, one `Redlock` with a `cluster(...)`
//! voter for each, warmed up (maps learnt, a connection to every master).
//! Each trial moves one slot to another master (`SETSLOT IMPORTING` /
//! `MIGRATING`, `SETSLOT NODE` everywhere, waited for until every node
//! agrees), on all three clusters or on one of them (alternately), then
//! times eight pairs, each an acquisition and its release: three in slots
//! that did not move (the trial's baseline), two in the moved slot (the
//! first meets the `MOVED`, the second finds the map updated), and three
//! more in slots that did not move (where a refresh may still land).
//!
//! Between two pairs (outside the timing) the servers' `INFO errorstats`
//! and `commandstats` say how many `MOVED` replies and topology requests
//! (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on older servers) each pair
//! caused; every pair has the same pause before it. A pair's extra cost is
//! its figure less the median of its trial's three baseline pairs; the
//! table gives the median over trials for each position.

use crate::cluster::RedisCluster;
use crate::redis::RedisServer;
use crate::scenario::{Settings, CLUSTER_SHARDS};
use crate::servers::Sample;
use crate::slots::{key_in_slot, key_slot, SLOTS};
use std::thread;
use std::time::{Duration, Instant};

/// Pairs before the first trial: every voter's map learnt, a connection
/// open to every master.
const WARM_UP_PAIRS: usize = 300;

/// The pairs of a trial, in order: whether each is in the moved slot, and
/// its name in the table.
const PAIRS: [(bool, &str); 8] = [
    (false, "baseline 1"),
    (false, "baseline 2"),
    (false, "baseline 3"),
    (true, "first in moved slot"),
    (true, "second in moved slot"),
    (false, "after 1"),
    (false, "after 2"),
    (false, "after 3"),
];
/// The baseline pairs: before anything of the trial could redirect.
const BASELINE: usize = 3;

/// One timed pair and what it caused on the servers.
#[derive(Clone, Copy, Default)]
struct Timed {
    acquire: Duration,
    release: Duration,
    moved_replies: u64,
    topology_requests: u64,
}

/// Runs the trials and prints the table.
pub fn run(settings: &Settings, trials: usize) -> Result<(), String> {
    if settings.nodes.is_some() {
        return Err("skipped: it moves slots of clusters it starts (no --nodes)".into());
    }
    let clusters = RedisCluster::start_many(3, CLUSTER_SHARDS, 0);
    let servers: Vec<&RedisServer> = clusters.iter().flat_map(|c| c.nodes()).collect();
    let mut builder = redlock_sync::Redlock::builder();
    for cluster in &clusters {
        let seeds: Vec<String> = cluster
            .masters()
            .into_iter()
            .map(|m| cluster.node(m).url())
            .collect();
        builder = builder.cluster(seeds);
    }
    let redlock = builder
        .node_timeout(settings.node_timeout)
        .lock_wait(std::time::Duration::ZERO)
        .build()
        .map_err(|e| e.to_string())?;
    let prefix = format!("peers:{}:moved", std::process::id());
    for i in 0..WARM_UP_PAIRS {
        pair(&redlock, &format!("{prefix}:warm:{i}"), settings.ttl)?;
    }
    // Both variants alternate, so that a drift of the machine touches both.
    let (mut all, mut one) = (Vec::new(), Vec::new());
    for t in 0..trials * 2 {
        eprintln!("moved: trial {}/{}", t + 1, trials * 2);
        // Odd steps over the slots: a different slot every trial.
        let slot = ((t * 5471 + 97) % usize::from(SLOTS)) as u16;
        let moved_on = if t % 2 == 0 {
            &clusters[..]
        } else {
            &clusters[..1]
        };
        thread::scope(|scope| {
            for cluster in moved_on {
                scope.spawn(move || {
                    cluster.move_slot(slot, cluster.other_master(cluster.master_of_slot(slot)))
                });
            }
        });
        let keys: Vec<String> = PAIRS
            .iter()
            .enumerate()
            .map(|(n, &(in_slot, _))| {
                let target = if in_slot { slot } else { other_slot(slot, n) };
                key_in_slot(&format!("{prefix}:{t}:{n}"), target)
            })
            .collect();
        let mut timed = [Timed::default(); PAIRS.len()];
        let mut before = Sample::take(&servers)?;
        for (entry, key) in timed.iter_mut().zip(&keys) {
            *entry = pair(&redlock, key, settings.ttl)?;
            let after = Sample::take(&servers)?;
            let seen = after.since(&before);
            let count = |name: &str| seen.calls.get(name).copied().unwrap_or(0);
            entry.moved_replies = seen.errors.get("MOVED").copied().unwrap_or(0);
            entry.topology_requests = count("cluster|shards") + count("cluster|slots");
            before = after;
        }
        if t % 2 == 0 {
            all.push(timed);
        } else {
            one.push(timed);
        }
    }
    println!(
        "MOVED: N=3 voters, each a cluster of {CLUSTER_SHARDS} masters; node timeout {:?}; \
         {trials} trials per variant (a slot moved before each trial)",
        settings.node_timeout
    );
    print_variant("slot moved on 3 of 3 clusters", &all);
    print_variant("slot moved on 1 of 3 clusters", &one);
    println!(
        "Medians over trials. (+x): the median over trials of the pair's figure less the median \
         of the same trial's three baseline pairs.\nMOVED, topology: the servers' count of MOVED \
         replies and CLUSTER SHARDS/SLOTS requests during the pair (INFO), mean per trial."
    );
    Ok(())
}

/// A slot other than `slot` for the `n`th pair (`n` < 8): `n + 1` ninths
/// of the slots away from it.
fn other_slot(slot: u16, n: usize) -> u16 {
    let slots = usize::from(SLOTS);
    ((usize::from(slot) + (n + 1) * slots / 9) % slots) as u16
}

/// One acquisition of `key` and its release, each timed; an error if
/// either fails (nothing else holds these keys).
fn pair(redlock: &redlock_sync::Redlock, key: &str, ttl: Duration) -> Result<Timed, String> {
    let started = Instant::now();
    let lock = match redlock.try_lock(key, ttl) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            let slot = key_slot(key.as_bytes());
            return Err(format!("{key} (slot {slot}): not acquired"));
        }
        Err(e) => return Err(format!("{key}: {e}")),
    };
    let acquired = Instant::now();
    lock.unlock().map_err(|e| format!("{key}: release: {e}"))?;
    Ok(Timed {
        acquire: acquired - started,
        release: acquired.elapsed(),
        ..Timed::default()
    })
}

fn print_variant(title: &str, trials: &[[Timed; PAIRS.len()]]) {
    println!("  {title}");
    println!(
        "    {:<22}{:>16}{:>10}{:>16}{:>10}{:>8}{:>10}",
        "pair", "acquire p50 µs", "(+x)", "release p50 µs", "(+x)", "MOVED", "topology"
    );
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let baseline = |trial: &[Timed], f: fn(&Timed) -> Duration| {
        median(trial[..BASELINE].iter().map(|t| micros(f(t))).collect())
    };
    for (index, &(_, name)) in PAIRS.iter().enumerate() {
        let field = |f: fn(&Timed) -> Duration| {
            let values = trials.iter().map(|t| micros(f(&t[index]))).collect();
            let extra = trials
                .iter()
                .map(|t| micros(f(&t[index])) - baseline(t, f))
                .collect();
            (median(values), median(extra))
        };
        let (acquire, acquire_extra) = field(|t| t.acquire);
        let (release, release_extra) = field(|t| t.release);
        let mean = |f: fn(&Timed) -> u64| {
            trials.iter().map(|t| f(&t[index])).sum::<u64>() as f64 / trials.len().max(1) as f64
        };
        println!(
            "    {name:<22}{acquire:>16.0}{:>10}{release:>16.0}{:>10}{:>8.2}{:>10.2}",
            format!("({acquire_extra:+.0})"),
            format!("({release_extra:+.0})"),
            mean(|t| t.moved_replies),
            mean(|t| t.topology_requests),
        );
    }
}

/// The median (the mean of the middle two for an even count); 0 if empty.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[middle],
        _ => (values[middle - 1] + values[middle]) / 2.0,
    }
}
