//! The screens as lines of text at a given width: `--once` prints them, the terminal view
//! draws them (with the selected row and the rows over the threshold highlighted).

use super::model::{bytes, human, number, Column, Model, View};
use crate::contract::SeriesRow;

/// Block characters from empty to full, for heat strips and sparklines.
const LEVELS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Cells in a row's heat strip.
const HEAT_CELLS: usize = 12;
/// The widths of the fixed columns after the name.
const FIXED: [(&str, usize); 7] =
    [("TYPE", 8), ("RATE/s", 9), ("VALUE", 9), ("P50", 9), ("P99", 9), ("≥T", 8), ("HEAT", HEAT_CELLS + 1)];

/// One line of a screen and how to draw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The text.
    pub text: String,
    /// A heading.
    pub heading: bool,
    /// Over the threshold (bold yellow).
    pub alert: bool,
    /// The selected row.
    pub selected: bool,
}

impl Line {
    fn plain(text: String) -> Line {
        Line { text, heading: false, alert: false, selected: false }
    }

    fn heading(text: String) -> Line {
        Line { heading: true, ..Line::plain(text) }
    }
}

/// The current screen, `width` columns wide: the header, a blank line, the view.
pub fn screen(model: &Model, width: usize) -> Vec<Line> {
    let mut lines: Vec<Line> = model.header().into_iter().map(|text| Line::plain(fit(&text, width))).collect();
    lines.push(Line::plain(String::new()));
    lines.extend(body(model, width));
    lines
}

/// The view below the header: the series table, a series' detail, or cardinality.
pub fn body(model: &Model, width: usize) -> Vec<Line> {
    let mut lines = match &model.view {
        View::Series => series_table(model, width),
        View::Detail(name) => detail(model, name, width),
        View::Cardinality => cardinality(model, width),
    };
    lines.iter_mut().for_each(|line| line.text = fit(&line.text, width));
    lines
}

/// The key help for the bottom line.
pub fn help(model: &Model) -> String {
    if let Some(typing) = &model.typing {
        return format!("filter (regex): {typing}_   Enter apply, Esc cancel");
    }
    let sort = model.sort.parameter();
    let order = if model.reverse { " reversed" } else { "" };
    let frozen = if model.frozen { "  FROZEN" } else { "" };
    let filter = model.filter.as_ref().map_or(String::new(), |f| format!("  filter /{f}/"));
    format!("sort {sort}{order}{filter}{frozen} | 1-6 sort, s next, r reverse, / filter, space freeze, Enter detail, t cardinality, q quit")
}

fn series_table(model: &Model, width: usize) -> Vec<Line> {
    let name_width = name_width(width);
    let threshold = model.threshold.map_or("≥T".to_string(), |t| format!("≥{}", number(t)));
    // Column::ALL's n-th column is FIXED's n-th (the name is the 0th of both).
    let sorted = Column::ALL.iter().position(|c| *c == model.sort);
    let mark = |index: usize| if sorted == Some(index) { "*" } else { "" };
    let mut heading = format!("{:<name_width$}", format!("NAME{}", mark(0)));
    for (index, (title, cell)) in FIXED.iter().enumerate() {
        let title = if index == 5 { threshold.as_str() } else { title };
        heading.push_str(&format!("{:>cell$}", format!("{title}{}", mark(index))));
    }
    let mut lines = vec![Line::heading(heading)];
    for (index, row) in model.rows().into_iter().enumerate() {
        let line = Line {
            text: row_text(row, name_width),
            heading: false,
            alert: model.is_over(row),
            selected: index == model.selected,
        };
        lines.push(line);
    }
    if let Some(live) = model.latest() {
        let shown = live.series.len() as u64;
        if live.matched > shown {
            lines.push(Line::plain(format!("({} more series match)", live.matched - shown)));
        }
    }
    lines
}

fn name_width(width: usize) -> usize {
    let fixed: usize = FIXED.iter().map(|(_, w)| w).sum();
    width.saturating_sub(fixed).max(12)
}

