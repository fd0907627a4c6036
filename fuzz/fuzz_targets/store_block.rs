//! Stored blocks read back from disk (a corrupt or truncated file): decoding never panics, and
//! what decodes encodes again to the same rows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use store::codec::block;

fuzz_target!(|bytes: &[u8]| {
    let _ = block::decode_one(bytes, 3);
    if let Ok(series) = block::decode_all(bytes) {
        let again = block::decode_all(&block::encode(&series)).expect("what decoded encodes and decodes again");
        assert_eq!(format!("{again:?}"), format!("{series:?}"));
    }
});
