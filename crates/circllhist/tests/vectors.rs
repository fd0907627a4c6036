//! Conformance with the C reference: every case of `tests/data/vectors.json` (the output of
//! libcircllhist recorded by the reference generator; provenance in `tests/data/README.md`).
//! Bins, counts, bytes and floats must all match exactly (floats to the bit).

use circllhist::{Bucket, Histogram, QuantileType};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vectors.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("the reference vectors at {path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn float(value: &Value) -> f64 {
    match value {
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        other => other.as_f64().unwrap_or_else(|| panic!("not a number: {other}")),
    }
}

fn floats(value: &Value) -> Vec<f64> {
    value.as_array().unwrap().iter().map(float).collect()
}

fn counts(value: &Value) -> Vec<u64> {
    value.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

/// Floats must be bit-identical to the C library's (NaN equals NaN): the crate evaluates the
/// same expressions in the same order with the same table of powers of ten.
fn assert_close(got: f64, want: f64, what: &str) {
    let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
    assert!(same, "{what}: got {got:e} ({:#x}), want {want:e} ({:#x})", got.to_bits(), want.to_bits());
}

fn assert_all_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (index, (g, w)) in got.iter().zip(want).enumerate() {
        assert_close(*g, *w, &format!("{what}[{index}]"));
    }
}

/// Builds a histogram from an input description.
fn build(input: &Value) -> Histogram {
    let mut histogram = Histogram::new();
    match input["kind"].as_str().unwrap() {
        "values" => {
            for value in floats(&input["values"]) {
                histogram.insert(value, 1);
            }
        }
        "weighted" => {
            for item in input["items"].as_array().unwrap() {
                histogram.insert(float(&item[0]), item[1].as_u64().unwrap());
            }
        }
        "int_scale" => {
            for item in input["items"].as_array().unwrap() {
                let (value, scale, count) =
                    (item[0].as_i64().unwrap(), item[1].as_i64().unwrap(), item[2].as_u64().unwrap());
                histogram.insert_int_scale(value, scale as i32, count);
            }
        }
        "recipe" => {
            let values = recipe(&input["recipe"]);
            assert_eq!(&values[..8], floats(&input["first_values"]).as_slice(), "the recipe generator");
            for value in values {
                histogram.insert(value, 1);
            }
        }
        other => panic!("unknown input kind {other}"),
    }
    histogram
}

/// The SplitMix64 recipes of the two 100,000-value cases.
fn recipe(recipe: &Value) -> Vec<f64> {
    let mut state = recipe["seed"].as_u64().unwrap();
    let mut next = || {
        state = state.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    };
    let n = recipe["n"].as_u64().unwrap();
    match recipe["name"].as_str().unwrap() {
        "splitmix64_uniform_ms" => (0..n).map(|_| (next() % 1_000_000) as f64 / 1000.0).collect(),
        "splitmix64_loguniform_3digit" => (0..n)
            .map(|_| {
                let x = next();
                let (m, e) = (100 + x % 900, (x >> 32) % 6);
                (m * 10u64.pow(e as u32)) as f64 / 100_000.0
            })
            .collect(),
        other => panic!("unknown recipe {other}"),
    }
}

fn bins_of(histogram: &Histogram) -> Vec<(i64, i64, u64)> {
    histogram.bins().map(|(b, c)| (i64::from(b.val()), i64::from(b.exp()), c)).collect()
}

fn expected_bins(value: &Value) -> Vec<(i64, i64, u64)> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_i64().unwrap(), b[1].as_i64().unwrap(), b[2].as_u64().unwrap()))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

