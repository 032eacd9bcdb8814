//! How well the SLO search stands in for an exhaustive sweep (issue 15).
//!
//! Run with `cargo bench --bench search`. Measured figures:
//!
//! Measured over 40 trials × 6 configs, bounds `ttft_p99=1s,tpot_p50=20ms`,
//! targets (1) ≥ 95 %, (2) ≥ 95 %, (3) ≤ 40 %:
//!
//! | grid | stop-early | (1) boundary within one step of the sweep's | (2) same winner as the sweep | (3) server time: request·s / seconds | probes per config |
//! |---|---|---|---|---|---|
//! | concurrency 2..128 step 2 | off | 97.5 % | 100 % | 16.7 % / 19.9 % | 13.8 of 64 |
//! | concurrency 2..128 step 2 | on | 97.6 % of 123 finished (117 stopped) | 100 % | 9.8 % / 14.1 % | 10.3 |
//! | rate 1..64 step 1 | off | 97.5 % | 100 % | 8.7 % / 21.6 % | 13.7 of 64 |
//! | rate 1..64 step 1 | on | 99.2 % of 121 finished (119 stopped) | 100 % | 5.8 % / 17.2 % | 10.2 |
//! | concurrency 4..128 step 4 | off | 100 % | 100 % | 27.5 % / 31.2 % | 11.5 of 32 |
//! | concurrency 4..128 step 4 | on | 100 % of 120 finished (120 stopped) | 100 % | 16.7 % / 21.9 % | 8.6 |
//!
//! (The step-4 rows come from the same run with `FULL.conc` set to
//! (4, 128, 4).) Before the search confirmed the points below its bracket
//! and widened the stop-early interval, the step-2 concurrency figures were
//! 77.1 %, 90.0 % and 12.5 % / 15.9 % (stop-early: 78.6 %, 87.5 %, 7.9 %),
//! rate 72.5 %, 90.0 %, 7.1 %, and step 4 93.3 %, 95.0 %, 21.2 %.
//!
//! Why bisection alone missed: a 3 % probe-wide slowdown moves TPOT p50 as
//! much as about two concurrency grid steps do, so near its boundary a
//! config passes and fails out of order. The sweep takes the first failure;
//! bisection took whichever crossing it landed on, and the first failure
//! hid in the grid points it skipped just below. The search now probes the
//! `CONFIRM_BELOW` (4) points below its lowest failure and moves down to
//! any failure found there (replaying the same cells, three points gave
//! 94.6 % / 92.5 %, five 98.8 % / 100 % at 18.0 % of request·s). The
//! stop-early rule's interval resamples requests, not the probe-wide
//! slowdown that made a probe fail, so once
//! in 40 trials it dropped the config that would have won; `cannot_win`
//! now widens both intervals by `PROBE_SPREAD` (5 %, in quadrature), which
//! keeps the winner in every trial at 0.1 point of request·s (3 % did too).
//!
//! Agreeing with the sweep is not being right: the first failure of a noisy
//! sweep sits below the noiseless boundary, and the search now inherits
//! that. Against the noiseless boundary both are within one step for
//! 69.6 % of configs (the bisection-only search was at 77.1 %; rate 68.8 %
//! and 68.3 %, step 4 88.3 % for both), and both pick the noiseless winner
//! in 90 % of trials (bisection alone 85 %; rate 85 %, step 4 95 %). The two
//! leading configs are 5 % apart. Both comparisons are printed.
//!
//! `--explain` prints one noiseless trial's grid, level by level.
//!
//! Every probe is a deterministic discrete-event simulation of `servebench
//! sim` (virtual time, no clock, no sleeping) following the simulator's own
//! rules: FIFO admission on running slots and KV room, prefills serialized
//! in admission order, then each running sequence decoding on its own step
//! clock whose step time depends on how many sequences are running, with
//! speculative acceptance drawn by the simulator's `draw_accepted`. The
//! requests become real `RequestRecord`s and a real `LevelSummary`
//! (`metrics::level::summarize`), judged by `SearchSpec::judge` and valued by
//! `Throughput::of`: the product code is what is measured here.
//!
//! Measurement noise is realistic, not zero: each probe multiplies its step
//! and prefill times by a log-normal factor (σ = 3 %) and every decode step
//! by its own log-normal jitter (σ = 5 %). The noise seed derives from
//! (trial seed, config, grid index), so the exhaustive sweep and the search
//! read the very same measurement of a probe, as a stored cell reused by
//! both would be.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) a reduced
//! version runs instead and asserts the invariants: on a noiseless trial and
//! wherever a config's pass/fail sequence is monotone, the search lands on
//! the exhaustive boundary exactly; every search answer is a measured pass
//! with a measured failure one grid step up; the search costs less server
//! time than the sweep.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use servebench::client::record::RequestRecord;
use servebench::load::driver::LevelRun;
use servebench::load::schedule::{Arrival, ArrivalClock, LoadShape};
use servebench::metrics::level::{summarize, LevelSummary};
use servebench::search::{
    cannot_win, next_step, parse_bounds, Axis, LevelFacts, Outcome, SearchSpec, Step, Throughput,
};
use servebench::sim::model::{draw_accepted, prefill_ms, step_ms};
use servebench::sim::SimConfig;

