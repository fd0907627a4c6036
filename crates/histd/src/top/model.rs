//! The view model: what `histd top` shows, from the last two answers of `/api/v1/live`, and
//! what each key does. No terminal here: the text and TUI renderers read it, tests drive it.

use std::collections::{HashMap, VecDeque};

use crate::contract::{Live, LiveRequest, SeriesRow};

/// Asked of a global with peers: how many members answered, and each that did not, and why.
fn group_line(live: &Live) -> Vec<String> {
    let Some(members) = &live.members else { return Vec::new() };
    let answered = members.iter().filter(|member| member.answered).count();
    let mut lines = vec![format!(
        "group: {answered} of {} members answered{}",
        members.len(),
        if answered < members.len() { " (PARTIAL: their series are missing)" } else { "" }
    )];
    for member in members.iter().filter(|member| !member.answered) {
        lines.push(format!("  {}: {}", member.url, member.error.as_deref().unwrap_or("no answer")));
    }
    lines
}

/// A Kafka global: its partitions with their lag, the commits waiting and the last one's age.
fn kafka_line(live: &Live) -> Option<String> {
    let kafka = live.kafka.as_ref()?;
    let partitions: Vec<String> =
        kafka.partitions.iter().map(|p| format!("{}:{}", p.partition, human(p.lag as f64))).collect();
    let last = kafka.last_commit_age_s.map_or("no commit yet".to_string(), |age| format!("last commit {age}s ago"));
    let behind = if kafka.falling_behind { "  FALLING BEHIND (its lag grows)" } else { "" };
    Some(format!(
        "kafka {} (group {}): lag {} over {} partitions [{}]  commits waiting {}  {last}{behind}",
        kafka.topic,
        kafka.group,
        human(kafka.lag as f64),
        kafka.partitions.len(),
        partitions.join(" "),
        kafka.commits_pending
    ))
}

/// Points of rate and p99 kept per series for the detail view's sparklines.
const HISTORY: usize = 600;

/// A column the rows can be sorted by (the daemon sorts, so the rows sent are the busiest by
/// it).
pub use crate::contract::SortBy as Column;

/// The column after `column`, for `s`.
fn next(column: Column) -> Column {
    let at = Column::ALL.iter().position(|&c| c == column).unwrap_or(0);
    Column::ALL[(at + 1) % Column::ALL.len()]
}

/// Which screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// The series table.
    Series,
    /// One series: its histogram and sparklines.
    Detail(String),
    /// Series per name and tag key; hot prefixes.
    Cardinality,
}

/// A key the views react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A character.
    Char(char),
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Ctrl-C.
    Interrupt,
}

/// What a key asks of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Draw again.
    Redraw,
    /// Ask the daemon again (the sort or filter changed), then draw.
    Refetch,
    /// Leave.
    Quit,
}

/// Everything the screen shows and the keys change.
#[derive(Debug)]
pub struct Model {
    /// The sort column.
    pub sort: Column,
    /// Ascending instead of the column's natural order.
    pub reverse: bool,
    /// The regex on series keys (`/`).
    pub filter: Option<String>,
    /// The filter being typed, while `/` is open.
    pub typing: Option<String>,
    /// No new answers are shown (space).
    pub frozen: bool,
    /// The screen.
    pub view: View,
    /// The highlighted row.
    pub selected: usize,
    /// Samples at or above this are counted; a p99 at or above it is highlighted.
    pub threshold: Option<f64>,
    /// Rows asked for.
    pub limit: usize,
    latest: Option<Live>,
    previous: Option<Live>,
    history: HashMap<String, VecDeque<(f64, f64)>>,
    crossing: HashMap<String, bool>,
}

impl Model {
    /// A model sorted by rate, with `threshold`, asking for `limit` rows.
    pub fn new(threshold: Option<f64>, limit: usize) -> Model {
        Model {
            sort: Column::Rate,
            reverse: false,
            filter: None,
            typing: None,
            frozen: false,
            view: View::Series,
            selected: 0,
            threshold,
            limit,
            latest: None,
            previous: None,
            history: HashMap::new(),
            crossing: HashMap::new(),
        }
    }