/// Checks every expected field of a case (or merge result) against `histogram`.
fn check_expected(name: &str, histogram: &Histogram, expected: &Value, vectors: &Value) {
    let probes = floats(&vectors["quantile_probes"]);
    let thresholds = floats(&vectors["thresholds"]);
    assert_eq!(bins_of(histogram), expected_bins(&expected["bins"]), "{name}: bins");
    assert_eq!(histogram.bin_count() as u64, expected["bin_count"].as_u64().unwrap(), "{name}: bin_count");
    assert_eq!(histogram.count(), expected["sample_count"].as_u64().unwrap(), "{name}: sample_count");
    assert_eq!(histogram.nan_count(), expected["nan_bin_count"].as_u64().unwrap(), "{name}: nan_bin_count");
    assert_eq!(hex(&histogram.to_bytes()), expected["serialized_hex"].as_str().unwrap(), "{name}: bytes");
    assert_eq!(histogram.to_base64(), expected["serialized_b64"].as_str().unwrap(), "{name}: base64");
    let bins: Vec<String> =
        expected["dec_strings"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
    assert_eq!(dec_strings(histogram), bins, "{name}: dec_strings");
    let below_inclusive: Vec<u64> = thresholds.iter().map(|&t| histogram.count_below(t, true)).collect();
    let below_exclusive: Vec<u64> = thresholds.iter().map(|&t| histogram.count_below(t, false)).collect();
    let above_inclusive: Vec<u64> = thresholds.iter().map(|&t| histogram.count_above(t, true)).collect();
    let above_exclusive: Vec<u64> = thresholds.iter().map(|&t| histogram.count_above(t, false)).collect();
    let nearby: Vec<u64> = thresholds.iter().map(|&t| histogram.count_nearby(t)).collect();
    assert_eq!(below_inclusive, counts(&expected["count_below_inclusive"]), "{name}: count_below_inclusive");
    assert_eq!(below_exclusive, counts(&expected["count_below_exclusive"]), "{name}: count_below_exclusive");
    assert_eq!(above_inclusive, counts(&expected["count_above_inclusive"]), "{name}: count_above_inclusive");
    assert_eq!(above_exclusive, counts(&expected["count_above_exclusive"]), "{name}: count_above_exclusive");
    assert_eq!(nearby, counts(&expected["count_nearby"]), "{name}: count_nearby");
    if name == "saturation" {
        return; // the C quantiles overflow n + 1 here; histd's do not (see the README)
    }
    assert_close(histogram.mean(), float(&expected["mean"]), &format!("{name}: mean"));
    assert_close(histogram.sum(), float(&expected["sum"]), &format!("{name}: sum"));
    assert_close(histogram.stddev(), float(&expected["stddev"]), &format!("{name}: stddev"));
    let type1 = histogram.quantiles(&probes, QuantileType::Type1).unwrap();
    assert_all_close(&type1, &floats(&expected["quantiles_type1"]), &format!("{name}: type-1 quantiles"));
    let type7 = histogram.quantiles(&probes, QuantileType::Type7).unwrap();
    assert_all_close(&type7, &floats(&expected["quantiles_type7"]), &format!("{name}: type-7 quantiles"));
    let inverse = histogram.inverse_quantiles(&thresholds).unwrap();
    assert_all_close(&inverse, &floats(&expected["inverse_quantiles"]), &format!("{name}: inverse quantiles"));
}

/// The Circonus/Go text form `H[1.2e-01]=2` of the lower edge.
fn dec_strings(histogram: &Histogram) -> Vec<String> {
    histogram
        .bins()
        .map(|(bucket, count)| {
            if bucket.is_nan() {
                return format!("H[NaN]={count}");
            }
            let text = format!("{:.1e}", bucket.edge());
            let (mantissa, exponent) = text.split_once('e').unwrap();
            let exponent: i32 = exponent.parse().unwrap();
            format!("H[{mantissa}e{}{:02}]={count}", if exponent < 0 { '-' } else { '+' }, exponent.abs())
        })
        .collect()
}

#[test]
fn bucket_mapping_matches_the_reference() {
    let vectors = vectors();
    for entry in vectors["bucket_mapping"].as_array().unwrap() {
        let input = float(&entry["input"]);
        check_bucket(Bucket::of_f64(input), entry, &format!("value {input:e}"));
    }
    for entry in vectors["int_scale_mapping"].as_array().unwrap() {
        let (value, scale) = (entry["value"].as_i64().unwrap(), entry["scale"].as_i64().unwrap() as i32);
        check_bucket(Bucket::of_int_scale(value, scale), entry, &format!("{value}e{scale}"));
    }
}

fn check_bucket(bucket: Bucket, entry: &Value, what: &str) {
    assert_eq!(
        (i64::from(bucket.val()), i64::from(bucket.exp())),
        (entry["val"].as_i64().unwrap(), entry["exp"].as_i64().unwrap()),
        "{what}"
    );
    assert_close(bucket.edge(), float(&entry["lower"]), &format!("{what}: lower"));
    assert_close(bucket.width(), float(&entry["width"]), &format!("{what}: width"));
    assert_close(bucket.midpoint(), float(&entry["midpoint"]), &format!("{what}: midpoint"));
    assert_eq!(bucket.to_string(), entry["str"].as_str().unwrap(), "{what}: string");
}

#[test]
fn every_case_matches_the_reference() {
    let vectors = vectors();
    for case in vectors["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let histogram = build(&case["input"]);
        check_expected(name, &histogram, &case["expected"], &vectors);
        let again = Histogram::from_base64(case["expected"]["serialized_b64"].as_str().unwrap()).unwrap();
        assert_eq!(again, histogram, "{name}: decode of the C bytes");
    }
}

#[test]
fn merges_match_the_reference() {
    let vectors = vectors();
    for merge in vectors["merges"].as_array().unwrap() {
        let name = merge["name"].as_str().unwrap();
        let parts: Vec<Histogram> = merge["parts"].as_array().unwrap().iter().map(build).collect();
        for (part, b64) in parts.iter().zip(merge["parts_serialized_b64"].as_array().unwrap()) {
            assert_eq!(&part.to_base64(), b64.as_str().unwrap(), "{name}: part");
        }
        let mut pairwise = Histogram::new();
        parts.iter().for_each(|p| pairwise.merge(p));
        check_expected(name, &pairwise, &merge["expected"], &vectors);
        assert_eq!(Histogram::merge_all(&parts), pairwise, "{name}: merge_all");
    }
}

#[test]
fn subtractions_match_the_reference() {
    let vectors = vectors();
    for case in vectors["subtractions"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (mut target, subtrahend) = match case.get("t2_serialized_b64") {
            Some(t2) => (
                Histogram::from_base64(t2.as_str().unwrap()).unwrap(),
                Histogram::from_base64(case["t1_serialized_b64"].as_str().unwrap()).unwrap(),
            ),
            None => (build(&case["target_before"]), build(&case["subtrahend"])),
        };
        let result = target.subtract(&subtrahend);
        assert_eq!(result.is_err(), case["subtract_return"].as_i64().unwrap() == -1, "{name}: return");
        let mut want = expected_bins(&case["result_bins_in_memory"]);
        want.retain(|&(_, _, count)| count > 0);
        assert_eq!(bins_of(&target), want, "{name}: bins");
        if let Some(b64) = case.get("result_serialized_b64") {
            assert_eq!(target.to_base64(), b64.as_str().unwrap(), "{name}: bytes");
        }
    }
}

#[test]
fn decoder_edge_cases_match_the_reference() {
    let vectors = vectors();
    for case in vectors["deserialization"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let result = match case.get("input_hex") {
            Some(text) => Histogram::read_bytes(&unhex(text.as_str().unwrap())).map(|(h, used)| (h, used as i64)),
            None => circllhist::decode_base64(case["input_b64"].as_str().unwrap())
                .and_then(|bytes| Histogram::from_bytes(&bytes).map(|h| (h, bytes.len() as i64))),
        };
        let want_return = case["return"].as_i64().unwrap();
        match result {
            Ok((histogram, used)) => {
                assert_eq!(used, want_return, "{name}: bytes used");
                // histd's reader sorts and merges what the C reader keeps as given.
                let mut want = expected_bins(&case["result_bins"]);
                want.sort_by_key(|&(val, exp, _)| Bucket::new(val as i8, exp as i8).unwrap());
                want.dedup_by(|later, earlier| {
                    let same = (later.0, later.1) == (earlier.0, earlier.1);
                    if same {
                        earlier.2 += later.2;
                    }
                    same
                });
                assert_eq!(bins_of(&histogram), want, "{name}: bins");
            }
            Err(error) => assert_eq!(want_return, -1, "{name}: rejected with {error}"),
        }
    }
}

#[test]
fn counts_are_written_minimally_where_c_truncates() {
    let vectors = vectors();
    for case in vectors["known_c_serializer_bug"].as_array().unwrap() {
        let count = case["count"].as_u64().unwrap();
        let mut histogram = Histogram::new();
        histogram.insert(1.0, count);
        assert_eq!(hex(&histogram.to_bytes()), case["correct_serialized_hex"].as_str().unwrap());
        let c_bytes = unhex(case["c_serialized_hex"].as_str().unwrap());
        let (c_read, _) = Histogram::read_bytes(&c_bytes).unwrap();
        assert_eq!(c_read.count(), case["c_roundtrip_count"].as_u64().unwrap(), "reading C's truncated bytes");
    }
}
