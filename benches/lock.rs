//! Lock round trips against real local `redis-server`s (started here, on free
//! loopback ports): our client next to a minimal hand-written reference
//! fan-out (the [`reference`] module below), which is the floor we compare
//! against. One "pair" is an acquisition (`SET key value NX PX 10000` on all
//! masters, a quorum of `+OK`) followed by its release (compare-and-delete
//! via EVALSHA, a quorum of `:1`), each checked inside the timed code (a
//! failed pair is counted, and the counts are printed at the end); node
//! timeout 50 ms; every pair uses a fresh name from a rotating set of 1000.
//!
//! - `pair/N=1`, `pair/N=3`, `pair/N=5`: one thread, 1, 3 or 5 masters.
//! - `pair-4-threads/N=5`: 4 threads at once, sharing one `Redlock` (one clone
//!   each) or each with its own reference client; one iteration is one pair
//!   and its time is wall time / pairs, so the rate is the aggregate one.
//! - `pair-32-threads/N=5`: 32 threads at once, each pair on a name of its
//!   own: `ours` (one handle shared by all), `ours-group` (one handle with
//!   `Builder::group_commit(true)`: the threads' acquisitions and releases
//!   batched, one write per master for many of them) and `reference` (a
//!   reference client per thread). The time is wall time / pairs, as above.
//! - `pair-paused-master/N=5`: one of 5 masters frozen with SIGSTOP for the
//!   whole group (resumed when the group ends, also on panic).
//! - then, outside criterion, CPU time (user + system) of the calling thread
//!   per pair at N = 5, ours and the reference, over 20 000 pairs each.
//!
//! - with `--features tls` (see the `tls` module below): the same 5
//!   servers' plaintext and TLS ports side by side in one group each,
//!   `tls-pair/N=5` (one thread) and `tls-pair-4-threads/N=5`, and the
//!   cost of a new connection: `tls-handshake` (TCP connect + TLS
//!   handshake, rustls with ring as the client uses it, blocking) and
//!   `new-client-first-ping` (build a one-node client, PING through a new
//!   connection: connect, TLS handshake, set-up commands, PING; plaintext
//!   and TLS).
//!
//! Criterion prints time per pair and, as throughput, pairs/s. Read the
//! ratio `ours / reference` of the times within one group (one run, same
//! servers and machine load): 1.0 means we are as fast as the floor. The
//! machine's noise moves both; compare ratios, not absolute figures, across
//! runs. `cargo bench --bench lock -- cpu` runs only the CPU measurement.

// The same spawner the integration tests use.
#[allow(dead_code)]
#[path = "../tests/support/redis.rs"]
mod redis;
#[allow(dead_code)]
#[path = "../tests/support/resp.rs"]
mod resp;

use criterion::{BenchmarkGroup, Criterion, Throughput};
use redlock_sync::Redlock;
use reference::Reference;
use std::net::SocketAddr;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(10);
const NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// A name comes back after this many pairs: long after its late releases ran.
const NAMES: usize = 1000;
const THREADS: u64 = 4;
const CPU_PAIRS: u64 = 20_000;

/// A rotating set of pre-formatted resource names.
struct Names {
    names: Vec<Vec<u8>>,
    next: usize,
}

impl Names {
    fn new(tag: &str) -> Names {
        let names = (0..NAMES)
            .map(|i| format!("bench:{tag}:{i:04}").into_bytes())
            .collect();
        Names { names, next: 0 }
    }

    fn next(&mut self) -> &[u8] {
        self.next = (self.next + 1) % self.names.len();
        &self.names[self.next]
    }
}

fn ours(urls: &[String]) -> Redlock {
    Redlock::builder()
        .nodes(urls)
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration")
}

/// Pairs that failed, per client. A pair can fail without any defect: on a
/// shared VM a stall of the whole machine can outlast the 50 ms node
/// timeout. Failures are counted and reported at the end (not hidden, and
/// not a reason to abort the whole run); a failed pair's time stays in the
/// figures.
static OURS_FAILED: AtomicU64 = AtomicU64::new(0);
static REFERENCE_FAILED: AtomicU64 = AtomicU64::new(0);

