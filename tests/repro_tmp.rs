mod support;
use redlock_sync::Redlock;
use std::time::{Duration, Instant};
use support::Cluster;

#[test]
fn repro() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let lease = redlock
        .lock("r", Duration::from_secs(2))
        .unwrap()
        .keep_alive(Duration::from_secs(60))
        .unwrap();
    let t0 = Instant::now();
    let g1 = cluster.servers[1].pause();
    let g2 = cluster.servers[2].pause();
    let e = loop {
        if let Err(e) = lease.check() {
            break e;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    eprintln!("{:?} err {e}", t0.elapsed());
    std::thread::sleep(Duration::from_millis(
        std::env::var("DELAY")
            .map(|d| d.parse().unwrap())
            .unwrap_or(0),
    ));
    eprintln!("before resume {:?}", lease.check());
    drop(g1);
    drop(g2);
    let r = Instant::now();
    while r.elapsed() < Duration::from_millis(500) {
        eprintln!("{:?} {:?}", r.elapsed(), lease.check());
        std::thread::sleep(Duration::from_millis(50));
    }
    for s in &cluster.servers {
        eprintln!("pttl {}", s.pttl(b"r"));
    }
    eprintln!("unlock {:?}", lease.unlock());
}
