//! An OTLP receiver's answer (`ExportMetricsServiceResponse`, any bytes a network peer
//! sends) as the otlp backend reads it: never a panic; a partial success never reports more
//! than the bytes could hold.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::otlp_response::run(data));
