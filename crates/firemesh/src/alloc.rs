//! The memory allocator of firemesh's programs, for yours too: one line,
//! `#[global_allocator] static ALLOC: firemesh::alloc::Allocator = firemesh::alloc::Allocator;`.
//!
//! Rank threads run each rank's share of an op on its own thread: the job and its result slot
//! are allocated on the issuing thread and freed on the rank's. glibc's malloc serializes such
//! frees on an arena lock; mimalloc does not (one small op on 2 rank threads of a CPU mesh:
//! 2.7 µs of host time with glibc's malloc, 1.7 µs with mimalloc). mimalloc returns freed
//! memory to the OS after 1 s by default, and a training step frees and allocates the same
//! large buffers again, each time faulting its pages in anew (ResNet-50 at 32×32 on a CPU mesh:
//! 12% slower steps than glibc's); here freed memory stays with the process for reuse, as
//! glibc's keeps it, and the steps take glibc's time.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

/// mimalloc's `mi_option_purge_delay` (its index in `mi_option_e` of mimalloc 3's
/// `mimalloc.h`): how long freed memory waits before it is returned to the OS, in ms; -1 never.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

static CONFIGURED: AtomicBool = AtomicBool::new(false);

/// mimalloc, keeping the memory a program frees for its own reuse.
pub struct Allocator;

/// Turns off returning freed memory to the OS (once; the first allocation does it). After
/// that, a plain load per allocation: no write to a cache line every thread shares.
pub fn keep_freed_memory() {
    if !CONFIGURED.load(Ordering::Relaxed) && !CONFIGURED.swap(true, Ordering::Relaxed) {
        // SAFETY: sets one of mimalloc's options; callable at any time, from any thread.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
    }
}

/// How long mimalloc waits before it returns freed memory to the OS, in ms (-1: never).
pub fn purge_delay_ms() -> i64 {
    // SAFETY: reads one of mimalloc's options.
    unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) as i64 }
}

// SAFETY: every call goes to mimalloc's allocator as it is, after setting an option.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        keep_freed_memory();
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        keep_freed_memory();
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}
