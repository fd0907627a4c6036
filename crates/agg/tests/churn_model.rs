//! Counters and timers through several readers over many flushes, with names that churn,
//! against a plain model of Etsy's rules: every flush reports each counter's (or timer's) sum
//! for the interval, and keeps reporting idle ones as 0 unless `deleteCounters`
//! (`deleteTimers`). Enough distinct names pass through to make readers start over (past
//! `CHURN_SLACK`) and the flusher number its keys again.

use std::collections::BTreeMap;

use agg::{AggConfig, Aggregator, Budgets, ReaderMap, Snapshot, Table, CHURN_SLACK};

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

/// The series' sums in a flush: counters' counts, or timers' sums of values.
fn sums(snapshot: &Snapshot, kind: &str) -> BTreeMap<String, f64> {
    match kind {
        "c" => snapshot
            .counters
            .iter()
            .filter(|p| !p.key.starts_with("statsd."))
            .map(|p| (p.key.to_string(), p.count))
            .collect(),
        _ => snapshot.timers.iter().map(|p| (p.key.to_string(), p.totals.sum)).collect(),
    }
}

fn run(kind: &str, delete: bool) {
    // Without budgets: every name is its own series (the budgets have tests of their own).
    let budgets = Budgets { max_series: [usize::MAX; 4], ..Budgets::default() };
    let config = AggConfig { delete_counters: delete, delete_timers: delete, budgets, ..AggConfig::default() };
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
            packet.push_str(&format!("{name}:{amount}|{kind}\n"));
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
        let got = sums(&snapshot, kind);
        let want = if delete {
            interval
        } else {
            known.values_mut().for_each(|count| *count = 0.0);
            known.extend(interval);
            known.clone()
        };
        assert_eq!(got.len(), want.len(), "{kind}, flush {flush}: number of series");
        assert!(got == want, "{kind}, flush {flush}: sums differ");
    }
}

#[test]
fn counters_match_the_model_when_idle_ones_are_kept() {
    run("c", false);
}

#[test]
fn counters_match_the_model_when_idle_ones_are_deleted() {
    run("c", true);
}

#[test]
fn timers_match_the_model_when_idle_ones_are_kept() {
    run("ms", false);
}

#[test]
fn timers_match_the_model_when_idle_ones_are_deleted() {
    run("ms", true);
}