/// One row: name, type, rate, value, p50, p99, samples at or above, heat strip.
pub fn row_text(row: &SeriesRow, name_width: usize) -> String {
    let cell = |value: Option<f64>| value.map_or("-".to_string(), number);
    let name = fit(&row.name, name_width.saturating_sub(1));
    let above = row.at_or_above.map_or("-".to_string(), |n| n.to_string());
    let rate = row.rate.map_or("-".to_string(), human);
    format!(
        "{name:<name_width$}{:>8}{rate:>9}{:>9}{:>9}{:>9}{above:>8} {}",
        row.kind,
        cell(row.value),
        cell(row.p50),
        cell(row.p99),
        heat(row.bins(), HEAT_CELLS)
    )
}

/// A histogram as `cells` block characters over its own range (log-spaced for positive
/// values), each as tall as its share of the busiest cell.
pub fn heat(bins: &[(f64, f64, u64)], cells: usize) -> String {
    if bins.is_empty() {
        return String::new();
    }
    let position = |lower: f64| if lower > 0.0 { lower.log10() } else { f64::NEG_INFINITY };
    let positives: Vec<f64> = bins.iter().map(|b| position(b.0)).filter(|p| p.is_finite()).collect();
    let low = positives.iter().copied().fold(f64::INFINITY, f64::min);
    let high = positives.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut counts = vec![0u64; cells];
    for &(lower, _, count) in bins {
        let p = position(lower);
        let at = if !p.is_finite() || high <= low {
            0
        } else {
            ((p - low) / (high - low) * (cells - 1) as f64).round() as usize
        };
        counts[at.min(cells - 1)] += count;
    }
    sparkline(&counts.iter().map(|&c| c as f64).collect::<Vec<_>>())
}

/// Values as block characters, each as tall as its share of the largest.
pub fn sparkline(values: &[f64]) -> String {
    let most = values.iter().copied().fold(0.0, f64::max);
    values
        .iter()
        .map(|&v| {
            if most <= 0.0 || v <= 0.0 {
                LEVELS[0]
            } else {
                LEVELS[((v / most) * 8.0).ceil().clamp(1.0, 8.0) as usize]
            }
        })
        .collect()
}

fn detail(model: &Model, name: &str, width: usize) -> Vec<Line> {
    let mut lines = vec![Line::heading(format!("{name}   (Esc back)"))];
    let Some(row) = model.rows().into_iter().find(|r| r.name == name) else {
        lines.push(Line::plain("not in the current rows (filtered out or idle)".to_string()));
        return lines;
    };
    lines.push(Line::plain(row_text(row, name_width(width))));
    if !row.bins().is_empty() {
        lines.push(Line::plain(String::new()));
        lines.push(Line::heading("histogram of the interval so far (bars: samples per decade of value)".to_string()));
        let groups = group_bins(row.bins(), 16);
        let bar_width = width.saturating_sub(34).max(10);
        for ((lower, upper, count), bar) in groups.iter().zip(density_bars(&groups, bar_width)) {
            lines.push(Line::plain(format!("{:>10} – {:<10} {count:>8} {bar}", number(*lower), number(*upper))));
        }
    }
    let history = model.history(name);
    let tail = &history[history.len().saturating_sub(width.saturating_sub(12).max(10))..];
    lines.push(Line::plain(String::new()));
    lines.push(Line::plain(format!("rate/s {}", sparkline(&tail.iter().map(|h| h.0).collect::<Vec<_>>()))));
    lines.push(Line::plain(format!("p99    {}", sparkline(&tail.iter().map(|h| h.1).collect::<Vec<_>>()))));
    lines
}

/// A bar per group as long as its density (samples per decade of value, as the web page
/// draws it), the densest `width` long: bins of very unequal width drawn by raw counts would
/// make the wide ones look like the mode. A group not wholly above zero is drawn by its count.
fn density_bars(groups: &[(f64, f64, u64)], width: usize) -> Vec<String> {
    let density = |&(lower, upper, count): &(f64, f64, u64)| match lower > 0.0 && upper > lower {
        true => count as f64 / (upper / lower).log10(),
        false => count as f64,
    };
    let densities: Vec<f64> = groups.iter().map(density).collect();
    let most = densities.iter().copied().fold(0.0, f64::max);
    densities
        .iter()
        .map(|&d| match most > 0.0 {
            // Rounded, but never nothing for a group that has samples.
            true => "█".repeat(((d / most * width as f64).round() as usize).max(usize::from(d > 0.0))),
            false => String::new(),
        })
        .collect()
}