    /// The path and query to ask the daemon.
    pub fn query(&self) -> String {
        LiveRequest {
            limit: self.limit,
            sort: self.sort,
            pattern: self.filter.clone(),
            threshold: self.threshold,
            tables: self.view == View::Cardinality, // a pass over every key: only when shown
            keys: Vec::new(),
        }
        .path_and_query()
    }

    /// Takes a new answer (ignored while frozen); returns the series that crossed the
    /// threshold since the last answer, as log lines.
    pub fn update(&mut self, live: Live) -> Vec<String> {
        if self.frozen {
            return Vec::new();
        }
        let mut crossed = Vec::new();
        for row in &live.series {
            let history = self.history.entry(row.name.clone()).or_default();
            if history.len() == HISTORY {
                history.pop_front();
            }
            history.push_back((row.rate.unwrap_or(0.0), row.p99.unwrap_or(0.0)));
            let over = self.is_over(row);
            let was_over = self.crossing.insert(row.name.clone(), over).unwrap_or(false);
            if over && !was_over {
                crossed.push(crossing_line(row, self.threshold.unwrap_or(0.0), live.now_ms));
            }
        }
        self.selected = self.selected.min(live.series.len().saturating_sub(1));
        self.previous = self.latest.replace(live);
        crossed
    }

    /// The last answer.
    pub fn latest(&self) -> Option<&Live> {
        self.latest.as_ref()
    }

    /// True when a row's p99 is at or above the threshold.
    pub fn is_over(&self, row: &SeriesRow) -> bool {
        match (self.threshold, row.p99) {
            (Some(threshold), Some(p99)) => p99 >= threshold,
            _ => false,
        }
    }

    /// The rows in display order.
    pub fn rows(&self) -> Vec<&SeriesRow> {
        let mut rows: Vec<&SeriesRow> = self.latest.iter().flat_map(|live| &live.series).collect();
        if self.reverse {
            rows.reverse();
        }
        rows
    }

    /// A series' rate and p99 over the answers seen.
    pub fn history(&self, name: &str) -> Vec<(f64, f64)> {
        self.history.get(name).map(|h| h.iter().copied().collect()).unwrap_or_default()
    }

    /// Per second between the last two answers of a cumulative figure of the header.
    fn per_second(&self, figure: impl Fn(&Live) -> u64) -> Option<f64> {
        let (latest, previous) = (self.latest.as_ref()?, self.previous.as_ref()?);
        let seconds = latest.now_ms.saturating_sub(previous.now_ms) as f64 / 1000.0;
        (seconds > 0.0).then(|| figure(latest).saturating_sub(figure(previous)) as f64 / seconds)
    }

    /// Per second between the last two answers of a figure that is not cumulative in `u64`.
    fn change_per_second(&self, figure: impl Fn(&Live) -> f64) -> Option<f64> {
        let (latest, previous) = (self.latest.as_ref()?, self.previous.as_ref()?);
        let seconds = latest.now_ms.saturating_sub(previous.now_ms) as f64 / 1000.0;
        (seconds > 0.0).then(|| (figure(latest) - figure(previous)) / seconds)
    }

