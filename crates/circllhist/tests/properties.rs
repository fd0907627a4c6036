//! Property tests: merge laws, codec round trip, monotone quantiles, counts that add up.

use circllhist::{DecadeCounts, Histogram, QuantileType};
use proptest::prelude::*;

/// Values across signs and many decades, plus zero and non-finite ones.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => -1e6f64..1e6,
        4 => 1e-3f64..1e3,
        2 => (-30i32..30, 1u32..100).prop_map(|(e, m)| f64::from(m) * 10f64.powi(e)),
        1 => Just(0.0),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(1e200)],
    ]
}

fn histogram() -> impl Strategy<Value = (Vec<f64>, Histogram)> {
    prop::collection::vec(value(), 0..200).prop_map(|values| {
        let mut histogram = Histogram::new();
        for &v in &values {
            histogram.insert(v, 1);
        }
        (values, histogram)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Inserting in any order gives the same histogram: sorted runs (appended at the end),
    /// shuffled values (searched, with the directory once there are enough bins), and a mix
    /// of the two (appends to a histogram that has a directory).
    #[test]
    fn insertion_order_does_not_matter(values in prop::collection::vec(value(), 0..300), split in 0usize..300) {
        let mut arrival = Histogram::new();
        values.iter().for_each(|&v| { arrival.insert(v, 1); });
        let mut sorted_values = values.clone();
        sorted_values.sort_by(f64::total_cmp);
        let mut sorted = Histogram::new();
        sorted_values.iter().for_each(|&v| { sorted.insert(v, 1); });
        let split = split.min(values.len());
        let mut mixed = Histogram::new();
        values[..split].iter().for_each(|&v| { mixed.insert(v, 1); });
        let mut rest = values[split..].to_vec();
        rest.sort_by(f64::total_cmp);
        rest.iter().for_each(|&v| { mixed.insert(v, 2); });
        values[split..].iter().for_each(|&v| { mixed.insert(v, 1); });
        let mut twice_rest = Histogram::new();
        values[..split].iter().for_each(|&v| { twice_rest.insert(v, 1); });
        values[split..].iter().for_each(|&v| { twice_rest.insert(v, 3); });
        prop_assert_eq!(&sorted, &arrival);
        prop_assert_eq!(&mixed, &twice_rest);
        prop_assert_eq!(arrival.count(), values.len() as u64);
    }

    /// Counting by decade gives the histogram inserting gives, whatever the counts (small, and
    /// some large), the order and the decades spanned (past eight decades the counts find
    /// theirs through an index).
    #[test]
    fn decade_counts_make_the_inserted_histogram(
        inserts in prop::collection::vec((value(), prop_oneof![8 => 0u64..5, 1 => (1u64 << 31)..(1u64 << 33)]), 0..300),
    ) {
        let (mut counted, mut inserted) = (DecadeCounts::default(), Histogram::new());
        for &(v, count) in &inserts {
            counted.insert_bucket(circllhist::Bucket::of_f64(v), count);
            inserted.insert(v, count);
        }
        prop_assert_eq!(counted.is_empty(), inserted.is_empty());
        prop_assert_eq!(counted.into_histogram(), inserted);
    }

    #[test]
    fn shifting_decades_moves_every_bin_as_inserting_it_again((_, histogram) in histogram(), decades in -128i8..=127) {
        let mut slow = Histogram::new();
        for (bucket, count) in histogram.bins() {
            let moved = match (bucket.is_nan() || bucket.is_zero(), bucket.exp().checked_add(decades)) {
                (true, _) => bucket,
                (false, Some(exp)) => circllhist::Bucket::new(bucket.val(), exp).unwrap_or(circllhist::Bucket::NAN),
                (false, None) if decades < 0 => circllhist::Bucket::ZERO,
                (false, None) => circllhist::Bucket::NAN,
            };
            slow.insert_bucket(moved, count);
        }
        let fast = histogram.shift_decades(decades);
        prop_assert_eq!(&fast, &slow);
        prop_assert_eq!(fast.count(), histogram.count());
        let mut grown = fast.clone();
        grown.insert(1.0, 1); // the result is a working histogram
        prop_assert_eq!(grown.count(), histogram.count() + 1);
    }

    #[test]
    fn merge_is_commutative_associative_and_the_union((a_values, a) in histogram(), (b_values, b) in histogram(), (_, c) in histogram()) {
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        prop_assert_eq!(&ab, &ba);
        let mut ab_c = ab.clone();
        ab_c.merge(&c);
        let mut bc = b.clone();
        bc.merge(&c);
        let mut a_bc = a.clone();
        a_bc.merge(&bc);
        prop_assert_eq!(&ab_c, &a_bc);
        prop_assert_eq!(&Histogram::merge_all([&a, &b, &c]), &ab_c);
        let mut union = Histogram::new();
        for &v in a_values.iter().chain(&b_values) {
            union.insert(v, 1);
        }
        prop_assert_eq!(ab, union);
    }

    #[test]
    fn serialising_round_trips((_, h) in histogram()) {
        prop_assert_eq!(&Histogram::from_bytes(&h.to_bytes()).unwrap(), &h);
        prop_assert_eq!(&Histogram::from_base64(&h.to_base64()).unwrap(), &h);
    }

    #[test]
    fn quantiles_are_monotone_in_q((_, h) in histogram(), mut probes in prop::collection::vec(0.0f64..=1.0, 1..20)) {
        probes.sort_by(f64::total_cmp);
        for kind in [QuantileType::Type1, QuantileType::Type7] {
            let results = h.quantiles(&probes, kind).unwrap();
            for pair in results.windows(2) {
                prop_assert!(pair[0] <= pair[1] || pair[0].is_nan(), "{:?}: {} > {}", kind, pair[0], pair[1]);
            }
        }
    }

    #[test]
    fn counts_below_and_above_partition_the_samples((_, h) in histogram(), threshold in value()) {
        prop_assume!(threshold.is_finite() && threshold.abs() < 1e128);
        let total = h.count();
        prop_assert_eq!(h.count_below(threshold, false) + h.count_above(threshold, true), total);
        prop_assert_eq!(h.count_below(threshold, true) + h.count_above(threshold, false), total);
    }

    #[test]
    fn any_bytes_decode_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok((h, used)) = Histogram::read_bytes(&bytes) {
            prop_assert!(used <= bytes.len());
            prop_assert_eq!(Histogram::from_bytes(&h.to_bytes()).unwrap(), h);
        }
    }

    /// A histogram merged into one that holds every bin of it (added in place) gives what
    /// inserting its values again gives.
    #[test]
    fn merging_a_part_again_adds_its_samples((a_values, a) in histogram(), (b_values, b) in histogram()) {
        let mut sum = a.clone();
        sum.merge(&b);
        sum.merge(&a);
        let mut expected = Histogram::new();
        for &v in a_values.iter().chain(&b_values).chain(&a_values) {
            expected.insert(v, 1);
        }
        prop_assert_eq!(sum, expected);
    }

    /// Merging a histogram's bytes in place is merging the histogram they decode to, for
    /// written forms (in order: few new bins or many) and for any bytes (out of order,
    /// repeated or zero bins, invalid buckets, cut short: then nothing is added), onto an
    /// empty histogram or a full one; and a checked form is one that decodes.
    #[test]
    fn merging_bytes_is_merging_what_they_decode_to(
        (_, held) in histogram(),
        (_, other) in histogram(),
        noise in prop::collection::vec(any::<u8>(), 0..64),
        subset in any::<bool>(),
    ) {
        let mut bytes = other.to_bytes();
        if subset {
            // Only bins the held histogram has: added where they are.
            let mut some = held.clone();
            some.merge(&other);
            bytes = some.to_bytes();
        }
        for bytes in [bytes, noise] {
            let decoded = Histogram::from_bytes(&bytes);
            prop_assert_eq!(Histogram::check_bytes(&bytes).is_ok(), decoded.is_ok());
            for start in [Histogram::new(), held.clone()] {
                let mut in_place = start.clone();
                let merged = in_place.merge_bytes(&bytes);
                prop_assert_eq!(merged.is_ok(), decoded.is_ok());
                let mut expected = start.clone();
                if let Ok(decoded) = &decoded {
                    expected.merge(decoded);
                }
                prop_assert_eq!(&in_place, &expected);
                // And the result keeps answering lookups as a histogram built bin by bin does.
                in_place.insert(1.5, 1);
                expected.insert(1.5, 1);
                prop_assert_eq!(in_place, expected);
            }
        }
    }

    #[test]
    fn subtracting_a_merged_part_gives_the_other_part((_, a) in histogram(), (_, b) in histogram()) {
        let mut sum = a.clone();
        sum.merge(&b);
        prop_assert!(sum.subtract(&b).is_ok());
        prop_assert_eq!(sum, a);
    }
}
