//! What locking costs the servers: their CPU time (`INFO commandstats`
//! `usec`, summed over the masters) per lock/unlock pair and per
//! extension, with the native commands (`DELIFEQ` or `DELEX … IFEQ`, `SET …
//! IFEQ`) where the masters have them, and with the scripts forced
//! (`Builder::native_commands(false)`), in turns in the same run. Release
//! notices are on (the default), so each release also publishes.
//!
//! ```sh
//! # 5 local masters of the server REDLOCK_TEST_SERVER names (Valkey 9.1 has the native commands)
//! REDLOCK_TEST_SERVER=/path/to/valkey-server cargo xtask example server_cost
//! cargo xtask example server_cost -- --pairs 20000 --turns 3
//! ```
//!
//! Each turn resets the statistics (`CONFIG RESETSTAT`), runs the pairs
//! from one thread on one resource, then the extensions of one lock, and
//! reads the statistics back (leaving out `INFO` and `CONFIG` themselves,
//! and, with the scripts, the commands they run inside: a script's `usec`
//! includes them, and they are listed on their own as well). The figures
//! are medians over the turns.

// Demo scaffolding: local servers.
#[path = "support/local.rs"]
mod local;

use redlock_sync::Redlock;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::exit;
use std::time::Duration;

const TTL: Duration = Duration::from_secs(10);

fn main() {
    let mut pairs = 20_000u32;
    let mut turns = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok());
        match (arg.as_str(), value) {
            ("--pairs", Some(n)) => pairs = n,
            ("--turns", Some(n)) => turns = n as usize,
            _ => {
                eprintln!("usage: server_cost [--pairs N] [--turns N]");
                exit(2);
            }
        }
    }
    let servers = local::start_servers(5).unwrap_or_else(|e| {
        eprintln!("{e}");
        exit(2)
    });
    let urls: Vec<String> = servers.iter().map(local::Server::url).collect();
    println!(
        "5 local masters ({}); {pairs} lock/unlock pairs and extensions per turn, {turns} turns",
        local::server_version()
    );
    let ports: Vec<u16> = servers.iter().map(local::Server::port).collect();
    let mut figures: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..turns {
        for (native, figures) in [true, false].into_iter().zip(figures.iter_mut()) {
            let redlock = Redlock::builder()
                .nodes(urls.clone())
                .native_commands(native)
                .max_extensions(u32::MAX)
                .build()
                .expect("valid configuration");
            // Run only inside the scripts when they are used.
            let nested: &[&str] = if native {
                &[]
            } else {
                &["get", "del", "pexpire", "publish"]
            };
            figures.push(turn(&redlock, &ports, pairs, nested));
        }
    }
    let health = Redlock::builder().nodes(urls.clone()).build().unwrap();
    health
        .lock("server-cost:forms", TTL)
        .unwrap()
        .unlock()
        .unwrap();
    println!("forms used by default: {}", health.health()[0]);
    let [native, scripts] = figures.map(|mut f| {
        let pair = median(f.iter_mut().map(|(p, _)| *p).collect());
        let extension = median(f.iter().map(|(_, e)| *e).collect());
        (pair, extension)
    });
    println!(
        "per lock/unlock pair: native {:.2} µs, scripts {:.2} µs ({:.2}x)",
        native.0,
        scripts.0,
        native.0 / scripts.0
    );
    println!(
        "per extension:        native {:.2} µs, scripts {:.2} µs ({:.2}x)",
        native.1,
        scripts.1,
        native.1 / scripts.1
    );
}

/// One turn: µs of server time per pair and per extension, summed over the
/// masters.
fn turn(redlock: &Redlock, ports: &[u16], pairs: u32, nested: &[&str]) -> (f64, f64) {
    let usec = |ports: &[u16]| -> f64 {
        by_command(ports)
            .iter()
            .filter(|(name, _)| !nested.contains(&name.as_str()))
            .map(|(_, usec)| *usec as f64)
            .sum()
    };
    // Connections open (and their handshakes run) before the count starts.
    redlock.lock("server-cost", TTL).unwrap().unlock().unwrap();
    reset(ports);
    for _ in 0..pairs {
        redlock.lock("server-cost", TTL).unwrap().unlock().unwrap();
    }
    let pair = usec(ports) / f64::from(pairs);
    let shares: Vec<String> = by_command(ports)
        .iter()
        .map(|(name, usec)| format!("{name} {:.2}", *usec as f64 / f64::from(pairs)))
        .collect();
    eprintln!("  per pair, µs by command: {}", shares.join(", "));
    let mut lock = redlock.lock("server-cost", TTL).unwrap();
    reset(ports);
    for _ in 0..pairs {
        lock.extend(TTL).unwrap();
    }
    let extension = usec(ports) / f64::from(pairs);
    lock.unlock().unwrap();
    (pair, extension)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn reset(ports: &[u16]) {
    for &port in ports {
        request(port, &["CONFIG", "RESETSTAT"]);
    }
}

/// Server time of each command but INFO and CONFIG, summed over `ports`.
fn by_command(ports: &[u16]) -> Vec<(String, u64)> {
    let mut total: Vec<(String, u64)> = Vec::new();
    for &port in ports {
        let info = request(port, &["INFO", "commandstats"]);
        for line in info.lines() {
            let Some((name, stats)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            if name.starts_with("info") || name.starts_with("config") {
                continue;
            }
            let usec = stats
                .split(',')
                .find_map(|field| field.strip_prefix("usec="))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            match total.iter_mut().find(|(n, _)| n == name) {
                Some((_, sum)) => *sum += usec,
                None => total.push((name.to_string(), usec)),
            }
        }
    }
    total
}

/// Sends one command and returns its reply's text (a bulk string's
/// contents, or the status line).
fn request(port: u16, args: &[&str]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut command = format!("*{}\r\n", args.len());
    for arg in args {
        command.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(command.as_bytes()).expect("write");
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    reader.read_line(&mut first).expect("read");
    match first.strip_prefix('$') {
        Some(len) => {
            let len: usize = len.trim().parse().expect("a length");
            let mut body = vec![0; len];
            reader.read_exact(&mut body).expect("read");
            String::from_utf8_lossy(&body).into_owned()
        }
        None => first,
    }
}
