//! One rule at work: its window of flushes, its value, and its state (inactive → pending →
//! firing → resolved), pure and driven by time as an argument.

use std::collections::VecDeque;
use std::time::Duration;

use store::{Expr, Function, Kind, Row, Selector};

use super::config::Rule;

/// Where a rule stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not breached.
    Inactive,
    /// Breached since `since` (unix seconds), not yet for the rule's `for`.
    Pending {
        /// When the breach began.
        since: u64,
    },
    /// Breached for the rule's `for`; firing since `since`.
    Firing {
        /// When it fired.
        since: u64,
    },
}

impl State {
    /// `inactive`, `pending` or `firing`.
    pub fn name(self) -> &'static str {
        match self {
            State::Inactive => "inactive",
            State::Pending { .. } => "pending",
            State::Firing { .. } => "firing",
        }
    }

    /// 0, 1 or 2: the state as a gauge.
    pub fn number(self) -> f64 {
        match self {
            State::Inactive => 0.0,
            State::Pending { .. } => 1.0,
            State::Firing { .. } => 2.0,
        }
    }
}

/// What an evaluation asks to be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing to send.
    None,
    /// It fired.
    Fired,
    /// It stopped firing.
    Resolved,
    /// Still firing, and due to be sent to Alertmanager again.
    StillFiring,
}

/// One flush of a rule's window: the merge of the rows its selector picked.
#[derive(Debug, Clone)]
struct Flushed {
    ts: u64,
    row: Option<Row>,
}

/// A rule, its window and its state.
#[derive(Debug, Clone)]
pub struct RuleState {
    /// The rule.
    pub rule: Rule,
    window: VecDeque<Flushed>,
    /// Where it stands.
    pub state: State,
    /// The value at the last evaluation (`None`: no data in the window).
    pub value: Option<f64>,
    /// When it was last evaluated (unix seconds).
    pub evaluated_at: Option<u64>,
    /// When it last stopped firing.
    pub resolved_at: Option<u64>,
    /// When it last fired.
    pub fired_at: Option<u64>,
    /// When it was last sent as firing.
    sent_at: u64,
}

impl RuleState {
    /// A rule not evaluated yet.
    pub fn new(rule: Rule) -> RuleState {
        RuleState {
            rule,
            window: VecDeque::new(),
            state: State::Inactive,
            value: None,
            evaluated_at: None,
            resolved_at: None,
            fired_at: None,
            sent_at: 0,
        }
    }

    /// The rule's new version, keeping the window when the expression is the same and the
    /// state when the breach condition is too (expressions compared as written: a number
    /// argument a function does not take is NaN, never equal to itself).
    pub fn renewed(mut self, rule: Rule) -> RuleState {
        if rule.expr_text != self.rule.expr_text {
            self.window.clear();
        }
        let condition = |rule: &Rule| (rule.expr_text.clone(), rule.comparison, rule.over);
        if condition(&rule) != condition(&self.rule) {
            self.state = State::Inactive;
        }
        self.rule = rule;
        self
    }

    /// The selector, the function and its kinds: what a flush must hand this rule.
    pub fn reads(&self) -> (&Selector, &'static [Kind]) {
        let (function, selector, _) = call_of(&self.rule.expr);
        (selector, function.kinds())
    }

    /// Adds a flush at `ts` (`row`: the merge of what the selector picked in it).
    pub fn observe(&mut self, ts: u64, row: Option<Row>) {
        self.window.push_back(Flushed { ts, row });
        let over = self.rule.over.as_secs();
        while self.window.front().is_some_and(|oldest| oldest.ts + over <= ts) {
            self.window.pop_front();
        }
    }

    /// Evaluates the window at `now` and moves the state; `resend` is how often a firing
    /// alert is sent again.
    pub fn evaluate(&mut self, now: u64, resend: Duration) -> Change {
        self.value = value_over(&self.rule.expr, self.window.iter().map(|f| f.row.as_ref()));
        self.evaluated_at = Some(now);
        let breached = self.value.is_some_and(|value| self.rule.comparison.breached_by(value));
        let hold = self.rule.hold.as_secs();
        let (state, change) = match (self.state, breached) {
            (State::Inactive, false) => (State::Inactive, Change::None),
            (State::Inactive, true) if hold == 0 => (State::Firing { since: now }, Change::Fired),
            (State::Inactive, true) => (State::Pending { since: now }, Change::None),
            (State::Pending { .. }, false) => (State::Inactive, Change::None),
            (State::Pending { since }, true) if now.saturating_sub(since) >= hold => {
                (State::Firing { since: now }, Change::Fired)
            }
            (pending @ State::Pending { .. }, true) => (pending, Change::None),
            (State::Firing { .. }, false) => {
                self.resolved_at = Some(now);
                (State::Inactive, Change::Resolved)
            }
            (firing @ State::Firing { .. }, true) if now.saturating_sub(self.sent_at) >= resend.as_secs() => {
                (firing, Change::StillFiring)
            }
            (firing @ State::Firing { .. }, true) => (firing, Change::None),
        };
        if matches!(change, Change::Fired | Change::StillFiring) {
            self.sent_at = now;
        }
        if change == Change::Fired {
            self.fired_at = Some(now);
        }
        self.state = state;
        change
    }
}