/// The latency bounds every config is searched against.
const BOUNDS: &str = "ttft_p99=1s,tpot_p50=20ms";
/// Per-probe log-normal factor on step and prefill times.
const PROBE_SIGMA: f64 = 0.03;
/// Per-step log-normal jitter on decode steps.
const STEP_SIGMA: f64 = 0.05;

/// One server config of the matrix: a simulator model and the GPUs it holds.
#[derive(Clone)]
struct Server {
    name: &'static str,
    sim: SimConfig,
    gpus: u32,
}

fn server(
    name: &'static str,
    gpus: u32,
    decode_step_ms: f64,
    per_seq_ms: f64,
    max_running: u32,
    spec: Option<(u32, f64, f64)>,
) -> Server {
    let mut sim = SimConfig {
        prefill_tok_s: 100_000.0 * f64::from(gpus),
        ttft_overhead_ms: 5.0,
        decode_step_ms,
        decode_step_per_seq_ms: per_seq_ms,
        max_running_requests: max_running,
        kv_capacity_tokens: 262_144,
        ..SimConfig::default()
    };
    if let Some((draft, acceptance, factor)) = spec {
        sim.spec_draft_tokens = draft;
        sim.spec_acceptance = acceptance;
        sim.spec_step_factor = factor;
    }
    Server { name, sim, gpus }
}

/// A matrix as a campaign would sweep it: engines' batch limits, speculative
/// decoding with different drafts, tensor parallelism.
fn servers() -> Vec<Server> {
    vec![
        server("ar tp1 mrr48", 1, 8.0, 0.15, 48, None),
        server("ar tp1 mrr128", 1, 8.0, 0.15, 128, None),
        server("ar tp2 mrr256", 2, 6.0, 0.12, 256, None),
        server("eagle k3 p0.7", 1, 8.0, 0.37, 128, Some((3, 0.7, 1.3))),
        server("eagle k5 p0.6", 1, 8.0, 0.5, 128, Some((5, 0.6, 1.5))),
        server("ngram k2 p0.8 tp2", 2, 5.0, 0.3, 256, Some((2, 0.8, 1.2))),
    ]
}

/// How big a run is.
#[derive(Clone, Copy)]
struct Scale {
    trials: u64,
    /// Trial 0 without measurement noise (the reduced check's reference).
    noiseless_first: bool,
    conc: (f64, f64, f64),
    rate: Option<(f64, f64, f64)>,
    /// Output tokens are drawn from this range.
    output: (u64, u64),
    /// Closed loop: requests per user; open loop: seconds of arrivals.
    per_user: usize,
    rate_seconds: f64,
    min_requests: usize,
}

const FULL: Scale = Scale {
    trials: 40,
    noiseless_first: false,
    conc: (2.0, 128.0, 2.0),
    rate: Some((1.0, 64.0, 1.0)),
    output: (64, 192),
    per_user: 8,
    rate_seconds: 16.0,
    min_requests: 64,
};

const QUICK: Scale = Scale {
    trials: 3,
    noiseless_first: true,
    conc: (4.0, 128.0, 4.0),
    rate: None,
    output: (24, 72),
    per_user: 2,
    rate_seconds: 4.0,
    min_requests: 32,
};

