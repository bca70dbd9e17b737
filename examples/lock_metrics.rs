//! The figures an operator charts, recorded by the crate's feature
//! `metrics` through the `metrics` facade and rendered by the Prometheus
//! exporter (`metrics-exporter-prometheus`): acquisitions by outcome, round
//! and wait latency, wakeups, lease renewals and losses, masters up and
//! their changes. The names, kinds and labels are listed in
//! docs/observability.md.
//!
//! ```sh
//! cargo run --release --features metrics --example lock_metrics       # 3 local masters
//! cargo run --release --features metrics --example lock_metrics -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! Four threads take turns on two hot locks for two seconds; meanwhile a
//! lease is held, and (with local masters) its key is deleted behind it, so
//! that the renewer finds it lost. At the end the exporter's text is
//! printed, as a scrape of `/metrics` would return it.
//!
//! What to copy: install the recorder first (`PrometheusBuilder`), then
//! build the handle (it describes its metrics and counts its masters up
//! when it is built); record the program's own figures beside the crate's
//! (`app_lock_hold_seconds` here, timed around the work). A long-running
//! program serves the text over HTTP instead of printing it (the exporter's
//! `http-listener` feature, or its `PrometheusHandle::render` in the
//! program's own server) and calls `PrometheusHandle::run_upkeep` every
//! few seconds. Demo scaffolding: `main`'s workload, and the local servers
//! of `local` (`examples/support/local.rs`).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redlock_sync::Redlock;
use std::thread;
use std::time::{Duration, Instant};

/// Upper bounds of the latency histograms' buckets, in seconds (without
/// them the exporter renders summaries: quantiles over a sliding window).
const BUCKETS: [f64; 9] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0];

fn main() {
    let (servers, urls) = local::masters(3);
    // The recorder first: the handle is built into it.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)
        .expect("valid buckets")
        .install_recorder()
        .expect("the only recorder");
    let redlock = Redlock::builder()
        .nodes(&urls)
        .lock_wait(Duration::from_secs(5))
        .build()
        .expect("valid configuration");

    // A lease, whose key goes behind its back (with local masters).
    let lease = redlock
        .lock("metrics:lease", Duration::from_secs(1))
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");

    // Four threads, two hot locks, two seconds.
    let until = Instant::now() + Duration::from_secs(2);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let redlock = redlock.clone();
            thread::spawn(move || {
                let resource = format!("metrics:hot:{}", i % 2);
                while Instant::now() < until {
                    match redlock.lock(&resource, Duration::from_secs(5)) {
                        Ok(lock) => {
                            let taken = Instant::now();
                            thread::sleep(Duration::from_millis(3)); // the work
                            let _ = lock.unlock();
                            // The program's own figure, beside the crate's.
                            metrics::histogram!("app_lock_hold_seconds")
                                .record(taken.elapsed().as_secs_f64());
                        }
                        Err(e) => eprintln!("worker {i}: {e}"),
                    }
                }
            })
        })
        .collect();
    if let Some(servers) = &servers {
        thread::sleep(Duration::from_millis(500));
        for server in servers {
            let _ = server.command(&["DEL", "metrics:lease"]);
        }
        // Found at the next renewal, within two thirds of the TTL.
        match lease.wait_ended(Duration::from_secs(5)) {
            Some(why) => println!("the lease ended: {why}"),
            None => println!("the lease still holds"),
        }
    }
    for worker in workers {
        worker.join().expect("worker");
    }
    drop(lease);
    print!("{}", prometheus.render());
}
