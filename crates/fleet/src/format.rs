//! The forwarding wire format, version 1: one source's interval (or a part of it) in the form
//! that merges exactly. docs/forward-format.md is the specification; this file follows it
//! field by field.
//!
//! ```text
//! batch    = "HFWD" version:u8=1 source:bytes interval_start_ms:varint interval_ms:varint
//!            part:bytes chunk:varint
//!            n:varint counter*n  n:varint timer*n  n:varint gauge*n  n:varint set*n
//! counter  = key:bytes value:f64
//! timer    = key:bytes flags:u8 (1 = statsd `ms` timer, 2 = raw values follow)
//!            received:varint count:f64 sum:f64 sum_squares:f64 min:f64 max:f64
//!            [n:varint value:f64*n]  histogram:bytes (libcircllhist's binary serialisation)
//! gauge    = key:bytes value:f64 updated_unix_s:varint
//! set      = key:bytes 0 n:varint member:bytes*n  |  key:bytes 1 precision:u8=14 register:u8*16384
//! bytes    = length:varint byte*length        varint = unsigned LEB128    f64 = IEEE 754, little-endian
//! ```
//!
//! The HTTP body is the batch compressed with snappy's block format (`Content-Encoding: snappy`).
//! A batch's identity is (source, interval_start_ms, part, chunk): a receiver merges each
//! identity once, so retries and copies cost nothing.

use std::borrow::Cow;
use std::mem::size_of;

use agg::{Distinct, ForwardedGauge, Hll, Mergeable, TimerPart, TimerPoint, TimerSamples, TimerTotals};
use compact_str::CompactString;

/// The first bytes of every batch.
pub const MAGIC: &[u8; 4] = b"HFWD";
/// The version this histd writes and reads.
pub const VERSION: u8 = 1;
/// The content type of a forwarded batch.
pub const CONTENT_TYPE: &str = "application/x-histd-forward";
/// The longest key a batch may hold.
const MAX_KEY_BYTES: usize = 65_536;
/// The longest source or part name (a host name, a URL): identities are remembered, so they
/// are kept short.
pub const MAX_NAME_BYTES: usize = 1024;
/// A key this long or shorter lives inside its slot (`CompactString`); a longer one costs its
/// bytes on the heap besides.
const INLINE_KEY_BYTES: usize = 24;
/// What a set member costs besides its bytes: its box and its place in the members' table.
const MEMBER_SLOT_BYTES: usize = 24;
const TIMER_MS: u8 = 1;
const TIMER_VALUES: u8 = 2;
const SET_MEMBERS: u8 = 0;
const SET_SKETCH: u8 = 1;

/// Who sent a batch and which part of which interval it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BatchId {
    /// The sending histd (`forward.source`).
    pub source: String,
    /// Unix milliseconds of the interval's start.
    pub interval_start_ms: u64,
    /// The interval's length in milliseconds.
    pub interval_ms: u64,
    /// The node the part was cut for (its URL): a source's interval splits into one part per
    /// node that owns some of its series.
    pub part: String,
    /// Parts too big for one request go in numbered chunks.
    pub chunk: u64,
}

impl BatchId {
    /// Unix milliseconds of the interval's end.
    pub fn end_ms(&self) -> u64 {
        self.interval_start_ms.saturating_add(self.interval_ms)
    }
}

/// A decoded batch.
#[derive(Debug)]
pub struct Batch {
    /// Its identity.
    pub id: BatchId,
    /// Its series.
    pub interval: Mergeable,
}

/// Writes one batch, section by section (series of every kind may be added in any order).
#[derive(Debug)]
pub struct BatchWriter {
    id: BatchId,
    sections: [Vec<u8>; 4],
    counts: [u64; 4],
}

impl BatchWriter {
    /// An empty batch with identity `id`.
    pub fn new(id: BatchId) -> Self {
        BatchWriter { id, sections: Default::default(), counts: [0; 4] }
    }