/// What a stored cell keeps of a probe.
#[derive(Clone, Copy)]
struct Cell {
    passed: bool,
    thr: Throughput,
    /// Wall time of the probe (first dispatch to last completion), s.
    seconds: f64,
    /// Requests in flight integrated over the probe, request·s.
    request_seconds: f64,
    tpot_p50: f64,
    ttft_p99: f64,
}

fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The workload of a trial, the same prompts for every config and level,
/// as a campaign's dataset is.
fn workload(seed: u64, n: usize, output: (u64, u64)) -> Vec<(u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, 0x77));
    (0..n)
        .map(|_| {
            (
                rng.random_range(128..=1024),
                rng.random_range(output.0..=output.1),
            )
        })
        .collect()
}

/// How requests arrive at a probe.
enum Load {
    /// Closed loop: this many users, `n` requests in all.
    Users(u32, usize),
    /// Open loop: these arrival times, ms.
    Arrivals(Vec<f64>),
}

struct Req {
    sent: f64,
    prompt: u64,
    target: u64,
    kv: u64,
    first: f64,
    emitted: u64,
    next_at: f64,
}

/// One probe of `srv`, simulated in virtual time.
fn simulate(srv: &Server, load: &Load, work: &[(u64, u64)], noise: bool, seed: u64) -> LevelRun {
    let cfg = &srv.sim;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (factor, jitter) = if noise {
        let z: f64 = StandardNormal.sample(&mut rng);
        ((PROBE_SIGMA * z).exp(), STEP_SIGMA)
    } else {
        (1.0, 0.0)
    };
    let n = match load {
        Load::Users(_, n) => *n,
        Load::Arrivals(a) => a.len(),
    };
    let mut reqs: Vec<Req> = Vec::with_capacity(n);
    // Events: (time bits, order, kind, request); times are never negative,
    // so their bit patterns sort as the times do.
    let mut events: BinaryHeap<Reverse<(u64, u64, u8, usize)>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, t: f64, kind: u8, r: usize| {
        order += 1;
        events.push(Reverse((t.to_bits(), order, kind, r)));
    };
    const ARRIVE: u8 = 0;
    const TOKEN: u8 = 1;
    let mut queue: VecDeque<usize> = VecDeque::new();
    let (mut running, mut kv_used, mut prefill_free) = (0u64, 0u64, 0.0f64);
    let mut records = Vec::with_capacity(n);
    let mut sent = 0usize;
    let arrive = |reqs: &mut Vec<Req>, queue: &mut VecDeque<usize>, t: f64| {
        let (prompt, target) = work[reqs.len() % work.len()];
        reqs.push(Req {
            sent: t,
            prompt,
            target,
            kv: (prompt + target).min(cfg.kv_capacity_tokens),
            first: 0.0,
            emitted: 0,
            next_at: 0.0,
        });
        queue.push_back(reqs.len() - 1);
    };
    match load {
        Load::Users(users, _) => {
            for _ in 0..(*users as usize).min(n) {
                arrive(&mut reqs, &mut queue, 0.0);
                sent += 1;
            }
        }
        Load::Arrivals(times) => {
            for (i, &t) in times.iter().enumerate() {
                push(&mut events, t, ARRIVE, i);
            }
        }
    }
    let mut now = 0.0f64;
    let mut end = 0.0f64;
    loop {
        // Admission: FIFO, the head waits for a running slot and its KV room.
        while let Some(&r) = queue.front() {
            if running >= u64::from(cfg.max_running_requests)
                || kv_used + reqs[r].kv > cfg.kv_capacity_tokens
            {
                break;
            }
            queue.pop_front();
            running += 1;
            kv_used += reqs[r].kv;
            let start = now.max(prefill_free);
            prefill_free = start + prefill_ms(cfg, reqs[r].prompt) * factor;
            push(&mut events, prefill_free + cfg.ttft_overhead_ms, TOKEN, r);
        }
        let Some(Reverse((bits, _, kind, r))) = events.pop() else {
            break;
        };
        now = f64::from_bits(bits);
        if kind == ARRIVE {
            arrive(&mut reqs, &mut queue, now);
            continue;
        }
        let q = &mut reqs[r];
        if q.emitted == 0 {
            q.first = now;
            q.emitted = 1;
        } else {
            let mut k = 1;
            if cfg.spec_draft_tokens > 0 {
                let room = (q.target - q.emitted).saturating_sub(1) as u32;
                k += u64::from(
                    draw_accepted(&mut rng, cfg.spec_draft_tokens, cfg.spec_acceptance).min(room),
                );
            }
            q.emitted += k.min(q.target - q.emitted);
        }
        if q.emitted < q.target {
            let z: f64 = if jitter > 0.0 {
                StandardNormal.sample(&mut rng)
            } else {
                0.0
            };
            let step = step_ms(cfg, running) * factor * (jitter * z).exp();
            q.next_at = if q.emitted == 1 { now } else { q.next_at } + step;
            let at = q.next_at;
            push(&mut events, at, TOKEN, r);
            continue;
        }
        running -= 1;
        kv_used -= q.kv;
        end = end.max(now);
        let mut rec = RequestRecord::new(q.sent, q.sent);
        rec.ttft_ms = Some(q.first - q.sent);
        rec.e2e_ms = Some(now - q.sent);
        rec.input_tokens = Some(q.prompt);
        rec.output_tokens = Some(q.target);
        rec.requested_output_tokens = Some(q.target);
        // Chunk times are left out: no bound here is on ITL, and pooling
        // every gap would cost more than the rest of the probe.
        rec.tokens_per_chunk_from_server = true;
        records.push(rec);
        if let Load::Users(..) = load {
            if sent < n {
                arrive(&mut reqs, &mut queue, now);
                sent += 1;
            }
        }
    }
    records.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
    LevelRun {
        records,
        duration_s: end / 1000.0,
        warmup_sent: 0,
        warmup_failed: 0,
        cancelled: false,
    }
}

