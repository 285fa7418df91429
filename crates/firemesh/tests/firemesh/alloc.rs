//! `firemesh::alloc`: the programs' allocator keeps freed memory instead of returning it to
//! the OS.

use std::alloc::{GlobalAlloc, Layout};

#[test]
fn the_allocator_keeps_freed_memory_for_reuse() {
    // mimalloc 3's default: freed memory goes back to the OS after 1 s. (A check that the
    // option index names that option.)
    assert_eq!(firemesh::alloc::purge_delay_ms(), 1000);
    let layout = Layout::from_size_align(64 << 20, 64).unwrap();
    // SAFETY: a valid layout; the block is written, then freed with the same layout.
    unsafe {
        let block = firemesh::alloc::Allocator.alloc(layout);
        assert!(!block.is_null());
        block.write_bytes(7, layout.size());
        assert_eq!(*block.add(layout.size() - 1), 7);
        firemesh::alloc::Allocator.dealloc(block, layout);
    }
    assert_eq!(firemesh::alloc::purge_delay_ms(), -1);
}