    /// Series written so far.
    pub fn series(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Bytes of series written so far (before compression).
    pub fn bytes(&self) -> usize {
        self.sections.iter().map(Vec::len).sum()
    }

    /// Adds a counter's interval sum.
    pub fn counter(&mut self, key: &str, value: f64) {
        let out = self.section(0);
        put_bytes(out, key.as_bytes());
        out.extend_from_slice(&value.to_le_bytes());
    }

    /// Adds a timer: its totals, its histogram, and its raw values when the point carries them
    /// and there are at most `raw_values_limit`.
    pub fn timer(&mut self, point: &TimerPoint, raw_values_limit: usize) {
        let values = point.values.as_deref().filter(|values| values.len() <= raw_values_limit);
        let out = self.section(1);
        put_bytes(out, point.key.as_bytes());
        out.push(if point.milliseconds { TIMER_MS } else { 0 } | if values.is_some() { TIMER_VALUES } else { 0 });
        let totals = &point.totals;
        put_varint(out, totals.received);
        for number in [totals.count, totals.sum, totals.sum_squares, totals.min, totals.max] {
            out.extend_from_slice(&number.to_le_bytes());
        }
        if let Some(values) = values {
            put_varint(out, values.len() as u64);
            values.iter().for_each(|value| out.extend_from_slice(&value.to_le_bytes()));
        }
        let histogram = point.histogram.to_bytes();
        put_bytes(out, &histogram);
    }

    /// Adds a gauge set at `updated_unix_s`.
    pub fn gauge(&mut self, key: &str, value: f64, updated_unix_s: u64) {
        let out = self.section(2);
        put_bytes(out, key.as_bytes());
        out.extend_from_slice(&value.to_le_bytes());
        put_varint(out, updated_unix_s);
    }

    /// Adds a set: its members while there are at most `members_limit`, else its sketch.
    pub fn set(&mut self, key: &str, distinct: &Distinct, members_limit: usize) {
        let out = self.section(3);
        put_bytes(out, key.as_bytes());
        match distinct {
            Distinct::Members(members) if members.len() <= members_limit => {
                out.push(SET_MEMBERS);
                put_varint(out, members.len() as u64);
                // Sorted: the same set is the same bytes.
                let mut sorted: Vec<&[u8]> = members.iter().map(|member| &**member).collect();
                sorted.sort_unstable();
                sorted.into_iter().for_each(|member| put_bytes(out, member));
            }
            _ => {
                out.push(SET_SKETCH);
                out.push(agg::distinct::HLL_PRECISION as u8);
                out.extend_from_slice(distinct.sketch().registers());
            }
        }
    }

    fn section(&mut self, index: usize) -> &mut Vec<u8> {
        self.counts[index] += 1;
        &mut self.sections[index]
    }

    /// The batch, uncompressed.
    pub fn finish(self) -> Vec<u8> {
        let id = &self.id;
        let mut out = Vec::with_capacity(self.bytes() + 64 + id.source.len() + id.part.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        put_bytes(&mut out, id.source.as_bytes());
        put_varint(&mut out, id.interval_start_ms);
        put_varint(&mut out, id.interval_ms);
        put_bytes(&mut out, id.part.as_bytes());
        put_varint(&mut out, id.chunk);
        for (count, section) in self.counts.iter().zip(&self.sections) {
            put_varint(&mut out, *count);
            out.extend_from_slice(section);
        }
        out
    }
}

/// Compresses a finished batch for its HTTP body.
pub fn compress(batch: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(batch).unwrap_or_else(|_| unreachable!("snappy takes any input under 4 GiB"))
}

/// Why a body is not a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// Not snappy's block format, or larger than allowed once decompressed.
    Compression(String),
    /// Not a batch of a version this histd reads.
    Header(String),
    /// A field is cut short or out of range.
    Field {
        /// The byte offset where it starts.
        at: usize,
        /// Which field.
        what: &'static str,
    },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Compression(why) => write!(f, "body is not a snappy-compressed batch: {why}"),
            FormatError::Header(why) => write!(f, "{why}"),
            FormatError::Field { at, what } => write!(f, "bad {what} at byte {at} of the decompressed batch"),
        }
    }
}

impl std::error::Error for FormatError {}

/// The size of a body once decompressed, as its header claims (checked when decompressing).
pub fn decompressed_len(body: &[u8]) -> Result<usize, FormatError> {
    snap::raw::decompress_len(body).map_err(|e| FormatError::Compression(e.to_string()))
}