/// The axis a campaign searches and how a grid level becomes a probe.
struct Grid {
    spec: SearchSpec,
    scale: Scale,
}

impl Grid {
    fn new(axis: Axis, (min, max, step): (f64, f64, f64), scale: Scale) -> Grid {
        let spec =
            SearchSpec::new(parse_bounds(BOUNDS).unwrap(), axis, min, max, Some(step)).unwrap();
        Grid { spec, scale }
    }

    fn requests(&self, level: f64) -> usize {
        let n = match self.spec.axis {
            Axis::Concurrency => level as usize * self.scale.per_user,
            Axis::Rate | Axis::TimeScale => (level * self.scale.rate_seconds) as usize,
        };
        n.max(self.scale.min_requests)
    }

    /// Measure grid point `k` of `srv`; the seed fixes every random draw.
    fn measure(&self, srv: &Server, work: &[(u64, u64)], k: u64, noise: bool, seed: u64) -> Cell {
        let level = self.spec.level(k);
        let n = self.requests(level);
        let (load, shape) = match self.spec.axis {
            Axis::Concurrency => (
                Load::Users(level as u32, n),
                LoadShape::Concurrency {
                    value: level as u32,
                },
            ),
            Axis::Rate => {
                let clock = ArrivalClock::new(level, Arrival::Poisson, 1.0, mix(seed, 1)).unwrap();
                let times = clock.take(n).map(|d| d.as_secs_f64() * 1000.0).collect();
                (
                    Load::Arrivals(times),
                    LoadShape::Rate {
                        value: level,
                        arrival: Arrival::Poisson,
                        burstiness: 1.0,
                        max_concurrency: None,
                    },
                )
            }
            Axis::TimeScale => unreachable!("the grids here search concurrency and rate"),
        };
        let run = simulate(srv, &load, work, noise, seed);
        let request_seconds = run.records.iter().filter_map(|r| r.e2e_ms).sum::<f64>() / 1000.0;
        let s: LevelSummary = summarize(shape, run, &[], 0.0, 0);
        let stat = |v: &Option<servebench::metrics::stats::Stats>, p99: bool| {
            v.map_or(f64::NAN, |s| if p99 { s.p99 } else { s.p50 })
        };
        Cell {
            passed: self.spec.judge(&LevelFacts::from(&s)).passed(),
            thr: Throughput::of(&s, srv.gpus, mix(seed, 2)),
            seconds: s.duration_s,
            request_seconds,
            tpot_p50: stat(&s.latency.tpot_ms, false),
            ttft_p99: stat(&s.latency.ttft_ms, true),
        }
    }
}

