//! Per-cell telemetry: what the engine itself says about a cell.
//!
//! Around each cell the engine's Prometheus `/metrics` is scraped and the
//! counter deltas are mapped to common fields; speculative acceptance is
//! taken, in order of preference, from the engine's per-response draft
//! counts (llama.cpp `timings`) summed over the cell's requests, or from
//! the metrics deltas — never from a cumulative server-wide average. The
//! server log of the current launch is scanned for capacity facts and error
//! lines, and GPUs are sampled with `nvidia-smi` where it exists.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::Endpoint;
use crate::engine::EngineKind;
use crate::load::live::LiveView;
use crate::metrics::level::LevelSummary;
pub use crate::telemetry::cell::{CellSpec, CellTelemetry};
use crate::telemetry::engine_metrics::{
    common_from_delta, spec_acceptance, CommonMetrics, SpecDecodeCounts,
};
use crate::telemetry::gpu::{parse_query_output, query_command, summarize, GpuSample, GpuSummary};
use crate::telemetry::logscan::scan_log;
use crate::telemetry::prometheus::{self, Scrape};
use crate::telemetry::timeline::{EngineGauges, Recorder, Sample, Timeline};

/// Scrape `/metrics`, or say why not.
pub async fn scrape(endpoint: &Endpoint, engine: EngineKind) -> Result<Scrape, String> {
    scrape_within(endpoint, engine, Duration::from_secs(10)).await
}

/// Scrape `/metrics` if it answers within `limit`, or say why not.
pub async fn scrape_within(
    endpoint: &Endpoint,
    engine: EngineKind,
    limit: Duration,
) -> Result<Scrape, String> {
    let (status, body) = endpoint
        .get(engine.metrics_path(), limit)
        .await
        .map_err(|f| f.detail)?;
    if status != 200 {
        return Err(format!("{} answered HTTP {status}", engine.metrics_path()));
    }
    prometheus::parse(&String::from_utf8_lossy(&body)).map_err(|e| e.to_string())
}

/// What the client received over a cell, which the engine's counters must cover.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientTotals {
    /// Output tokens of the cell's completed requests.
    pub output_tokens: f64,
    /// Completed requests.
    pub finished_requests: f64,
}

impl ClientTotals {
    /// The totals of a measured cell.
    pub fn of(summary: &LevelSummary) -> Self {
        Self {
            output_tokens: summary
                .requests
                .iter()
                .filter(|r| r.is_ok())
                .filter_map(|r| r.credible_output_tokens())
                .sum::<u64>() as f64,
            finished_requests: summary.completed as f64,
        }
    }
}

/// How a metrics delta falls short of what the client received, or `None`
/// when it covers it (or the engine does not export the counter).
///
/// The counters also see warm-up and probe requests, so they may exceed the
/// client's totals; only falling short means the scrape missed part of the cell.
pub fn shortfall(metrics: &CommonMetrics, want: ClientTotals) -> Option<String> {
    let mut gaps = Vec::new();
    if let Some(g) = metrics.generation_tokens {
        if g < want.output_tokens {
            gaps.push(format!(
                "generation_tokens delta {g} < {} output tokens received",
                want.output_tokens
            ));
        }
    }
    if let Some(f) = metrics.requests_finished {
        if f < want.finished_requests {
            gaps.push(format!(
                "requests_finished delta {f} < {} requests completed",
                want.finished_requests
            ));
        }
    }
    (!gaps.is_empty()).then(|| gaps.join(", "))
}

/// How long the after-cell scrape may wait for the engine's counters.
#[derive(Debug, Clone, Copy)]
pub struct Settle {
    /// Pause before the first re-scrape; it doubles after each.
    pub first_delay: Duration,
    /// Give up after this long in all.
    pub limit: Duration,
    /// Give up sooner when the counters stopped changing for this long.
    pub quiet: Duration,
}

impl Settle {
    /// The runner's bounds: counters that lag by a scheduling hiccup catch
    /// up within milliseconds; ones that differ by definition never do, and
    /// must not cost more than about a second per cell.
    pub const RUNNER: Settle = Settle {
        first_delay: Duration::from_millis(20),
        limit: Duration::from_secs(2),
        quiet: Duration::from_secs(1),
    };
}

