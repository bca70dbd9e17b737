//! The codec's hot path allocates nothing: encoding `SET key value NX PX ttl`
//! into a reused buffer and decoding `+OK` are counted with a global
//! allocator that tallies the allocations of the current thread only (so
//! other tests running in parallel do not disturb the count).

use redlock_sync::resp::{decode, encode_command, Arg, Decoded, Reply};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` unchanged; the counter is a
// const-initialised thread-local, which itself never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
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