/// A grid index as a signed position, -1 for "below min".
fn position(spec: &SearchSpec, o: &Outcome) -> i64 {
    o.passing_load()
        .and_then(|l| spec.index_of(l))
        .map_or(-1, |k| k as i64)
}

/// What the exhaustive sweep says of one config.
fn exhaustive(cells: &[Cell]) -> i64 {
    match cells.iter().position(|c| !c.passed) {
        Some(f) => f as i64 - 1,
        None => cells.len() as i64 - 1,
    }
}

/// One config's search: its answer (None when stopped early) and its cost.
struct Searched {
    answer: Option<i64>,
    probes: Vec<u64>,
}

fn search(spec: &SearchSpec, cells: &[Cell], leader: Option<&Throughput>) -> Searched {
    let mut probed = BTreeMap::new();
    let mut probes = Vec::new();
    loop {
        match next_step(spec, &probed) {
            Step::Probe(k) => {
                assert!(!probed.contains_key(&k), "probe {k} asked twice");
                probed.insert(k, cells[k as usize].passed);
                probes.push(k);
                if let (Some(lead), Some((&f, _))) = (leader, probed.iter().find(|(_, &p)| !p)) {
                    if f > 0 && cannot_win(&cells[f as usize].thr, lead) {
                        return Searched {
                            answer: None,
                            probes,
                        };
                    }
                }
            }
            Step::Done(o) => {
                let pos = position(spec, &o);
                // The answer is a measured pass with a measured failure one step up.
                if pos >= 0 {
                    assert!(cells[pos as usize].passed);
                }
                if let Outcome::Boundary { .. } | Outcome::BelowMin { .. } = o {
                    assert!(!cells[(pos + 1) as usize].passed);
                }
                return Searched {
                    answer: Some(pos),
                    probes,
                };
            }
        }
    }
}

fn best(answers: &[Option<i64>], cells: &[Vec<Cell>]) -> Option<usize> {
    let mut win: Option<(usize, f64)> = None;
    for (c, a) in answers.iter().enumerate() {
        if let Some(k) = a.filter(|&k| k >= 0) {
            let v = cells[c][k as usize].thr.per_gpu;
            if win.is_none_or(|(_, w)| v > w) {
                win = Some((c, v));
            }
        }
    }
    win.map(|(c, _)| c)
}

/// One trial's results under one stop-early setting.
#[derive(Default, Clone)]
struct Tally {
    pairs: u64,
    finished: u64,
    within_one: u64,
    exact: u64,
    monotone_exact: (u64, u64),
    trials: u64,
    same_winner: u64,
    /// Per-GPU throughput given up when the winner differs, share of the best.
    regret: Vec<f64>,
    probes: u64,
    seconds: f64,
    request_seconds: f64,
    grid_seconds: f64,
    grid_request_seconds: f64,
    /// Finished searches within one grid step of the noiseless boundary,
    /// and the sweep's boundaries of the same pairs.
    search_near: u64,
    sweep_near: u64,
    search_err: u64,
    sweep_err: u64,
    search_true_winner: u64,
    sweep_true_winner: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.pairs += o.pairs;
        self.finished += o.finished;
        self.within_one += o.within_one;
        self.exact += o.exact;
        self.monotone_exact.0 += o.monotone_exact.0;
        self.monotone_exact.1 += o.monotone_exact.1;
        self.trials += o.trials;
        self.same_winner += o.same_winner;
        self.regret.extend(&o.regret);
        self.probes += o.probes;
        self.seconds += o.seconds;
        self.request_seconds += o.request_seconds;
        self.grid_seconds += o.grid_seconds;
        self.grid_request_seconds += o.grid_request_seconds;
        self.search_near += o.search_near;
        self.sweep_near += o.sweep_near;
        self.search_err += o.search_err;
        self.sweep_err += o.sweep_err;
        self.search_true_winner += o.search_true_winner;
        self.sweep_true_winner += o.sweep_true_winner;
    }
}

