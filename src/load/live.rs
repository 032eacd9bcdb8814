//! A running view of a level for progress display only; stored numbers are
//! always recomputed from raw records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hdrhistogram::Histogram;

/// Counters and a TTFT histogram updated as requests finish.
pub struct LiveView {
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
