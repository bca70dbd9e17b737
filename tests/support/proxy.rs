//! A TCP proxy in front of a real server, for faults in between: it
//! forwards every command to the server, and can cut the client's
//! connection right after forwarding a chosen command (the server runs it;
//! the client never hears back), or hold a chosen command back for a while
//! before forwarding it (the network delays it; the server runs it late).

use super::resp::{parse_command, Command};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

type Cut = dyn Fn(&Command) -> bool + Send + Sync;
type Hold = dyn Fn(&Command) -> Duration + Send + Sync;

/// A proxy on 127.0.0.1 that forwards to `upstream`.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    cut_after: Box<Cut>,
    hold_before: Box<Hold>,
    stopping: AtomicBool,
    cuts: AtomicUsize,
    streams: Mutex<Vec<TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Proxy {
    /// Starts a proxy to `upstream` that closes a client connection (both
    /// ways) right after forwarding a command for which `cut_after` is true.
    pub fn start(
        upstream: SocketAddr,
        cut_after: impl Fn(&Command) -> bool + Send + Sync + 'static,
    ) -> Proxy {
        Proxy::with(upstream, Box::new(cut_after), Box::new(|_| Duration::ZERO))
    }

    /// Starts a proxy to `upstream` that holds each command for
    /// `hold_before(command)` before forwarding it (and the commands behind
    /// it on the same connection), and cuts nothing.
    pub fn holding(
        upstream: SocketAddr,
        hold_before: impl Fn(&Command) -> Duration + Send + Sync + 'static,
    ) -> Proxy {
        Proxy::with(upstream, Box::new(|_| false), Box::new(hold_before))
    }

    fn with(upstream: SocketAddr, cut_after: Box<Cut>, hold_before: Box<Hold>) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("proxy: bind");
        listener.set_nonblocking(true).expect("proxy: nonblocking");
        let addr = listener.local_addr().expect("proxy: addr");
        let shared = Arc::new(Shared {
            upstream,
            cut_after,
            hold_before,
            stopping: AtomicBool::new(false),
            cuts: AtomicUsize::new(0),
            streams: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::spawn(move || accept_loop(&listener, &accept_shared));
        Proxy {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.addr.port())
    }

    /// How many connections it has cut.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
        for stream in self.shared.streams.lock().unwrap().iter() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock().unwrap());
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stopping.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(_) => {
                thread::sleep(Duration::from_millis(2));
                continue;
            }
        };
        client
            .set_nonblocking(false)
            .expect("proxy: blocking client");
        let Ok(server) = TcpStream::connect(shared.upstream) else {
            continue; // the client sees its connection closed
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        {
            let mut streams = shared.streams.lock().unwrap();
            streams.push(client.try_clone().expect("proxy: clone"));
            streams.push(server.try_clone().expect("proxy: clone"));
        }
        let up = {
            let (client, server, shared) = (
                client.try_clone().unwrap(),
                server.try_clone().unwrap(),
                Arc::clone(shared),
            );
            thread::spawn(move || forward_commands(client, server, &shared))
        };
        let down = thread::spawn(move || pump(server, client));
        shared.threads.lock().unwrap().extend([up, down]);
    }
}

/// Client to server, command by command, cutting where told.
fn forward_commands(mut client: TcpStream, mut server: TcpStream, shared: &Shared) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Ok(Some((command, used))) = parse_command(&buf) {
            let hold = (shared.hold_before)(&command);
            if !hold.is_zero() {
                thread::sleep(hold);
            }
            if server.write_all(&buf[..used]).is_err() {
                return;
            }
            buf.drain(..used);
            if (shared.cut_after)(&command) {
                shared.cuts.fetch_add(1, Ordering::SeqCst);
                let _ = client.shutdown(Shutdown::Both);
                let _ = server.shutdown(Shutdown::Both);
                return;
            }
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => {
                let _ = server.shutdown(Shutdown::Both);
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Server to client, as it comes.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut chunk = [0u8; 4096];
    loop {
        match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&chunk[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}