/// What one trial yields: a tally per stop-early setting and per-config facts.
struct TrialOut {
    tally: [Tally; 2],
    boundary: Vec<f64>,
    thr: Vec<f64>,
    winner: Option<usize>,
}

/// The boundary without measurement noise: a noiseless sweep up to its
/// first failure, with the per-GPU throughput there.
fn noiseless(grid: &Grid, srv: &Server, work: &[(u64, u64)], seed: u64) -> (i64, f64) {
    let mut at = (-1, 0.0);
    for k in 0..=grid.spec.last_index() {
        let cell = grid.measure(srv, work, k, false, mix(seed, k));
        if !cell.passed {
            break;
        }
        at = (k as i64, cell.thr.per_gpu);
    }
    at
}

fn trial(grid: &Grid, servers: &[Server], seed: u64, noise: bool) -> TrialOut {
    let spec = &grid.spec;
    let last = spec.last_index();
    let most = grid.requests(spec.level(last));
    let work = workload(seed, most, grid.scale.output);
    let cell_seed = |c: usize| mix(seed, c as u64 + 1);
    let cells: Vec<Vec<Cell>> = servers
        .iter()
        .enumerate()
        .map(|(c, srv)| {
            (0..=last)
                .map(|k| grid.measure(srv, &work, k, noise, mix(cell_seed(c), k)))
                .collect()
        })
        .collect();
    let sweep: Vec<i64> = cells.iter().map(|c| exhaustive(c)).collect();
    let sweep_answers: Vec<Option<i64>> = sweep.iter().map(|&t| Some(t)).collect();
    let winner = best(&sweep_answers, &cells);
    let reference: Vec<(i64, f64)> = if noise {
        servers
            .iter()
            .enumerate()
            .map(|(c, srv)| noiseless(grid, srv, &work, cell_seed(c)))
            .collect()
    } else {
        sweep
            .iter()
            .enumerate()
            .map(|(c, &k)| (k, cells[c][k.max(0) as usize].thr.per_gpu))
            .collect()
    };
    let true_winner = reference
        .iter()
        .enumerate()
        .filter(|(_, r)| r.0 >= 0)
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(c, _)| c);
    let grid_seconds: f64 = cells.iter().flatten().map(|c| c.seconds).sum();
    let grid_request_seconds: f64 = cells.iter().flatten().map(|c| c.request_seconds).sum();
    let mut tally: [Tally; 2] = Default::default();
    for (stop_early, t) in tally.iter_mut().enumerate() {
        let mut answers = Vec::new();
        let mut leader: Option<Throughput> = None;
        for (c, cs) in cells.iter().enumerate() {
            let s = search(
                spec,
                cs,
                if stop_early == 1 {
                    leader.as_ref()
                } else {
                    None
                },
            );
            t.pairs += 1;
            t.probes += s.probes.len() as u64;
            for &k in &s.probes {
                t.seconds += cs[k as usize].seconds;
                t.request_seconds += cs[k as usize].request_seconds;
            }
            if let Some(a) = s.answer {
                t.finished += 1;
                t.within_one += u64::from((a - sweep[c]).abs() <= 1);
                t.exact += u64::from(a == sweep[c]);
                let flips = cs.windows(2).filter(|w| w[0].passed != w[1].passed).count();
                let monotone = flips <= 1 && (cs[0].passed || flips == 0);
                if monotone {
                    t.monotone_exact.1 += 1;
                    t.monotone_exact.0 += u64::from(a == sweep[c]);
                }
                let r = reference[c].0;
                t.search_near += u64::from((a - r).abs() <= 1);
                t.sweep_near += u64::from((sweep[c] - r).abs() <= 1);
                t.search_err += (a - r).unsigned_abs();
                t.sweep_err += (sweep[c] - r).unsigned_abs();
                if a >= 0 {
                    let thr = cs[a as usize].thr;
                    if leader.is_none_or(|l| thr.per_gpu > l.per_gpu) {
                        leader = Some(thr);
                    }
                }
            }
            answers.push(s.answer);
        }
        let chosen = best(&answers, &cells);
        t.trials = 1;
        t.same_winner = u64::from(chosen == winner);
        t.search_true_winner = u64::from(chosen == true_winner);
        t.sweep_true_winner = u64::from(winner == true_winner);
        if let (Some(w), Some(ch)) = (winner, chosen) {
            if w != ch {
                let tw = cells[w][sweep[w] as usize].thr.per_gpu;
                let tc = cells[ch][sweep[ch].max(0) as usize].thr.per_gpu;
                t.regret.push((tw - tc) / tw);
            }
        }
        t.grid_seconds = grid_seconds;
        t.grid_request_seconds = grid_request_seconds;
    }
    TrialOut {
        tally,
        boundary: sweep
            .iter()
            .map(|&t| if t >= 0 { spec.level(t as u64) } else { 0.0 })
            .collect(),
        thr: sweep
            .iter()
            .enumerate()
            .map(|(c, &t)| {
                if t >= 0 {
                    cells[c][t as usize].thr.per_gpu
                } else {
                    0.0
                }
            })
            .collect(),
        winner,
    }
}

