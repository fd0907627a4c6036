//! A management command line, parsed and run against an aggregator as the management port
//! does: never a panic, a reply in Etsy's shape.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| histd::fuzzing::management_command(line));
