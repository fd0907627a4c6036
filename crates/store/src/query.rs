//! The query language and its evaluation.
//!
//! ```text
//! expr     = function "(" selector ["," number] ")" | "cumulative(" expr ")"
//! selector = name ["{" tag ("," tag)* "}"]          tag = key "=" value | key
//! ```
//! Functions: `quantile(S, q)`, `inverse_quantile(S, x)` (share of samples ≤ x),
//! `count_above(S, x)` (samples ≥ x), `count_below(S, x)` (samples < x), `count(S)`, `sum(S)`,
//! `mean(S)`, `min(S)`, `max(S)`, `rate(S)` (counters, per second), `value(S)` (gauges),
//! `cardinality(S)` (sets), `cumulative(E)` (running total of E over the range). Every series
//! the selector picks is merged, and each step merges its rows (histograms exactly), so
//! `quantile(x, 0.99)` over an hour step is the hour's p99, not an average of p99s.

use circllhist::{Bucket, Histogram};

use crate::range::Grid;
use crate::{Kind, Row, Selector, Store, StoreError};

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A function of a selector, with its number argument when it takes one.
    Call(Function, Selector, f64),
    /// The running total of an expression.
    Cumulative(Box<Expr>),
}

/// The functions of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `quantile(S, q)`.
    Quantile,
    /// `inverse_quantile(S, x)`.
    InverseQuantile,
    /// `count_above(S, x)`.
    CountAbove,
    /// `count_below(S, x)`.
    CountBelow,
    /// `count(S)`.
    Count,
    /// `sum(S)`.
    Sum,
    /// `mean(S)`.
    Mean,
    /// `min(S)`.
    Min,
    /// `max(S)`.
    Max,
    /// `rate(S)`.
    Rate,
    /// `value(S)`.
    Value,
    /// `cardinality(S)`.
    Cardinality,
}

impl Function {
    fn parse(name: &str) -> Option<Function> {
        Some(match name {
            "quantile" => Function::Quantile,
            "inverse_quantile" => Function::InverseQuantile,
            "count_above" => Function::CountAbove,
            "count_below" => Function::CountBelow,
            "count" => Function::Count,
            "sum" => Function::Sum,
            "mean" => Function::Mean,
            "min" => Function::Min,
            "max" => Function::Max,
            "rate" => Function::Rate,
            "value" => Function::Value,
            "cardinality" => Function::Cardinality,
            _ => return None,
        })
    }

    /// The name as written in a query.
    pub fn name(self) -> &'static str {
        match self {
            Function::Quantile => "quantile",
            Function::InverseQuantile => "inverse_quantile",
            Function::CountAbove => "count_above",
            Function::CountBelow => "count_below",
            Function::Count => "count",
            Function::Sum => "sum",
            Function::Mean => "mean",
            Function::Min => "min",
            Function::Max => "max",
            Function::Rate => "rate",
            Function::Value => "value",
            Function::Cardinality => "cardinality",
        }
    }

    fn takes_number(self) -> bool {
        matches!(self, Function::Quantile | Function::InverseQuantile | Function::CountAbove | Function::CountBelow)
    }

    /// Its value over one merged row (`number`: the quantile, or the value compared with),
    /// as the query API computes it; `None` where the row has no such value.
    pub fn evaluate(self, row: &Row, number: f64) -> Option<f64> {
        value_of(self, row, number)
    }

    /// The kinds of series the function reads.
    pub fn kinds(self) -> &'static [Kind] {
        match self {
            Function::Quantile
            | Function::InverseQuantile
            | Function::CountAbove
            | Function::CountBelow
            | Function::Mean => &[Kind::Timer],
            Function::Count | Function::Sum | Function::Rate => &[Kind::Counter, Kind::Timer],
            Function::Min | Function::Max => &[Kind::Timer, Kind::Gauge],
            Function::Value => &[Kind::Gauge],
            Function::Cardinality => &[Kind::Set],
        }
    }
}

/// A query that does not parse, with what is wrong and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} (at character {at} of the expression)")]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// Character offset.
    pub at: usize,
}

