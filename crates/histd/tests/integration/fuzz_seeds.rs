//! Every fuzz target (`fuzz/fuzz_targets`, bodies in `histd::fuzzing::targets`) on its
//! checked-in seeds (`fuzz/corpus-seeds/<target>`) and on mutations of them, in the test
//! command's own build: a target whose property breaks, or that panics, fails here without
//! libFuzzer. `scripts/fuzz` runs libFuzzer on the same bodies, for as long as asked.
//!
//! The mutations come from a fixed seed (`HISTD_FUZZ_SEED` to choose another), so a failure
//! is reproduced by running the test again; its input is written to `target/fuzz-findings/`.

use std::path::Path;

/// Mutations of each seed, and inputs made of random bytes, per target.
const MUTATIONS_PER_SEED: usize = 64;
const RANDOM_INPUTS: usize = 64;
/// Seeds of one target mutated at most (`store_block` has hundreds; each is replayed).
const SEEDS_MUTATED: usize = 8;

/// xorshift64*: the same inputs on every run of one seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }

    /// `seed` changed as libFuzzer's simplest mutators change an input: bytes flipped, set to
    /// an edge value, cut, inserted, a slice repeated.
    fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut bytes = seed.to_vec();
        for _ in 0..1 + self.below(4) {
            let at = self.below(bytes.len() + 1);
            let last = bytes.len().saturating_sub(1);
            match self.below(6) {
                0 if !bytes.is_empty() => {
                    let bit = 1 << self.below(8);
                    bytes[at.min(last)] ^= bit;
                }
                1 if !bytes.is_empty() => {
                    let edge = [0, 0xff, 0x7f, 0x80, b'\n', b':'][self.below(6)];
                    bytes[at.min(last)] = edge;
                }
                2 => bytes.truncate(at),
                3 => {
                    let inserted: Vec<u8> = (0..1 + self.below(8)).map(|_| self.next() as u8).collect();
                    bytes.splice(at..at, inserted);
                }
                4 if !bytes.is_empty() => {
                    let from = self.below(bytes.len());
                    let slice = bytes[from..(from + 1 + self.below(16)).min(bytes.len())].to_vec();
                    bytes.splice(at..at, slice);
                }
                _ => bytes.reverse(),
            }
        }
        bytes
    }
}

/// The seeds of `target`, in name order (none when it has no folder).
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus-seeds").join(target);
    let mut paths: Vec<_> =
        std::fs::read_dir(folder).into_iter().flatten().flatten().map(|entry| entry.path()).collect();
    paths.sort();
    paths.iter().filter_map(|path| std::fs::read(path).ok()).collect()
}

#[test]
fn every_fuzz_target_holds_on_its_seeds_and_their_mutations() {
    let seed = std::env::var("HISTD_FUZZ_SEED").ok().and_then(|text| text.parse().ok()).unwrap_or(0x5eed_f00d_u64);
    let mut random = Random(seed | 1);
    let findings = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-findings");
    let mut failed = Vec::new();
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut seeded = 0;
    for (target, run) in histd::fuzzing::targets::TARGETS {
        let seeds = seeds(target);
        seeded += usize::from(!seeds.is_empty());
        let mut inputs = seeds.clone();
        for seed in seeds.iter().take(SEEDS_MUTATED) {
            inputs.extend((0..MUTATIONS_PER_SEED).map(|_| random.mutate(seed)));
        }
        inputs.extend((0..RANDOM_INPUTS).map(|_| (0..random.below(256)).map(|_| random.next() as u8).collect()));
        for (index, input) in inputs.iter().enumerate() {
            if std::panic::catch_unwind(|| run(input)).is_err() {
                std::fs::create_dir_all(&findings).unwrap();
                let kept = findings.join(format!("{target}-{seed:x}-{index}"));
                std::fs::write(&kept, input).unwrap();
                failed.push(format!("{target}: input {index} (kept as {})", kept.display()));
                break;
            }
        }
    }
    std::panic::set_hook(quiet);
    // The seeds were found (a wrong path would leave only random bytes, which pass anything):
    // the targets of binary formats without seeds yet are the certificate, histogram, journal,
    // spool and store ones.
    assert!(seeded >= 22, "only {seeded} targets had seeds in fuzz/corpus-seeds");
    assert!(failed.is_empty(), "fuzz targets that failed (HISTD_FUZZ_SEED={seed}):\n{}", failed.join("\n"));
}
