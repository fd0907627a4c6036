//! Any answer (status and body) to `histd health`'s `GET /health`, as it reads it: never a
//! panic, and "up" only for a 200 whose JSON says `"status": "up"`.
#![no_main]

use histd::health_cli::verdict;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let status = data.first().map_or(200, |&b| 100 + u16::from(b) * 2);
    let Ok(body) = std::str::from_utf8(data.get(1..).unwrap_or_default()) else { return };
    if let Ok((true, _)) = verdict(status, body) {
        let said: serde_json::Value = serde_json::from_str(body).expect("an answer read as up is JSON");
        assert!(status == 200 && said["status"] == "up", "{status} {body}");
    }
});