    /// The header lines: the flush, input rates and losses, bad lines by reason, series and
    /// store, a line per sink.
    pub fn header(&self) -> Vec<String> {
        let Some(live) = &self.latest else { return vec!["waiting for the first answer...".to_string()] };
        let rate = |figure: &dyn Fn(&Live) -> u64| self.per_second(figure).map_or("-".to_string(), human);
        let lag = live.flush_lag_s.map_or(String::new(), |lag| format!("  lag {}s", number(lag)));
        let queue_share = match live.receive_buffer_bytes {
            0 => String::new(),
            buffer => format!(" ({:.0}%)", live.receive_queue_bytes as f64 * 100.0 / buffer as f64),
        };
        let mut lines = vec![
            format!(
                "up {}  interval {}s ({:.1}s in)  flushes {}  last flush {:.1} ms{lag}  RSS {}",
                duration(live.uptime_s),
                live.interval.seconds,
                live.interval.elapsed_s,
                live.flushes,
                live.last_flush_duration_ms,
                bytes(live.rss_bytes)
            ),
            format!(
                "lines {}/s  packets {}/s  bad {}/s  kernel drops {}/s  receive queue {} of {}{queue_share}",
                rate(&|l| l.totals.lines),
                rate(&|l| l.totals.packets),
                rate(&|l| l.totals.bad_lines.values().sum()),
                rate(&|l| l.totals.kernel_drops),
                bytes(live.receive_queue_bytes),
                bytes(live.receive_buffer_bytes)
            ),
        ];
        lines.extend(group_line(live));
        lines.extend(kafka_line(live));
        let bad_reasons: Vec<String> = live
            .totals
            .bad_lines
            .keys()
            .filter_map(|reason| {
                let per_second = self.per_second(|l| l.totals.bad_lines.get(reason).copied().unwrap_or(0))?;
                (per_second > 0.0).then(|| format!("{reason} {}/s", human(per_second)))
            })
            .collect();
        if !bad_reasons.is_empty() {
            lines.push(format!("bad lines: {}", bad_reasons.join(", ")));
            let latest = live.totals.bad_line_examples.iter().max_by_key(|(_, example)| example.unix_s);
            if let Some((reason, example)) = latest {
                let source = example.source.as_deref().unwrap_or("a datagram");
                lines.push(format!("  latest ({reason}, from {source}): {}", example.line));
            }
        }
        for alert in &live.alerts {
            lines.push(format!("ALERT {} {}: {}", alert.state.to_uppercase(), alert.name, alert.summary));
        }
        let count = &live.series_count;
        let store = live.store_bytes.map_or(String::new(), |b| {
            let growth = self.change_per_second(|l| l.store_bytes.unwrap_or(0) as f64);
            let growth = growth.map_or(String::new(), |g| format!(" (+{}/s)", bytes(g.max(0.0) as u64)));
            format!("  store {}{growth}", bytes(b))
        });
        lines.push(format!(
            "series: {} counters, {} timers, {} gauges, {} sets{store}",
            count.counter, count.timer, count.gauge, count.set
        ));
        for (sink, values) in &live.sinks {
            let value = |name: &str| values.get(name).copied().unwrap_or(0.0);
            let out =
                self.change_per_second(|l| l.sinks.get(sink).and_then(|v| v.get("points_out")).copied().unwrap_or(0.0));
            let success = match value("seconds_since_success") {
                s if s < 0.0 => "never".to_string(),
                s => format!("{}s ago", number(s)),
            };
            // A Kafka local's aborted transactions, when it has any.
            let aborted = match value("transactions_aborted") {
                n if n > 0.0 => format!("  transactions aborted {n}"),
                _ => String::new(),
            };
            lines.push(format!(
                "sink {sink}: out {}/s  queued {}  retries {}  errors {}  buffered {}  last success {success}{aborted}",
                out.map_or("-".to_string(), human),
                value("queued"),
                value("retries"),
                value("errors"),
                bytes(value("buffered_bytes") as u64)
            ));
            if let Some(error) = live.sink_last_errors.get(sink) {
                lines.push(format!("  last error: {}", crate::printable::escaped(error)));
            }
        }
        lines
    }

