//! Parsing allocates nothing per line: counted with a global allocator that counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn parsing_a_packet_allocates_nothing() {
    let packet: &[u8] = b"a:1|c\nb:2.5|ms|@0.1\ng:+3|g\nu:bob|s\nk:1|c:2|c:3|c|@0.5\n\
        tg:1|c|#env:prod,role;x|c:ci-1|T1656581400\np:1:2:32|d\nbad\nfoo:abc|c\n_e{1,1}:a|b\r\n";
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut accepted = 0usize;
    let mut rejected = 0usize;
    for line in proto::lines(packet) {
        if let proto::Line::Metrics(values) = proto::parse_line(line) {
            for value in values {
                match value {
                    Ok(_) => accepted += 1,
                    Err(_) => rejected += 1,
                }
            }
        }
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!((accepted, rejected), (11, 2));
    assert_eq!(allocations, 0, "parsing allocated");
}