/// The after-cell scrape: re-scraped with backoff until the counter deltas
/// since `before` cover what the client received, the counters stop
/// changing, or `settle.limit` passes. Returns the last scrape and, when the
/// counters never caught up, a note saying by how much.
///
/// Engines may update their counters a moment after the response that ends
/// a request has reached the client (llama.cpp answers `/metrics` from a
/// worker thread while its main loop may still be finishing the slot), so a
/// single scrape right after the last response can miss the last request.
pub async fn scrape_settled(
    endpoint: &Endpoint,
    engine: EngineKind,
    before: &Result<Scrape, String>,
    want: ClientTotals,
    settle: Settle,
) -> (Result<Scrape, String>, Option<String>) {
    let start = tokio::time::Instant::now();
    let mut delay = settle.first_delay;
    let mut last: Option<CommonMetrics> = None;
    let mut last_change = start;
    loop {
        let after = scrape(endpoint, engine).await;
        let (Some(kind), Ok(b), Ok(a)) = (engine.telemetry(), before, &after) else {
            return (after, None);
        };
        let now_metrics = common_from_delta(kind, &prometheus::delta(b, a));
        let Some(gap) = shortfall(&now_metrics, want) else {
            return (after, None);
        };
        let now = tokio::time::Instant::now();
        let changed = last.as_ref().is_none_or(|l| {
            (l.generation_tokens, l.requests_finished)
                != (now_metrics.generation_tokens, now_metrics.requests_finished)
        });
        if changed {
            last_change = now;
        }
        last = Some(now_metrics);
        let waited = now - start;
        if waited >= settle.limit || (!changed && now - last_change >= settle.quiet) {
            return (
                after,
                Some(format!(
                    "engine counters did not cover the cell after {:.1} s: {gap}",
                    waited.as_secs_f64()
                )),
            );
        }
        tokio::time::sleep(delay.min(settle.limit - waited)).await;
        delay = delay.saturating_mul(2);
    }
}

/// Scrapes a sampler may have waiting for an answer at once; past it a
/// tick records the client's side alone rather than pile up requests on a
/// slow engine.
const MAX_PENDING_SCRAPES: usize = 4;

/// The most GPU samples kept for a cell's summary; past it every other one
/// is dropped, so a long cell costs bounded memory.
const MAX_GPU_SAMPLES: usize = 16_384;

/// What a cell's sampler watches.
pub struct SamplerSetup {
    /// The server's endpoint, whose `/metrics` is scraped.
    pub endpoint: Endpoint,
    /// Its engine, for the metric names.
    pub engine: EngineKind,
    /// The GPUs the server holds (none: no `nvidia-smi`).
    pub gpus: Vec<u32>,
    /// Sampling interval, ms; 0 keeps no timeline (GPUs are still
    /// sampled, every second).
    pub interval_ms: u64,
    /// The client's running counts.
    pub live: Arc<LiveView>,
}

#[derive(Default)]
struct SamplerState {
    recorder: Option<Recorder>,
    gpu: Vec<GpuSample>,
    gpu_note: Option<String>,
}