    /// Applies a key.
    pub fn key(&mut self, key: Key) -> Action {
        if let Some(typing) = &mut self.typing {
            return match key {
                Key::Enter => {
                    let text = std::mem::take(typing);
                    self.typing = None;
                    self.filter = (!text.is_empty()).then_some(text);
                    self.selected = 0;
                    Action::Refetch
                }
                Key::Esc => {
                    self.typing = None;
                    Action::Redraw
                }
                Key::Backspace => {
                    typing.pop();
                    Action::Redraw
                }
                Key::Char(c) => {
                    typing.push(c);
                    Action::Redraw
                }
                Key::Interrupt => Action::Quit,
                _ => Action::Redraw,
            };
        }
        match key {
            Key::Char('q') | Key::Interrupt => Action::Quit,
            Key::Esc => match self.view {
                View::Series => Action::Quit,
                _ => {
                    self.view = View::Series;
                    Action::Redraw
                }
            },
            Key::Char(digit @ '1'..='6') => {
                self.sort = Column::ALL[digit as usize - '1' as usize];
                Action::Refetch
            }
            Key::Char('s') => {
                self.sort = next(self.sort);
                Action::Refetch
            }
            Key::Char('r') => {
                self.reverse = !self.reverse;
                Action::Redraw
            }
            Key::Char('/') => {
                self.typing = Some(self.filter.clone().unwrap_or_default());
                Action::Redraw
            }
            Key::Char(' ') => {
                self.frozen = !self.frozen;
                Action::Redraw
            }
            Key::Char('t') => {
                self.view = if self.view == View::Cardinality { View::Series } else { View::Cardinality };
                Action::Refetch
            }
            Key::Enter => {
                if let Some(row) = self.rows().get(self.selected) {
                    self.view = View::Detail(row.name.clone());
                }
                Action::Redraw
            }
            Key::Up => {
                self.selected = self.selected.saturating_sub(1);
                Action::Redraw
            }
            Key::Down => {
                self.selected = (self.selected + 1).min(self.rows().len().saturating_sub(1));
                Action::Redraw
            }
            _ => Action::Redraw,
        }
    }
}

