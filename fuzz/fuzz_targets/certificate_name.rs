//! A client certificate's DER as the HTTPS port reads its subject's common name: a name or
//! none, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|der: &[u8]| {
    let _ = histd::fuzzing::certificate_name(der);
});
