//! Any answer (status and body) to `histd health`'s `GET /health`, as it reads it: never a
//! panic, and "up" only for a 200 whose JSON says `"status": "up"`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::health_answer::run(data));