/// One pair with our client; counts it as failed unless both halves
/// succeeded, and shows the first failure.
fn ours_pair(redlock: &Redlock, name: &[u8]) {
    let failure = match redlock.try_lock(name, TTL) {
        Ok(Some(lock)) => lock.unlock().err().map(|e| format!("unlock: {e}")),
        Ok(None) => Some(format!("{} is held", name.escape_ascii())),
        Err(e) => Some(format!("try_lock: {e}")),
    };
    if let Some(failure) = failure {
        if OURS_FAILED.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!("ours: first failed pair: {failure}");
        }
    }
}

/// One pair with the reference; counts it as failed unless both halves
/// succeeded.
fn reference_pair(client: &mut Reference, name: &[u8]) {
    let ok = match client.try_lock(name, TTL) {
        Some(value) => client.unlock(name, &value),
        None => false,
    };
    if !ok && REFERENCE_FAILED.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!("reference: first failed pair");
    }
}

/// Prints how many pairs failed (see [`OURS_FAILED`]).
fn report_failures() {
    println!(
        "failed pairs: ours {}, reference {}",
        OURS_FAILED.load(Ordering::Relaxed),
        REFERENCE_FAILED.load(Ordering::Relaxed)
    );
}

fn addrs(cluster: &redis::Cluster, n: usize) -> Vec<SocketAddr> {
    cluster.servers[..n].iter().map(|s| s.addr()).collect()
}

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    group
}

/// a) and b): one thread, N = 1, 3, 5.
fn single_thread(c: &mut Criterion, cluster: &redis::Cluster) {
    for n in [1, 3, 5] {
        let urls = &cluster.urls()[..n];
        let redlock = ours(urls);
        let mut reference = Reference::connect(&addrs(cluster, n), NODE_TIMEOUT);
        let mut group = group(c, &format!("pair/N={n}"));
        let mut names = Names::new(&format!("ours{n}"));
        group.bench_function("ours", |b| b.iter(|| ours_pair(&redlock, names.next())));
        let mut names = Names::new(&format!("ref{n}"));
        group.bench_function("reference", |b| {
            b.iter(|| reference_pair(&mut reference, names.next()))
        });
        group.finish();
    }
}

/// c): 4 threads, N = 5.
fn four_threads(c: &mut Criterion, cluster: &redis::Cluster) {
    let redlock = ours(&cluster.urls());
    let ours_crew = Crew::new((0..THREADS).map(|t| {
        let redlock = redlock.clone();
        let mut names = Names::new(&format!("ours4t{t}"));
        move || ours_pair(&redlock, names.next())
    }));
    let reference_crew = Crew::new((0..THREADS).map(|t| {
        let mut client = Reference::connect(&addrs(cluster, 5), NODE_TIMEOUT);
        let mut names = Names::new(&format!("ref4t{t}"));
        move || reference_pair(&mut client, names.next())
    }));
    let mut group = group(c, "pair-4-threads/N=5");
    group.bench_function("ours", |b| b.iter_custom(|iters| ours_crew.run(iters)));
    group.bench_function("reference", |b| {
        b.iter_custom(|iters| reference_crew.run(iters))
    });
    group.finish();
}

/// c'): 32 threads, N = 5: one handle, with and without group commit,
/// against a reference client per thread.
fn thirty_two_threads(c: &mut Criterion, cluster: &redis::Cluster) {
    const MANY: u64 = 32;
    let crew_of = |redlock: Redlock, tag: &'static str| {
        Crew::new((0..MANY).map(move |t| {
            let redlock = redlock.clone();
            let mut names = Names::new(&format!("{tag}{t}"));
            move || ours_pair(&redlock, names.next())
        }))
    };
    let ours_crew = crew_of(ours(&cluster.urls()), "ours32t");
    let grouped = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .group_commit(true)
        .build()
        .expect("valid configuration");
    let group_crew = crew_of(grouped, "group32t");
    let reference_crew = Crew::new((0..MANY).map(|t| {
        let mut client = Reference::connect(&addrs(cluster, 5), NODE_TIMEOUT);
        let mut names = Names::new(&format!("ref32t{t}"));
        move || reference_pair(&mut client, names.next())
    }));
    let mut group = group(c, "pair-32-threads/N=5");
    group.bench_function("ours", |b| b.iter_custom(|iters| ours_crew.run(iters)));
    group.bench_function("ours-group", |b| {
        b.iter_custom(|iters| group_crew.run(iters))
    });
    group.bench_function("reference", |b| {
        b.iter_custom(|iters| reference_crew.run(iters))
    });
    group.finish();
}

