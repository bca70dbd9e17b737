//! A persistent blocking RESP client for the referee and for inspecting
//! masters many times a second (the support module's admin client opens a
//! connection per command, which is too slow inside a contention loop).

use crate::support::resp::{encode_command, parse};
use crate::support::OwnedReply;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub struct Client {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Client {
    pub fn connect(addr: &str) -> Client {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .expect("write timeout");
        Client {
            stream,
            input: Vec::new(),
            output: Vec::new(),
        }
    }

    /// Sends one command and waits for its reply (panics on I/O errors:
    /// the referee and the masters under inspection are not under fault).
    pub fn call(&mut self, args: &[&[u8]]) -> OwnedReply {
        self.output = encode_command(args);
        self.stream
            .write_all(&self.output)
            .expect("write to referee");
        loop {
            if let Some((reply, used)) = parse(&self.input).expect("a valid reply") {
                self.input.drain(..used);
                return reply;
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("read from referee");
            assert!(n > 0, "referee closed the connection");
            self.input.extend_from_slice(&chunk[..n]);
        }
    }
}
