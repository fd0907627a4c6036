//! The cardinality budgets as the management `stats` reply, `/health`, `/metrics`, the API
//! and the web page show them: one list of named values, and the offenders.

use std::collections::BTreeMap;

use agg::{BudgetReport, FoldReason, MetricType};

use crate::contract::{Budgets, Offender};

/// What the budgets hold, gathered under the aggregator's lock.
#[derive(Debug, Clone)]
pub struct BudgetState {
    /// The budgets, series held and folds.
    pub report: BudgetReport,
    /// Set intervals counted by a sketch past `maxSetMembers`.
    pub sets_sketched: u64,
    /// Series deleted by `idleTTL`, per type.
    pub idle_expired: [u64; 4],
}

impl BudgetState {
    /// Reads it from the aggregator.
    pub fn of(aggregator: &agg::Aggregator) -> BudgetState {
        BudgetState {
            report: aggregator.budget_report(),
            sets_sketched: aggregator.sets_sketched(),
            idle_expired: aggregator.expired(),
        }
    }

    /// `(name, value, is_total)`: series held and budgets per type (levels), folds by reason
    /// and sketched sets (totals since start). `stats` prefixes the names with `budget.`.
    pub fn entries(&self) -> Vec<(String, f64, bool)> {
        let report = &self.report;
        let mut out = Vec::new();
        for (at, kind) in MetricType::ALL.iter().enumerate() {
            out.push((format!("series.{}", kind.name()), report.series[at] as f64, false));
            out.push((format!("max_series.{}", kind.name()), report.budgets.max_series[at] as f64, false));
        }
        let names_at_budget: usize = report.names_at_budget.iter().sum();
        out.push(("names_at_series_per_name".to_string(), names_at_budget as f64, false));
        for reason in FoldReason::ALL {
            out.push((format!("folded_series.{}", reason.as_str()), report.folded[reason as usize] as f64, true));
        }
        out.push(("sets_sketched".to_string(), self.sets_sketched as f64, true));
        for (kind, expired) in MetricType::ALL.iter().zip(self.idle_expired) {
            out.push((format!("idle_expired.{}", kind.name()), expired as f64, true));
        }
        out
    }

    /// As the API answers it (`/api/v1/budgets`, `budgets` in `/health`).
    pub fn contract(&self) -> Budgets {
        let report = &self.report;
        let per_type = |values: [usize; 4]| -> BTreeMap<String, u64> {
            MetricType::ALL.iter().zip(values).map(|(kind, value)| (kind.name().to_string(), value as u64)).collect()
        };
        let offenders = report
            .offenders
            .iter()
            .map(|o| Offender {
                pattern: o.pattern.clone(),
                new_series_per_second: (o.new_series_per_second * 1000.0).round() / 1000.0,
                new_series: o.new_series,
                folded: o.folded,
            })
            .collect();
        let folded_series =
            FoldReason::ALL.iter().map(|r| (r.as_str().to_string(), report.folded[*r as usize])).collect();
        Budgets {
            series: per_type(report.series),
            max_series: per_type(report.budgets.max_series),
            max_series_per_name: report.budgets.max_series_per_name as u64,
            max_tag_values: report.budgets.max_tag_values as u64,
            max_set_members: report.budgets.max_set_members as u64,
            names_at_series_per_name: per_type(report.names_at_budget),
            folded_series,
            sets_sketched: self.sets_sketched,
            idle_expired: per_type(self.idle_expired.map(|n| n as usize)),
            offenders,
        }
    }
}