/// How deeply expressions may nest (`cumulative(cumulative(...))`): parsing, evaluating and
/// dropping an expression recurse once per level, so a bound keeps any input from exhausting a
/// thread's stack.
pub const MAX_DEPTH: usize = 16;

/// Parses an expression.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    let mut parser = Parser { text, at: 0, depth: 0 };
    let expr = parser.expr()?;
    parser.skip_space();
    if parser.at < text.len() {
        return Err(parser.error("unexpected text after the expression"));
    }
    Ok(expr)
}

/// Parses a selector alone (`api.latency{route=/login}`), as the HTTP API's `name` parameter.
pub fn parse_selector(text: &str) -> Result<Selector, ParseError> {
    let mut parser = Parser { text, at: 0, depth: 0 };
    let selector = parser.selector()?;
    parser.skip_space();
    if parser.at < text.len() {
        return Err(parser.error("unexpected text after the metric name"));
    }
    Ok(selector)
}

struct Parser<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    at: usize,
    /// Expressions open around the one being read.
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> ParseError {
        ParseError { message: message.to_string(), at: self.at }
    }

    fn skip_space(&mut self) {
        while let Some(space) = self.rest().chars().next().filter(|c| c.is_whitespace()) {
            self.at += space.len_utf8();
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn eat(&mut self, token: char) -> Result<(), ParseError> {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len_utf8();
            Ok(())
        } else {
            Err(self.error(&format!("expected '{token}'")))
        }
    }

    /// Characters up to one of `stops`.
    fn word(&mut self, stops: &[char]) -> &str {
        self.skip_space();
        let start = self.at;
        let length = self.rest().find(|c: char| stops.contains(&c) || c.is_whitespace()).unwrap_or(self.rest().len());
        self.at += length;
        &self.text[start..self.at]
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        let name_at = {
            self.skip_space();
            self.at
        };
        let name = self.word(&['(']).to_string();
        self.eat('(')?;
        if name == "cumulative" {
            return self.nested().map(|inner| Expr::Cumulative(Box::new(inner)));
        }
        let function =
            Function::parse(&name).ok_or_else(|| ParseError { message: unknown_function(&name), at: name_at })?;
        let selector = self.selector()?;
        let number = if function.takes_number() {
            self.eat(',')?;
            self.skip_space();
            let number_at = self.at;
            let number = self.number()?;
            if function == Function::Quantile && !(0.0..=1.0).contains(&number) {
                let message = format!("quantile's second argument is a share from 0 to 1 (0.99 for p99), not {number}");
                return Err(ParseError { message, at: number_at });
            }
            number
        } else {
            f64::NAN
        };
        self.eat(')')?;
        Ok(Expr::Call(function, selector, number))
    }

    /// The expression inside a function that takes one, and its closing parenthesis.
    fn nested(&mut self) -> Result<Expr, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(&format!("expressions nest at most {MAX_DEPTH} levels deep")));
        }
        self.depth += 1;
        let inner = self.expr()?;
        self.depth -= 1;
        self.eat(')')?;
        Ok(inner)
    }

    fn selector(&mut self) -> Result<Selector, ParseError> {
        let name = self.word(&['{', ',', ')', '(']).to_string();
        if name.is_empty() {
            return Err(self.error("expected a metric name"));
        }
        let mut tags = Vec::new();
        self.skip_space();
        if self.rest().starts_with('{') {
            self.at += 1;
            loop {
                let tag = self.word(&[',', '}']).to_string();
                if !tag.is_empty() {
                    tags.push(clean_tag(&tag));
                }
                self.skip_space();
                match self.rest().chars().next() {
                    Some(',') => self.at += 1,
                    Some('}') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(self.error("expected ',' or '}' in the tags")),
                }
            }
        }
        Ok(Selector { name: clean_name(&name), tags })
    }

    fn number(&mut self) -> Result<f64, ParseError> {
        let text = self.word(&[')', ',']).to_string();
        text.parse().map_err(|_| self.error(&format!("'{text}' is not a number")))
    }
}

/// Names are stored as Etsy's sanitiser leaves them; a query name gets the same treatment.
fn clean_name(name: &str) -> String {
    let mut out = String::new();
    proto::key::push_sanitized(&mut out, name.as_bytes());
    out
}

