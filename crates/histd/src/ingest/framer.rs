//! Newline framing over a byte stream, with partial lines bounded per connection and across
//! all connections.
//!
//! Each read lands in a fixed chunk; everything up to the chunk's last newline goes out as one
//! packet (joined to the partial line held from before), and only what follows it is held. So
//! each byte is scanned for a newline once, whatever a client drips, and memory per connection
//! is the chunk plus its partial line. A partial line longer than [`MAX_LINE_BYTES`], or one
//! that would take the daemon's partial lines past their budget (`streamPendingBytes`), is
//! cut: what is held goes out as a line of its own, counted in `stream_lines_split`.

use std::sync::Arc;

use crate::telemetry::EdgeCounters;

/// Bytes read at once.
pub const READ_CHUNK: usize = 64 * 1024;
/// The longest partial line one connection holds.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// The budget for partial lines across every stream connection; what is held is the
/// `stream_pending_bytes` gauge.
#[derive(Debug, Clone)]
pub struct PendingBudget {
    /// The most bytes held at once.
    pub limit: u64,
    /// Where the bytes held are counted.
    pub edges: Arc<EdgeCounters>,
}

/// One connection's framing state.
#[derive(Debug)]
pub struct Framer {
    chunk: Box<[u8]>,
    /// The partial line after the last newline seen (counted in the budget).
    pending: Vec<u8>,
    budget: PendingBudget,
}

impl Framer {
    /// An empty framer whose partial lines count against `budget`.
    pub fn new(budget: PendingBudget) -> Self {
        Framer { chunk: vec![0; READ_CHUNK].into_boxed_slice(), pending: Vec::new(), budget }
    }

    /// Where the next read goes.
    pub fn chunk(&mut self) -> &mut [u8] {
        &mut self.chunk
    }

    /// Frames the `read` bytes just read into [`Framer::chunk`]: complete lines go to
    /// `packet` (one call), the rest is held.
    pub fn accept(&mut self, read: usize, mut packet: impl FnMut(&[u8])) {
        let chunk = std::mem::take(&mut self.chunk);
        let new = &chunk[..read];
        match new.iter().rposition(|&b| b == b'\n') {
            Some(newline) => {
                if self.pending.is_empty() {
                    packet(&new[..=newline]);
                } else {
                    self.pending.extend_from_slice(&new[..=newline]);
                    packet(&self.pending);
                    self.release();
                }
                self.hold(&new[newline + 1..], &mut packet);
            }
            None => self.hold(new, &mut packet),
        }
        self.chunk = chunk;
    }

    /// Hands over the partial line still held (the connection ended).
    pub fn finish(&mut self, mut packet: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            packet(&self.pending);
            self.release();
        }
    }

    /// Holds `bytes` after the partial line, or cuts the line there when it would grow past
    /// its bounds.
    fn hold(&mut self, bytes: &[u8], packet: &mut impl FnMut(&[u8])) {
        if bytes.is_empty() {
            return;
        }
        let too_long = self.pending.len() + bytes.len() > MAX_LINE_BYTES;
        let held = &self.budget.edges.stream_pending_bytes;
        if too_long || !held.try_add(bytes.len() as u64, self.budget.limit) {
            held.add(bytes.len() as u64); // briefly: released with the line below
            self.pending.extend_from_slice(bytes);
            self.budget.edges.stream_lines_split.add(1);
            packet(&self.pending);
            self.release();
            return;
        }
        self.pending.reserve_exact(bytes.len());
        self.pending.extend_from_slice(bytes);
    }

    /// Forgets the partial line, returning its bytes to the budget (and its memory, when it
    /// was large).
    fn release(&mut self) {
        self.budget.edges.stream_pending_bytes.sub(self.pending.len() as u64);
        self.pending.clear();
        if self.pending.capacity() > READ_CHUNK {
            self.pending = Vec::new();
        }
    }
}

impl Drop for Framer {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framer(limit: u64) -> (Framer, Arc<EdgeCounters>) {
        let edges = Arc::new(EdgeCounters::default());
        (Framer::new(PendingBudget { limit, edges: edges.clone() }), edges)
    }

    /// Feeds `reads` and collects the packets, the last one from `finish`.
    fn frame(framer: &mut Framer, reads: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut packets = Vec::new();
        for read in reads {
            framer.chunk()[..read.len()].copy_from_slice(read);
            framer.accept(read.len(), |p| packets.push(p.to_vec()));
        }
        framer.finish(|p| packets.push(p.to_vec()));
        packets
    }

    /// Reads, and the packets framed from them.
    type Case<'a> = (&'a [&'a [u8]], &'a [&'a [u8]]);

    #[test]
    fn frames_on_the_last_newline() {
        let cases: &[Case] = &[
            (&[b"a:1|c\nb:", b"2|c\nc:3", b"|c"], &[b"a:1|c\n", b"b:2|c\n", b"c:3|c"]),
            (&[b"a:1|c\nb:2|c\n"], &[b"a:1|c\nb:2|c\n"]),
            (&[b"a", b":", b"1", b"|c\n"], &[b"a:1|c\n"]),
            (&[b"\n", b"x\n"], &[b"\n", b"x\n"]),
        ];
        for (reads, want) in cases {
            let (mut framer, edges) = framer(u64::MAX);
            assert_eq!(frame(&mut framer, reads), *want, "{reads:?}");
            assert_eq!((edges.stream_lines_split.get(), edges.stream_pending_bytes.get()), (0, 0));
        }
    }

    #[test]
    fn cuts_and_counts_a_line_past_its_length() {
        let (mut framer, edges) = framer(u64::MAX);
        let chunk = vec![b'x'; READ_CHUNK];
        let reads: Vec<&[u8]> = std::iter::repeat_n(&chunk[..], MAX_LINE_BYTES / READ_CHUNK + 1).collect();
        let sizes: Vec<usize> = frame(&mut framer, &reads).iter().map(Vec::len).collect();
        assert_eq!(sizes, [MAX_LINE_BYTES + READ_CHUNK]);
        assert_eq!((edges.stream_lines_split.get(), edges.stream_pending_bytes.get()), (1, 0));
    }

    #[test]
    fn partial_lines_share_one_budget() {
        let edges = Arc::new(EdgeCounters::default());
        let budget = PendingBudget { limit: 10, edges: edges.clone() };
        let (mut first, mut second) = (Framer::new(budget.clone()), Framer::new(budget));
        let mut packets = Vec::new();
        first.chunk()[..6].copy_from_slice(b"aaaaaa");
        first.accept(6, |p| packets.push(p.to_vec()));
        assert_eq!(edges.stream_pending_bytes.get(), 6);
        second.chunk()[..6].copy_from_slice(b"bbbbbb");
        second.accept(6, |p| packets.push(p.to_vec()));
        assert_eq!(packets, [b"bbbbbb".to_vec()], "past the budget: cut and handed over");
        assert_eq!((edges.stream_lines_split.get(), edges.stream_pending_bytes.get()), (1, 6));
        drop(first);
        assert_eq!(edges.stream_pending_bytes.get(), 0, "a closed connection gives its bytes back");
    }
}