/// Decompresses and reads a body, refusing one larger than `max_bytes` decompressed or whose
/// entries would take more than `max_bytes` of memory once decoded.
pub fn decode(body: &[u8], max_bytes: usize) -> Result<Batch, FormatError> {
    decode_within(body, max_bytes, usize::MAX)
}

/// As [`decode`], the entries' memory also bounded by `decoded_per_byte` times the
/// decompressed size: what a reader reserved for the batch before reading it
/// ([`decoded_bound`]).
pub fn decode_within(body: &[u8], max_bytes: usize, decoded_per_byte: usize) -> Result<Batch, FormatError> {
    let checked = decompress_checked(body, max_bytes, decoded_per_byte)?;
    let mut interval = Mergeable::default();
    checked.read_into(&mut interval);
    Ok(Batch { id: checked.id, interval })
}

/// The most memory the entries of a batch of `decompressed` bytes may take: `per_byte` times
/// its size, and never past `max_bytes`.
pub fn decoded_bound(decompressed: usize, max_bytes: usize, per_byte: usize) -> usize {
    decompressed.saturating_mul(per_byte).min(max_bytes)
}

/// Reads an uncompressed batch (no bound on what it decodes to beyond its own size).
pub fn read_batch(raw: &[u8]) -> Result<Batch, FormatError> {
    read_batch_within(raw, usize::MAX)
}

/// Reads an uncompressed batch whose entries may take at most `max_decoded` bytes of memory
/// (a batch of a million empty set members is a few megabytes on the wire and would be tens
/// of times that decoded: the budget is spent as entries are read, so no count is trusted).
pub fn read_batch_within(raw: &[u8], max_decoded: usize) -> Result<Batch, FormatError> {
    let checked = check_batch(raw, max_decoded)?;
    let mut interval = Mergeable::default();
    checked.read_into(&mut interval);
    Ok(Batch { id: checked.id, interval })
}

/// Decompresses a body and checks the batch whole, as [`decode_within`] does, without
/// building its series: [`Checked::read_into`] hands them to what merges them.
pub fn decompress_checked(
    body: &[u8],
    max_bytes: usize,
    decoded_per_byte: usize,
) -> Result<Checked<'static>, FormatError> {
    decompress_checked_into(body, max_bytes, decoded_per_byte, Vec::new()).map_err(|(error, _)| error)
}

/// As [`decompress_checked`], decompressing into `buffer` (a reader that takes many batches
/// gives back the one it had, [`Checked::into_buffer`], and the pages it holds are written
/// again rather than asked of the kernel for every batch); a refused body gives it back with
/// the error.
pub fn decompress_checked_into(
    body: &[u8],
    max_bytes: usize,
    decoded_per_byte: usize,
    mut buffer: Vec<u8>,
) -> Result<Checked<'static>, (FormatError, Vec<u8>)> {
    let length = match decompressed_len(body) {
        Ok(length) if length > max_bytes => {
            let why = format!("{length} bytes decompressed, over the limit of {max_bytes}");
            return Err((FormatError::Compression(why), buffer));
        }
        Ok(length) => length,
        Err(error) => return Err((error, buffer)),
    };
    buffer.clear();
    buffer.resize(length, 0);
    if let Err(error) = snap::raw::Decoder::new().decompress(body, &mut buffer) {
        return Err((FormatError::Compression(error.to_string()), buffer));
    }
    match check(&buffer, decoded_bound(length, max_bytes, decoded_per_byte)) {
        Ok((id, series_at, counts)) => Ok(Checked { id, raw: Cow::Owned(buffer), series_at, counts }),
        Err(error) => Err((error, buffer)),
    }
}

/// Checks an uncompressed batch whole (every field, every timer's parts agreeing, the
/// decoding budget of `max_decoded` bytes) and reads its identity; its series are read out
/// by [`Checked::read_into`], which then cannot fail.
pub fn check_batch(raw: &[u8], max_decoded: usize) -> Result<Checked<'_>, FormatError> {
    let (id, series_at, counts) = check(raw, max_decoded)?;
    Ok(Checked { id, raw: Cow::Borrowed(raw), series_at, counts })
}