fn run_trials(grid: &Grid, servers: &[Server], scale: Scale) -> Vec<TrialOut> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let seeds: Vec<u64> = (0..scale.trials).collect();
    let mut out: Vec<(u64, TrialOut)> = std::thread::scope(|s| {
        let handles: Vec<_> = seeds
            .chunks(seeds.len().div_ceil(threads))
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|&t| {
                            let noise = !(scale.noiseless_first && t == 0);
                            (t, trial(grid, servers, 1000 + t, noise))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("trial thread"))
            .collect()
    });
    out.sort_by_key(|(t, _)| *t);
    out.into_iter().map(|(_, o)| o).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "n/a".into()
    } else {
        format!("{:.1} %", 100.0 * a as f64 / b as f64)
    }
}

fn report(grid: &Grid, servers: &[Server], outs: &[TrialOut]) -> [Tally; 2] {
    let spec = &grid.spec;
    println!(
        "\n== {} {}..{} step {} ({} grid points), bounds {BOUNDS}, {} trials ==",
        spec.axis,
        spec.min,
        spec.max,
        spec.step,
        spec.last_index() + 1,
        outs.len()
    );
    println!(
        "{:<20} {:>5} {:>22} {:>26} {:>8}",
        "config", "gpus", "boundary p10/p50/p90", "tok/s/GPU p10/p50/p90", "wins"
    );
    for (c, srv) in servers.iter().enumerate() {
        let q = |v: Vec<f64>| {
            let mut v = v;
            v.sort_by(f64::total_cmp);
            let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
            (at(0.1), at(0.5), at(0.9))
        };
        let b = q(outs.iter().map(|o| o.boundary[c]).collect());
        let t = q(outs.iter().map(|o| o.thr[c]).collect());
        let wins = outs.iter().filter(|o| o.winner == Some(c)).count();
        println!(
            "{:<20} {:>5} {:>22} {:>26} {:>8}",
            srv.name,
            srv.gpus,
            format!("{}/{}/{}", b.0, b.1, b.2),
            format!("{:.0}/{:.0}/{:.0}", t.0, t.1, t.2),
            wins
        );
    }
    let mut totals: [Tally; 2] = Default::default();
    for o in outs {
        totals[0].add(&o.tally[0]);
        totals[1].add(&o.tally[1]);
    }
    for (label, t) in ["stop-early off", "stop-early on "].iter().zip(&totals) {
        let regret = if t.regret.is_empty() {
            String::new()
        } else {
            format!(
                " (when not, the pick gives up median {:.1} % of the best tok/s/GPU)",
                100.0 * median(t.regret.clone())
            )
        };
        println!("{label}:");
        println!(
            "  (1) boundary within one grid step of the sweep's: {} of {} finished searches ({} exact; {} stopped early)",
            pct(t.within_one, t.finished),
            t.finished,
            pct(t.exact, t.finished),
            t.pairs - t.finished
        );
        println!(
            "  (2) same winner as the sweep: {} of {} trials{regret}",
            pct(t.same_winner, t.trials),
            t.trials
        );
        println!(
            "  (3) server time: {:.1} % of the sweep's request·s, {:.1} % of its seconds; {:.1} probes per config of {}",
            100.0 * t.request_seconds / t.grid_request_seconds,
            100.0 * t.seconds / t.grid_seconds,
            t.probes as f64 / t.pairs as f64,
            spec.last_index() + 1
        );
        let n = t.finished.max(1) as f64;
        println!(
            "  against the noiseless boundary: search within one step {} (mean error {:.2} steps), sweep {} ({:.2}); noiseless winner picked: search {}, sweep {}",
            pct(t.search_near, t.finished),
            t.search_err as f64 / n,
            pct(t.sweep_near, t.finished),
            t.sweep_err as f64 / n,
            pct(t.search_true_winner, t.trials),
            pct(t.sweep_true_winner, t.trials)
        );
    }
    totals
}

