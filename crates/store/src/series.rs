//! Series identity: the metric name, its tags (sorted, so tag order never splits a series) and
//! its kind; and selectors that pick series by name and tags.

use std::fmt;

/// What a series measures, which decides how its rows roll up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Counts per interval; rollups add.
    Counter,
    /// A value; rollups keep the last, and min/max.
    Gauge,
    /// Distinct members per interval; rollups keep the largest.
    Set,
    /// Samples with a histogram; rollups merge exactly.
    Timer,
}

impl Kind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Set => "set",
            Kind::Timer => "timer",
        }
    }

    /// From the stored name.
    pub fn parse(text: &str) -> Option<Kind> {
        match text {
            "counter" => Some(Kind::Counter),
            "gauge" => Some(Kind::Gauge),
            "set" => Some(Kind::Set),
            "timer" => Some(Kind::Timer),
            _ => None,
        }
    }
}

/// A series: name, sorted tags (`k=v` or bare, joined by `;`), kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// The name without tags.
    pub name: String,
    /// Tags sorted and joined with `;` (empty when none).
    pub tags: String,
    /// The kind.
    pub kind: Kind,
}

impl SeriesKey {
    /// From an aggregation key (`name;tag1;tag2`, as histd and Etsy name series).
    pub fn from_key(key: &str, kind: Kind) -> SeriesKey {
        let (name, tags) = key.split_once(';').unwrap_or((key, ""));
        let mut tags: Vec<&str> = tags.split(';').filter(|t| !t.is_empty()).collect();
        tags.sort_unstable();
        tags.dedup();
        SeriesKey { name: name.to_string(), tags: tags.join(";"), kind }
    }

    /// The tags as a list.
    pub fn tag_list(&self) -> impl Iterator<Item = &str> {
        self.tags.split(';').filter(|t| !t.is_empty())
    }
}

impl fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.tags.is_empty() {
            write!(f, "{{{}}}", self.tags.replace(';', ","))?;
        }
        Ok(())
    }
}

/// Picks series: by exact name, keeping those that carry every listed tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The name.
    pub name: String,
    /// Tags that must all be present (`k=v` or bare).
    pub tags: Vec<String>,
}

impl std::fmt::Display for Selector {
    /// As a query writes it: `name` or `name{k=v,k2}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.tags.is_empty() {
            write!(f, "{{{}}}", self.tags.join(","))?;
        }
        Ok(())
    }
}

impl Selector {
    /// True when `series` has the name and every tag.
    pub fn matches(&self, series: &SeriesKey) -> bool {
        series.name == self.name && self.tags.iter().all(|wanted| series.tag_list().any(|tag| tag == wanted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_and_sort_tags() {
        let key = SeriesKey::from_key("api.latency;route=-login;env=prod", Kind::Timer);
        assert_eq!((key.name.as_str(), key.tags.as_str()), ("api.latency", "env=prod;route=-login"));
        assert_eq!(key, SeriesKey::from_key("api.latency;env=prod;route=-login", Kind::Timer));
        assert_eq!(key.to_string(), "api.latency{env=prod,route=-login}");
        assert_eq!(SeriesKey::from_key("plain", Kind::Counter).tags, "");
    }

    #[test]
    fn selectors_need_every_tag() {
        let key = SeriesKey::from_key("a;env=prod;role=web", Kind::Counter);
        let selector =
            |tags: &[&str]| Selector { name: "a".into(), tags: tags.iter().map(|t| t.to_string()).collect() };
        assert!(selector(&[]).matches(&key));
        assert!(selector(&["env=prod"]).matches(&key));
        assert!(selector(&["env=prod", "role=web"]).matches(&key));
        assert!(!selector(&["env=dev"]).matches(&key));
    }
}
