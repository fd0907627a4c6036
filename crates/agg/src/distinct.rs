//! A set's distinct members: the members themselves, or a HyperLogLog sketch of them once a
//! forwarded interval brings one (a local histd forwards a set's members up to a limit, a
//! sketch past it: `forward.setMembersLimit`).
//!
//! The sketch is HyperLogLog (Flajolet, Fusy, Gandouet, Meunier 2007) with 2^14 one-byte
//! registers (16 KiB, about 0.8% standard error), linear counting below 2.5 × 2^14. A member's
//! hash is FNV-1a 64 of its bytes passed through MurmurHash3's 64-bit finaliser: documented so
//! that any tool can build a sketch histd merges (docs/forward-format.md).

use hashbrown::HashSet;

/// Bits of the hash that pick a register.
pub const HLL_PRECISION: u32 = 14;
/// Registers in a sketch.
pub const HLL_REGISTERS: usize = 1 << HLL_PRECISION;
/// The largest register value: the rank of a hash whose 50 remaining bits are all zero.
const MAX_RANK: u8 = (64 - HLL_PRECISION + 1) as u8;

/// A HyperLogLog sketch: mergeable by the register-wise maximum, exactly, in any order.
#[derive(Clone, PartialEq, Eq)]
pub struct Hll {
    registers: Box<[u8]>,
}

impl std::fmt::Debug for Hll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hll(~{:.0})", self.estimate())
    }
}

impl Default for Hll {
    fn default() -> Self {
        Hll { registers: vec![0; HLL_REGISTERS].into_boxed_slice() }
    }
}

impl Hll {
    /// A sketch from its registers; `None` unless there are [`HLL_REGISTERS`] of them, each at
    /// most 51.
    pub fn from_registers(registers: &[u8]) -> Option<Hll> {
        let valid = registers.len() == HLL_REGISTERS && registers.iter().all(|&r| r <= MAX_RANK);
        valid.then(|| Hll { registers: registers.into() })
    }

    /// The registers, in index order.
    pub fn registers(&self) -> &[u8] {
        &self.registers
    }

    /// Adds one member.
    pub fn insert(&mut self, member: &[u8]) {
        let hash = member_hash(member);
        let index = (hash >> (64 - HLL_PRECISION)) as usize;
        let rank = ((hash << HLL_PRECISION).leading_zeros() + 1).min(u32::from(MAX_RANK)) as u8;
        let register = &mut self.registers[index];
        *register = (*register).max(rank);
    }

    /// Adds every member `other` counted.
    pub fn merge(&mut self, other: &Hll) {
        for (mine, theirs) in self.registers.iter_mut().zip(other.registers.iter()) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// The estimated number of distinct members.
    pub fn estimate(&self) -> f64 {
        let m = HLL_REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let inverse_sum: f64 = self.registers.iter().map(|&r| f64::powi(2.0, -i32::from(r))).sum();
        let raw = alpha * m * m / inverse_sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        }
    }
}