/// [`check_batch`]'s reading: the identity, where the series start, and how many of each kind.
fn check(raw: &[u8], max_decoded: usize) -> Result<(BatchId, usize, [usize; 4]), FormatError> {
    let mut input = Input { bytes: raw, at: 0, decoded: 0, max_decoded, checked: false };
    let id = input.header()?;
    let series_at = input.at;
    let counts = input.series(&mut Ignore)?;
    if input.at != raw.len() {
        return Err(FormatError::Field { at: input.at, what: "trailing bytes" });
    }
    Ok((id, series_at, counts))
}

/// A batch checked whole ([`check_batch`], [`decompress_checked`]), its series still in its
/// bytes.
#[derive(Debug)]
pub struct Checked<'a> {
    /// Its identity.
    pub id: BatchId,
    raw: Cow<'a, [u8]>,
    series_at: usize,
    /// Counters, timers, gauges and sets in it.
    counts: [usize; 4],
}

impl Checked<'_> {
    /// The bytes it was decompressed into, for the next batch.
    pub fn into_buffer(self) -> Vec<u8> {
        self.raw.into_owned()
    }

    /// Hands every series to `into`, section by section (counters, timers, gauges, sets), in
    /// the order written.
    pub fn read_into(&self, into: &mut impl Series) {
        into.expect(self.counts);
        let mut input =
            Input { bytes: &self.raw, at: self.series_at, decoded: 0, max_decoded: usize::MAX, checked: true };
        let read = input.series(into);
        debug_assert!(read.is_ok(), "check_batch read the same bytes: {read:?}");
    }
}

/// What takes a batch's series one by one as [`Checked::read_into`] reads them: a global's
/// aggregation merging them where they lie, or a [`Mergeable`] collecting them.
pub trait Series {
    /// How many counters, timers, gauges and sets are coming (room may be made for them).
    fn expect(&mut self, _counts: [usize; 4]) {}
    /// A counter's interval sum.
    fn counter(&mut self, key: &str, value: f64);
    /// A timer's interval.
    fn timer(&mut self, key: &str, part: &TimerPart<'_>);
    /// A gauge's latest value.
    fn gauge(&mut self, key: &str, gauge: ForwardedGauge);
    /// A set's members or sketch.
    fn set(&mut self, key: &str, set: SetPart<'_>);
}

/// A set as a batch holds it: its members or its sketch, read where they lie.
#[derive(Debug, Clone, Copy)]
pub struct SetPart<'a> {
    kind: u8,
    /// The members (each `bytes`) after their count, or the sketch's registers.
    bytes: &'a [u8],
    members: usize,
}

impl SetPart<'_> {
    /// The set, decoded.
    pub fn to_distinct(&self) -> Distinct {
        if self.kind == SET_SKETCH {
            let sketch = Hll::from_registers(self.bytes).unwrap_or_else(|| unreachable!("checked with the batch"));
            return Distinct::Sketch(Box::new(sketch));
        }
        let mut input = Input { bytes: self.bytes, at: 0, decoded: 0, max_decoded: usize::MAX, checked: true };
        let mut members = hashbrown::HashSet::with_capacity(self.members);
        for _ in 0..self.members {
            if let Ok(member) = input.bytes(MAX_KEY_BYTES, "set member") {
                members.insert(Box::<[u8]>::from(member));
            }
        }
        Distinct::Members(members)
    }
}

/// Takes the series of a batch being checked and keeps nothing.
struct Ignore;