/// d): N = 5, one master frozen (SIGSTOP) for the whole group.
fn paused_master(c: &mut Criterion) {
    let cluster = redis::Cluster::start(5);
    let redlock = ours(&cluster.urls());
    let mut reference = Reference::connect(&addrs(&cluster, 5), NODE_TIMEOUT);
    // Connections are up before the master freezes, as in production.
    ours_pair(&redlock, b"bench:paused:warm");
    reference_pair(&mut reference, b"bench:paused:warm-ref");
    let _paused = cluster.servers[2].pause(); // resumed on drop, also on panic
    let mut group = group(c, "pair-paused-master/N=5");
    let mut names = Names::new("ourspaused");
    group.bench_function("ours", |b| b.iter(|| ours_pair(&redlock, names.next())));
    let mut names = Names::new("refpaused");
    group.bench_function("reference", |b| {
        b.iter(|| reference_pair(&mut reference, names.next()))
    });
    group.finish();
}

/// Worker threads that each run `iters / 4` pairs per call of [`Crew::run`],
/// started together; the call returns the wall time of the slowest.
struct Crew {
    start: Arc<Barrier>,
    done: Arc<Barrier>,
    per_thread: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Crew {
    fn new<F: FnMut() + Send + 'static>(workers: impl Iterator<Item = F>) -> Crew {
        let workers: Vec<F> = workers.collect();
        let start = Arc::new(Barrier::new(workers.len() + 1));
        let done = Arc::new(Barrier::new(workers.len() + 1));
        let per_thread = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicBool::new(false));
        let threads = workers
            .into_iter()
            .map(|mut pair| {
                let (start, done) = (Arc::clone(&start), Arc::clone(&done));
                let (per_thread, stop) = (Arc::clone(&per_thread), Arc::clone(&stop));
                let failed = Arc::clone(&failed);
                thread::spawn(move || loop {
                    start.wait();
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let n = per_thread.load(Ordering::SeqCst);
                    let run = panic::catch_unwind(AssertUnwindSafe(|| (0..n).for_each(|_| pair())));
                    if run.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    done.wait();
                })
            })
            .collect();
        Crew {
            start,
            done,
            per_thread,
            stop,
            failed,
            threads,
        }
    }

    fn run(&self, iters: u64) -> Duration {
        let workers = self.threads.len() as u64;
        let per_thread = iters.div_ceil(workers).max(1);
        self.per_thread.store(per_thread, Ordering::SeqCst);
        let started = Instant::now();
        self.start.wait();
        self.done.wait();
        let elapsed = started.elapsed();
        assert!(
            !self.failed.load(Ordering::SeqCst),
            "a worker's pair failed"
        );
        // Time per iteration must be wall time / pairs actually run.
        elapsed.mul_f64(iters as f64 / (per_thread * workers) as f64)
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.start.wait();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// User and system CPU time of the calling thread so far.
fn thread_cpu() -> (Duration, Duration) {
    // Without RUSAGE_THREAD, the process: no other thread runs meanwhile.
    #[cfg(target_os = "linux")]
    const WHO: libc::c_int = libc::RUSAGE_THREAD;
    #[cfg(not(target_os = "linux"))]
    const WHO: libc::c_int = libc::RUSAGE_SELF;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, exclusively borrowed rusage that
    // getrusage(2) fills in; it keeps no pointer to it.
    let rc = unsafe { libc::getrusage(WHO, &mut usage) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (time(usage.ru_utime), time(usage.ru_stime))
}

/// CPU (user, system) and wall time of `pairs` calls of `pair`.
fn measure(pairs: u64, mut pair: impl FnMut()) -> (Duration, Duration, Duration) {
    let (user0, sys0) = thread_cpu();
    let started = Instant::now();
    (0..pairs).for_each(|_| pair());
    let wall = started.elapsed();
    let (user1, sys1) = thread_cpu();
    (user1 - user0, sys1 - sys0, wall)
}

/// CPU time per pair at N = 5, ours and the reference, in alternating
/// slices so that a change in machine load hits both alike.
fn cpu_per_pair(cluster: &redis::Cluster, pairs: u64) {
    const SLICES: u64 = 4;
    let redlock = ours(&cluster.urls());
    let mut reference = Reference::connect(&addrs(cluster, 5), NODE_TIMEOUT);
    let (mut our_names, mut ref_names) = (Names::new("ourscpu"), Names::new("refcpu"));
    for _ in 0..200 {
        ours_pair(&redlock, our_names.next());
        reference_pair(&mut reference, ref_names.next());
    }
    let mut totals = [[Duration::ZERO; 3]; 2];
    for _ in 0..SLICES {
        let slices = [
            measure(pairs / SLICES, || ours_pair(&redlock, our_names.next())),
            measure(pairs / SLICES, || {
                reference_pair(&mut reference, ref_names.next())
            }),
        ];
        for (total, (user, sys, wall)) in totals.iter_mut().zip(slices) {
            total[0] += user;
            total[1] += sys;
            total[2] += wall;
        }
    }
    let pairs = (pairs / SLICES * SLICES) as f64;
    let us = |d: Duration| d.as_secs_f64() * 1e6 / pairs;
    let cpu = |t: &[Duration; 3]| us(t[0] + t[1]);
    println!("cpu per pair, N=5, {pairs} pairs each (user + system of the calling thread):");
    for (who, t) in ["ours", "reference"].iter().zip(&totals) {
        println!(
            "  {who:<9}  cpu {:7.2} us (user {:6.2} + sys {:6.2})   wall {:7.2} us   cpu/wall {:.2}",
            cpu(t),
            us(t[0]),
            us(t[1]),
            us(t[2]),
            cpu(t) / us(t[2]),
        );
    }
    let ratio = cpu(&totals[0]) / cpu(&totals[1]);
    println!(
        "  ratio ours/reference: cpu {ratio:.3} ({}), wall {:.3}",
        if ratio <= 1.2 {
            "within 1.2x"
        } else {
            "ABOVE 1.2x"
        },
        us(totals[0][2]) / us(totals[1][2]),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench_mode = args.iter().any(|a| a == "--bench");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cpu_only = !filters.is_empty() && filters.iter().all(|f| f.as_str() == "cpu");

    let cluster = redis::Cluster::start(5);
    if !cpu_only {
        let mut c = Criterion::default().configure_from_args();
        single_thread(&mut c, &cluster);
        four_threads(&mut c, &cluster);
        thirty_two_threads(&mut c, &cluster);
        paused_master(&mut c);
        #[cfg(feature = "tls")]
        tls::benches(&mut c);
        c.final_summary();
    }
    if filters.is_empty() || cpu_only {
        // Under `cargo test --benches`, a short smoke run.
        cpu_per_pair(&cluster, if bench_mode { CPU_PAIRS } else { 200 });
    }
    report_failures();
}

/// A minimal Redlock fan-out, the floor to compare against: one plain
/// non-blocking `TcpStream` per master (TCP_NODELAY), the command written to
/// all at once, then `poll(2)` and reads until a quorum answered or became
/// impossible. Replies not waited for stay owed on their connection and are
/// read before its next reply is used. A master whose oldest owed reply is
/// past the node timeout is skipped (never queued behind); a connection that
/// fails, would block a write or sends anything unexpected is abandoned,
/// never reconnected. It trusts real Redis not to talk out of turn on an
/// idle connection (our client checks for that; this one does not).
mod reference {
    use std::collections::VecDeque;
    use std::io::{
        self,
        ErrorKind::{Interrupted, WouldBlock},
        Read, Write,
    };
    use std::net::{SocketAddr, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    const RELEASE: &[u8] = b"if redis.call('get',KEYS[1]) == ARGV[1] \
        then return redis.call('del',KEYS[1]) else return 0 end";
    /// Every reply the lock commands get; anything else kills the connection.
    const KNOWN: [&[u8]; 4] = [b"+OK", b"$-1", b":1", b":0"];
    const MAX_OWED: usize = 64;

    struct Node {
        stream: TcpStream,
        input: Vec<u8>,
        len: usize,
        /// When each reply still owed was asked for, oldest first.
        owed: VecDeque<Instant>,
        /// This round's reply is awaited.
        waiting: bool,
        dead: bool,
    }

    pub struct Reference {
        nodes: Vec<Node>,
        sha: Vec<u8>,
        timeout: Duration,
        frame: Vec<u8>,
        fds: Vec<libc::pollfd>,
    }

    /// Connects (blocking: this is setup) and loads the release script.
    fn setup(addr: &SocketAddr, load: &[u8]) -> io::Result<(TcpStream, [u8; 47])> {
        let mut stream = TcpStream::connect_timeout(addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(load)?;
        let mut reply = [0u8; 47]; // $40\r\n<40 hex digits>\r\n
        stream.read_exact(&mut reply)?;
        stream.set_nonblocking(true)?;
        Ok((stream, reply))
    }

    impl Reference {
        pub fn connect(addrs: &[SocketAddr], timeout: Duration) -> Reference {
            let (mut load, mut sha, mut nodes) = (Vec::new(), Vec::new(), Vec::new());
            encode(&mut load, &[b"SCRIPT", b"LOAD", RELEASE]);
            for addr in addrs {
                let (stream, reply) = setup(addr, &load).expect("reference: setup");
                assert!(reply.starts_with(b"$40\r\n"), "{}", reply.escape_ascii());
                sha = reply[5..45].to_vec();
                nodes.push(Node {
                    stream,
                    input: vec![0; 4096],
                    len: 0,
                    owed: VecDeque::with_capacity(MAX_OWED),
                    waiting: false,
                    dead: false,
                });
            }
            let (fd, events, revents) = (-1, libc::POLLIN, 0);
            let fds = vec![
                libc::pollfd {
                    fd,
                    events,
                    revents
                };
                addrs.len()
            ];
            let frame = Vec::with_capacity(256);
            Reference {
                nodes,
                sha,
                timeout,
                frame,
                fds,
            }
        }

        /// One attempt; on success, the lock's value.
        pub fn try_lock(&mut self, key: &[u8], ttl: Duration) -> Option<[u8; 40]> {
            let mut raw = [0u8; 20];
            getrandom::fill(&mut raw).expect("getrandom");
            let mut value = [0u8; 40];
            for (hex, byte) in value.chunks_exact_mut(2).zip(raw) {
                hex[0] = b"0123456789abcdef"[usize::from(byte >> 4)];
                hex[1] = b"0123456789abcdef"[usize::from(byte & 15)];
            }
            let mut digits = [0u8; 20];
            let ttl_ms = decimal(ttl.as_millis() as u64, &mut digits);
            self.frame.clear();
            let args: [&[u8]; 6] = [b"SET", key, &value, b"NX", b"PX", ttl_ms];
            encode(&mut self.frame, &args);
            let started = Instant::now();
            let drift = ttl / 100 + Duration::from_millis(2);
            if self.round(b"+OK", b"$-1") && started.elapsed() + drift < ttl {
                return Some(value);
            }
            // Failed: release everywhere (a SET may have landed), not awaited.
            self.frame.clear();
            encode(&mut self.frame, &[b"EVALSHA", &self.sha, b"1", key, &value]);
            self.send_all(Instant::now());
            self.nodes.iter_mut().for_each(|n| n.waiting = false);
            None
        }

        pub fn unlock(&mut self, key: &[u8], value: &[u8]) -> bool {
            self.frame.clear();
            encode(&mut self.frame, &[b"EVALSHA", &self.sha, b"1", key, value]);
            self.round(b":1", b":0")
        }

        /// Writes `frame` to every usable node; returns how many now wait.
        fn send_all(&mut self, now: Instant) -> usize {
            let mut sent = 0;
            for n in &mut self.nodes {
                while !n.dead && !n.owed.is_empty() && n.fill() {
                    n.take(b"", b""); // drains what arrived; nothing to vote on
                }
                let lagging = n.owed.len() == MAX_OWED
                    || n.owed.front().is_some_and(|&t| now - t > self.timeout);
                if n.dead || lagging {
                    continue;
                }
                if n.stream.write(&self.frame).ok() != Some(self.frame.len()) {
                    n.dead = true; // a partial write would desynchronise it
                    continue;
                }
                n.owed.push_back(now);
                (n.waiting, sent) = (true, sent + 1);
            }
            sent
        }

        /// Sends `frame`; waits until a quorum said `yes`, one is impossible,
        /// or the node timeout passed.
        fn round(&mut self, yes: &[u8], no: &[u8]) -> bool {
            let deadline = Instant::now() + self.timeout;
            let quorum = self.nodes.len() / 2 + 1;
            let (mut open, mut ayes) = (self.send_all(Instant::now()), 0);
            while ayes < quorum && ayes + open >= quorum && Instant::now() < deadline {
                for (pollfd, n) in self.fds.iter_mut().zip(&self.nodes) {
                    pollfd.fd = if n.waiting { n.stream.as_raw_fd() } else { -1 };
                    // -1: skipped
                }
                let left = deadline.saturating_duration_since(Instant::now());
                poll(&mut self.fds, left);
                for (n, fd) in self.nodes.iter_mut().zip(&self.fds) {
                    if fd.revents == 0 {
                        continue;
                    }
                    n.fill();
                    if let Some(vote) = n.take(yes, no) {
                        (n.waiting, open, ayes) = (false, open - 1, ayes + usize::from(vote));
                    }
                }
            }
            self.nodes.iter_mut().for_each(|n| n.waiting = false);
            ayes >= quorum
        }
    }

    impl Node {
        /// One non-blocking read; whether it brought bytes.
        fn fill(&mut self) -> bool {
            match self.stream.read(&mut self.input[self.len..]) {
                Ok(0) => self.dead = true, // closed, or a full buffer: no valid reply
                Ok(k) => self.len += k,
                Err(e) if matches!(e.kind(), WouldBlock | Interrupted) => return false,
                Err(_) => self.dead = true,
            }
            !self.dead
        }

        /// Consumes the complete replies, oldest first, up to the awaited
        /// one; returns its vote once it is there (a failure votes no).
        fn take(&mut self, yes: &[u8], no: &[u8]) -> Option<bool> {
            let (mut used, mut vote) = (0, None);
            while !self.dead && vote.is_none() {
                let unread = &self.input[used..self.len];
                let Some(at) = unread.windows(2).position(|w| w == b"\r\n") else {
                    break;
                };
                let line = &unread[..at];
                used += at + 2;
                let current = self.waiting && self.owed.len() == 1;
                let valid = KNOWN.contains(&line) && (!current || line == yes || line == no);
                if self.owed.pop_front().is_none() || !valid {
                    self.dead = true; // unsolicited or unexpected: never resynchronise
                } else if current {
                    vote = Some(line == yes);
                }
            }
            self.input.copy_within(used..self.len, 0);
            self.len -= used;
            vote.or((self.dead && self.waiting).then_some(false))
        }
    }

    /// Appends `args` as a RESP array of bulk strings.
    fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
        let mut digits = [0u8; 20];
        out.push(b'*');
        out.extend_from_slice(decimal(args.len() as u64, &mut digits));
        for arg in args {
            out.extend_from_slice(b"\r\n$");
            out.extend_from_slice(decimal(arg.len() as u64, &mut digits));
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(arg);
        }
        out.extend_from_slice(b"\r\n");
    }

    fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
        let mut i = buf.len();
        while i == buf.len() || n > 0 {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
        &buf[i..]
    }

    /// Waits until a socket in `fds` is readable or `timeout` passed
    /// (rounded up to whole milliseconds, so it never spins).
    fn poll(fds: &mut [libc::pollfd], timeout: Duration) {
        let ms = timeout.as_micros().div_ceil(1000).clamp(1, 60_000) as libc::c_int;
        // SAFETY: `fds` is a live, exclusively borrowed slice of initialised
        // pollfds; poll(2) reads `fds.len()` of them and writes only `revents`.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        let error = io::Error::last_os_error();
        assert!(rc >= 0 || error.kind() == Interrupted, "poll: {error}");
    }
}

/// TLS against plaintext on the same servers (feature `tls`).
#[cfg(feature = "tls")]
mod tls {
    use super::{group, ours_pair, redis, Crew, Names, NODE_TIMEOUT, THREADS};
    use criterion::Criterion;
    use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
    use redlock_sync::Redlock;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    use std::sync::Arc;
    use std::time::Duration;

    /// A CA and a server certificate for 127.0.0.1, as PEM:
    /// (ca, server cert, server key).
    fn certificates() -> (String, String, String) {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().expect("key");
        let ca = ca.self_signed(&ca_key).expect("CA");
        let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("key");
        let cert = leaf.signed_by(&key, &ca, &ca_key).expect("leaf");
        (ca.pem(), cert.pem(), key.serialize_pem())
    }

    fn free_port() -> u16 {
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port()
    }

    /// Five servers with a plaintext and a TLS port each (client
    /// certificates not required), and the CA's PEM.
    struct Servers {
        servers: Vec<(redis::RedisServer, u16)>,
        ca: String,
    }

    impl Servers {
        fn start() -> Servers {
            let (ca, cert, key) = certificates();
            let dir =
                std::env::temp_dir().join(format!("redlock-bench-tls-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let file = |name: &str, text: &str| {
                let path = dir.join(name);
                std::fs::write(&path, text).expect("write");
                path.to_str().expect("UTF-8").to_string()
            };
            let (cert, key, ca_file) = (
                file("s.crt", &cert),
                file("s.key", &key),
                file("ca.crt", &ca),
            );
            let servers = (0..5)
                .map(|_| {
                    let port = free_port();
                    let args = [
                        "--tls-port",
                        &port.to_string(),
                        "--tls-cert-file",
                        &cert,
                        "--tls-key-file",
                        &key,
                        "--tls-ca-cert-file",
                        &ca_file,
                        "--tls-auth-clients",
                        "no",
                    ]
                    .map(String::from);
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    (redis::RedisServer::start_with(&args), port)
                })
                .collect();
            Servers { servers, ca }
        }

        fn plain_urls(&self) -> Vec<String> {
            self.servers.iter().map(|(s, _)| s.url()).collect()
        }

        fn tls_urls(&self) -> Vec<String> {
            self.servers
                .iter()
                .map(|(_, port)| format!("rediss://127.0.0.1:{port}"))
                .collect()
        }

        fn client(&self, urls: &[String]) -> Redlock {
            let builder = Redlock::builder()
                .nodes(urls)
                .node_timeout(NODE_TIMEOUT)
                .lock_wait(Duration::ZERO);
            let builder = if urls[0].starts_with("rediss") {
                builder.tls_root_ca_pem(&self.ca)
            } else {
                builder
            };
            builder.build().expect("valid configuration")
        }
    }

    pub(super) fn benches(c: &mut Criterion) {
        let servers = Servers::start();
        let clients = [
            ("plaintext", servers.client(&servers.plain_urls())),
            ("tls", servers.client(&servers.tls_urls())),
        ];

        let mut g = group(c, "tls-pair/N=5");
        for (name, redlock) in &clients {
            let mut names = Names::new(&format!("tls1{name}"));
            g.bench_function(*name, |b| b.iter(|| ours_pair(redlock, names.next())));
        }
        g.finish();

        let mut g = group(c, "tls-pair-4-threads/N=5");
        for (name, redlock) in &clients {
            let crew = Crew::new((0..THREADS).map(|t| {
                let redlock = redlock.clone();
                let mut names = Names::new(&format!("tls4t{name}{t}"));
                move || ours_pair(&redlock, names.next())
            }));
            g.bench_function(*name, |b| b.iter_custom(|iters| crew.run(iters)));
        }
        g.finish();

        // TCP connect + TLS handshake to one server, blocking, with the
        // client's own TLS stack (rustls, ring) and a config like its own.
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(servers.ca.as_bytes()) {
            roots.add(cert.expect("PEM")).expect("CA");
        }
        let config = Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
        );
        let (first, tls_port) = &servers.servers[0];
        let tls_addr = (Ipv4Addr::LOCALHOST, *tls_port);
        let mut g = group(c, "tls-handshake");
        g.bench_function("tcp-connect", |b| {
            b.iter(|| TcpStream::connect(first.addr()).expect("connect"))
        });
        g.bench_function("tcp-connect+tls-handshake", |b| {
            b.iter(|| {
                let mut tcp = TcpStream::connect(tls_addr).expect("connect");
                tcp.set_nodelay(true).expect("nodelay");
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
                let mut tls = rustls::ClientConnection::new(Arc::clone(&config), name.to_owned())
                    .expect("session");
                while tls.is_handshaking() {
                    tls.complete_io(&mut tcp).expect("handshake");
                }
                tls
            })
        });
        g.finish();

        // What a new connection costs a client: build, connect, (TLS,)
        // set-up commands, PING; then drop.
        let mut g = group(c, "new-client-first-ping");
        let one = [
            ("plaintext", vec![first.url()]),
            ("tls", vec![format!("rediss://127.0.0.1:{tls_port}")]),
        ];
        for (name, urls) in &one {
            g.bench_function(*name, |b| {
                b.iter(|| {
                    let redlock = servers.client(urls);
                    redlock.ping().expect("PING");
                })
            });
        }
        g.finish();
    }
}
