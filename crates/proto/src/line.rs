//! Lines: `<name>:<value>|<type>[|@<rate>][:<value>|<type>...][|#<tags>][|c:..][|e:..][|card:..][|T<ts>]`
//!
//! The grammar accepts what Etsy statsd 0.10 accepts, plus DogStatsD (see
//! `docs/dogstatsd.md`), with these rules:
//!
//! * The name is everything before the first `:`.
//! * The metadata tail starts at the first `|` that begins a DogStatsD line field: `#tags`,
//!   `e:`, `card:`, `T<digits>`, or `c:` followed by something that is not a number (`c:2` is
//!   Etsy's "next group of type counter", `c:ci-83c0` a container id). Tail fields apply to
//!   every value of the line; unknown tail fields are ignored.
//! * Before the tail, `:` separates value groups (`k:1|c:2|ms`); each group is
//!   `value|type[|@rate][|ignored...]`. A group with no type borrows the type and rate of the
//!   next group that has one (DogStatsD value packing: `k:1:2:3|d`).

use crate::number::js_number;

/// Splits a packet into lines: on `\n`, dropping one `\r` before it and skipping empty lines.
pub fn lines(packet: &[u8]) -> impl Iterator<Item = &[u8]> {
    packet
        .split(|&byte| byte == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty())
}

/// What one non-empty line holds.
#[derive(Debug, Clone)]
pub enum Line<'a> {
    /// A metric line: its values, each parsed or rejected on its own.
    Metrics(Values<'a>),
    /// A DogStatsD event (`_e{..}`): recognised, not a metric.
    Event,
    /// A DogStatsD service check (`_sc|..`): recognised, not a metric.
    ServiceCheck,
}

/// Parses one line (no `\n`, no trailing `\r`).
pub fn parse_line(line: &[u8]) -> Line<'_> {
    if line.starts_with(b"_e{") {
        return Line::Event;
    }
    if line.starts_with(b"_sc|") {
        return Line::ServiceCheck;
    }
    Line::Metrics(Values::new(line))
}

/// The kind of a metric, from its type field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `c`: adds `value / rate` to a counter.
    Counter,
    /// `ms`: a timer sample (never negative).
    Timer,
    /// `g`: sets a gauge, or moves it when the value has a sign.
    Gauge,
    /// `s`: adds a member to a set.
    Set,
    /// `h`: a DogStatsD histogram sample, aggregated like a timer.
    Histogram,
    /// `d`: a DogStatsD distribution sample, aggregated like a timer.
    Distribution,
}

impl Kind {
    /// The type field as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "c",
            Kind::Timer => "ms",
            Kind::Gauge => "g",
            Kind::Set => "s",
            Kind::Histogram => "h",
            Kind::Distribution => "d",
        }
    }

    fn from_field(field: &[u8]) -> Result<Kind, ParseError> {
        match field.trim_ascii() {
            b"c" => Ok(Kind::Counter),
            b"ms" => Ok(Kind::Timer),
            b"g" => Ok(Kind::Gauge),
            b"s" => Ok(Kind::Set),
            b"h" => Ok(Kind::Histogram),
            b"d" => Ok(Kind::Distribution),
            b"" => Err(ParseError::NoType),
            _ => Err(ParseError::UnknownType),
        }
    }
}

/// A metric's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A number: a counter increment, a timer or histogram sample, or a gauge's new value.
    Number(f64),
    /// A gauge value written with a sign (`+5`, `-3`): moves a gauge that has a non-zero value,
    /// sets one that has none (Etsy's rule).
    GaugeDelta(f64),
    /// A set member, compared as bytes (`1` and `01` differ). An empty member is `0`, as in Etsy.
    Member(&'a [u8]),
}

/// DogStatsD tags (`#a:b,c`), kept raw; [`Tags::iter`] yields each non-empty tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tags<'a>(&'a [u8]);

impl<'a> Tags<'a> {
    /// Tags from the text after `#`.
    pub fn new(raw: &'a [u8]) -> Self {
        Tags(raw)
    }

    /// The text after `#`, as received.
    pub fn raw(&self) -> &'a [u8] {
        self.0
    }

    /// True when there is no tag.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&byte| byte == b',')
    }

    /// Each tag, in order, skipping empty ones.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> {
        self.0.split(|&byte| byte == b',').filter(|tag| !tag.is_empty())
    }
}

/// One parsed value of a line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric<'a> {
    /// The name as received, before sanitising (see [`crate::key`]).
    pub name: &'a [u8],
    /// DogStatsD tags of the line.
    pub tags: Tags<'a>,
    /// The type.
    pub kind: Kind,
    /// The value.
    pub value: Value<'a>,
    /// The sample rate, finite and greater than 0 (1 when not given).
    pub sample_rate: f64,
    /// A DogStatsD `|T<unix seconds>` timestamp, when given and valid.
    pub timestamp: Option<u64>,
}

