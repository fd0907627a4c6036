//! Counters through several readers over many flushes, with names that churn, against a plain
//! model of Etsy's rules: every flush reports each counter's sum for the interval, and keeps
//! reporting idle counters as 0 unless `deleteCounters`. Enough distinct names pass through to
//! make readers start over and the flusher renumber (both past `CHURN_SLACK`).

use std::collections::BTreeMap;

use agg::{AggConfig, Aggregator, ReaderMap, Table, CHURN_SLACK};

/// SplitMix64: deterministic and good enough for picking names and amounts.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn run(delete_counters: bool) {
    let config = AggConfig { delete_counters, ..AggConfig::default() };
    let mut aggregator = Aggregator::new(config);
    let mut readers: Vec<(Table, ReaderMap)> = (0..3).map(|_| (Table::new(true, 16), ReaderMap::default())).collect();
    let mut random = Random(7);
    let mut known: BTreeMap<String, f64> = BTreeMap::new();
    let names_per_flush = CHURN_SLACK + CHURN_SLACK / 2;
    for flush in 0..6u64 {
        // Each flush uses a window of names that slides by most of its width: old names go idle.
        let first_name = flush as usize * (names_per_flush * 3 / 4);
        let mut interval: BTreeMap<String, f64> = BTreeMap::new();
        let mut packet = String::new();
        for line in 0..names_per_flush + 5000 {
            let name = format!("churn.{}", first_name + (random.next() as usize % names_per_flush));
            let amount = (random.next() % 5) as f64;
            packet.push_str(&format!("{name}:{amount}|c\n"));
            *interval.entry(name).or_default() += amount;
            if line % 20 == 19 {
                // Mostly one reader per flush, so the others go idle and start over.
                let reader = &mut readers[(flush as usize + usize::from(random.next() & 3 == 0)) % 3].0;
                reader.insert_packet(1, packet.as_bytes());
                packet.clear();
            }
        }
        readers[0].0.insert_packet(1, packet.as_bytes());
        for (table, map) in &mut readers {
            aggregator.absorb_taken(map, table.take(false));
        }
        let snapshot = aggregator.flush(10_000 * (flush + 1));
        let got: BTreeMap<String, f64> = snapshot
            .counters
            .iter()
            .filter(|p| !p.key.starts_with("statsd."))
            .map(|p| (p.key.to_string(), p.count))
            .collect();
        let want = if delete_counters {
            interval
        } else {
            known.values_mut().for_each(|count| *count = 0.0);
            known.extend(interval);
            known.clone()
        };
        assert_eq!(got.len(), want.len(), "flush {flush}: number of counters");
        assert!(got == want, "flush {flush}: counts differ");
    }
}

#[test]
fn counters_match_the_model_when_idle_ones_are_kept() {
    run(false);
}

#[test]
fn counters_match_the_model_when_idle_ones_are_deleted() {
    run(true);
}