/// Adjacent bins merged into at most `most` groups.
fn group_bins(bins: &[(f64, f64, u64)], most: usize) -> Vec<(f64, f64, u64)> {
    let per_group = bins.len().div_ceil(most.max(1)).max(1);
    bins.chunks(per_group)
        .map(|chunk| (chunk[0].0, chunk[chunk.len() - 1].1, chunk.iter().map(|b| b.2).sum()))
        .collect()
}

fn cardinality(model: &Model, width: usize) -> Vec<Line> {
    let Some(live) = model.latest() else { return Vec::new() };
    let name_width = (width / 2).max(20);
    let mut lines = vec![Line::heading(format!("{:<name_width$}{:>8}  TAGS (distinct values)", "NAME", "SERIES"))];
    let Some(cardinality) = &live.cardinality else { return lines };
    for name in &cardinality.names {
        let tags: Vec<String> = name.tags.iter().map(|(k, n)| format!("{k}={n}")).collect();
        lines.push(Line::plain(format!(
            "{:<name_width$}{:>8}  {}",
            fit(&name.name, name_width - 1),
            name.series,
            tags.join(" ")
        )));
    }
    let other = &cardinality.other;
    if other.names > 0 {
        lines.push(Line::plain(format!("(other {} names, {} series)", other.names, other.series)));
    }
    lines.push(Line::plain(String::new()));
    lines.push(Line::heading(format!("{:<name_width$}{:>10}{:>8}", "HOT PREFIX", "RATE/s", "SHARE")));
    for prefix in live.prefixes.iter().flatten() {
        let share = format!("{:.1}%", prefix.share * 100.0);
        lines.push(Line::plain(format!(
            "{:<name_width$}{:>10}{share:>8}",
            fit(&prefix.prefix, name_width - 1),
            human(prefix.rate)
        )));
    }
    if let Some(store) = live.store_bytes {
        lines.push(Line::plain(format!("store {}", bytes(store))));
    }
    lines
}

/// `text` cut to `width` characters (an ellipsis marks the cut).
pub fn fit(text: &str, width: usize) -> String {
    // Every line is fitted: a name's control characters (keyNameSanitize: false) are shown
    // escaped, never sent to the terminal.
    let text = crate::printable::escaped(text);
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heat_strip_shows_where_the_samples_are() {
        let bins = [(1.0, 1.1, 10), (10.0, 11.0, 100), (100.0, 110.0, 1)];
        assert_eq!(heat(&bins, 3), "▁█▁");
        // The same count over a tenth of a decade and over a whole decade: ten times denser.
        let bars = density_bars(&[(1.0, 10f64.powf(0.1), 10), (10.0, 100.0, 10), (0.0, 1.0, 1)], 20);
        assert_eq!(bars.iter().map(|b| b.chars().count()).collect::<Vec<_>>(), [20, 2, 1]);
        assert_eq!(heat(&[], 3), "");
        assert_eq!(sparkline(&[0.0, 1.0, 2.0, 4.0]), " ▂▄█");
    }

    #[test]
    fn rows_fit_the_width() {
        let row = SeriesRow {
            name: "a.very.long.series.name;with=tags;and=more".into(),
            kind: "timer".into(),
            value: Some(1234.0),
            rate: Some(123.4),
            p50: Some(12.0),
            p99: Some(950.25),
            at_or_above: Some(3),
            bins: Some(vec![(1.0, 1.1, 5)]),
        };
        let text = row_text(&row, 20);
        assert!(text.starts_with("a.very.long.series… "), "{text}");
        assert!(text.contains("   timer    123.4     1234       12   950.25       3 "), "{text}");
        assert_eq!(fit("abcdef", 4), "abc…");
    }
}