/// A tag typed as `k=v` (or `k:v`, as DogStatsD clients send it) becomes what the daemon stored:
/// `k=v`, sanitised (`route=/login` is stored as `route=-login`).
fn clean_tag(tag: &str) -> String {
    let rendered = match tag.split_once(['=', ':']) {
        Some((key, value)) => format!("{key}={value}"),
        None => tag.to_string(),
    };
    clean_name(&rendered)
}

/// Why an expression reads nothing from series that exist: its function does not apply to
/// their type (`quantile` of a counter, `value` of a timer).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{function}() reads {wanted}; '{selector}' is {found}{hint}")]
pub struct TypeMismatch {
    /// The function, as written.
    pub function: &'static str,
    /// The types it reads (`timers`, `counters or timers`).
    pub wanted: String,
    /// The selector, as written.
    pub selector: String,
    /// The types of the series it picks (`a counter`).
    pub found: String,
    /// Functions that do read them.
    pub hint: String,
}

impl Store {
    /// `Err` when some function of `expr` picks series that exist but are all of types it
    /// does not read: an answer with no points would look like "no data".
    pub fn check_types(&self, expr: &Expr) -> Result<(), TypeMismatch> {
        match expr {
            Expr::Cumulative(inner) => self.check_types(inner),
            Expr::Call(function, selector, _) => {
                let mut found: Vec<Kind> = self.select(selector).iter().map(|series| series.key.kind).collect();
                found.sort_by_key(|kind| kind.as_str());
                found.dedup();
                if found.is_empty() || found.iter().any(|kind| function.kinds().contains(kind)) {
                    return Ok(());
                }
                let plural = |kind: &Kind| format!("{}s", kind.as_str());
                let wanted: Vec<String> = function.kinds().iter().map(plural).collect();
                let found_names: Vec<String> = found.iter().map(|kind| format!("a {}", kind.as_str())).collect();
                let suggestions: Vec<&str> = ALL_FUNCTIONS
                    .iter()
                    .filter(|f| f.kinds().iter().any(|kind| found.contains(kind)))
                    .map(|f| f.name())
                    .collect();
                Err(TypeMismatch {
                    function: function.name(),
                    wanted: wanted.join(" or "),
                    selector: selector.to_string(),
                    found: found_names.join(" and "),
                    hint: format!(": try {}", suggestions.join(", ")),
                })
            }
        }
    }
}

/// Why `name` is not a function, and which are.
fn unknown_function(name: &str) -> String {
    let known: Vec<&str> = ALL_FUNCTIONS.iter().map(|f| f.name()).collect();
    format!("unknown function '{name}': the functions are {}, and cumulative(...)", known.join(", "))
}

/// Every function, in the order the documentation lists them.
const ALL_FUNCTIONS: [Function; 12] = [
    Function::Quantile,
    Function::InverseQuantile,
    Function::CountAbove,
    Function::CountBelow,
    Function::Count,
    Function::Sum,
    Function::Mean,
    Function::Min,
    Function::Max,
    Function::Rate,
    Function::Value,
    Function::Cardinality,
];

/// One step's merged rows, or nothing.
type Step = Option<Row>;

impl Store {
    /// The value of `expr` per step of `step` seconds over `[from, to)` (steps aligned to multiples of
    /// `step`, the first and last clipped to the range: [`crate::range`]): `(step start, value)`,
    /// steps with no data (or no defined value) left out.
    pub fn query(&self, expr: &Expr, from: i64, to: i64, step: i64) -> Result<Vec<(i64, f64)>, StoreError> {
        match expr {
            Expr::Cumulative(inner) => {
                let mut total = 0.0;
                Ok(self
                    .query(inner, from, to, step)?
                    .into_iter()
                    .map(|(t, v)| {
                        (t, {
                            total += v;
                            total
                        })
                    })
                    .collect())
            }
            Expr::Call(function, selector, number) => {
                let steps = self.steps(selector, function.kinds(), Grid::aligned(from, to, step))?;
                Ok(steps.into_iter().filter_map(|(t, row)| Some((t, value_of(*function, &row?, *number)?))).collect())
            }
        }
    }