/// The reduced run `cargo test --all-targets` does: checks, no timing.
fn check() {
    let servers = servers();
    let grid = Grid::new(Axis::Concurrency, QUICK.conc, QUICK);
    let outs = run_trials(&grid, &servers, QUICK);
    let totals = report(&grid, &servers, &outs);
    for t in &totals {
        // Wherever the measured pass/fail sequence is monotone, bisection
        // over the same cells cannot land anywhere but the sweep's boundary.
        assert_eq!(t.monotone_exact.0, t.monotone_exact.1, "monotone pairs");
        assert!(t.request_seconds < t.grid_request_seconds);
        assert!(t.seconds < t.grid_seconds);
        assert!(t.probes < t.pairs * (grid.spec.last_index() + 1));
    }
    let noiseless = &outs[0].tally[0];
    assert_eq!(noiseless.exact, noiseless.pairs, "noiseless trial");
    assert_eq!(noiseless.same_winner, 1);
    // Without noise the stop-early rule only drops configs that could not have won.
    assert_eq!(outs[0].tally[1].same_winner, 1);
    // The matrix is not degenerate: boundaries fall inside the grid and differ.
    let b = &outs[0].boundary;
    assert!(b.iter().all(|&l| l > grid.spec.min));
    assert!(b.iter().any(|&l| l != b[0]));
    println!("search bench checks passed");
}

/// One noiseless trial's grid, level by level, for choosing configs and bounds.
fn explain(axis: Axis, range: (f64, f64, f64), scale: Scale) {
    let grid = Grid::new(axis, range, scale);
    let spec = &grid.spec;
    let work = workload(
        1000,
        grid.requests(spec.level(spec.last_index())),
        scale.output,
    );
    for (c, srv) in servers().iter().enumerate() {
        println!("{} ({} GPUs):", srv.name, srv.gpus);
        for k in 0..=spec.last_index() {
            let cell = grid.measure(srv, &work, k, false, mix(mix(1000, c as u64 + 1), k));
            println!(
                "  {:>6} {} tpot_p50 {:6.2} ms  ttft_p99 {:7.1} ms  {:6.0} tok/s/GPU [{:.0}, {:.0}]",
                spec.level(k),
                if cell.passed { "pass" } else { "FAIL" },
                cell.tpot_p50,
                cell.ttft_p99,
                cell.thr.per_gpu,
                cell.thr.low,
                cell.thr.high
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--explain") {
        explain(Axis::Concurrency, FULL.conc, FULL);
        if let Some(rate) = FULL.rate {
            explain(Axis::Rate, rate, FULL);
        }
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        check();
        return;
    }
    let servers = servers();
    let scale = FULL;
    let grid = Grid::new(Axis::Concurrency, scale.conc, scale);
    let outs = run_trials(&grid, &servers, scale);
    println!(
        "probe noise: log-normal, σ {:.0} % per probe and {:.0} % per decode step, seeded by (trial, config, grid index): sweep and search read the same cell",
        PROBE_SIGMA * 100.0,
        STEP_SIGMA * 100.0
    );
    report(&grid, &servers, &outs);
    if let Some(rate) = scale.rate {
        let grid = Grid::new(Axis::Rate, rate, scale);
        let outs = run_trials(&grid, &servers, scale);
        report(&grid, &servers, &outs);
    }
}