impl Series for Ignore {
    fn counter(&mut self, _: &str, _: f64) {}
    fn timer(&mut self, _: &str, _: &TimerPart<'_>) {}
    fn gauge(&mut self, _: &str, _: ForwardedGauge) {}
    fn set(&mut self, _: &str, _: SetPart<'_>) {}
}

impl Series for Mergeable {
    fn expect(&mut self, [counters, timers, gauges, sets]: [usize; 4]) {
        self.counters.reserve_exact(counters);
        self.timers.reserve_exact(timers);
        self.gauges.reserve_exact(gauges);
        self.sets.reserve_exact(sets);
    }

    fn counter(&mut self, key: &str, value: f64) {
        self.counters.push((key.into(), value));
    }

    fn timer(&mut self, key: &str, part: &TimerPart<'_>) {
        self.timers.push((key.into(), TimerSamples::from_part(part)));
    }

    fn gauge(&mut self, key: &str, gauge: ForwardedGauge) {
        self.gauges.push((key.into(), gauge));
    }

    fn set(&mut self, key: &str, set: SetPart<'_>) {
        self.sets.push((key.into(), set.to_distinct()));
    }
}

impl Series for agg::Absorbing<'_> {
    fn counter(&mut self, key: &str, value: f64) {
        agg::Absorbing::counter(self, key, value);
    }

    fn timer(&mut self, key: &str, part: &TimerPart<'_>) {
        agg::Absorbing::timer(self, key, part);
    }

    fn gauge(&mut self, key: &str, gauge: ForwardedGauge) {
        agg::Absorbing::gauge(self, key, gauge);
    }

    fn set(&mut self, key: &str, set: SetPart<'_>) {
        agg::Absorbing::set(self, key, set.to_distinct());
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A cursor over a batch: every read checks what is left, and what it decoded so far.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Bytes of memory the entries read so far take (estimated: their bytes and a slot each).
    decoded: usize,
    max_decoded: usize,
    /// True when reading bytes a first pass checked whole (`check`): what it checked of each
    /// timer is not checked again.
    checked: bool,
}

impl<'a> Input<'a> {
    fn error(&self, what: &'static str) -> FormatError {
        FormatError::Field { at: self.at, what }
    }

    fn take(&mut self, length: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        let end = self.at.checked_add(length).filter(|&end| end <= self.bytes.len()).ok_or(self.error(what))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self, what: &'static str) -> Result<u8, FormatError> {
        Ok(self.take(1, what)?[0])
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, FormatError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte(what)?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(what))
    }

    /// The batch's identity, after its magic and version.
    fn header(&mut self) -> Result<BatchId, FormatError> {
        if self.take(4, "magic")? != MAGIC {
            return Err(FormatError::Header("not a histd forward batch (no HFWD magic)".into()));
        }
        let version = self.byte("version")?;
        if version != VERSION {
            return Err(FormatError::Header(format!("batch version {version}: this histd reads version {VERSION}")));
        }
        Ok(BatchId {
            source: self.name("source")?,
            interval_start_ms: self.varint("interval start")?,
            interval_ms: self.varint("interval length")?,
            part: self.name("part")?,
            chunk: self.varint("chunk")?,
        })
    }

    /// The four sections of series, each handed to `into`; how many each held.
    fn series(&mut self, into: &mut impl Series) -> Result<[usize; 4], FormatError> {
        let counters = self.entries(9, "counter count", size_of::<(CompactString, f64)>(), |input| {
            let key = input.key()?;
            into.counter(key, input.f64("counter value")?);
            Ok(())
        })?;
        let timers = self.entries(51, "timer count", size_of::<(CompactString, TimerSamples)>(), |input| {
            let key = input.key()?;
            into.timer(key, &input.timer()?);
            Ok(())
        })?;
        let gauges = self.entries(10, "gauge count", size_of::<(CompactString, ForwardedGauge)>(), |input| {
            let key = input.key()?;
            into.gauge(key, input.gauge()?);
            Ok(())
        })?;
        let sets = self.entries(3, "set count", size_of::<(CompactString, Distinct)>(), |input| {
            let key = input.key()?;
            into.set(key, input.set()?);
            Ok(())
        })?;
        Ok([counters, timers, gauges, sets])
    }

    /// A count of entries of at least `smallest` bytes each, then each entry read with `read`,
    /// its `slot` bytes of decoded memory spent first; how many there were.
    fn entries(
        &mut self,
        smallest: usize,
        what: &'static str,
        slot: usize,
        mut read: impl FnMut(&mut Input<'a>) -> Result<(), FormatError>,
    ) -> Result<usize, FormatError> {
        let count = self.count(smallest, what)?;
        for _ in 0..count {
            self.spend(slot, "entry")?;
            read(self)?;
        }
        Ok(count)
    }

    /// A count of entries of at least `smallest` bytes each: no more than the bytes left hold.
    fn count(&mut self, smallest: usize, what: &'static str) -> Result<usize, FormatError> {
        let count = self.varint(what)?;
        let left = (self.bytes.len() - self.at) as u64;
        match count.checked_mul(smallest as u64) {
            Some(bytes) if bytes <= left => Ok(count as usize),
            _ => Err(self.error(what)),
        }
    }

    fn bytes(&mut self, limit: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        let length = self.varint(what)?;
        if length > limit as u64 {
            return Err(self.error(what));
        }
        self.take(length as usize, what)
    }

    /// Counts `bytes` more of decoded memory against the batch's budget.
    fn spend(&mut self, bytes: usize, what: &'static str) -> Result<(), FormatError> {
        self.decoded = self.decoded.saturating_add(bytes);
        if self.decoded > self.max_decoded {
            return Err(FormatError::Compression(format!(
                "{what} at byte {}: the batch decodes to more than the limit of {} bytes",
                self.at, self.max_decoded
            )));
        }
        Ok(())
    }

    fn name(&mut self, what: &'static str) -> Result<String, FormatError> {
        let bytes = self.bytes(MAX_NAME_BYTES, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error(what))
    }

    fn key(&mut self) -> Result<&'a str, FormatError> {
        let bytes = self.bytes(MAX_KEY_BYTES, "key")?;
        self.spend(if bytes.len() > INLINE_KEY_BYTES { bytes.len() } else { 0 }, "key")?;
        match std::str::from_utf8(bytes) {
            Ok(key) if !key.is_empty() => Ok(key),
            _ => Err(self.error("key")),
        }
    }

    fn f64(&mut self, what: &'static str) -> Result<f64, FormatError> {
        let bytes = self.take(8, what)?;
        Ok(f64::from_le_bytes(bytes.try_into().unwrap_or_else(|_| unreachable!("8 bytes taken"))))
    }

    fn timer(&mut self) -> Result<TimerPart<'a>, FormatError> {
        let flags = self.byte("timer flags")?;
        let received = self.varint("timer received")?;
        let mut numbers = [0.0; 5];
        for number in &mut numbers {
            *number = self.f64("timer totals")?;
        }
        let [count, sum, sum_squares, min, max] = numbers;
        let totals = TimerTotals { count, received, sum, sum_squares, min, max };
        let values = match flags & TIMER_VALUES {
            0 => &[][..],
            _ => {
                let n = self.count(8, "timer value count")?;
                self.spend(n * 8, "timer values")?;
                self.take(n * 8, "timer value")?
            }
        };
        let at = self.at;
        let histogram = self.bytes(usize::MAX, "histogram")?;
        self.spend(histogram.len() * 2, "histogram")?;
        let milliseconds = flags & TIMER_MS != 0;
        if self.checked {
            return Ok(TimerPart::accepted_before(totals, milliseconds, values, histogram));
        }
        TimerPart::new(totals, milliseconds, values, histogram)
            .ok_or(FormatError::Field { at, what: "timer (histogram, values, count or min/max disagree)" })
    }

