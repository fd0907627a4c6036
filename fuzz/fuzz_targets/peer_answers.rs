//! Any bytes a peer of a global's group (`global.peers`) answers with, read as each answer
//! the group routes merge and merged into this global's own: refused or merged, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::peer_answers::run(data));
