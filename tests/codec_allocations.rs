//! The codec's hot path allocates nothing: encoding `SET key value NX PX ttl`
//! into a reused buffer and decoding `+OK` are counted with the support
//! module's per-thread counting allocator.

mod support;

use redlock_sync::resp::{decode, encode_command, Arg, Decoded, Reply};
use support::alloc::{counted, CountingAllocator};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations_during(f: impl FnOnce()) -> u64 {
    counted(f).1.allocations
}

#[test]
fn encode_set_and_decode_ok_allocate_nothing() {
    let mut buf = Vec::with_capacity(128);
    let value = [0xAB_u8; 40];
    let encode = |buf: &mut Vec<u8>, ttl: u64| {
        buf.clear();
        encode_command(
            buf,
            &[
                Arg::Bytes(b"SET"),
                Arg::Bytes(b"orders:42"),
                Arg::Bytes(&value),
                Arg::Bytes(b"NX"),
                Arg::Bytes(b"PX"),
                Arg::Uint(ttl),
            ],
        );
    };
    encode(&mut buf, 1); // the buffer has its final capacity from here on

    let mut checked = 0;
    let count = allocations_during(|| {
        for ttl in [1, 10_000, u64::MAX] {
            encode(&mut buf, ttl);
            checked += usize::from(buf.starts_with(b"*6\r\n$3\r\nSET\r\n"));
            if let Ok(Decoded::Complete(Reply::Simple(b"OK"), 5)) = decode(b"+OK\r\n") {
                checked += 1;
            }
        }
    });
    assert_eq!(
        checked, 6,
        "the measured work did not produce the expected bytes"
    );
    assert_eq!(count, 0, "heap allocations on the codec hot path");
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the test above against a counter that never counts.
    let count = allocations_during(|| drop(std::hint::black_box(vec![1u8; 64])));
    assert!(count >= 1);
}
