//! Codec micro-benchmarks. Every benchmark checks the answer it times, so a
//! broken codec cannot produce a fast, meaningless figure.

use criterion::{criterion_group, criterion_main, Criterion};
use redlock_sync::resp::{decode, encode_command, Arg, Decoded, Reply};
use std::hint::black_box;

fn encode_set_nx_px(c: &mut Criterion) {
    let value = [b'f'; 40];
    let mut buf = Vec::with_capacity(128);
    c.bench_function("encode SET key value NX PX ttl", |b| {
        b.iter(|| {
            buf.clear();
            encode_command(
                &mut buf,
                &[
                    Arg::Bytes(b"SET"),
                    Arg::Bytes(black_box(b"orders:42")),
                    Arg::Bytes(black_box(&value)),
                    Arg::Bytes(b"NX"),
                    Arg::Bytes(b"PX"),
                    Arg::Uint(black_box(10_000)),
                ],
            );
            assert_eq!(buf.len(), 102);
        })
    });
}

fn decode_one(c: &mut Criterion, name: &str, frame: &'static [u8], expected: Reply<'static>) {
    c.bench_function(name, |b| {
        b.iter(|| match decode(black_box(frame)) {
            Ok(Decoded::Complete(reply, used)) => {
                assert_eq!(reply, expected);
                assert_eq!(used, frame.len());
            }
            other => panic!("{name}: {other:?}"),
        })
    });
}

fn decode_replies(c: &mut Criterion) {
    decode_one(c, "decode +OK", b"+OK\r\n", Reply::Simple(b"OK"));
    decode_one(c, "decode $-1", b"$-1\r\n", Reply::Nil);
    decode_one(c, "decode :1", b":1\r\n", Reply::Integer(1));
    decode_one(
        c,
        "decode -NOSCRIPT error",
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        Reply::Error(b"NOSCRIPT No matching script. Please use EVAL."),
    );
}

criterion_group!(benches, encode_set_nx_px, decode_replies);
criterion_main!(benches);