    /// The merged row of each step of a call's selector (the kinds `function` reads) over
    /// `[from, to)`: what [`Store::query`] evaluates, in a form other stores' rows of the same
    /// steps merge into exactly ([`Row::merge`]).
    pub fn step_rows(
        &self,
        function: Function,
        selector: &Selector,
        from: i64,
        to: i64,
        step: i64,
    ) -> Result<Vec<(i64, Option<Row>)>, StoreError> {
        self.steps(selector, function.kinds(), Grid::aligned(from, to, step))
    }

    /// The merged histogram of the timers `selector` picks over `[from, to)`, and the merged row
    /// (exact count, sum, min, max).
    pub fn merged(&self, selector: &Selector, from: i64, to: i64) -> Result<Option<Row>, StoreError> {
        let mut merged: Option<Row> = None;
        for row in self.steps(selector, &[Kind::Timer], Grid::whole(from, to))?.into_iter().filter_map(|(_, row)| row) {
            match &mut merged {
                Some(total) => total.merge(&row, Kind::Timer),
                None => merged = Some(row),
            }
        }
        Ok(merged)
    }

    /// Per step, the merged timer row (for heatmaps).
    pub fn timer_steps(
        &self,
        selector: &Selector,
        from: i64,
        to: i64,
        step: i64,
    ) -> Result<Vec<(i64, Step)>, StoreError> {
        self.steps(selector, &[Kind::Timer], Grid::aligned(from, to, step))
    }

    /// Every step of `grid` with the merge of the rows of every picked series in it (the rule
    /// of [`crate::range`]: a step holds the flushes of its part of the range only).
    fn steps(&self, selector: &Selector, kinds: &[Kind], grid: Grid) -> Result<Vec<(i64, Step)>, StoreError> {
        let _snapshot = self.read_snapshot()?;
        let mut steps: Vec<(i64, Step)> = (0..grid.len()).map(|i| (grid.label(i), None)).collect();
        for series in self.select(selector).into_iter().filter(|s| kinds.contains(&s.key.kind)) {
            for row in self.rows_within(series.id, &grid)? {
                let Some((_, slot)) = steps.get_mut(grid.index(row.ts)) else { continue };
                match slot {
                    Some(merged) => merged.merge(&row, series.key.kind),
                    None => *slot = Some(row),
                }
            }
        }
        Ok(steps)
    }
}

fn value_of(function: Function, row: &Row, number: f64) -> Option<f64> {
    let histogram = || row.histogram.as_ref();
    let value = match function {
        Function::Quantile => within(histogram()?.quantile(number), row.min, row.max),
        Function::InverseQuantile => histogram()?.inverse_quantiles(&[number]).ok()?[0],
        Function::CountAbove => histogram()?.count_above(number, true) as f64,
        Function::CountBelow => histogram()?.count_below(number, false) as f64,
        Function::Count => row.count,
        Function::Sum if !row.sum.is_nan() => row.sum,
        Function::Sum => row.count,
        Function::Mean => row.sum / row.value,
        Function::Min => row.min,
        Function::Max => row.max,
        Function::Rate => row.count / row.seconds,
        Function::Value | Function::Cardinality => row.value,
    };
    value.is_finite().then_some(value)
}

/// `value` clamped to the exact `[min, max]` of the samples, when they are known (an idle
/// timer's row has neither).
fn within(value: f64, min: f64, max: f64) -> f64 {
    if min <= max {
        value.clamp(min, max)
    } else {
        value
    }
}

/// A histogram's bins as `(lower, upper, count)`, lower edge toward -∞.
pub fn bins_of(histogram: &Histogram) -> Vec<(f64, f64, u64)> {
    histogram
        .bins()
        .filter(|(bucket, _)| !bucket.is_nan())
        .map(|(bucket, count)| {
            let left = bucket.left();
            let upper = if bucket == Bucket::ZERO { 0.0 } else { left + bucket.width() };
            (two_digits(left), two_digits(upper), count)
        })
        .collect()
}

