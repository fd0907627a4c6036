//! A management command line, parsed and run against an aggregator as the management port
//! does: never a panic, a reply in Etsy's shape.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::management_command::run(data));
