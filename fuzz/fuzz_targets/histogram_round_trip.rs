//! Values read from the input: insert, merge two halves, serialise and read back; the merge
//! equals inserting everything, the bytes round-trip, and statistics never panic.
#![no_main]

use circllhist::{Histogram, QuantileType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let values: Vec<f64> = bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    let (left, right) = values.split_at(values.len() / 2);
    let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
    for (part, histogram) in [(left, &mut a), (right, &mut b), (&values[..], &mut all)] {
        for &value in part {
            histogram.insert(value, 1);
        }
    }
    a.merge(&b);
    assert_eq!(a, all);
    assert_eq!(Histogram::from_base64(&all.to_base64()).unwrap(), all);
    let _ = all.quantiles(&[0.0, 0.5, 0.99, 1.0], QuantileType::Type1);
    let _ = all.inverse_quantiles(&[-1.0, 0.0, 1.0]);
    let _ = (all.mean(), all.stddev(), all.sum());
});
