//! Parsing allocates nothing per line: counted with a global allocator that counts each
//! thread's allocations (tests run in parallel threads).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// Allocations made by this thread so far.
fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
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
    let before = allocations();
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
    let allocations = allocations() - before;
    assert_eq!((accepted, rejected), (11, 2));
    assert_eq!(allocations, 0, "parsing allocated");
}

#[test]
fn scanning_a_packet_allocates_nothing() {
    let packet: &[u8] = b"a:1|c\nb:2.5|ms|@0.1\ng:-3|g\nu:bob|s\nh:7|h\r\nd:1.25|d|@0.5|#env:prod\nbad\n\n";
    let before = allocations();
    let (mut simple, mut other) = (0usize, 0usize);
    for line in proto::scan_lines(packet) {
        match line {
            proto::Scanned::Simple(_) => simple += 1,
            proto::Scanned::Other(_) => other += 1,
        }
    }
    let allocations = allocations() - before;
    assert_eq!((simple, other), (5, 2));
    assert_eq!(allocations, 0, "scanning allocated");
}

#[test]
fn the_counter_sees_allocations() {
    let before = allocations();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(allocations() - before, 1);
}
