//! A counting global allocator, for the tests that check what the client
//! allocates. A test binary installs it with
//! `#[global_allocator] static GLOBAL: CountingAllocator = CountingAllocator;`.
//!
//! It counts per thread (const-initialised thread-locals, which never
//! allocate themselves), so tests running in parallel in one binary, and
//! the threads of fake nodes, do not disturb a measurement: the client does
//! all of a call's work on the calling thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

/// Bytes allocated and not yet freed, by every thread of the process.
static LIVE: AtomicI64 = AtomicI64::new(0);

/// Blocks allocated and not yet freed, by every thread of the process (a
/// `realloc` moves a block, it does not add one).
static LIVE_BLOCKS: AtomicI64 = AtomicI64::new(0);

/// The bytes the whole process holds allocated now (all threads): to check
/// that something does not grow, compare two readings.
pub fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// The number of blocks the whole process holds allocated now (all
/// threads). A buffer that grows to a new high-water mark changes
/// [`live_bytes`] but not this; something kept per operation changes both.
#[allow(dead_code)]
pub fn live_blocks() -> i64 {
    LIVE_BLOCKS.load(Ordering::Relaxed)
}

pub struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
    /// Print a backtrace for each allocation (see `counted_tracing`).
    static TRACE: Cell<bool> = const { Cell::new(false) };
}

/// What one thread allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls to `alloc`, `alloc_zeroed` and `realloc`.
    pub allocations: u64,
    /// Bytes asked for by those calls.
    pub bytes: u64,
}

fn count(what: &str, layout: Layout, bytes: usize) {
    LIVE.fetch_add(bytes as i64, Ordering::Relaxed);
    ALLOCATIONS.with(|n| n.set(n.get() + 1));
    BYTES.with(|n| n.set(n.get() + bytes as u64));
    // Tracing is off while it prints, and its own allocations are taken
    // back out of the counts.
    if TRACE.with(|t| t.replace(false)) {
        let (n, b) = (ALLOCATIONS.with(Cell::get), BYTES.with(Cell::get));
        let trace = std::backtrace::Backtrace::force_capture();
        eprintln!("---- {what} {layout:?} ----\n{trace}");
        ALLOCATIONS.with(|c| c.set(n));
        BYTES.with(|c| c.set(b));
        TRACE.with(|t| t.set(true));
    }
}

// SAFETY: every method forwards to `System` unchanged; the counters are
// const-initialised thread-locals and atomics, which never allocate, and `count` prints
// (and so allocates) only when tracing was asked for.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        count("alloc", layout, layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        count("alloc_zeroed", layout, layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        count("realloc", layout, new_size);
        System.realloc(ptr, layout, new_size)
    }
}

fn now() -> Counts {
    Counts {
        allocations: ALLOCATIONS.with(Cell::get),
        bytes: BYTES.with(Cell::get),
    }
}

/// Runs `f` and returns what this thread allocated meanwhile.
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, Counts) {
    counted_tracing(false, f)
}

/// Like [`counted`]; with `trace`, prints a backtrace for every allocation
/// (to find where an unexpected one comes from).
pub fn counted_tracing<R>(trace: bool, f: impl FnOnce() -> R) -> (R, Counts) {
    let before = now();
    TRACE.with(|t| t.set(trace));
    let result = f();
    TRACE.with(|t| t.set(false));
    let after = now();
    let counts = Counts {
        allocations: after.allocations - before.allocations,
        bytes: after.bytes - before.bytes,
    };
    (result, counts)
}
