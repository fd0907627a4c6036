//! Node's `util.inspect` layout (node 20 defaults: `breakLength` 80, `compact` 3,
//! `maxArrayLength` 100), for the `counters`, `timers`, `gauges` and `sets` dumps, so they read
//! as Etsy's do: `{ 'a.b': 3, c: 1 }`, wrapped one entry per line when long.

use agg::jsfmt::js_number;

const BREAK_LENGTH: usize = 80;
const MAX_ARRAY_LENGTH: usize = 100;

/// A value to lay out.
pub enum Node {
    /// A number.
    Number(f64),
    /// A string (quoted with `'`).
    Text(String),
    /// An array of numbers or strings.
    Array(Vec<Node>),
}

/// `{ key: value, ... }` for `entries`, in order.
pub fn object(entries: &[(String, Node)]) -> String {
    let output: Vec<String> =
        entries.iter().map(|(key, value)| format!("{}: {}", property_key(key), format_value(value, 2))).collect();
    if output.is_empty() {
        return "{}".to_string();
    }
    reduce(&output, 0, "{", "}", false)
}

fn format_value(value: &Node, indentation: usize) -> String {
    match value {
        Node::Number(number) => number_text(*number),
        Node::Text(text) => quoted(text),
        Node::Array(items) => array(items, indentation),
    }
}

fn array(items: &[Node], indentation: usize) -> String {
    if items.is_empty() {
        return "[]".to_string();
    }
    let mut output: Vec<String> =
        items.iter().take(MAX_ARRAY_LENGTH).map(|item| format_value(item, indentation + 2)).collect();
    let more = items.len().saturating_sub(MAX_ARRAY_LENGTH);
    if more > 0 {
        output.push(format!("... {more} more item{}", if more > 1 { "s" } else { "" }));
    }
    let numeric = items.iter().all(|item| matches!(item, Node::Number(_)));
    let entries = output.len();
    if entries > 6 {
        output = group_array_elements(output, indentation, more > 0, numeric);
    }
    reduce(&output, indentation, "[", "]", entries != output.len())
}

/// Node's `reduceToSingleString`: one line when it fits, else one entry per line.
fn reduce(output: &[String], indentation: usize, open: &str, close: &str, grouped: bool) -> String {
    if !grouped {
        let start = output.len() + indentation + open.len() + 10;
        if below_break_length(output, start) {
            return format!("{open} {} {close}", output.join(", "));
        }
    }
    let pad = format!("\n{}", " ".repeat(indentation));
    format!("{open}{pad}  {}{pad}{close}", output.join(&format!(",{pad}  ")))
}

fn below_break_length(output: &[String], start: usize) -> bool {
    let mut total = output.len() + start;
    if total + output.len() > BREAK_LENGTH {
        return false;
    }
    for entry in output {
        total += entry.len();
        if total > BREAK_LENGTH {
            return false;
        }
    }
    !output.iter().any(|entry| entry.contains('\n'))
}

/// Node's `groupArrayElements`: long arrays of short items laid out in aligned columns.
fn group_array_elements(output: Vec<String>, indentation: usize, has_more: bool, numeric: bool) -> Vec<String> {
    let data_length = if has_more { output.len() - 1 } else { output.len() };
    let separator = 2;
    let lengths: Vec<usize> = output[..data_length].iter().map(|s| s.chars().count()).collect();
    let total: usize = lengths.iter().map(|len| len + separator).sum();
    let max_length = lengths.iter().copied().max().unwrap_or(0);
    let actual_max = max_length + separator;
    if !(actual_max * 3 + indentation < BREAK_LENGTH && (total as f64 / actual_max as f64 > 5.0 || max_length <= 6)) {
        return output;
    }
    let average_bias = (actual_max as f64 - total as f64 / output.len() as f64).sqrt();
    let biased_max = (actual_max as f64 - 3.0 - average_bias).max(1.0);
    let columns = ((2.5 * biased_max * data_length as f64).sqrt() / biased_max)
        .round()
        .min(((BREAK_LENGTH - indentation) / actual_max) as f64)
        .min(12.0)
        .min(15.0) as usize;
    if columns <= 1 {
        return output;
    }
    let column_width: Vec<usize> = (0..columns)
        .map(|column| (column..data_length).step_by(columns).map(|j| lengths[j]).max().unwrap_or(0) + separator)
        .collect();
    let mut rows = Vec::new();
    for row_start in (0..data_length).step_by(columns) {
        let row_end = (row_start + columns).min(data_length);
        let mut row = String::new();
        for j in row_start..row_end {
            let last = j == row_end - 1;
            let cell = if last { output[j].clone() } else { format!("{}, ", output[j]) };
            let width = column_width[j - row_start] - if last && numeric { separator } else { 0 };
            row.push_str(&align(&cell, width, numeric, last));
        }
        rows.push(row);
    }
    if has_more {
        rows.push(output[data_length].clone());
    }
    rows
}

