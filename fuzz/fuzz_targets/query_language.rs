//! Untrusted expression text (the HTTP API's `expr` and `name`): parsing never panics or
//! overflows the stack, and whatever parses nests no deeper than the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use store::{parse, parse_selector, Expr, MAX_DEPTH};

fn depth(expr: &Expr) -> usize {
    match expr {
        Expr::Call(..) => 0,
        Expr::Cumulative(inner) => 1 + depth(inner),
    }
}

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(expr) = parse(&text) {
        assert!(depth(&expr) <= MAX_DEPTH, "{text:?} nests deeper than the limit");
    }
    let _ = parse_selector(&text);
});