impl SamplerState {
    fn keep_gpu(&mut self, mut samples: Vec<GpuSample>) {
        self.gpu.append(&mut samples);
        if self.gpu.len() > MAX_GPU_SAMPLES {
            let mut i = 0;
            self.gpu.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
    }
}

/// What a cell's sampler gathered.
#[derive(Default)]
pub struct Sampled {
    /// The timeline, unless sampling was off.
    pub timeline: Option<Timeline>,
    /// Per-GPU summaries of the server's GPUs.
    pub gpus: Vec<GpuSummary>,
    /// Why there are no GPU samples.
    pub gpu_note: Option<String>,
}

/// Sampling in the background while a cell runs: the engine's gauges, the
/// GPUs and the client's counts, on one clock.
pub struct CellSampler {
    state: Arc<Mutex<SamplerState>>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    started: std::time::Instant,
    live: Arc<LiveView>,
}

/// One `nvidia-smi` query of the GPUs, or why it failed.
async fn query_gpus() -> Result<Vec<GpuSample>, String> {
    let argv = query_command();
    let o = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("nvidia-smi is not available ({e}); no GPU samples"))?;
    if !o.status.success() {
        return Err(format!(
            "nvidia-smi failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    parse_query_output(&String::from_utf8_lossy(&o.stdout)).map_err(|e| e.to_string())
}

impl CellSampler {
    /// Sample until [`finish`](Self::finish).
    pub fn start(setup: SamplerSetup) -> Self {
        let started = std::time::Instant::now();
        let state = Arc::new(Mutex::new(SamplerState {
            recorder: (setup.interval_ms > 0).then(|| Recorder::new(setup.interval_ms)),
            ..SamplerState::default()
        }));
        let stop = CancellationToken::new();
        let period = Duration::from_millis(match setup.interval_ms {
            0 => 1000,
            ms => ms,
        });
        let timeline = setup.interval_ms > 0;
        let watch_gpus = !setup.gpus.is_empty();
        let task = (timeline || watch_gpus).then(|| {
            let (state, stop, live) = (state.clone(), stop.clone(), setup.live.clone());
            let (endpoint, engine, gpus) = (setup.endpoint, setup.engine, setup.gpus);
            tokio::spawn(async move {
                // Every tick due is taken, late ones at once, and stamped
                // with the moment it was due: a busy client reads its
                // sample a little late rather than leave a gap.
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                let mut pending = tokio::task::JoinSet::new();
                loop {
                    // Ticks that came due before the stop still count.
                    let due = tokio::select! {
                        biased;
                        due = tick.tick() => due,
                        _ = stop.cancelled() => break,
                    };
                    while pending.try_join_next().is_some() {}
                    let base = Sample {
                        t_s: due
                            .into_std()
                            .saturating_duration_since(started)
                            .as_secs_f64(),
                        in_flight: live.in_flight(),
                        sent: live.sent.load(std::sync::atomic::Ordering::Relaxed),
                        ..Sample::default()
                    };
                    let gpu_on =
                        watch_gpus && state.lock().map(|s| s.gpu_note.is_none()).unwrap_or(false);
                    if pending.len() >= MAX_PENDING_SCRAPES {
                        record(&state, base, None);
                        continue;
                    }
                    let (state, endpoint, gpus) = (state.clone(), endpoint.clone(), gpus.clone());
                    pending.spawn(async move {
                        let scrape_gauges = async {
                            let names = engine.telemetry()?;
                            let s = scrape_within(&endpoint, engine, period * 4).await.ok()?;
                            Some(EngineGauges::of(names, &s))
                        };
                        let query = async {
                            match gpu_on {
                                true => Some(query_gpus().await),
                                false => None,
                            }
                        };
                        let (engine, gpu) = tokio::join!(scrape_gauges, query);
                        let mut sample = Sample {
                            engine: engine.unwrap_or_default(),
                            ..base
                        };
                        let gpu = gpu.map(|g| {
                            g.map(|all| {
                                all.into_iter()
                                    .filter(|s| gpus.contains(&s.index))
                                    .collect::<Vec<_>>()
                            })
                        });
                        if let Some(Ok(mine)) = &gpu {
                            gpu_columns(&mut sample, mine);
                        }
                        record(&state, sample, gpu);
                    });
                }
                // A scrape still out when the cell ends has a moment to land.
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    while pending.join_next().await.is_some() {}
                })
                .await;
            })
        });
        Self {
            state,
            stop,
            task,
            started,
            live: setup.live,
        }
    }

    /// Stop sampling: the timeline on the level's clock and the GPUs' summaries.
    pub async fn finish(mut self) -> Sampled {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        let state = match self.state.lock() {
            Ok(mut s) => std::mem::take(&mut *s),
            Err(_) => SamplerState::default(),
        };
        let origin = self.live.epoch.get().map_or(0.0, |e| {
            e.saturating_duration_since(self.started).as_secs_f64()
        });
        Sampled {
            timeline: state.recorder.map(|r| r.finish(origin)),
            gpus: summarize(&state.gpu),
            gpu_note: state.gpu_note,
        }
    }
}

/// The server's GPUs at one sample: power and memory summed, utilisation
/// averaged, each over the GPUs that reported it.
fn gpu_columns(sample: &mut Sample, mine: &[GpuSample]) {
    let sum = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>());
    let power: Vec<f64> = mine.iter().filter_map(|s| s.power_w).collect();
    let memory: Vec<f64> = mine
        .iter()
        .filter_map(|s| s.memory_used_mib)
        .map(|m| m as f64)
        .collect();
    let util: Vec<f64> = mine.iter().filter_map(|s| s.utilization_pct).collect();
    sample.gpu_power_w = sum(&power);
    sample.gpu_memory_mib = sum(&memory);
    sample.gpu_util_pct = sum(&util).map(|t| t / util.len() as f64);
}

