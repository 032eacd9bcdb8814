//! A running view of a level for progress display only; stored numbers are
//! always recomputed from raw records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use hdrhistogram::Histogram;

/// Counters and a TTFT histogram updated as requests go out and finish;
/// the cell's timeline samples them too.
pub struct LiveView {
    /// When the measured part started (after any warm-up).
    pub epoch: OnceLock<std::time::Instant>,
    /// Measured units sent: requests, or sessions of several turns.
    pub sent: AtomicU64,
    /// Measured units finished.
    pub units_done: AtomicU64,
    /// Requests finished (ok or failed).
    pub done: AtomicU64,
    /// Requests failed.
    pub failed: AtomicU64,
    /// Output tokens of completed requests.
    pub output_tokens: AtomicU64,
    ttft_us: Mutex<Histogram<u64>>,
}

impl Default for LiveView {
    fn default() -> Self {
        Self {
            epoch: OnceLock::new(),
            sent: AtomicU64::new(0),
            units_done: AtomicU64::new(0),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            output_tokens: AtomicU64::new(0),
            ttft_us: Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds"),
            ),
        }
    }
}

impl LiveView {
    /// Mark the start of the measured part (the first call wins).
    pub fn start(&self, at: std::time::Instant) {
        let _ = self.epoch.set(at);
    }

    /// Account for one request sent.
    pub fn sent_one(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Account for one unit finished, whatever its requests' outcomes.
    pub fn unit_done(&self) {
        self.units_done.fetch_add(1, Ordering::Relaxed);
    }

    /// Units sent and not yet finished.
    pub fn in_flight(&self) -> u64 {
        self.sent
            .load(Ordering::Relaxed)
            .saturating_sub(self.units_done.load(Ordering::Relaxed))
    }

    /// Account for one finished request.
    pub fn record(&self, ok: bool, ttft_ms: Option<f64>, output_tokens: u64) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.output_tokens
            .fetch_add(output_tokens, Ordering::Relaxed);
        if let Some(t) = ttft_ms {
            if let Ok(mut h) = self.ttft_us.lock() {
                let _ = h.record(((t * 1000.0) as u64).max(1));
            }
        }
    }

    /// Median TTFT so far, in ms.
    pub fn ttft_p50_ms(&self) -> Option<f64> {
        let h = self.ttft_us.lock().ok()?;
        (!h.is_empty()).then(|| h.value_at_quantile(0.5) as f64 / 1000.0)
    }
}
