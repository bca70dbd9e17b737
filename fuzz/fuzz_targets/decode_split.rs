//! Decoding a byte stream fed in arbitrary pieces (the way a socket delivers
//! it) must give exactly the replies, or the error, of decoding it whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redlock_sync::resp::{decode, encode_reply, DecodeError, Decoded};

/// Canonical encodings of the replies at the front of `stream`, and the error
/// that ended it (if any). Stops at the first partial reply.
fn decode_all(stream: &[u8]) -> (Vec<Vec<u8>>, Option<DecodeError>) {
    let mut replies = Vec::new();
    let mut rest = stream;
    loop {
        match decode(rest) {
            Ok(Decoded::Complete(reply, used)) => {
                let mut canonical = Vec::new();
                encode_reply(&mut canonical, &reply);
                replies.push(canonical);
                rest = &rest[used..];
            }
            Ok(Decoded::Partial) => return (replies, None),
            Err(e) => return (replies, Some(e)),
        }
    }
}

fuzz_target!(|input: &[u8]| {
    // The first byte seeds the chunk sizes; the rest is the stream.
    let Some((&seed, stream)) = input.split_first() else {
        return;
    };
    let whole = decode_all(stream);

    let mut replies = Vec::new();
    let mut error = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut step = usize::from(seed % 16) + 1;
    'feed: while fed < stream.len() {
        let end = (fed + step).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
        step = step * 7 % 17 + 1;
        loop {
            match decode(&buf) {
                Ok(Decoded::Complete(reply, used)) => {
                    let mut canonical = Vec::new();
                    encode_reply(&mut canonical, &reply);
                    replies.push(canonical);
                    buf.drain(..used);
                }
                Ok(Decoded::Partial) => break,
                Err(e) => {
                    error = Some(e);
                    break 'feed;
                }
            }
        }
    }
    assert_eq!((replies, error), whole);
});
