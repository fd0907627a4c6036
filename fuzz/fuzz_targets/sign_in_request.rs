//! Any `Cookie` header lines and sign-in form a browser (or anyone) sends the HTTP port
//! (issue 49, item 2): read without a panic; a session id found is one the header holds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::sign_in_request::run(data));
