//! Newline framing over a byte stream, with partial lines bounded per connection and across
//! all connections.
//!
//! Each read lands in a fixed chunk; everything up to the chunk's last newline goes out as one
//! packet (joined to the partial line held from before), and only what follows it is held. So
//! each byte is scanned for a newline once, whatever a client drips, and memory per connection
//! is the chunk plus its partial line. A partial line longer than `maxStreamLineBytes`, or one
//! that would take the daemon's partial lines past their budget (`streamPendingBytes`), is
//! discarded whole, up to its newline, and reported once ([`Framed::TooLong`]): never parsed in
//! pieces (the tail of a long line could read as a valid metric).

use std::sync::Arc;

use crate::telemetry::EdgeCounters;

/// Bytes read at once.
pub const READ_CHUNK: usize = 64 * 1024;
#[cfg(test)]
use super::DEFAULT_MAX_STREAM_LINE_BYTES as MAX_LINE_BYTES;

/// The budget for partial lines across every stream connection; what is held is the
/// `stream_pending_bytes` gauge.
#[derive(Debug, Clone)]
pub struct PendingBudget {
    /// The most bytes held at once.
    pub limit: u64,
    /// The longest line kept (`maxStreamLineBytes`).
    pub line_limit: usize,
    /// Where the bytes held are counted.
    pub edges: Arc<EdgeCounters>,
}

/// What framing hands on.
#[derive(Debug, PartialEq, Eq)]
pub enum Framed<'a> {
    /// Complete lines, each with its newline (the last line at the end of a connection may
    /// have none).
    Packet(&'a [u8]),
    /// A line too long to keep was discarded.
    TooLong,
}

/// One connection's framing state.
#[derive(Debug)]
pub struct Framer {
    chunk: Box<[u8]>,
    /// The partial line after the last newline seen (counted in the budget).
    pending: Vec<u8>,
    /// The current line was too long: its bytes are dropped until its newline.
    skipping: bool,
    budget: PendingBudget,
}

impl Framer {
    /// An empty framer whose partial lines count against `budget`.
    pub fn new(budget: PendingBudget) -> Self {
        Framer { chunk: vec![0; READ_CHUNK].into_boxed_slice(), pending: Vec::new(), skipping: false, budget }
    }

    /// Where the next read goes.
    pub fn chunk(&mut self) -> &mut [u8] {
        &mut self.chunk
    }