fn crossing_line(row: &SeriesRow, threshold: f64, now_ms: u64) -> String {
    let p99 = row.p99.map_or("-".to_string(), number);
    let above = row.at_or_above.map_or("-".to_string(), |n| n.to_string());
    format!("{} {} p99 {p99} >= {} ({above} samples at or above)", timestamp(now_ms), row.name, number(threshold))
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn timestamp(unix_ms: u64) -> String {
    crate::timefmt::utc_rfc3339(unix_ms / 1000)
}

/// A number in at most 7 characters: `12.3`, `1.23k`, `45.6M`.
pub fn human(value: f64) -> String {
    let magnitude = value.abs();
    let (scaled, unit) = match magnitude {
        m if m >= 1e9 => (value / 1e9, "G"),
        m if m >= 1e6 => (value / 1e6, "M"),
        m if m >= 1e4 => (value / 1e3, "k"),
        _ => (value, ""),
    };
    if unit.is_empty() && scaled.fract() == 0.0 {
        format!("{scaled:.0}")
    } else {
        format!("{scaled:.1}{unit}")
    }
}

/// A value as a statistic: up to 4 significant digits.
pub fn number(value: f64) -> String {
    if value.abs() >= 1e4 {
        human(value)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Bytes in KiB, MiB, GiB.
pub fn bytes(value: u64) -> String {
    let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    units
        .iter()
        .find(|(_, size)| value >= *size)
        .map_or(format!("{value} B"), |(unit, size)| format!("{:.1} {unit}", value as f64 / *size as f64))
}

/// Seconds as `3d4h`, `2h05m`, `4m07s`, `12s`.
pub fn duration(seconds: u64) -> String {
    let (d, h, m, s) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m"),
        _ => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, rate: f64, p99: Option<f64>) -> SeriesRow {
        SeriesRow {
            name: name.into(),
            kind: if p99.is_some() { "timer" } else { "counter" }.into(),
            value: Some(rate * 2.0),
            rate: Some(rate),
            p50: p99.map(|p| p / 2.0),
            p99,
            at_or_above: p99.map(|_| 3),
            bins: None,
        }
    }

    fn live(now_ms: u64, lines: u64, series: Vec<SeriesRow>) -> Live {
        let mut live = Live { now_ms, series, ..Live::default() };
        live.totals.lines = lines;
        live
    }

    #[test]
    fn header_rates_come_from_the_last_two_answers() {
        let mut model = Model::new(None, 10);
        model.update(live(1_000, 100, vec![]));
        assert!(model.header()[1].starts_with("lines -/s"), "{:?}", model.header());
        let mut next = live(3_000, 20_100, vec![]);
        next.totals.bad_lines.insert("no_type".into(), 40);
        let example = |line: &str, unix_s| crate::contract::BadLineExample {
            line: line.into(),
            source: Some("10.0.0.7".into()),
            unix_s,
        };
        next.totals.bad_line_examples.insert("no_type".into(), example("api.hits:1", 20));
        next.totals.bad_line_examples.insert("bad_value".into(), example("old:x|c", 10));
        model.update(next);
        let header = model.header();
        assert!(header[1].starts_with("lines 10.0k/s"), "{header:?}");
        assert_eq!(header[2], "bad lines: no_type 20/s");
        assert_eq!(header[3], "  latest (no_type, from 10.0.0.7): api.hits:1");
    }

    /// Issue 49: top asked of a global with peers says how many members answered, and names
    /// each that did not.
    #[test]
    fn the_header_says_when_the_group_answered_in_part() {
        use crate::contract::Member;
        let member = |url: &str, error: Option<&str>| Member {
            url: url.into(),
            answered: error.is_none(),
            error: error.map(String::from),
        };
        let cases: Vec<(Option<Vec<Member>>, Vec<&str>)> = vec![
            (None, vec![]),
            (Some(vec![member("self", None), member("https://g2:8443", None)]), vec!["group: 2 of 2 members answered"]),
            (
                Some(vec![member("self", None), member("https://g2:8443", Some("connection refused"))]),
                vec![
                    "group: 1 of 2 members answered (PARTIAL: their series are missing)",
                    "  https://g2:8443: connection refused",
                ],
            ),
        ];
        for (members, want) in cases {
            let mut model = Model::new(None, 10);
            model.update(Live { members, ..live(1_000, 0, vec![]) });
            let header = model.header();
            let group: Vec<&str> = header
                .iter()
                .map(String::as_str)
                .filter(|line| line.contains("g2") || line.starts_with("group"))
                .collect();
            assert_eq!(group, want);
        }
    }

    /// Issue 49, item 5: a Kafka local's sink line has its aborted transactions and why it
    /// last failed (made printable: a broker's text never drives the terminal).
    #[test]
    fn a_sinks_line_has_its_aborted_transactions_and_last_error() {
        let mut answer = live(1_000, 0, vec![]);
        let values = [("transactions_aborted", 2.0), ("errors", 3.0), ("seconds_since_success", 1.0)];
        let values = values.iter().map(|(name, value)| (name.to_string(), *value)).collect();
        answer.sinks.insert("forward".into(), values);
        answer.sink_last_errors.insert("forward".into(), "broker down \u{1b}[2J".into());
        let mut model = Model::new(None, 10);
        model.update(answer);
        let header = model.header();
        let at = header.iter().position(|line| line.starts_with("sink forward")).unwrap();
        assert!(
            header[at].ends_with("errors 3  buffered 0 B  last success 1s ago  transactions aborted 2"),
            "{header:?}"
        );
        assert_eq!(header[at + 1], "  last error: broker down \\u{1b}[2J");
    }

    /// Issue 49, item 5: a Kafka global's header says where it stands in its topic.
    #[test]
    fn a_kafka_globals_header_shows_its_partitions_lag_and_commits() {
        use crate::contract::{KafkaStanding, PartitionStanding};
        let partition = |partition, lag| PartitionStanding { partition, next: 100, end: 100 + lag, lag };
        let kafka = KafkaStanding {
            topic: "histd-forward".into(),
            group: "dc-a".into(),
            instance_id: None,
            partitions: vec![partition(0, 0), partition(3, 1500)],
            lag: 1500,
            commits_pending: 2,
            last_commit_age_s: Some(4),
            falling_behind: true,
        };
        let mut model = Model::new(None, 10);
        model.update(Live { kafka: Some(kafka), ..live(1_000, 0, vec![]) });
        let header = model.header();
        let line = header.iter().find(|line| line.starts_with("kafka")).unwrap_or_else(|| panic!("{header:?}"));
        assert_eq!(
            line,
            "kafka histd-forward (group dc-a): lag 1500 over 2 partitions [0:0 3:1500]  commits waiting 2  last commit 4s ago  FALLING BEHIND (its lag grows)"
        );
    }

    #[test]
    fn keys_sort_filter_freeze_and_open_the_detail() {
        let mut model = Model::new(Some(500.0), 10);
        model.update(live(1_000, 0, vec![row("a", 5.0, Some(900.0)), row("b", 1.0, None)]));
        let cases: &[(Key, Action)] = &[(Key::Char('5'), Action::Refetch), (Key::Char('s'), Action::Refetch)];
        for (key, want) in cases {
            assert_eq!(model.key(*key), *want);
        }
        assert_eq!(model.sort, Column::Above);
        assert!(model.query().contains("sort=above") && model.query().contains("threshold=500"));
        model.key(Key::Char('r'));
        assert_eq!(model.rows().iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        for key in [Key::Char('/'), Key::Char('^'), Key::Char('x'), Key::Backspace, Key::Char('a')] {
            model.key(key);
        }
        assert_eq!(model.typing.as_deref(), Some("^a"));
        assert_eq!(model.key(Key::Enter), Action::Refetch);
        assert!(model.query().ends_with("&match=%5Ea&threshold=500"), "{}", model.query());
        model.key(Key::Char(' '));
        assert!(model.update(live(2_000, 0, vec![])).is_empty() && model.rows().len() == 2, "frozen");
        model.key(Key::Char(' '));
        model.key(Key::Down);
        model.key(Key::Enter);
        assert_eq!(model.view, View::Detail("a".into()), "reversed: the second row is a");
        assert_eq!(model.key(Key::Esc), Action::Redraw);
        assert_eq!(model.view, View::Series);
        assert!(!model.query().contains("tables"));
        assert_eq!(model.key(Key::Char('t')), Action::Refetch);
        assert_eq!(model.view, View::Cardinality);
        assert!(model.query().ends_with("&tables=1"), "the tables only while they are shown");
        assert_eq!(model.key(Key::Char('q')), Action::Quit);
    }

    #[test]
    fn a_series_crossing_the_threshold_is_logged_once() {
        let mut model = Model::new(Some(500.0), 10);
        assert_eq!(model.update(live(1_000, 0, vec![row("a", 1.0, Some(100.0))])).len(), 0);
        let crossed = model.update(live(2_000, 0, vec![row("a", 1.0, Some(700.0))]));
        assert_eq!(crossed, ["1970-01-01T00:00:02Z a p99 700 >= 500 (3 samples at or above)"]);
        assert!(model.update(live(3_000, 0, vec![row("a", 1.0, Some(800.0))])).is_empty(), "still over");
        assert_eq!(model.history("a"), [(1.0, 100.0), (1.0, 700.0), (1.0, 800.0)]);
    }

    #[test]
    fn numbers_fit_their_columns() {
        let cases = [(0.0, "0"), (12.5, "12.5"), (1234.0, "1234"), (12_345.0, "12.3k"), (2.5e6, "2.5M")];
        for (value, want) in cases {
            assert_eq!(human(value), want, "{value}");
        }
        assert_eq!(number(0.1234), "0.123");
        assert_eq!(bytes(16 << 20), "16.0 MiB");
        assert_eq!(duration(3725), "1h02m");
    }
}