/// Keep a sample and what `nvidia-smi` said with it.
fn record(
    state: &Mutex<SamplerState>,
    sample: Sample,
    gpu: Option<Result<Vec<GpuSample>, String>>,
) {
    let Ok(mut s) = state.lock() else { return };
    if let Some(r) = s.recorder.as_mut() {
        r.push(sample);
    }
    match gpu {
        Some(Ok(mine)) => s.keep_gpu(mine),
        Some(Err(e)) => {
            s.gpu_note.get_or_insert(e);
        }
        None => {}
    }
}

/// Put a cell's telemetry together.
pub fn assemble(
    engine: EngineKind,
    speculative: bool,
    before: Result<Scrape, String>,
    after: Result<Scrape, String>,
    summary: &LevelSummary,
    log_text: &str,
) -> CellTelemetry {
    let mut t = CellTelemetry::default();
    let kind = engine.telemetry();
    match (kind, before, after) {
        (Some(k), Ok(b), Ok(a)) => {
            t.metrics = Some(common_from_delta(k, &prometheus::delta(&b, &a)))
        }
        (None, _, _) => {
            t.metrics_note = Some(format!(
                "no metric names are known for the `{engine}` engine"
            ))
        }
        (_, Err(e), _) | (_, _, Err(e)) => t.metrics_note = Some(format!("no metrics: {e}")),
    }
    // Per-request counts are exact for this cell; prefer them.
    if let (Some(drafted), Some(accepted)) = (summary.draft_tokens, summary.accepted_draft_tokens) {
        let counts = SpecDecodeCounts {
            drafts: None,
            draft_tokens: Some(drafted as f64),
            accepted_tokens: Some(accepted as f64),
            ..Default::default()
        };
        t.spec = Some(CellSpec {
            source: "response timings (summed over the cell's requests)".into(),
            acceptance: spec_acceptance(&counts),
            counts,
        });
    } else if let Some(counts) = t.metrics.as_ref().and_then(|m| m.spec.clone()) {
        let drafted =
            counts.drafts.unwrap_or(0.0) > 0.0 || counts.draft_tokens.unwrap_or(0.0) > 0.0;
        // A speculative server that drafted nothing is a finding too; a
        // plain server's zero counters are not.
        if drafted || speculative {
            t.spec = Some(CellSpec {
                source: "metrics delta over the cell".into(),
                acceptance: spec_acceptance(&counts),
                counts,
            });
        }
    }
    if let Some(k) = kind {
        if !log_text.is_empty() {
            t.log = Some(scan_log(k, log_text));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::openai::Api;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A llama.cpp-style `/metrics` on 127.0.0.1 whose generated-token counter
    /// reads `early` for the first `late_after` scrapes and `late` after them,
    /// like a server that credits the last request after its response went out.
    async fn lagging_metrics(early: u64, late: u64, late_after: u64) -> (String, Arc<AtomicU64>) {
        let scrapes = Arc::new(AtomicU64::new(0));
        let seen = scrapes.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let seen = seen.clone();
                async move {
                    let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                    let v = if n > late_after { late } else { early };
                    format!(
                        "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {v}\n"
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, scrapes)
    }

    fn before(tokens: u64) -> Result<Scrape, String> {
        prometheus::parse(&format!(
            "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {tokens}\n"
        ))
        .map_err(|e| e.to_string())
    }

    fn predicted(s: &Result<Scrape, String>) -> f64 {
        s.as_ref()
            .unwrap()
            .sum("llamacpp:tokens_predicted_total")
            .unwrap()
    }

    const FAST: Settle = Settle {
        first_delay: Duration::from_millis(1),
        limit: Duration::from_secs(30),
        quiet: Duration::from_secs(30),
    };

    const WANT: ClientTotals = ClientTotals {
        output_tokens: 192.0,
        finished_requests: 3.0,
    };

    #[tokio::test]
    async fn the_after_scrape_waits_for_counters_that_credit_the_last_request_late() {
        // 1000 before the cell; the first two scrapes after it still miss the
        // third request's 64 tokens.
        let (url, scrapes) = lagging_metrics(1128, 1192, 2).await;
        let ep = Endpoint::new(&url, Api::Chat).unwrap();
        let (after, note) =
            scrape_settled(&ep, EngineKind::Llamacpp, &before(1000), WANT, FAST).await;
        assert_eq!(predicted(&after) - 1000.0, 192.0);
        assert_eq!(note, None);
        assert_eq!(scrapes.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn counters_that_cover_the_cell_are_scraped_once() {
        // More than the client saw (a warm-up request) is coverage too.
        let (url, scrapes) = lagging_metrics(1208, 1208, 0).await;
        let ep = Endpoint::new(&url, Api::Chat).unwrap();
        let (after, note) =
            scrape_settled(&ep, EngineKind::Llamacpp, &before(1000), WANT, FAST).await;
        assert_eq!(predicted(&after), 1208.0);
        assert_eq!(note, None);
        assert_eq!(scrapes.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn counters_that_never_catch_up_leave_a_note_once_they_stop_changing() {
        let (url, scrapes) = lagging_metrics(1128, 1128, 0).await;
        let ep = Endpoint::new(&url, Api::Chat).unwrap();
        let settle = Settle {
            quiet: Duration::ZERO,
            ..FAST
        };
        let (after, note) =
            scrape_settled(&ep, EngineKind::Llamacpp, &before(1000), WANT, settle).await;
        assert_eq!(predicted(&after), 1128.0);
        let note = note.expect("a note");
        assert!(
            note.contains("generation_tokens delta 128 < 192 output tokens received"),
            "{note}"
        );
        // Unchanged on the second scrape, with no quiet time to wait: done.
        assert_eq!(scrapes.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn the_wait_is_bounded_even_while_counters_keep_moving() {
        let (url, scrapes) = lagging_metrics(1100, 1150, 1).await;
        let ep = Endpoint::new(&url, Api::Chat).unwrap();
        let settle = Settle {
            limit: Duration::ZERO,
            ..FAST
        };
        let (after, note) =
            scrape_settled(&ep, EngineKind::Llamacpp, &before(1000), WANT, settle).await;
        assert_eq!(predicted(&after), 1100.0);
        assert!(note.unwrap().contains("100 < 192"));
        assert_eq!(scrapes.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn without_a_before_scrape_there_is_nothing_to_wait_for() {
        let (url, scrapes) = lagging_metrics(1128, 1192, 5).await;
        let ep = Endpoint::new(&url, Api::Chat).unwrap();
        let (after, note) = scrape_settled(
            &ep,
            EngineKind::Llamacpp,
            &Err("no metrics".into()),
            WANT,
            FAST,
        )
        .await;
        assert!(after.is_ok());
        assert_eq!(note, None);
        assert_eq!(scrapes.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_sample_sums_power_and_memory_and_averages_utilisation_over_the_servers_gpus() {
        // The last recorded block: the 3090 at 145.33 W, 1 MiB, 26 %; the
        // A6000 at 297.69 W, 38742 MiB, 100 %.
        let blocks = crate::telemetry::gpu::tests::recorded_power_blocks();
        let gpus = parse_query_output(&blocks[3].1).unwrap();
        let mut s = Sample::default();
        gpu_columns(&mut s, &gpus);
        assert!((s.gpu_power_w.unwrap() - 443.02).abs() < 1e-9);
        assert_eq!(s.gpu_memory_mib, Some(38743.0));
        assert_eq!(s.gpu_util_pct, Some(63.0));
        // One GPU of the two is the server's: only its figures.
        let mut one = Sample::default();
        gpu_columns(&mut one, &gpus[..1]);
        assert_eq!(
            (one.gpu_power_w, one.gpu_memory_mib, one.gpu_util_pct),
            (Some(145.33), Some(1.0), Some(26.0))
        );
        // Nothing reported: nothing, never zero.
        let mut none = Sample::default();
        gpu_columns(&mut none, &[]);
        assert_eq!(none.gpu_power_w, None);
    }

    #[test]
    fn shortfall_names_each_counter_below_the_client_and_ignores_absent_ones() {
        let delta = |text: &str| {
            common_from_delta(
                crate::telemetry::TelemetryEngine::Vllm,
                &prometheus::delta(
                    &prometheus::parse("").unwrap(),
                    &prometheus::parse(text).unwrap(),
                ),
            )
        };
        let both = "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 192\n# TYPE vllm:request_success_total counter\nvllm:request_success_total 2\n";
        assert_eq!(
            shortfall(&delta(both), WANT).as_deref(),
            Some("requests_finished delta 2 < 3 requests completed")
        );
        let tokens_only =
            "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 191\n";
        assert_eq!(
            shortfall(&delta(tokens_only), WANT).as_deref(),
            Some("generation_tokens delta 191 < 192 output tokens received")
        );
        assert_eq!(shortfall(&delta(""), WANT), None);
    }
}
