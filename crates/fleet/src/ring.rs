//! Which global node owns a series: rendezvous (highest random weight) hashing over the nodes
//! that are up, so a node going down moves only its own series (each to its own next-best
//! node) and they come back when it recovers.
//!
//! `score(node, key) = fmix64(fnv1a64(key) XOR fnv1a64(node))`, where `node` is the node's URL
//! as configured, `key` the series key, FNV-1a 64 and MurmurHash3's `fmix64` as in
//! docs/forward-format.md; the owner is the live node with the highest score (ties: the
//! earlier node in `forward.nodes`). Any tool can compute the same owner.
//!
//! Ownership is decided when a flush is cut, with the health known then, so each series'
//! interval goes whole to one node. A part already cut for a node that goes down waits for it
//! (the node merges a copy of what it took before dying once: its journal keeps the
//! identities), for `forward.redirectAfterMs` at most; then it goes to the next node.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use agg::distinct::{fmix64, fnv1a64};

use crate::unix_now_ms;

/// One node and whether it is believed up.
#[derive(Debug)]
pub struct Node {
    /// Its name (its identity in the hash): a global's URL as configured, a proxy's
    /// aggregator as `host:port`.
    pub name: String,
    /// `fnv1a64(name)`.
    hash: u64,
    up: AtomicBool,
    /// Unix milliseconds since when it is down (0 while up).
    down_since_ms: AtomicU64,
}

impl Node {
    /// A node, up until a request or a health check fails.
    pub fn new(name: String) -> Node {
        Node { hash: fnv1a64(name.as_bytes()), name, up: AtomicBool::new(true), down_since_ms: AtomicU64::new(0) }
    }

    /// Believed up.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Records a health check's or a request's outcome; true when that changed the belief.
    pub fn set_up(&self, up: bool) -> bool {
        let changed = self.up.swap(up, Ordering::Relaxed) != up;
        if changed {
            let since = if up { 0 } else { unix_now_ms().max(1) };
            self.down_since_ms.store(since, Ordering::Relaxed);
        }
        changed
    }

    /// True when it has been down for `at_least`.
    pub fn down_for(&self, at_least: Duration) -> bool {
        let since = self.down_since_ms.load(Ordering::Relaxed);
        since != 0 && unix_now_ms().saturating_sub(since) >= at_least.as_millis() as u64
    }
}

/// The nodes, in config order.
#[derive(Debug)]
pub struct Ring {
    nodes: Vec<Node>,
}

impl Ring {
    /// A ring of `nodes` (at least one).
    pub fn new(nodes: Vec<Node>) -> Ring {
        assert!(!nodes.is_empty(), "forward.nodes is checked to be non-empty");
        Ring { nodes }
    }

    /// The nodes, in config order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The index of the node that owns `key`: the live node with the highest score, or the
    /// highest-scoring node of all when none is up (its part waits in the spool).
    pub fn owner(&self, key: &[u8]) -> usize {
        let key_hash = fnv1a64(key);
        self.best(key_hash, true).or_else(|| self.best(key_hash, false)).unwrap_or(0)
    }

    /// Where a part cut for node `part_owner` goes now: that node while it is up; once it has
    /// been down for `redirect_after`, the live node that scores highest for the part owner's
    /// name; `None` until then, or when no node is up.
    pub fn destination(&self, part_owner: usize, redirect_after: Duration) -> Option<usize> {
        let owner = self.nodes.get(part_owner)?;
        if owner.is_up() {
            return Some(part_owner);
        }
        if !owner.down_for(redirect_after) {
            return None;
        }
        self.best(owner.hash, true)
    }

    fn best(&self, key_hash: u64, only_up: bool) -> Option<usize> {
        let candidates = self.nodes.iter().enumerate().filter(|(_, node)| !only_up || node.is_up());
        // max_by_key keeps the last of equal scores; reversed order keeps the earliest node.
        candidates.rev().max_by_key(|(_, node)| fmix64(key_hash ^ node.hash)).map(|(index, _)| index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(count: usize) -> Ring {
        let node = |i: usize| Node::new(format!("http://10.0.0.{i}:8127"));
        Ring::new((1..=count).map(node).collect())
    }

    fn keys() -> impl Iterator<Item = String> {
        (0..20_000).map(|i| format!("api.request.{i}"))
    }

    #[test]
    fn series_spread_evenly_over_the_nodes() {
        let ring = ring(4);
        let mut per_node = [0usize; 4];
        keys().for_each(|key| per_node[ring.owner(key.as_bytes())] += 1);
        for count in per_node {
            assert!((4_500..=5_500).contains(&count), "{per_node:?}");
        }
    }

    #[test]
    fn a_node_going_down_moves_only_its_own_series_and_they_come_back() {
        let ring = ring(3);
        let before: Vec<usize> = keys().map(|key| ring.owner(key.as_bytes())).collect();
        ring.nodes()[1].set_up(false);
        let during: Vec<usize> = keys().map(|key| ring.owner(key.as_bytes())).collect();
        for (was, is) in before.iter().zip(&during) {
            assert!(*is != 1 && (*was == 1 || was == is), "moved from {was} to {is}");
        }
        let moved_to: Vec<usize> = before.iter().zip(&during).filter(|(w, _)| **w == 1).map(|(_, i)| *i).collect();
        assert!(moved_to.contains(&0) && moved_to.contains(&2), "a dead node's series spread over the others");
        ring.nodes()[1].set_up(true);
        let after: Vec<usize> = keys().map(|key| ring.owner(key.as_bytes())).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn the_score_is_the_documented_one() {
        // docs/forward-format.md's worked example.
        let ring = ring(2);
        let key = b"api.latency";
        let scores: Vec<u64> = ring.nodes().iter().map(|n| fmix64(fnv1a64(key) ^ fnv1a64(n.name.as_bytes()))).collect();
        let want = if scores[0] >= scores[1] { 0 } else { 1 };
        assert_eq!(ring.owner(key), want);
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_part_waits_for_its_node_then_is_redirected_and_waits_when_all_are_down() {
        let ring = ring(3);
        let (soon, never) = (Duration::ZERO, Duration::from_secs(3600));
        assert_eq!(ring.destination(2, never), Some(2));
        ring.nodes()[2].set_up(false);
        assert_eq!(ring.destination(2, never), None, "not down for long enough");
        let elsewhere = ring.destination(2, soon).unwrap();
        assert_ne!(elsewhere, 2);
        ring.nodes().iter().for_each(|n| {
            n.set_up(false);
        });
        assert_eq!(ring.destination(2, soon), None);
        assert!(ring.owner(b"k") < 3);
    }
}