/// Why a value (or a whole line) was rejected. Each has a stable name for bad-line counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The line has no `:` (`foo`): no value at all.
    NoValue,
    /// The name before the first `:` is empty (`:1|c`).
    EmptyName,
    /// A value has no type field, and no later group lends one (`foo:1`, `foo:1|`).
    NoType,
    /// The type is not one of `c ms g s h d` (`foo:1|zz`).
    UnknownType,
    /// The value is not a number (`foo:abc|c`, `foo:|g`).
    BadValue,
    /// A timer value is negative (`foo:-5|ms`).
    NegativeTimer,
    /// The sample rate is not `@` and a number greater than 0 (`|@-1`, `|0.5`, `|@0`).
    BadSampleRate,
    /// The line is longer than histd keeps (a datagram past `maxDatagramBytes`, a stream line
    /// past 1 MiB or the partial-line budget): discarded whole, never parsed in pieces. The
    /// parser never returns it; the listeners count it.
    TooLong,
}

impl ParseError {
    /// Every reason, in a fixed order (see [`ParseError::index`]).
    pub const ALL: [ParseError; 8] = [
        ParseError::NoValue,
        ParseError::EmptyName,
        ParseError::NoType,
        ParseError::UnknownType,
        ParseError::BadValue,
        ParseError::NegativeTimer,
        ParseError::BadSampleRate,
        ParseError::TooLong,
    ];

    /// The reason's name, used in metric names (`bad_lines.<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            ParseError::NoValue => "no_value",
            ParseError::EmptyName => "empty_name",
            ParseError::NoType => "no_type",
            ParseError::UnknownType => "unknown_type",
            ParseError::BadValue => "bad_value",
            ParseError::NegativeTimer => "negative_timer",
            ParseError::BadSampleRate => "bad_sample_rate",
            ParseError::TooLong => "too_long",
        }
    }

    /// The position of this reason in [`ParseError::ALL`], for counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for ParseError {}

/// The type and rate a value group gives its values.
#[derive(Debug, Clone, Copy, PartialEq)]
struct GroupType {
    kind: Kind,
    rate: Option<f64>,
}

/// The values of one metric line, in order: an iterator of parsed metrics or rejections.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    name: &'a [u8],
    body: &'a [u8],
    /// Start of the next value group in `body`; past the end when done.
    next_group: usize,
    tags: Tags<'a>,
    tail_rate: Option<f64>,
    timestamp: Option<u64>,
    /// An error that rejects the whole line, reported once.
    line_error: Option<ParseError>,
    /// A typed group found ahead for packed values: the end of its text, and its type.
    lender: Option<(usize, Result<GroupType, ParseError>)>,
}

impl<'a> Values<'a> {
    fn new(line: &'a [u8]) -> Self {
        let mut values = Values {
            name: b"",
            body: b"",
            next_group: 1,
            tags: Tags::default(),
            tail_rate: None,
            timestamp: None,
            line_error: None,
            lender: None,
        };
        let Some(colon) = line.iter().position(|&byte| byte == b':') else {
            values.line_error = Some(ParseError::NoValue);
            return values;
        };
        if colon == 0 {
            values.line_error = Some(ParseError::EmptyName);
            return values;
        }
        values.name = &line[..colon];
        let rest = &line[colon + 1..];
        let tail_start = metadata_tail_start(rest);
        values.body = &rest[..tail_start.unwrap_or(rest.len())];
        values.next_group = 0;
        if let Some(start) = tail_start {
            values.read_tail(&rest[start + 1..]);
        }
        values
    }

    /// Reads `#tags`, `@rate` and `T<ts>` from the tail; other fields are ignored.
    fn read_tail(&mut self, tail: &'a [u8]) {
        for field in tail.split(|&byte| byte == b'|') {
            match field.first() {
                Some(b'#') => self.tags = Tags::new(&field[1..]),
                Some(b'@') => match sample_rate(field) {
                    Ok(rate) => self.tail_rate = Some(rate),
                    Err(error) => self.line_error = Some(error),
                },
                Some(b'T') => self.timestamp = unix_timestamp(&field[1..]),
                _ => {}
            }
        }
    }

    /// The type lent to a packed value by the next typed group.
    fn lent_type(&mut self) -> Result<GroupType, ParseError> {
        if let Some((end, lent)) = self.lender {
            if self.next_group <= end {
                return lent;
            }
        }
        let mut start = self.next_group;
        while start <= self.body.len() {
            let (group, end) = group_at(self.body, start);
            if let Some(bar) = group.iter().position(|&byte| byte == b'|') {
                let lent = group_type(&group[bar + 1..]);
                self.lender = Some((end, lent));
                return lent;
            }
            start = end + 1;
        }
        Err(ParseError::NoType)
    }

