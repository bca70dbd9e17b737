//! What the servers did while a client ran: their CPU time (`INFO cpu`)
//! and the commands they ran (`INFO commandstats`), summed over every
//! server of a scenario and read before and after each window, so that the
//! work a pair costs the servers can be set beside the client's figures.

use crate::redis::RedisServer;
use crate::resp::OwnedReply;
use std::collections::BTreeMap;

/// The servers' counters at one moment, summed over the servers.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// `used_cpu_sys + used_cpu_user`, in microseconds.
    pub cpu_us: f64,
    /// Calls per command (commandstats' names: `set`, `cluster|shards`);
    /// commands run by scripts count too.
    pub calls: BTreeMap<String, u64>,
    /// Error replies per error code (`errorstats`: `MOVED`, `ASK`, ...).
    pub errors: BTreeMap<String, u64>,
    /// `INFO stats`: reads from clients' sockets, writes to them, and the
    /// bytes received (how the commands arrived: one read for a
    /// pipelined command and its `ECHO`, or more).
    pub reads: u64,
    pub writes: u64,
    pub input_bytes: u64,
}

impl Sample {
    /// The counters of every server in `servers` (one `INFO` each, outside
    /// any timed window).
    pub fn take(servers: &[&RedisServer]) -> Result<Sample, String> {
        let mut sample = Sample::default();
        for server in servers {
            let reply =
                server.command(&[b"INFO", b"cpu", b"stats", b"commandstats", b"errorstats"])?;
            let OwnedReply::Bulk(text) = reply else {
                return Err(format!("INFO: not a bulk string: {reply:?}"));
            };
            sample.add(&String::from_utf8_lossy(&text));
        }
        Ok(sample)
    }

    fn add(&mut self, info: &str) {
        for line in info.lines() {
            if let Some(seconds) = line
                .strip_prefix("used_cpu_sys:")
                .or_else(|| line.strip_prefix("used_cpu_user:"))
            {
                self.cpu_us += seconds.trim().parse::<f64>().unwrap_or(0.0) * 1e6;
            } else if let Some(n) = line.strip_prefix("total_reads_processed:") {
                self.reads += n.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(n) = line.strip_prefix("total_writes_processed:") {
                self.writes += n.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(n) = line.strip_prefix("total_net_input_bytes:") {
                self.input_bytes += n.trim().parse::<u64>().unwrap_or(0);
            } else if let Some((name, stats)) = line
                .strip_prefix("cmdstat_")
                .and_then(|rest| rest.split_once(':'))
            {
                *self.calls.entry(name.to_string()).or_default() += counter(stats, "calls=");
            } else if let Some((code, stats)) = line
                .strip_prefix("errorstat_")
                .and_then(|rest| rest.split_once(':'))
            {
                *self.errors.entry(code.to_string()).or_default() += counter(stats, "count=");
            }
        }
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Sample) -> Sample {
        let diff = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>| {
            now.iter()
                .map(|(name, &n)| {
                    (
                        name.clone(),
                        n - then.get(name).copied().unwrap_or(0).min(n),
                    )
                })
                .filter(|&(_, n)| n > 0)
                .collect()
        };
        Sample {
            cpu_us: self.cpu_us - before.cpu_us,
            calls: diff(&self.calls, &before.calls),
            errors: diff(&self.errors, &before.errors),
            reads: self.reads.saturating_sub(before.reads),
            writes: self.writes.saturating_sub(before.writes),
            input_bytes: self.input_bytes.saturating_sub(before.input_bytes),
        }
    }

    /// Adds `other`'s counts to this one's.
    pub fn accumulate(&mut self, other: &Sample) {
        self.cpu_us += other.cpu_us;
        self.reads += other.reads;
        self.writes += other.writes;
        self.input_bytes += other.input_bytes;
        for (name, n) in &other.calls {
            *self.calls.entry(name.clone()).or_default() += n;
        }
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_default() += n;
        }
    }

    /// Calls per pair of each command, but the harness's own `INFO`, then
    /// the servers' socket reads and writes and bytes received per pair:
    /// `set 3.00, echo 6.00, ...; reads 6.00, writes 6.00, bytes in 540`.
    pub fn calls_per_pair(&self, pairs: u64) -> String {
        let pairs = pairs.max(1) as f64;
        let calls = self
            .calls
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .map(|(name, &n)| format!("{name} {:.2}", n as f64 / pairs))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{calls}; socket reads {:.2}, writes {:.2}, bytes in {:.0}",
            self.reads as f64 / pairs,
            self.writes as f64 / pairs,
            self.input_bytes as f64 / pairs
        )
    }
}

/// The number after `key` in a `key=n,key=n` list, or 0.
fn counter(stats: &str, key: &str) -> u64 {
    stats
        .split(',')
        .find_map(|field| field.strip_prefix(key))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_commands_and_errors() {
        let mut sample = Sample::default();
        sample.add(
            "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\n\
             used_cpu_sys_children:9.0\r\n# Commandstats\r\n\
             cmdstat_set:calls=7,usec=10,usec_per_call=1.4\r\n\
             cmdstat_cluster|shards:calls=2,usec=1\r\n# Errorstats\r\n\
             errorstat_MOVED:count=3\r\n",
        );
        assert_eq!(sample.cpu_us, 1_750_000.0);
        assert_eq!(sample.calls["set"], 7);
        assert_eq!(sample.calls["cluster|shards"], 2);
        assert_eq!(sample.errors["MOVED"], 3);
        let later = Sample {
            cpu_us: 2_000_000.0,
            calls: [("set".to_string(), 10), ("info".to_string(), 1)].into(),
            errors: sample.errors.clone(),
            reads: 6,
            writes: 3,
            input_bytes: 300,
        };
        let diff = later.since(&sample);
        assert_eq!(diff.cpu_us, 250_000.0);
        assert_eq!(
            diff.calls_per_pair(3),
            "set 1.00; socket reads 2.00, writes 1.00, bytes in 100"
        );
        assert!(diff.errors.is_empty());
    }
}