    fn gauge(&mut self) -> Result<ForwardedGauge, FormatError> {
        let value = self.f64("gauge value")?;
        let updated_unix_s = self.varint("gauge update time")?;
        Ok(ForwardedGauge { value, updated_unix_s })
    }

    fn set(&mut self) -> Result<SetPart<'a>, FormatError> {
        match self.byte("set kind")? {
            SET_MEMBERS => {
                let members = self.count(1, "set member count")?;
                let start = self.at;
                for _ in 0..members {
                    let member = self.bytes(MAX_KEY_BYTES, "set member")?;
                    self.spend(member.len() + MEMBER_SLOT_BYTES, "set member")?;
                }
                Ok(SetPart { kind: SET_MEMBERS, bytes: &self.bytes[start..self.at], members })
            }
            SET_SKETCH => {
                if u32::from(self.byte("sketch precision")?) != agg::distinct::HLL_PRECISION {
                    return Err(self.error("sketch precision (histd reads 14)"));
                }
                let registers = self.take(agg::distinct::HLL_REGISTERS, "sketch registers")?;
                self.spend(registers.len(), "sketch")?;
                Hll::from_registers(registers).ok_or(self.error("sketch register"))?;
                Ok(SetPart { kind: SET_SKETCH, bytes: registers, members: 0 })
            }
            _ => Err(self.error("set kind")),
        }
    }
}
