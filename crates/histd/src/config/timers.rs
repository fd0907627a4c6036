//! Timer keys: `percentThreshold`, `histogram`, `calculatedTimerMetrics`.

use agg::{BinLimit, HistogramRule, Threshold};
use serde_json::Value;

use crate::config_reader::{number_of, ConfigError, Reader};

/// `percentThreshold`: a number or an array of them, each in [-100, 100] and not 0.
pub fn thresholds(top: &Reader<'_>) -> Result<Vec<Threshold>, ConfigError> {
    let values: Vec<&Value> = match top.raw("percentThreshold") {
        None => return Ok(vec![Threshold::new(90.0)]),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(single) => vec![single],
    };
    if values.len() > agg::config::MAX_THRESHOLDS {
        let message = format!("{} thresholds: at most {}", values.len(), agg::config::MAX_THRESHOLDS);
        return Err(top.error("percentThreshold", message));
    }
    values
        .into_iter()
        .map(|value| match number_of(value) {
            Some(p) if p != 0.0 && (-100.0..=100.0).contains(&p) => Ok(Threshold::new(p)),
            _ => Err(top.error("percentThreshold", format!("{value} is not a percentage in [-100, 100] other than 0"))),
        })
        .collect()
}

/// `histogram`: `[{metric: "substring", bins: [limit, ..., 'inf']}]`, limits ascending.
pub fn histograms(top: &Reader<'_>) -> Result<Vec<HistogramRule>, ConfigError> {
    let rules = top.array("histogram")?;
    rules
        .iter()
        .enumerate()
        .map(|(index, rule)| {
            let key = format!("histogram[{index}]");
            let Value::Object(object) = rule else {
                return Err(ConfigError { key, message: format!("expected {{metric, bins}}, got {rule}") });
            };
            let rule = top.element(object, key);
            let metric = rule.string("metric")?.ok_or_else(|| rule.error("metric", "is missing"))?;
            let bins = rule.array("bins")?.iter().map(|bin| bin_limit(&rule, bin)).collect::<Result<Vec<_>, _>>()?;
            check_ascending(&rule, &bins)?;
            Ok(HistogramRule { metric, bins })
        })
        .collect()
}

fn bin_limit(rule: &Reader<'_>, bin: &Value) -> Result<BinLimit, ConfigError> {
    if bin.as_str() == Some("inf") {
        return Ok(BinLimit::Infinity);
    }
    match number_of(bin) {
        Some(limit) if limit.is_finite() => Ok(BinLimit::Below(limit)),
        _ => Err(rule.error("bins", format!("{bin} is neither a number nor 'inf'"))),
    }
}

fn check_ascending(rule: &Reader<'_>, bins: &[BinLimit]) -> Result<(), ConfigError> {
    let order = |limit: &BinLimit| match limit {
        BinLimit::Below(value) => *value,
        BinLimit::Infinity => f64::INFINITY,
    };
    if bins.windows(2).all(|pair| order(&pair[0]) < order(&pair[1])) {
        Ok(())
    } else {
        Err(rule.error("bins", "limits must be ascending, with 'inf' last"))
    }
}

/// `calculatedTimerMetrics`: names of timer statistics to emit (empty = all).
pub fn calculated_timer_metrics(top: &Reader<'_>) -> Result<Vec<String>, ConfigError> {
    top.array("calculatedTimerMetrics")?
        .iter()
        .map(|name| {
            name.as_str()
                .map(str::to_string)
                .ok_or_else(|| top.error("calculatedTimerMetrics", format!("{name} is not a string")))
        })
        .collect()
}
