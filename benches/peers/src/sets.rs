//! Ours on several resources at once (issue 36): a set of K taken in one
//! call, and the same K resources as single locks taken one after another
//! in sorted order (what a program does without sets, deadlock-free).
//! Each pair is on K fresh names derived from the scenario's resource.

use crate::clients::{Client, Pair};
use std::fmt::Write;
use std::time::{Duration, Instant};

pub struct OursSet {
    redlock: redlock_sync::Redlock,
    /// The pair's names, rewritten in place for each pair (no allocation
    /// once their capacity is reached, as for the single-lock clients).
    names: Vec<String>,
    /// Single locks held so far in the sorted form.
    held: Vec<redlock_sync::Lock>,
    sorted: bool,
}

impl OursSet {
    pub fn connect(
        urls: &[String],
        node_timeout: Duration,
        k: usize,
        sorted: bool,
    ) -> Result<OursSet, String> {
        let redlock = redlock_sync::Redlock::builder()
            .nodes(urls)
            .node_timeout(node_timeout)
            .lock_wait(Duration::ZERO) // One attempt per pair, as for every client here.
            .build()
            .map_err(|e| e.to_string())?;
        Ok(OursSet {
            redlock,
            names: vec![String::new(); k],
            held: Vec::with_capacity(k),
            sorted,
        })
    }

    /// `resource:0` .. `resource:K-1`, sorted (as the set sorts them).
    fn fill(&mut self, resource: &str) {
        for (i, name) in self.names.iter_mut().enumerate() {
            name.clear();
            let _ = write!(name, "{resource}:{i}");
        }
        self.names.sort_unstable();
    }

    fn set_pair(&mut self, ttl: Duration) -> Pair {
        let started = Instant::now();
        let Ok(Some(set)) = self.redlock.try_lock_many(&self.names, ttl) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        let released = set.unlock().is_ok();
        Pair::released(started, acquired, released)
    }

    fn sorted_pair(&mut self, ttl: Duration) -> Pair {
        let started = Instant::now();
        for name in &self.names {
            match self.redlock.try_lock(name, ttl) {
                Ok(Some(lock)) => self.held.push(lock),
                _ => {
                    for lock in self.held.drain(..) {
                        let _ = lock.unlock();
                    }
                    return Pair::acquire_failed(started);
                }
            }
        }
        let acquired = Instant::now();
        let mut released = true;
        for lock in self.held.drain(..) {
            released &= lock.unlock().is_ok();
        }
        Pair::released(started, acquired, released)
    }
}

impl Client for OursSet {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        self.fill(resource);
        if self.sorted {
            self.sorted_pair(ttl)
        } else {
            self.set_pair(ttl)
        }
    }
}