/// Numbers are right-aligned (padStart); other items left-aligned (padEnd), the last of a row
/// unpadded.
fn align(cell: &str, width: usize, numeric: bool, last: bool) -> String {
    if numeric {
        format!("{cell:>width$}")
    } else if last {
        cell.to_string()
    } else {
        format!("{cell:<width$}")
    }
}

/// A key as Node prints it: bare when it is an identifier, else single-quoted.
fn property_key(key: &str) -> String {
    let mut chars = key.chars();
    let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        key.to_string()
    } else {
        quoted(key)
    }
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'").replace('\n', "\\n"))
}

fn number_text(number: f64) -> String {
    if number == 0.0 && number.is_sign_negative() {
        "-0".to_string()
    } else {
        js_number(number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(values: &[f64]) -> Node {
        Node::Array(values.iter().map(|&v| Node::Number(v)).collect())
    }

    #[test]
    fn lays_out_like_node() {
        let short =
            vec![("g.a".to_string(), Node::Number(3.0)), ("statsd.timestamp_lag".to_string(), Node::Number(0.0))];
        assert_eq!(object(&short), "{ 'g.a': 3, 'statsd.timestamp_lag': 0 }");
        assert_eq!(object(&[]), "{}");
        let long = vec![
            ("statsd.bad_lines_seen".to_string(), Node::Number(0.0)),
            ("statsd.packets_received".to_string(), Node::Number(1.0)),
            ("statsd.metrics_received".to_string(), Node::Number(1.0)),
        ];
        assert_eq!(
            object(&long),
            "{\n  'statsd.bad_lines_seen': 0,\n  'statsd.packets_received': 1,\n  'statsd.metrics_received': 1\n}"
        );
        assert_eq!(object(&[("t".to_string(), numbers(&[1.0, 2.0, 3.0]))]), "{ t: [ 1, 2, 3 ] }");
        assert_eq!(object(&[("t".to_string(), numbers(&[]))]), "{ t: [] }");
        assert_eq!(object(&[("s".to_string(), Node::Array(vec![Node::Text("a".into())]))]), "{ s: [ 'a' ] }");
    }

    /// Expected texts are node 20's own `util.inspect` output for the same objects.
    #[test]
    fn groups_long_arrays_in_columns_like_node() {
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(
            object(&[("t".to_string(), numbers(&ten))]),
            "{\n  t: [\n    1, 2, 3, 4,  5,\n    6, 7, 8, 9, 10\n  ]\n}"
        );
        let many: Vec<f64> = (0..120).map(|i| f64::from(i) * 1.5).collect();
        let want = "{\n  t: [\n      0,   1.5,   3,   4.5,   6,   7.5,   9,  10.5,  12,  13.5,\n     15,  16.5,  18,  19.5,  21,  22.5,  24,  25.5,  27,  28.5,\n     30,  31.5,  33,  34.5,  36,  37.5,  39,  40.5,  42,  43.5,\n     45,  46.5,  48,  49.5,  51,  52.5,  54,  55.5,  57,  58.5,\n     60,  61.5,  63,  64.5,  66,  67.5,  69,  70.5,  72,  73.5,\n     75,  76.5,  78,  79.5,  81,  82.5,  84,  85.5,  87,  88.5,\n     90,  91.5,  93,  94.5,  96,  97.5,  99, 100.5, 102, 103.5,\n    105, 106.5, 108, 109.5, 111, 112.5, 114, 115.5, 117, 118.5,\n    120, 121.5, 123, 124.5, 126, 127.5, 129, 130.5, 132, 133.5,\n    135, 136.5, 138, 139.5, 141, 142.5, 144, 145.5, 147, 148.5,\n    ... 20 more items\n  ]\n}";
        assert_eq!(object(&[("t".to_string(), numbers(&many))]), want);
        let texts =
            Node::Array(["x", "yy", "zzz", "a", "b", "c", "d"].iter().map(|s| Node::Text(s.to_string())).collect());
        let mixed = vec![("a".to_string(), numbers(&[100.25, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])), ("b".to_string(), texts)];
        let want = "{\n  a: [\n    100.25, 2,\n         3, 4,\n         5, 6,\n         7\n  ],\n  b: [\n    'x', 'yy', 'zzz',\n    'a', 'b',  'c',\n    'd'\n  ]\n}";
        assert_eq!(object(&mixed), want);
    }
}
