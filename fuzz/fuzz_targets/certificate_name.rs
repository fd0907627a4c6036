//! A client certificate's DER as the HTTPS port reads its subject's common name: a name or
//! none, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::certificate_name::run(data));