/// A member's 64-bit hash: FNV-1a, then MurmurHash3's `fmix64` (FNV's high bits alone are
/// poorly spread for short inputs).
pub fn member_hash(member: &[u8]) -> u64 {
    fmix64(fnv1a64(member))
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// MurmurHash3's 64-bit finaliser: every input bit moves every output bit.
pub fn fmix64(mut hash: u64) -> u64 {
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

/// A set's interval at the flusher: exact members, or a sketch once one was merged in.
#[derive(Debug, Clone, PartialEq)]
pub enum Distinct {
    /// Every member (what readers collect).
    Members(HashSet<Box<[u8]>>),
    /// An estimate: a forwarded sketch was merged in (members added since go into it).
    Sketch(Box<Hll>),
}

impl Default for Distinct {
    fn default() -> Self {
        Distinct::Members(HashSet::new())
    }
}

impl Distinct {
    /// Distinct members: exact, or the sketch's estimate rounded.
    pub fn count(&self) -> u64 {
        match self {
            Distinct::Members(members) => members.len() as u64,
            Distinct::Sketch(sketch) => sketch.estimate().round() as u64,
        }
    }

    /// About how many bytes of memory the members or sketch hold.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Distinct::Members(members) => members.iter().map(|m| m.len() + 24).sum(),
            Distinct::Sketch(_) => HLL_REGISTERS,
        }
    }

    /// True when the count is an estimate.
    pub fn is_estimate(&self) -> bool {
        matches!(self, Distinct::Sketch(_))
    }

    /// A sketch of these members (a copy of the sketch when it is one).
    pub fn sketch(&self) -> Hll {
        match self {
            Distinct::Members(members) => {
                let mut sketch = Hll::default();
                members.iter().for_each(|member| sketch.insert(member));
                sketch
            }
            Distinct::Sketch(sketch) => (**sketch).clone(),
        }
    }

    /// Past `limit` members, counts them by a sketch from now on (true when it did now).
    pub fn cap(&mut self, limit: usize) -> bool {
        match self {
            Distinct::Members(members) if members.len() > limit => {
                *self = Distinct::Sketch(Box::new(self.sketch()));
                true
            }
            _ => false,
        }
    }

    /// Adds members.
    pub fn extend(&mut self, more: impl IntoIterator<Item = Box<[u8]>>) {
        match self {
            Distinct::Members(members) => members.extend(more),
            Distinct::Sketch(sketch) => more.into_iter().for_each(|member| sketch.insert(&member)),
        }
    }

    /// Adds everything `other` holds; the union is a sketch when either is.
    pub fn merge(&mut self, other: Distinct) {
        match other {
            Distinct::Members(members) => self.extend(members),
            Distinct::Sketch(mut sketch) => match self {
                Distinct::Sketch(mine) => mine.merge(&sketch),
                Distinct::Members(members) => {
                    members.iter().for_each(|member| sketch.insert(member));
                    *self = Distinct::Sketch(sketch);
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(range: std::ops::Range<u32>) -> impl Iterator<Item = Box<[u8]>> {
        range.map(|i| format!("user-{i}").into_bytes().into_boxed_slice())
    }

    #[test]
    fn estimates_stay_within_three_standard_errors() {
        for n in [0u32, 1, 10, 1_000, 20_000, 100_000, 1_000_000] {
            let mut sketch = Hll::default();
            members(0..n).for_each(|m| sketch.insert(&m));
            let error = (sketch.estimate() - f64::from(n)).abs() / f64::from(n.max(1));
            assert!(error < 3.0 * 0.0081 + 0.001, "{n} members estimated {}", sketch.estimate());
        }
    }

    #[test]
    fn merging_sketches_is_the_sketch_of_the_union_in_any_order() {
        let (mut a, mut b, mut union) = (Hll::default(), Hll::default(), Hll::default());
        members(0..5000).for_each(|m| a.insert(&m));
        members(3000..9000).for_each(|m| b.insert(&m));
        members(0..9000).for_each(|m| union.insert(&m));
        let mut ab = a.clone();
        ab.merge(&b);
        b.merge(&a);
        assert_eq!(ab, union);
        assert_eq!(b, union);
    }

    #[test]
    fn members_become_a_sketch_when_one_is_merged_in() {
        let mut set = Distinct::Members(members(0..100).collect());
        let mut other = Hll::default();
        members(50..20_000).for_each(|m| other.insert(&m));
        set.merge(Distinct::Sketch(Box::new(other)));
        assert!(set.is_estimate());
        let count = set.count() as f64;
        assert!((count - 20_000.0).abs() < 20_000.0 * 0.03, "{count}");
        let mut exact = Distinct::Members(members(0..10).collect());
        exact.merge(Distinct::Members(members(5..20).collect()));
        assert_eq!(exact.count(), 20);
    }

    #[test]
    fn registers_round_trip_and_bad_ones_are_refused() {
        let mut sketch = Hll::default();
        members(0..300).for_each(|m| sketch.insert(&m));
        assert_eq!(Hll::from_registers(sketch.registers()), Some(sketch));
        assert_eq!(Hll::from_registers(&[0; 10]), None);
        assert_eq!(Hll::from_registers(&[52; HLL_REGISTERS]), None);
    }
}