/// A bin edge as the two-digit decimal it is (`7.2`, not the `7.199999999999999` that
/// computing it in binary floating point gives): every circllhist edge is two significant
/// digits times a power of ten.
fn two_digits(edge: f64) -> f64 {
    if edge == 0.0 || !edge.is_finite() {
        return edge;
    }
    format!("{edge:.1e}").parse().unwrap_or(edge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_edges_read_as_their_decimals() {
        let mut histogram = Histogram::new();
        for value in [7.25, 0.0123, -450.0, 99.5, 0.0] {
            histogram.insert(value, 1);
        }
        let edges: Vec<(f64, f64)> = bins_of(&histogram).iter().map(|&(l, u, _)| (l, u)).collect();
        assert_eq!(edges, [(-460.0, -450.0), (0.0, 0.0), (0.012, 0.013), (7.2, 7.3), (99.0, 100.0)]);
    }

    #[test]
    fn parses_expressions() {
        let sel = |name: &str, tags: &[&str]| Selector {
            name: name.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        };
        let cases: &[(&str, Expr)] = &[
            ("quantile(api.latency, 0.99)", Expr::Call(Function::Quantile, sel("api.latency", &[]), 0.99)),
            (
                "quantile( api.latency{route=/login} ,0.5)",
                Expr::Call(Function::Quantile, sel("api.latency", &["route=-login"]), 0.5),
            ),
            (
                "count_above(t{env:prod,canary}, 1.5)",
                Expr::Call(Function::CountAbove, sel("t", &["env=prod", "canary"]), 1.5),
            ),
            ("rate(hits)", Expr::Call(Function::Rate, sel("hits", &[]), f64::NAN)),
            (
                "cumulative(count_above(t, 1.5))",
                Expr::Cumulative(Box::new(Expr::Call(Function::CountAbove, sel("t", &[]), 1.5))),
            ),
        ];
        for (text, want) in cases {
            let got = parse(text).unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{text}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |depth: usize| format!("{}count(x){}", "cumulative(".repeat(depth), ")".repeat(depth));
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        let error = parse(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(error.to_string().contains("nest at most 16 levels"), "{error}");
        // The probe's request: 5,455 levels, which overflowed a worker's stack before.
        let error = parse(&nested(5455)).unwrap_err();
        assert!(error.to_string().contains("nest at most"), "{error}");
        let unclosed = "cumulative(".repeat(100_000);
        assert!(parse(&unclosed).is_err());
    }

    #[test]
    fn any_unicode_space_separates() {
        // U+00A0 is two bytes: skipping it as one used to slice inside a character (a panic).
        let want = format!("{:?}", parse("rate(x)").unwrap());
        for text in ["\u{a0}rate(x)", "rate(\u{a0}x\u{2003})\u{3000}", "\u{a0}\u{a0}rate( x )"] {
            assert_eq!(format!("{:?}", parse(text).unwrap()), want, "{text:?}");
        }
    }

    #[test]
    fn says_what_is_wrong() {
        let cases = [
            ("p99(x)", "unknown function 'p99': the functions are quantile, inverse_quantile, count_above"),
            ("quantile(x)", "expected ','"),
            ("quantile(x, high)", "'high' is not a number"),
            ("rate()", "expected a metric name"),
            ("rate(x) junk", "unexpected text"),
            ("rate(x{a=b)", "expected ',' or '}'"),
            ("quantile(\u{a0}x\u{2003})", "expected ','"),
            ("rate(x\u{a0}\u{a0}", "expected ')'"),
            ("\u{a0}", "expected '('"),
            ("quantile(x, 1.5)", "a share from 0 to 1 (0.99 for p99), not 1.5"),
            ("quantile(x, 99)", "not 99"),
            ("quantile(x, -0.1)", "not -0.1"),
            ("cumulative(quantile(x, 2))", "not 2"),
        ];
        for (text, want) in cases {
            let error = parse(text).unwrap_err();
            assert!(error.to_string().contains(want), "{text}: {error}");
        }
        for edge in ["quantile(x, 0)", "quantile(x, 1)", "quantile(x, 0.999)", "inverse_quantile(x, 1500)"] {
            assert!(parse(edge).is_ok(), "{edge}");
        }
    }
}
