//! Any bytes a server at the URL of `histd health`, `query` or `top` answers with (issue 48,
//! P3: endless heads and bodies took them to 24 GB): read through their bounded client, never
//! a panic, never a body past its cap, nothing echoed that drives a terminal.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::cli_answer::run(data));
