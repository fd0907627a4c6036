//! Where a Kafka global stands in its topic (issue 49, item 5), as `/health`, `histd health`,
//! `stats` and `/metrics` show it: the partitions the group gave it, for each the next offset
//! it reads, the offset the log ends at for it (the last stable offset) and the lag between
//! them; the commits waiting and the age of the last one; and whether the lag grows without
//! bound ([`LagTrend`]: the global is then `degraded`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use crate::contract::{KafkaStanding, PartitionStanding};

/// How long one window of the lag's trend is.
pub const WINDOW: Duration = Duration::from_secs(60);

/// How many windows in a row must each hold more lag at their lowest than the one before
/// for the global to be falling behind.
const GROWING_WINDOWS: usize = 3;

/// The lag's trend: its lowest value in each [`WINDOW`]. A global that keeps up drains its
/// lag now and then (each window's lowest is near zero); one that does not sees the lowest
/// rise window after window.
#[derive(Debug, Default)]
pub struct LagTrend {
    /// (window start, lowest lag seen in it), oldest first.
    windows: VecDeque<(Instant, i64)>,
}

impl LagTrend {
    /// Notes the lag seen at `now`.
    pub fn note(&mut self, lag: i64, now: Instant) {
        match self.windows.back_mut() {
            Some((start, lowest)) if now.duration_since(*start) < WINDOW => *lowest = (*lowest).min(lag),
            _ => {
                self.windows.push_back((now, lag));
                while self.windows.len() > GROWING_WINDOWS + 1 {
                    self.windows.pop_front();
                }
            }
        }
    }

    /// True when the lowest lag of each of the last [`GROWING_WINDOWS`] whole windows (and of
    /// the one open now) rose above the one before, from above zero.
    pub fn falling_behind(&self) -> bool {
        let lows: Vec<i64> = self.windows.iter().map(|(_, lowest)| *lowest).collect();
        lows.len() > GROWING_WINDOWS && lows.windows(2).all(|pair| pair[1] > pair[0]) && lows[0] > 0
    }

    /// Forgets the trend (the partitions assigned changed: another lag).
    pub fn reset(&mut self) {
        self.windows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lag_whose_floor_rises_window_after_window_is_falling_behind() {
        // (the lag seen every 10 s, falling behind at the end)
        let cases: &[(&[i64], bool)] = &[
            (&[0; 30], false),
            // Bursty but drained every window.
            (
                &[500, 0, 800, 0, 300, 0, 900, 0, 100, 0, 700, 0, 500, 0, 800, 0, 300, 0, 900, 0, 100, 0, 700, 0, 5],
                false,
            ),
            // Rising for four windows from above zero.
            (&(0..25).map(|i| 100 + i * 50).collect::<Vec<_>>(), true),
            // Rising, then caught up in the last window.
            (&(0..24).map(|i| 100 + i * 50).chain([0]).collect::<Vec<_>>(), false),
            // Too short to tell.
            (&[100, 200, 300, 400, 500, 600], false),
        ];
        for (lags, want) in cases {
            let start = Instant::now();
            let mut trend = LagTrend::default();
            for (i, lag) in lags.iter().enumerate() {
                trend.note(*lag, start + Duration::from_secs(10 * i as u64));
            }
            assert_eq!(trend.falling_behind(), *want, "{lags:?}");
        }
    }
}