    /// Frames the `read` bytes just read into [`Framer::chunk`]: complete lines go to `out`
    /// (one packet), the rest is held.
    pub fn accept(&mut self, read: usize, mut out: impl FnMut(Framed<'_>)) {
        let chunk = std::mem::take(&mut self.chunk);
        let mut new = &chunk[..read];
        if self.skipping {
            match new.iter().position(|&b| b == b'\n') {
                Some(newline) => (self.skipping, new) = (false, &new[newline + 1..]),
                None => new = &[],
            }
        }
        match new.iter().rposition(|&b| b == b'\n') {
            Some(newline) if self.pending.is_empty() => {
                out(Framed::Packet(&new[..=newline]));
                self.hold(&new[newline + 1..], &mut out);
            }
            Some(newline) => {
                // The held line ends at the first newline: whole if it fits, else discarded.
                let first = new.iter().position(|&b| b == b'\n').unwrap_or(newline);
                if self.pending.len() + first > self.budget.line_limit {
                    self.release();
                    out(Framed::TooLong);
                    if first < newline {
                        out(Framed::Packet(&new[first + 1..=newline]));
                    }
                } else {
                    self.pending.extend_from_slice(&new[..=newline]);
                    out(Framed::Packet(&self.pending));
                    self.release();
                }
                self.hold(&new[newline + 1..], &mut out);
            }
            None => self.hold(new, &mut out),
        }
        self.chunk = chunk;
    }

    /// Hands over the partial line still held (the connection ended).
    pub fn finish(&mut self, mut out: impl FnMut(Framed<'_>)) {
        if !self.pending.is_empty() {
            out(Framed::Packet(&self.pending));
            self.release();
        }
    }

    /// Holds `bytes` after the partial line, or discards the line when it would grow past its
    /// bounds (and the rest of it, up to its newline, as it arrives).
    fn hold(&mut self, bytes: &[u8], out: &mut impl FnMut(Framed<'_>)) {
        if bytes.is_empty() {
            return;
        }
        // Without its newline yet, a line that already reaches the limit cannot fit.
        let too_long = self.pending.len() + bytes.len() > self.budget.line_limit;
        if too_long || !self.budget.edges.stream_pending_bytes.try_add(bytes.len() as u64, self.budget.limit) {
            self.release();
            self.skipping = true;
            out(Framed::TooLong);
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
        (Framer::new(PendingBudget { limit, line_limit: MAX_LINE_BYTES, edges: edges.clone() }), edges)
    }

    /// Feeds `reads` and collects what comes out (`None` for a discarded line), the last from
    /// `finish`.
    fn frame(framer: &mut Framer, reads: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
        let mut out = Vec::new();
        let mut collect = |framed: Framed<'_>| match framed {
            Framed::Packet(packet) => out.push(Some(packet.to_vec())),
            Framed::TooLong => out.push(None),
        };
        for read in reads {
            framer.chunk()[..read.len()].copy_from_slice(read);
            framer.accept(read.len(), &mut collect);
        }
        framer.finish(&mut collect);
        out
    }

    /// Reads, and what is framed from them.
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
            let want: Vec<Option<Vec<u8>>> = want.iter().map(|p| Some(p.to_vec())).collect();
            assert_eq!(frame(&mut framer, reads), want, "{reads:?}");
            assert_eq!(edges.stream_pending_bytes.get(), 0);
        }
    }

    #[test]
    fn a_line_past_its_length_is_discarded_whole() {
        let (mut framer, edges) = framer(u64::MAX);
        let chunk = vec![b'x'; READ_CHUNK];
        let mut reads: Vec<&[u8]> = std::iter::repeat_n(&chunk[..], MAX_LINE_BYTES / READ_CHUNK + 2).collect();
        // The long line's tail, which would parse as a counter if it were cut off, then a line.
        reads.push(b"xx;tail:1|c\nnext:1|c\n");
        let framed = frame(&mut framer, &reads);
        assert_eq!(framed, [None, Some(b"next:1|c\n".to_vec())]);
        assert_eq!(edges.stream_pending_bytes.get(), 0);
    }

    #[test]
    fn the_line_limit_is_exact_across_reads() {
        // A limit of two chunks: a line of exactly that many bytes (newline aside) is kept,
        // one byte more is discarded, however the reads cut it.
        let edges = Arc::new(EdgeCounters::default());
        let line_limit = 2 * READ_CHUNK;
        let new = || Framer::new(PendingBudget { limit: u64::MAX, line_limit, edges: edges.clone() });
        for extra in [0, 1] {
            let mut line = vec![b'x'; line_limit - 4 + extra];
            line.extend_from_slice(b":1|c\nnext:1|c\n");
            let reads: Vec<&[u8]> = line.chunks(READ_CHUNK - 7).collect();
            let framed = frame(&mut new(), &reads);
            let kept = framed.iter().flatten().any(|packet| packet.len() > line_limit);
            assert_eq!((kept, framed.contains(&None)), (extra == 0, extra == 1), "{extra} over");
            assert!(framed.iter().flatten().any(|packet| packet.ends_with(b"next:1|c\n")), "the next line is kept");
        }
        assert_eq!(edges.stream_pending_bytes.get(), 0);
    }

    #[test]
    fn partial_lines_share_one_budget() {
        let edges = Arc::new(EdgeCounters::default());
        let budget = PendingBudget { limit: 10, line_limit: MAX_LINE_BYTES, edges: edges.clone() };
        let (mut first, mut second) = (Framer::new(budget.clone()), Framer::new(budget));
        let mut framed = Vec::new();
        first.chunk()[..6].copy_from_slice(b"aaaaaa");
        first.accept(6, |f| framed.push(f == Framed::TooLong));
        assert_eq!(edges.stream_pending_bytes.get(), 6);
        second.chunk()[..6].copy_from_slice(b"bbbbbb");
        second.accept(6, |f| framed.push(f == Framed::TooLong));
        assert_eq!(framed, [true], "past the budget: discarded");
        assert_eq!(edges.stream_pending_bytes.get(), 6);
        drop(first);
        assert_eq!(edges.stream_pending_bytes.get(), 0, "a closed connection gives its bytes back");
    }
}