/// The function call at the heart of an expression.
pub fn call_of(expr: &Expr) -> (Function, &Selector, f64) {
    match expr {
        Expr::Call(function, selector, number) => (*function, selector, *number),
        Expr::Cumulative(inner) => call_of(inner),
    }
}

/// The expression's value over a window of flushes: a function of the rows merged, or for
/// `cumulative(e)` the sum of `e` flush by flush.
fn value_over<'r>(expr: &Expr, flushes: impl Iterator<Item = Option<&'r Row>> + Clone) -> Option<f64> {
    match expr {
        Expr::Call(function, _, number) => {
            let kind = function.kinds()[0];
            let mut merged: Option<Row> = None;
            for row in flushes.flatten() {
                match &mut merged {
                    Some(total) => total.merge(row, kind),
                    None => merged = Some(row.clone()),
                }
            }
            function.evaluate(&merged?, *number)
        }
        Expr::Cumulative(inner) => {
            let values: Vec<f64> = flushes.filter_map(|row| value_over(inner, std::iter::once(row))).collect();
            (!values.is_empty()).then(|| values.iter().sum())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::config::Comparison;

    fn rule(expr: &str, over_s: u64, comparison: Comparison, hold_s: u64) -> Rule {
        Rule {
            name: "r".into(),
            expr: store::parse(expr).unwrap(),
            expr_text: expr.into(),
            over: Duration::from_secs(over_s),
            comparison,
            hold: Duration::from_secs(hold_s),
            labels: Default::default(),
            summary: String::new(),
        }
    }

    fn counter(ts: u64, count: f64) -> Option<Row> {
        Some(Row { seconds: 10.0, count, ..Row::empty(ts as i64) })
    }

    /// The state machine, flush by flush: a `for` of 20 s needs three breached evaluations in
    /// a row (0, 10, 20 s); one bad flush alone never fires it.
    #[test]
    fn states_move_as_the_breach_lasts() {
        /// `for` in seconds, a count per flush, the state and change after each.
        type Case<'a> = (u64, &'a [f64], &'a [&'a str], &'a [Change]);
        let cases: &[Case] = &[
            (0, &[5.0, 0.0, 5.0], &["firing", "inactive", "firing"], &[Change::Fired, Change::Resolved, Change::Fired]),
            (
                20,
                &[5.0, 0.0, 5.0, 5.0, 5.0, 0.0],
                &["pending", "inactive", "pending", "pending", "firing", "inactive"],
                &[Change::None, Change::None, Change::None, Change::None, Change::Fired, Change::Resolved],
            ),
        ];
        for (hold, counts, states, changes) in cases {
            let mut state = RuleState::new(rule("count(errors)", 10, Comparison::Above(1.0), *hold));
            for (flush, count) in counts.iter().enumerate() {
                let ts = 1000 + flush as u64 * 10;
                state.observe(ts, counter(ts, *count));
                let change = state.evaluate(ts, Duration::from_secs(60));
                assert_eq!((state.state.name(), change), (states[flush], changes[flush]), "for {hold}, flush {flush}");
            }
        }
    }

    #[test]
    fn a_window_merges_its_flushes_and_forgets_older_ones() {
        let cases: &[(&str, u64, f64)] = &[
            ("count(errors)", 30, 6.0),             // the last three flushes: 1 + 2 + 3
            ("rate(errors)", 30, 0.2),              // 6 in 30 s
            ("count(errors)", 10, 3.0),             // the last one
            ("cumulative(count(errors))", 20, 5.0), // 2 + 3
        ];
        for (expr, over, want) in cases {
            let mut state = RuleState::new(rule(expr, *over, Comparison::Above(100.0), 0));
            for (flush, count) in [10.0, 1.0, 2.0, 3.0].into_iter().enumerate() {
                let ts = 1000 + flush as u64 * 10;
                state.observe(ts, counter(ts, count));
            }
            state.evaluate(1030, Duration::from_secs(60));
            assert_eq!(state.value, Some(*want), "{expr} over {over}");
        }
    }

    #[test]
    fn a_firing_alert_is_sent_again_every_resend_interval_and_no_data_resolves() {
        let mut state = RuleState::new(rule("count(errors)", 10, Comparison::Above(1.0), 0));
        let mut changes = Vec::new();
        for flush in 0..8u64 {
            let ts = 1000 + flush * 10;
            state.observe(ts, if flush < 7 { counter(ts, 5.0) } else { Option::None });
            changes.push(state.evaluate(ts, Duration::from_secs(30)));
        }
        use Change::*;
        assert_eq!(changes, [Fired, None, None, StillFiring, None, None, StillFiring, Resolved]);
    }

    #[test]
    fn renewing_keeps_what_did_not_change() {
        let mut state = RuleState::new(rule("count(errors)", 10, Comparison::Above(1.0), 0));
        state.observe(1000, counter(1000, 5.0));
        state.evaluate(1000, Duration::from_secs(60));
        let relabelled = Rule { summary: "new".into(), ..state.rule.clone() };
        let state = state.renewed(relabelled);
        assert_eq!((state.state.name(), state.window.len()), ("firing", 1));
        let stricter = rule("count(errors)", 10, Comparison::Above(9.0), 0);
        let state = state.renewed(stricter);
        assert_eq!((state.state.name(), state.window.len()), ("inactive", 1));
        let other = rule("count(other)", 10, Comparison::Above(9.0), 0);
        assert_eq!(state.renewed(other).window.len(), 0);
    }
}
