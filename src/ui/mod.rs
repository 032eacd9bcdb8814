//! Terminal output: a live progress bar on a TTY, quiet lines otherwise.
//!
//! Progress reads a [`LiveView`] that the driver updates; it never computes
//! stored numbers.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::load::live::LiveView;

/// Interval between plain progress lines when stderr is not a terminal.
const LINE_INTERVAL: Duration = Duration::from_secs(10);

/// A running progress display for one level.
pub struct LevelProgress {
    stop: tokio_util::sync::CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Where a cell stands in its campaign, for the progress line.
#[derive(Debug, Clone, Copy)]
pub struct CampaignEta {
    /// The cell's own estimate, s (used until its first request ends).
    pub estimate_s: f64,
    /// Estimated time of everything after this cell, s.
    pub rest_s: f64,
}

impl LevelProgress {
    /// Start showing progress of `label` toward `total` requests (or `duration`).
    pub fn start(
        label: String,
        total: Option<u64>,
        duration: Option<Duration>,
        live: Arc<LiveView>,
    ) -> Self {
        Self::start_in_campaign(label, total, duration, live, None)
    }

    /// [`Self::start`], also showing the campaign's remaining time.
    pub fn start_in_campaign(
        label: String,
        total: Option<u64>,
        duration: Option<Duration>,
        live: Arc<LiveView>,
        campaign: Option<CampaignEta>,
    ) -> Self {
        let stop = tokio_util::sync::CancellationToken::new();
        let tty = std::io::stderr().is_terminal();
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let bar = tty.then(|| {
                let bar = match total {
                    Some(n) => ProgressBar::new(n),
                    None => ProgressBar::new_spinner(),
                };
                bar.set_style(
                    ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                );
                bar.set_prefix(label.clone());
                bar
            });
            let mut last_line = Instant::now();
            loop {
                let done = live.done.load(Ordering::Relaxed);
                let failed = live.failed.load(Ordering::Relaxed);
                let ttft = live
                    .ttft_p50_ms()
                    .map(|t| format!("{t:.1} ms"))
                    .unwrap_or_else(|| "-".into());
                let elapsed = started.elapsed().as_secs_f64();
                let left = eta_s(done, total, duration, elapsed);
                let eta = left
                    .map(|e| format!("{e:.0}s"))
                    .unwrap_or_else(|| "?".into());
                let mut msg = format!("failed {failed}  TTFT p50 {ttft}  ETA {eta}");
                if let Some(c) = campaign {
                    msg.push_str(&format!(
                        "  campaign ETA {}",
                        crate::util::units::fmt_s(campaign_left_s(left, c, elapsed))
                    ));
                }
                if let Some(b) = &bar {
                    b.set_position(done);
                    b.set_message(msg);
                } else if last_line.elapsed() >= LINE_INTERVAL {
                    eprintln!("{label}: {done} done, {msg}");
                    last_line = Instant::now();
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = s.cancelled() => break,
                }
            }
            if let Some(b) = bar {
                b.finish_and_clear();
            }
        });
        Self {
            stop,
            task: Some(task),
        }
    }

    /// Stop and clear the display.
    pub async fn finish(mut self) {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// The campaign's time left: this cell's (measured pace, or its estimate
/// until there is one) plus everything after it.
fn campaign_left_s(cell_left: Option<f64>, c: CampaignEta, elapsed: f64) -> f64 {
    cell_left.unwrap_or((c.estimate_s - elapsed).max(0.0)) + c.rest_s
}

/// Seconds left, from the request count or the duration, whichever is known.
fn eta_s(done: u64, total: Option<u64>, duration: Option<Duration>, elapsed: f64) -> Option<f64> {
    let by_count = total
        .filter(|_| done > 0)
        .map(|n| elapsed / done as f64 * n.saturating_sub(done) as f64);
    let by_time = duration.map(|d| (d.as_secs_f64() - elapsed).max(0.0));
    match (by_count, by_time) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eta_uses_the_tighter_bound() {
        assert_eq!(super::eta_s(10, Some(20), None, 5.0), Some(5.0));
        assert_eq!(
            super::eta_s(10, Some(20), Some(std::time::Duration::from_secs(7)), 5.0),
            Some(2.0)
        );
        assert_eq!(super::eta_s(0, Some(20), None, 1.0), None);
    }

    #[test]
    fn campaign_eta_adds_the_rest_to_this_cells_pace_or_estimate() {
        let c = super::CampaignEta {
            estimate_s: 10.0,
            rest_s: 100.0,
        };
        assert_eq!(super::campaign_left_s(None, c, 4.0), 106.0);
        assert_eq!(super::campaign_left_s(None, c, 14.0), 100.0);
        assert_eq!(super::campaign_left_s(Some(2.0), c, 4.0), 102.0);
    }
}
