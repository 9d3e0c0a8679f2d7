//! A global allocator that counts the heap the current thread holds, for
//! tests that measure memory without depending on the machine: the same
//! input gives the same count on every run, whatever else runs.
//!
//! Each allocation is counted as glibc's malloc holds it (the request plus
//! its 8-byte header, rounded up to 16, at least 32 bytes), which is what
//! the process's RSS grows by when the heap grows; a large allocation
//! (served by mmap) is rounded up to whole pages. Only the thread that
//! called [`Counting::start`] is counted, so other threads cannot disturb
//! the figure.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// glibc's default `M_MMAP_THRESHOLD`: larger requests get their own pages.
const MMAP_THRESHOLD: usize = 128 * 1024;
const PAGE: usize = 4096;

pub struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The bytes malloc takes for a request of `size` bytes.
#[must_use]
fn malloc_size(size: usize) -> usize {
    if size >= MMAP_THRESHOLD {
        (size + 16).div_ceil(PAGE) * PAGE
    } else {
        ((size + 8 + 15) & !15).max(32)
    }
}

fn count(size: usize, sign: isize) {
    // `try_with`: the thread's locals may be gone while it exits.
    if ON.try_with(Cell::get).unwrap_or(false) {
        let bytes = isize::try_from(malloc_size(size)).unwrap_or(isize::MAX);
        if let Ok(held) = HELD.try_with(|h| {
            h.set(h.get() + sign * bytes);
            h.get()
        }) {
            let _ = PEAK.try_with(|p| p.set(p.get().max(held)));
        }
    }
}

impl Counting {
    /// Counts from now on, on this thread, from zero.
    pub fn start() {
        HELD.with(|h| h.set(0));
        PEAK.with(|p| p.set(0));
        ON.with(|on| on.set(true));
    }

    /// The bytes this thread holds more than at `start` (negative when it
    /// freed more than it took).
    #[must_use]
    pub fn held() -> isize {
        HELD.with(Cell::get)
    }

    /// The most this thread held at once since `start`.
    #[must_use]
    pub fn peak() -> isize {
        PEAK.with(Cell::get)
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// counting only reads and writes this thread's counters, which need no
// allocation (const-initialised thread locals without destructors).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