    fn parse_group(&mut self, group: &'a [u8]) -> Result<Metric<'a>, ParseError> {
        let (value, group_type) = match group.iter().position(|&byte| byte == b'|') {
            Some(bar) => (&group[..bar], group_type(&group[bar + 1..])?),
            None => (group, self.lent_type()?),
        };
        let value = parse_value(group_type.kind, value)?;
        let sample_rate = group_type.rate.or(self.tail_rate).unwrap_or(1.0);
        if !weighs_finitely(group_type.kind, &value, sample_rate) {
            return Err(ParseError::BadSampleRate);
        }
        Ok(Metric {
            name: self.name,
            tags: self.tags,
            kind: group_type.kind,
            value,
            sample_rate,
            timestamp: self.timestamp,
        })
    }
}

impl<'a> Iterator for Values<'a> {
    type Item = Result<Metric<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(error) = self.line_error.take() {
            self.next_group = self.body.len() + 1;
            return Some(Err(error));
        }
        if self.next_group > self.body.len() {
            return None;
        }
        let (group, end) = group_at(self.body, self.next_group);
        self.next_group = end + 1;
        Some(self.parse_group(group))
    }
}

/// The value group starting at `start`: its text and the index where it ends (a `:` or the end).
fn group_at(body: &[u8], start: usize) -> (&[u8], usize) {
    let end = body[start..].iter().position(|&byte| byte == b':').map_or(body.len(), |offset| start + offset);
    (&body[start..end], end)
}

/// Where the DogStatsD metadata tail starts in `rest` (the index of its first `|`).
///
/// `#` starts it anywhere (Etsy splits on `|#` first); the other line fields only after a
/// group's type field, so that `k:1|c:2|c` stays two Etsy groups.
fn metadata_tail_start(rest: &[u8]) -> Option<usize> {
    let mut field_in_group = 0;
    for (index, &byte) in rest.iter().enumerate() {
        match byte {
            b':' => field_in_group = 0,
            b'|' => {
                field_in_group += 1;
                let field = &rest[index + 1..];
                if field.first() == Some(&b'#') || (field_in_group >= 2 && starts_line_field(field)) {
                    return Some(index);
                }
            }
            _ => {}
        }
    }
    None
}

/// True for the fields that belong to the whole line after a type: `e:`, `card:`, `T<digit>`,
/// and `c:` not followed by a number.
fn starts_line_field(field: &[u8]) -> bool {
    match field {
        [b'e', b':', ..] | [b'c', b'a', b'r', b'd', b':', ..] => true,
        [b'T', digit, ..] => digit.is_ascii_digit(),
        [b'c', b':', after @ ..] => {
            let end = after.iter().position(|&b| b == b'|' || b == b':');
            js_number(&after[..end.unwrap_or(after.len())]).is_none()
        }
        _ => false,
    }
}

/// `type[|@rate][|ignored...]`, the fields of a group after its value.
fn group_type(fields: &[u8]) -> Result<GroupType, ParseError> {
    let mut fields = fields.split(|&byte| byte == b'|');
    let kind = Kind::from_field(fields.next().unwrap_or_default())?;
    let rate = fields.next().map(sample_rate).transpose()?;
    Ok(GroupType { kind, rate })
}

/// `@<number>`, a number greater than 0 and finite. `@2e-1` is 0.2, `@+0.5` is 0.5.
fn sample_rate(field: &[u8]) -> Result<f64, ParseError> {
    let number = field.strip_prefix(b"@").ok_or(ParseError::BadSampleRate)?;
    match js_number(number) {
        Some(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(ParseError::BadSampleRate),
    }
}

/// Whether a value sampled at `rate` stays finite once weighted: a counter adds
/// `value / rate`, a timer counts `1 / rate` (`k:1e300|c|@1e-300` would add Infinity).
fn weighs_finitely(kind: Kind, value: &Value<'_>, rate: f64) -> bool {
    match (kind, value) {
        (Kind::Counter, Value::Number(number)) => (number / rate).is_finite(),
        (Kind::Timer | Kind::Histogram | Kind::Distribution, _) => (1.0 / rate).is_finite(),
        _ => true,
    }
}

fn unix_timestamp(digits: &[u8]) -> Option<u64> {
    std::str::from_utf8(digits).ok()?.parse().ok().filter(|&ts| ts > 0)
}

fn parse_value(kind: Kind, text: &[u8]) -> Result<Value<'_>, ParseError> {
    if kind == Kind::Set {
        return Ok(Value::Member(if text.is_empty() { b"0" } else { text }));
    }
    // `Infinity` and overflowing numbers (`1e309`) are JavaScript numbers Etsy accepts; histd
    // refuses them: an infinite counter or gauge never comes back, and its statistics are NaN.
    let number = js_number(text).filter(|number| number.is_finite()).ok_or(ParseError::BadValue)?;
    match kind {
        Kind::Timer if number < 0.0 => Err(ParseError::NegativeTimer),
        Kind::Gauge if matches!(text.first(), Some(b'+' | b'-')) => Ok(Value::GaugeDelta(number)),
        _ => Ok(Value::Number(number)),
    }
}

#[cfg(test)]
#[path = "line_tests.rs"]
mod tests;
