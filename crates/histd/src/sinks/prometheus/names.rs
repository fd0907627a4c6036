//! Series keys (`api.latency;env=prod;route=/login`) as Prometheus names and labels, escaped
//! as statsd_exporter escapes them: every character outside `[A-Za-z0-9_]` becomes `_`, and a
//! leading digit gets a `_` in front.

/// A series' labels, sorted by name, names unique.
pub type Labels = Vec<(String, String)>;

/// Labels histd itself writes, which a tag may not take.
const RESERVED: [&str; 3] = ["le", "vmrange", "quantile"];

/// A key as a Prometheus series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesName {
    /// The metric name.
    pub name: String,
    /// The statsd name it came from (what mapping files match).
    pub statsd_name: String,
    /// The tags as labels.
    pub labels: Labels,
    /// Tags that could not become labels: no value (`#beta`, `env=`), an empty or reserved
    /// name (`le`, `vmrange`, `quantile`, `__…`).
    pub dropped_tags: usize,
}

/// The name and labels of `key`: its Graphite `;k=v` tags (DogStatsD tags arrive rendered
/// so) become labels; when a label repeats, the last value wins, as in statsd_exporter.
pub fn series_name(key: &str) -> SeriesName {
    let mut parts = key.split(';');
    let statsd_name = parts.next().unwrap_or_default().to_string();
    let name = escape(&statsd_name);
    let mut labels: Labels = Vec::new();
    let mut dropped_tags = 0;
    for tag in parts {
        let Some((label, value)) = tag.split_once('=').filter(|(_, value)| !value.is_empty()) else {
            dropped_tags += 1;
            continue;
        };
        let label = escape(label);
        if label.is_empty() || label.starts_with("__") || RESERVED.contains(&label.as_str()) {
            dropped_tags += 1;
            continue;
        }
        match labels.iter_mut().find(|(existing, _)| *existing == label) {
            Some(entry) => entry.1 = value.to_string(),
            None => labels.push((label, value.to_string())),
        }
    }
    labels.sort_unstable();
    SeriesName { name, statsd_name, labels, dropped_tags }
}

/// `text` with every character outside `[A-Za-z0-9_]` replaced by `_`, and `_` before a
/// leading digit.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        out.push('_');
    }
    out.extend(text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn keys_become_names_and_labels() {
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], usize);
        let cases: &[Case] = &[
            ("api.latency", "api_latency", &[], 0),
            ("api.latency;route=/login;env=prod", "api_latency", &[("env", "prod"), ("route", "/login")], 0),
            ("5xx-errors", "_5xx_errors", &[], 0),
            ("a;beta;env=x", "a", &[("env", "x")], 1),
            ("a;env=;host=h", "a", &[("host", "h")], 1),
            ("a;le=1;vmrange=2;quantile=3;__name__=b;=v", "a", &[], 5),
            ("a;env=x;env=y", "a", &[("env", "y")], 0),
            ("a;host.name=web-1", "a", &[("host_name", "web-1")], 0),
            ("a;k=v=w", "a", &[("k", "v=w")], 0),
            ("ünï", "_n_", &[], 0),
        ];
        for (key, name, want, dropped) in cases {
            let got = series_name(key);
            assert_eq!((got.name.as_str(), got.labels, got.dropped_tags), (*name, labels(want), *dropped), "{key}");
        }
    }
}
