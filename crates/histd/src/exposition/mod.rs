//! The Prometheus exposition `/metrics` answers in: text 0.0.4, OpenMetrics 1.0 or protobuf
//! (chosen by the scraper's `Accept`), written family by family. histd's own metrics are
//! written with it (`http/metrics.rs`), and the prometheus backend writes its series into the
//! same answer (`sinks/prometheus/exposition.rs`); `wire.rs` is protobuf's encoding, which
//! remote write and OTLP use too.
//!
//! In OpenMetrics a counter's samples end in `_total` (a statsd counter `requests` is
//! `requests_total`, its family `requests`), and the text ends with `# EOF`.

mod kind;
pub mod protobuf;
pub mod wire;

use std::fmt::Write;

pub use kind::Kind;

/// The text 0.0.4 content type.
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The OpenMetrics 1.0 content type.
pub const OPEN_METRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The exposition formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Text 0.0.4.
    Text,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// Length-delimited `MetricFamily` messages.
    Protobuf,
}

impl Format {
    /// What a scraper's `Accept` asks for: the offered format with the highest weight (`q`,
    /// 1 when absent), protobuf before OpenMetrics before text on a tie; protobuf only when
    /// `protobuf_allowed`; text when nothing offered is named.
    pub fn negotiate(accept: &str, protobuf_allowed: bool) -> Format {
        let mut best = (0.0, Format::Text);
        for part in accept.split(',') {
            let mut fields = part.split(';').map(str::trim);
            let format = match fields.next().unwrap_or_default() {
                "application/vnd.google.protobuf"
                    if protobuf_allowed && part.contains("proto=io.prometheus.client.MetricFamily") =>
                {
                    Format::Protobuf
                }
                "application/openmetrics-text" => Format::OpenMetrics,
                "text/plain" => Format::Text,
                _ => continue,
            };
            let weight = fields.find_map(|f| f.strip_prefix("q=")?.parse::<f64>().ok()).unwrap_or(1.0);
            if weight <= 0.0 {
                continue; // q=0: "not acceptable"
            }
            if weight > best.0 || (weight == best.0 && format.preferred_to(best.1)) {
                best = (weight, format);
            }
        }
        best.1
    }

    /// Which of two equally wanted formats to answer in.
    fn preferred_to(self, other: Format) -> bool {
        let rank = |format| match format {
            Format::Protobuf => 2,
            Format::OpenMetrics => 1,
            Format::Text => 0,
        };
        rank(self) > rank(other)
    }
}

/// Writes metric families in one format.
pub struct Exposition {
    /// The text so far.
    pub out: String,
    open_metrics: bool,
    /// With protobuf: the messages so far, and the family being written.
    protobuf: Option<Families>,
}

/// Protobuf families: the finished ones, and the one whose metrics are being added.
#[derive(Default)]
struct Families {
    done: Vec<u8>,
    open: Option<OpenFamily>,
}

struct OpenFamily {
    name: String,
    help: String,
    kind: Kind,
    metrics: Vec<u8>,
}

impl Families {
    /// Writes the open family, if any.
    fn close(&mut self) {
        if let Some(family) = self.open.take() {
            protobuf::write_family(&mut self.done, &family.name, Some(&family.help), family.kind, &family.metrics);
        }
    }
}

impl Exposition {
    /// An empty text in OpenMetrics or 0.0.4.
    pub fn new(open_metrics: bool) -> Exposition {
        Exposition { out: String::new(), open_metrics, protobuf: None }
    }

    /// An empty exposition in `format`.
    pub fn in_format(format: Format) -> Exposition {
        let protobuf = (format == Format::Protobuf).then(Families::default);
        Exposition { out: String::new(), open_metrics: format == Format::OpenMetrics, protobuf }
    }

    /// The content type of the answer.
    pub fn content_type(&self) -> &'static str {
        match (&self.protobuf, self.open_metrics) {
            (Some(_), _) => protobuf::CONTENT_TYPE,
            (None, true) => OPEN_METRICS,
            (None, false) => TEXT,
        }
    }

    /// One family's `# HELP` (when given) and `# TYPE` lines; returns the samples' base name.
    pub fn family(&mut self, name: &str, kind: Option<Kind>, help: Option<&str>) -> String {
        if let Some(families) = &mut self.protobuf {
            families.close();
            let (kind, help) = (kind.unwrap_or(Kind::Gauge), help.unwrap_or_default().to_string());
            families.open = Some(OpenFamily { name: name.to_string(), help, kind, metrics: Vec::new() });
            return name.to_string();
        }
        let (family, sample) = match (kind, self.open_metrics) {
            (Some(Kind::Counter), true) => match name.strip_suffix("_total") {
                Some(stem) => (stem.to_string(), name.to_string()),
                None => (name.to_string(), format!("{name}_total")),
            },
            _ => (name.to_string(), name.to_string()),
        };
        if let Some(help) = help {
            let _ = writeln!(self.out, "# HELP {family} {}", escape_help(help));
        }
        if let Some(kind) = kind {
            let _ = writeln!(self.out, "# TYPE {family} {}", kind.name());
        }
        sample
    }

    /// A family of one sample without labels.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: f64) {
        let sample = self.family(name, Some(kind), Some(help));
        self.sample(&sample, &[], None, value);
    }

    /// One sample line: `name{labels,extra} value` (protobuf: a metric of the current family).
    pub fn sample(&mut self, name: &str, labels: &[(String, String)], extra: Option<(&str, &str)>, value: f64) {
        if let Some(Families { open: Some(family), .. }) = &mut self.protobuf {
            protobuf::write_number_metric(&mut family.metrics, labels, extra, family.kind, value);
            return;
        }
        self.out.push_str(name);
        let pairs = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(extra);
        let mut first = true;
        for (label, text) in pairs {
            self.out.push(if first { '{' } else { ',' });
            first = false;
            let _ = write!(self.out, "{label}=\"");
            escape_label_value(text, &mut self.out);
            self.out.push('"');
        }
        if !first {
            self.out.push('}');
        }
        self.out.push(' ');
        write_value(value, &mut self.out);
        self.out.push('\n');
    }

    /// The protobuf answer so far, its open family written: for a writer of whole families
    /// (the prometheus backend's registry). `None` in the text formats.
    pub fn protobuf_families(&mut self) -> Option<&mut Vec<u8>> {
        let families = self.protobuf.as_mut()?;
        families.close();
        Some(&mut families.done)
    }

    /// The text, ended as the format requires.
    pub fn finish(self) -> String {
        String::from_utf8(self.finish_bytes()).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The answer's bytes, ended as the format requires.
    pub fn finish_bytes(mut self) -> Vec<u8> {
        if let Some(mut families) = self.protobuf.take() {
            families.close();
            return families.done;
        }
        if self.open_metrics {
            self.out.push_str("# EOF\n");
        }
        self.out.into_bytes()
    }
}

/// A float as Prometheus writes one: shortest round trip, `+Inf`, `-Inf`, `NaN`.
pub fn write_value(value: f64, out: &mut String) {
    match value {
        f64::INFINITY => out.push_str("+Inf"),
        f64::NEG_INFINITY => out.push_str("-Inf"),
        v if v.is_nan() => out.push_str("NaN"),
        v => {
            let _ = write!(out, "{v}");
        }
    }
}

fn escape_label_value(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}
