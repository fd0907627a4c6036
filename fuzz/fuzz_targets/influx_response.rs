//! An InfluxDB answer (any bytes a network peer sends, with any status) as the influx backend
//! reads it: never a panic; a partial write's dropped points are only ever read from a body
//! that says `partial write` and `dropped=`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::influx_response::run(data));
