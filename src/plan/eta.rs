//! Duration estimates that hold before anything ran, and sharpen as cells
//! are measured.
//!
//! A prior per engine gives start-up time and per-request speed:
//! - `sim`: its own timing model, read from the flags the server is started
//!   with (it is deterministic, so the estimate can be close), including the
//!   `--crash-after` fault, after which no cell of that server runs;
//! - `vllm`/`sglang` on a known GPU: a decode step reads the weights on one
//!   GPU plus the KV cache of every running sequence, at a share of the GPU's
//!   memory bandwidth ([`crate::memory::gpus::GPUS`]); prefill is compute-bound at a share of its
//!   dense BF16 throughput;
//! - `llamacpp` (and GPU engines with no GPU): CPU speed from the model's
//!   bytes at an effective memory bandwidth measured on the test machines.
//!
//! Measured cells then correct the prior, per server config and per load
//! level ([`Calibration`]), never with one factor for everything.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::campaign::{Campaign, PromptSource, ServerConfig, WorkloadPoint};
use crate::engine::EngineKind;
use crate::load::schedule::LoadShape;
use crate::memory::gpus::GpuFigures;
use crate::sim::SimConfig;

/// Share of peak memory bandwidth a decode step reaches (vLLM/SGLang at
/// small batch typically reach 60–75 % of peak).
pub const BANDWIDTH_EFFICIENCY: f64 = 0.65;
/// Share of dense BF16 peak a prefill reaches.
pub const PREFILL_MFU: f64 = 0.4;
/// Fixed cost of one GPU decode step (scheduling, launches, sampling), s.
pub const GPU_STEP_OVERHEAD_S: f64 = 0.002;
/// Extra cost per step of each tensor-parallel all-reduce round, s per layer.
pub const TP_ALLREDUCE_S_PER_LAYER: f64 = 25e-6;
/// Speed-up kept per doubling of the tensor-parallel size when the plan
/// has no GPU model to weigh bytes and all-reduces with: 85 %, so TP2 is
/// 1.7× and TP4 2.9× one GPU (decode and prefill alike).
pub const TP_DOUBLING_EFFICIENCY: f64 = 0.85;

/// Speed of `tp` GPUs over one, at [`TP_DOUBLING_EFFICIENCY`] per doubling.
pub fn tp_speedup(tp: u32) -> f64 {
    let tp = f64::from(tp.max(1));
    tp * TP_DOUBLING_EFFICIENCY.powf(tp.log2())
}
/// Effective bytes/s one CPU thread streams through the weights in a
/// llama.cpp decode step, on the reference machine
/// ([`REFERENCE_PROBE_BYTES_PER_S`]): SmolLM2-135M Q4_1 (98 MB) decoded at
/// 11.9–12.3 ms per token on one thread there.
pub const CPU_BYTES_PER_S_PER_THREAD: f64 = 8.1e9;
/// CPU prefill throughput of short prompts relative to single-stream decode
/// (tokens/s ratio).
pub const CPU_PREFILL_OVER_DECODE: f64 = 3.5;
/// Prompt length at which a llama.cpp CPU prefill's per-token cost doubles:
/// 1,500-token prompts took 9.8–10.6 s on one thread on the reference
/// machine, against ~5.2 s at the short-prompt rate.
pub const CPU_PREFILL_QUADRATIC_TOKENS: f64 = 1500.0;
/// Share of a llama.cpp CPU decode pass that each running sequence adds:
/// one thread measured TPOT 27–30 ms alone, 36–49 ms with two and 68 ms
/// with four running (SmolLM2-135M Q4_1) on a slower machine, i.e. a step
/// of about (0.5 + 0.5 × running) passes.
pub const CPU_STEP_SHARE_PER_SEQ: f64 = 0.5;
/// Fixed cost of one vLLM/SGLang step when they run on CPU (Python
/// scheduler, torch dispatch), s on the reference machine: vLLM 0.32's CPU
/// build on two threads took 32–33 ms per step alone and 36.6 ms with two
/// running for a 269 MB model whose weights stream in ~17 ms.
pub const CPU_ENGINE_STEP_OVERHEAD_S: f64 = 0.012;
/// Share of a weight pass each running sequence adds to a vLLM/SGLang CPU step.
pub const CPU_ENGINE_STEP_SHARE_PER_SEQ: f64 = 0.25;
/// vLLM/SGLang CPU prefill throughput relative to one weight pass (tokens
/// per pass time): their batched matmuls prefilled 1,000 and 1,900 tokens in
/// 1.5 s and 2.0 s on a machine half as fast (≈ 900 tok/s for a 37 ms pass),
/// linear at these lengths.
pub const CPU_ENGINE_PREFILL_TOKENS_PER_PASS: f64 = 30.0;
/// vLLM/SGLang's fixed time to first token on CPU (tokenize, schedule, one
/// step), s on the reference machine: 100-token prompts answered their first
/// token in 0.15 s, short chat prompts in 0.10 s.
pub const CPU_ENGINE_REQUEST_OVERHEAD_S: f64 = 0.09;
/// Share of drafted tokens a draft model gets accepted, for the prior.
pub const DRAFT_ACCEPTANCE_PRIOR: f64 = 0.3;
/// What `cpuprobe::int8_dot_bytes_per_s` measured on the reference machine,
/// where the CPU constants above were measured, bytes/s (5.20–5.28 GB/s
/// over ten probes, quiet).
pub const REFERENCE_PROBE_BYTES_PER_S: f64 = 5.25e9;

/// This machine's CPU speed against the reference machine, from the probe
/// `plan` and `run` take when a server runs on CPU.
///
/// Machines differ by 2× or more (another CPU, cores shared with other
/// work), which no fixed constant absorbs. On the reference machine both
/// cores busy with other work took the probe from 5.25 to 2.75 GB/s (÷1.9)
/// and llama.cpp's TPOT from 12.3 to 25.7 ms and a 1,500-token prefill from
/// 9.8 to 20.2 s (×2.1), so the factor is the plain ratio of probe rates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuSpeed {
    /// What the probe measured here, bytes/s (`None`: not probed).
    pub probe_bytes_per_s: Option<f64>,
    /// Speed against the reference machine (> 1: faster).
    pub factor: f64,
}

impl CpuSpeed {
    /// The reference machine itself: what the priors assume unprobed.
    pub const REFERENCE: CpuSpeed = CpuSpeed {
        probe_bytes_per_s: None,
        factor: 1.0,
    };

    /// From the probe's measured rate, bytes/s; an absurd reading is
    /// bounded rather than trusted.
    pub fn from_probe(bytes_per_s: f64) -> Self {
        let f = bytes_per_s / REFERENCE_PROBE_BYTES_PER_S;
        CpuSpeed {
            probe_bytes_per_s: Some(bytes_per_s),
            factor: if f.is_finite() {
                f.clamp(0.05, 20.0)
            } else {
                1.0
            },
        }
    }

    /// One line for `plan`: the probe against the reference.
    pub fn describe(&self) -> String {
        match self.probe_bytes_per_s {
            Some(b) => format!(
                "CPU speed: probe {:.2} GB/s, {:.2}× the machine the CPU priors were measured on ({:.2} GB/s)",
                b / 1e9,
                self.factor,
                REFERENCE_PROBE_BYTES_PER_S / 1e9
            ),
            None => "CPU speed: not probed; the CPU priors' own machine assumed".into(),
        }
    }
}

/// Time servebench spends around each cell (source, scrapes, result file), s.
pub const CELL_OVERHEAD_S: f64 = 0.15;

/// Per-request speed of one server config, and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Speed {
    /// Fixed time per request (TTFT overhead, HTTP round trip), s.
    pub request_overhead_s: f64,
    /// Prefill speed, tokens/s.
    pub prefill_tok_s: f64,
    /// Whether prefills of concurrent requests queue one after another.
    pub serial_prefill: bool,
    /// Prompt length at which attention doubles the per-token prefill cost
    /// (CPU engines; `None`: linear).
    pub prefill_quadratic_tokens: Option<f64>,
    /// Decode step time with an empty batch, s.
    pub step_base_s: f64,
    /// Extra step time per running sequence, s.
    pub step_per_seq_s: f64,
    /// Extra step time per context token of each running sequence (KV read), s.
    pub kv_s_per_token: f64,
    /// Tokens a sequence gains per step (> 1 with speculative decoding).
    pub tokens_per_step: f64,
    /// Compute time of one token of one sequence in a decode step, s: a
    /// step is never shorter than its running sequences' verified tokens
    /// take to compute (0: steps are memory-bound only).
    pub compute_s_per_token: f64,
    /// Tokens each running sequence has verified per step (1, or the
    /// speculative drafts plus one).
    pub verified_per_step: f64,
    /// Most sequences the server runs at once.
    pub max_running: Option<u64>,
    /// Requests after which the server dies (simulator fault), counted from its start.
    pub crash_after: Option<u64>,
    /// Where the figures come from, for `plan`.
    pub basis: String,
}

impl Speed {
    /// Seconds one request of `input` prompt and `output` tokens takes with `running` in flight.
    pub fn request_s(&self, input: f64, output: f64, running: f64) -> f64 {
        let running = running.max(1.0);
        let prefill = self.prefill_s(input);
        // A queue of prefills: on average a request waits for half the others.
        let prefill = if self.serial_prefill {
            prefill * (1.0 + running) / 2.0
        } else {
            prefill
        };
        let steps = (output / self.tokens_per_step.max(1.0)).ceil();
        let context = input + output / 2.0;
        let memory =
            self.step_base_s + running * (self.step_per_seq_s + self.kv_s_per_token * context);
        let compute = running * self.verified_per_step.max(1.0) * self.compute_s_per_token;
        self.request_overhead_s + prefill + steps * memory.max(compute)
    }

    /// Seconds the prefill of one `input`-token prompt takes alone.
    pub fn prefill_s(&self, input: f64) -> f64 {
        input / self.prefill_tok_s.max(1e-9)
            * (1.0 + self.prefill_quadratic_tokens.map_or(0.0, |l| input / l))
    }

    /// Seconds one unit of `turns` ([`unit_turns`]) takes with `running`
    /// in flight: its requests one after another, with the pauses between them.
    pub fn unit_s(&self, turns: &[TurnShape], running: f64) -> f64 {
        turns
            .iter()
            .map(|t| t.pause_s + self.request_s(t.input, t.output, running))
            .sum()
    }

    /// Seconds the load of `w` takes (warm-up included, servebench's own overhead not).
    pub fn load_s(&self, w: &WorkloadPoint) -> f64 {
        let cap = self.max_running.unwrap_or(u64::MAX).max(1) as f64;
        let units = w.num_requests.map(|n| (n + w.warmup) as f64);
        let turns = unit_turns(w);
        let unit_s = |running: f64| self.unit_s(&turns, running);
        let one_alone = unit_s(1.0);
        let by_count = match w.load {
            LoadShape::Concurrency { value } => {
                // No more run at once than the server admits or the units
                // (requests, or sessions of turns in sequence) there are.
                let running = (value as f64)
                    .min(cap)
                    .min(units.unwrap_or(f64::MAX).max(1.0));
                let one = unit_s(running);
                // Prefills that queue for one compute unit are a floor:
                // sixteen 100k-token prompts take sixteen prefills at any
                // concurrency.
                let prefills = if self.serial_prefill {
                    turns.iter().map(|t| self.prefill_s(t.input)).sum()
                } else {
                    0.0
                };
                units.map(|n| ((n / running).ceil() * one).max(n * prefills))
            }
            LoadShape::Rate {
                value,
                max_concurrency,
                ..
            } => {
                // In flight at this rate (Little's law), capped by the server and the client.
                let limit = cap.min(max_concurrency.map(f64::from).unwrap_or(f64::MAX));
                let running = (value * one_alone).clamp(1.0, limit);
                let one = unit_s(running);
                let served = running / one;
                units.map(|n| n / value.min(served) + one)
            }
            // The trace's schedule at its scale, and the last request.
            LoadShape::Replay { time_scale, .. } => match &w.source {
                PromptSource::Trace { span_s, .. } => Some(span_s / time_scale + one_alone),
                _ => units.map(|n| n * one_alone),
            },
        };
        match (by_count, w.duration_s) {
            (Some(a), Some(d)) => a.min(d + one_alone),
            (Some(a), None) => a,
            (None, Some(d)) => d + one_alone,
            (None, None) => one_alone,
        }
    }
}

/// Template tokens a chat message adds around its content, as the plan
/// counts them (chat templates add a few per message).
const CHAT_TOKENS_PER_MESSAGE: f64 = 4.0;

/// Mean prompt and output tokens of one request of a workload that is not
/// a session (a session's turns: [`session_turns`]).
pub fn request_shape(w: &WorkloadPoint) -> (f64, f64) {
    match &w.source {
        PromptSource::Synthetic => (w.input_len as f64, w.output_len as f64),
        PromptSource::PromptKinds { kinds } => {
            (kinds_prompt_words(kinds) + 12.0, w.output_len as f64)
        }
        PromptSource::Dataset { .. } | PromptSource::Scenario { .. } => {
            (256.0, w.output_len as f64)
        }
        PromptSource::Trace {
            mean_input,
            mean_output,
            ..
        } => (*mean_input, *mean_output),
    }
}

/// The requests of one unit of `w` in order: a session's turns, or one
/// request of the workload's mean shape.
pub fn unit_turns(w: &WorkloadPoint) -> Vec<TurnShape> {
    session_turns(w).unwrap_or_else(|| {
        let (input, output) = request_shape(w);
        vec![TurnShape {
            pause_s: 0.0,
            input,
            output,
        }]
    })
}

/// One turn of a session (or a request) as the plan counts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnShape {
    /// The pause before this turn is sent (the think time after the last), s.
    pub pause_s: f64,
    /// Prompt tokens: the whole conversation so far and this turn's message.
    pub input: f64,
    /// Output tokens: the turn's own length, capped by the workload's.
    pub output: f64,
}

/// The turns of a session workload in order (`None`: not a session, or its
/// scenario does not resolve), with prompts counted one token per word.
pub fn session_turns(w: &WorkloadPoint) -> Option<Vec<TurnShape>> {
    let PromptSource::Scenario { name } = &w.source else {
        return None;
    };
    let sc = crate::workload::session::resolve(name).ok()?;
    let words = |s: &str| s.split_whitespace().count() as f64;
    let mut context = 3.0
        + sc.system
            .as_deref()
            .map_or(0.0, |s| words(s) + CHAT_TOKENS_PER_MESSAGE);
    let mut pause_s = 0.0;
    let mut out = Vec::with_capacity(sc.turns.len());
    for turn in &sc.turns {
        // As the driver sends it: the turn's length, capped by the workload's.
        let output = turn
            .output_len
            .map_or(w.output_len, |n| (n as u64).min(w.output_len)) as f64;
        context += words(&turn.user) + CHAT_TOKENS_PER_MESSAGE;
        out.push(TurnShape {
            pause_s,
            input: context,
            output,
        });
        // The answer joins the conversation the next turn resends.
        context += output + CHAT_TOKENS_PER_MESSAGE;
        pause_s = turn.think_time().as_secs_f64();
    }
    Some(out)
}

/// Mean word count of the built-in prompts of the given kinds.
fn kinds_prompt_words(kinds: &[crate::workload::PromptKind]) -> f64 {
    let texts: Vec<&str> = kinds
        .iter()
        .flat_map(|k| k.variants().iter().copied())
        .collect();
    if texts.is_empty() {
        return 64.0;
    }
    texts
        .iter()
        .map(|t| t.split_whitespace().count() as f64)
        .sum::<f64>()
        / texts.len() as f64
}

/// What a prior needs to know about the hardware and the model.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Weight bytes on one GPU (memory model) or of the whole model file(s).
    pub weights_bytes_per_gpu: Option<f64>,
    /// KV bytes per token per GPU (memory model).
    pub kv_bytes_per_token_per_gpu: Option<f64>,
    /// Decoder layers.
    pub layers: Option<u32>,
    /// The GPU's figures, when named or declared.
    pub gpu: Option<GpuFigures>,
    /// Most requests the memory model lets the server run at once (KV
    /// cache, recurrent-state slots), when it knows.
    pub max_running: Option<u64>,
}

/// Start-up prior, s: sim and llama.cpp start in about a second, vLLM and
/// SGLang in about a minute on a GPU plus weight loading, more with TP.
///
/// `cpu`: the server runs on this CPU, where start-up is imports and
/// initialisation, CPU work: the reference machine's figure divided by its
/// speed. `eager`: the engine was told to skip compilation and graph capture
/// (vLLM `--enforce-eager`, SGLang `--disable-cuda-graph`).
pub fn startup_prior_s(
    engine: EngineKind,
    weights_total_bytes: Option<f64>,
    tp: u32,
    eager: bool,
    cpu: Option<CpuSpeed>,
) -> f64 {
    let gb = weights_total_bytes.unwrap_or(0.0) / 1e9;
    let extra_ranks = tp.saturating_sub(1) as f64;
    // Python imports, engine core and memory profiling: the 135M model came
    // up in 27–42 s (mean 34 s) on the reference machine's 2 cores with
    // --enforce-eager, where compiling adds about 10 s; on GPUs about 45 s,
    // and torch.compile with CUDA graph capture adds about 15 s.
    let (python_base, compile) = match cpu {
        Some(_) => (35.0, 10.0),
        None => (45.0, 15.0),
    };
    let compile = if eager { 0.0 } else { compile };
    let prior = match engine {
        EngineKind::Sim => 0.2,
        // Reading the GGUF dominates after process start.
        EngineKind::Llamacpp => 1.0 + gb / 1.0,
        EngineKind::Vllm => python_base + compile + gb / 1.5 + 15.0 * extra_ranks,
        EngineKind::Sglang => python_base - 10.0 + compile + gb / 1.5 + 10.0 * extra_ranks,
        EngineKind::Openai => 0.0,
        EngineKind::Command => 5.0,
    };
    match (engine, cpu) {
        (EngineKind::Sim | EngineKind::Openai | EngineKind::Command, _) | (_, None) => prior,
        (_, Some(cpu)) => prior / cpu.factor,
    }
}

/// Time from asking a server to stop until it and its process tree are
/// gone, s: the Python engines shut their engine-core processes down (vLLM
/// on CPU took 0.8 s), llama.cpp and the simulator exit at once.
pub fn stop_prior_s(engine: EngineKind) -> f64 {
    match engine {
        EngineKind::Sim => 0.05,
        EngineKind::Llamacpp => 0.15,
        EngineKind::Vllm | EngineKind::Sglang => 0.8,
        EngineKind::Openai => 0.0,
        EngineKind::Command => 0.5,
    }
}

/// The simulator config a server would run with, from its command line.
pub fn sim_config(argv: &[String]) -> Option<SimConfig> {
    use clap::Parser;
    // The `sim` subcommand's own parser, so a flag given twice means here
    // what it means to the process.
    let at = argv.iter().position(|a| a == "sim")?;
    let v = ["servebench", "sim"]
        .into_iter()
        .map(str::to_string)
        .chain(argv[at + 1..].iter().cloned());
    match crate::cli::Cli::try_parse_from(v).ok()?.command {
        crate::cli::Command::Sim(a) => Some(a.config),
        _ => None,
    }
}

/// The simulator's speed, straight from its timing model.
pub fn sim_speed(cfg: &SimConfig) -> Speed {
    let tokens_per_step = if cfg.spec_draft_tokens > 0 {
        crate::sim::model::expected_tokens_per_step(cfg.spec_draft_tokens, cfg.spec_acceptance)
    } else {
        1.0
    };
    let factor = if cfg.spec_draft_tokens > 0 {
        cfg.spec_step_factor
    } else {
        1.0
    };
    Speed {
        // TTFT overhead plus a local HTTP round trip.
        request_overhead_s: cfg.ttft_overhead_ms / 1000.0 + 0.001,
        prefill_tok_s: if cfg.prefill_tok_s <= 0.0 {
            f64::INFINITY
        } else {
            cfg.prefill_tok_s
        },
        serial_prefill: true,
        prefill_quadratic_tokens: None,
        step_base_s: cfg.decode_step_ms * factor / 1000.0,
        step_per_seq_s: cfg.decode_step_per_seq_ms * factor / 1000.0,
        kv_s_per_token: 0.0,
        tokens_per_step,
        compute_s_per_token: 0.0,
        verified_per_step: 1.0,
        max_running: Some(cfg.max_running_requests as u64),
        crash_after: cfg.crash_after,
        basis: format!(
            "simulator timing model: {} ms/step + {} ms/seq, {} tok/s prefill{}",
            cfg.decode_step_ms,
            cfg.decode_step_per_seq_ms,
            cfg.prefill_tok_s,
            if cfg.spec_draft_tokens > 0 {
                format!(", {tokens_per_step:.2} tokens/step")
            } else {
                String::new()
            }
        ),
    }
}

/// GPU engine speed from bytes read per step against the GPU's bandwidth.
pub fn gpu_speed(gpu: &GpuFigures, weights: f64, kv_per_token: f64, layers: u32, tp: u32) -> Speed {
    let bw = gpu.bandwidth * BANDWIDTH_EFFICIENCY;
    let comm = if tp > 1 {
        TP_ALLREDUCE_S_PER_LAYER * 2.0 * layers as f64
    } else {
        0.0
    };
    // Parameters at BF16 (2 bytes each); a forward pass costs 2 FLOPs per parameter per token.
    let flops_per_token = 2.0 * weights / 2.0;
    Speed {
        request_overhead_s: 0.005,
        prefill_tok_s: gpu.bf16_flops * PREFILL_MFU / flops_per_token.max(1.0),
        // Prefills share the GPU's compute: concurrent ones queue.
        serial_prefill: true,
        prefill_quadratic_tokens: None,
        step_base_s: weights / bw + GPU_STEP_OVERHEAD_S + comm,
        step_per_seq_s: 0.0,
        kv_s_per_token: kv_per_token / bw,
        tokens_per_step: 1.0,
        // At large batches a step is compute-bound, at the prefill's share of peak.
        compute_s_per_token: flops_per_token / (gpu.bf16_flops * PREFILL_MFU).max(1.0),
        verified_per_step: 1.0,
        max_running: None,
        crash_after: None,
        basis: format!(
            "{:.1} GB read per step at {:.0}% of {} {:.2} TB/s ({})",
            weights / 1e9,
            BANDWIDTH_EFFICIENCY * 100.0,
            gpu.name,
            gpu.bandwidth / 1e12,
            gpu.source
        ),
    }
}

/// CPU speed (llama.cpp, or vLLM/SGLang's CPU builds) from the model's bytes.
pub fn cpu_speed(engine: EngineKind, model_bytes: f64, threads: u32, cpu: CpuSpeed) -> Speed {
    let f = cpu.factor;
    let bw = CPU_BYTES_PER_S_PER_THREAD * threads.clamp(1, 8) as f64 * f;
    // One pass over the weights.
    let t1 = (model_bytes / bw).max(1e-6);
    let basis = format!(
        "CPU: {:.0} MB of weights at {:.1} GB/s ({threads} thread(s), the {} rate measured on the reference machine × {f:.2})",
        model_bytes / 1e6,
        bw / 1e9,
        if engine == EngineKind::Llamacpp {
            "llama.cpp"
        } else {
            "vLLM CPU"
        }
    );
    match engine {
        // Compute-bound kernels: prefills queue, attention grows with the
        // prompt, and each running sequence adds a share of a pass.
        EngineKind::Llamacpp => Speed {
            request_overhead_s: 0.01 / f,
            prefill_tok_s: CPU_PREFILL_OVER_DECODE / t1,
            serial_prefill: true,
            prefill_quadratic_tokens: Some(CPU_PREFILL_QUADRATIC_TOKENS),
            step_base_s: (1.0 - CPU_STEP_SHARE_PER_SEQ) * t1,
            step_per_seq_s: CPU_STEP_SHARE_PER_SEQ * t1,
            kv_s_per_token: 0.0,
            tokens_per_step: 1.0,
            compute_s_per_token: 0.0,
            verified_per_step: 1.0,
            max_running: None,
            crash_after: None,
            basis,
        },
        // The Python engines batch prefills into large matmuls and pay a
        // per-step scheduling cost that dwarfs each extra sequence.
        _ => Speed {
            request_overhead_s: CPU_ENGINE_REQUEST_OVERHEAD_S / f,
            prefill_tok_s: CPU_ENGINE_PREFILL_TOKENS_PER_PASS / t1,
            serial_prefill: false,
            prefill_quadratic_tokens: None,
            step_base_s: t1 + CPU_ENGINE_STEP_OVERHEAD_S / f,
            step_per_seq_s: CPU_ENGINE_STEP_SHARE_PER_SEQ * t1,
            kv_s_per_token: 0.0,
            tokens_per_step: 1.0,
            compute_s_per_token: 0.0,
            verified_per_step: 1.0,
            max_running: None,
            crash_after: None,
            basis,
        },
    }
}

/// What the plan assumes of a speculative method before any cell of it ran
/// (the per-server calibration then corrects it from measured cells).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecPrior {
    /// Tokens drafted per step.
    pub drafted: f64,
    /// Chance each successive drafted token is accepted, given the ones before it were.
    pub acceptance: f64,
    /// A step's memory-bound cost over an autoregressive one (the drafter's passes).
    pub step_factor: f64,
    /// Tokens each sequence has verified per step.
    pub verified: f64,
}

impl SpecPrior {
    /// Expected tokens a sequence gains per step: 1 + Σ acceptance^i over the drafts.
    pub fn tokens_per_step(&self) -> f64 {
        crate::sim::model::expected_tokens_per_step(self.drafted.round() as u32, self.acceptance)
    }

    /// The prior of one server's drafting on `engine`. Acceptance per drafted
    /// position is a published-order figure per method (EAGLE 0.7, EAGLE-3
    /// and MTP 0.8, a DFlash block 0.85, a DDTree tree 0.88, a separate draft
    /// model 0.6, n-gram lookup 0.4, anything else 0.6); the budget is read
    /// in the engine's meaning (SGLang counts the root in
    /// `num_draft_tokens`, a DFlash block holds the last verified token).
    pub fn of(engine: EngineKind, spec: &crate::engine::Speculative) -> SpecPrior {
        use crate::engine::SpecMethod as M;
        let n = spec.num_draft_tokens.map(f64::from);
        let root = if engine == EngineKind::Sglang {
            1.0
        } else {
            0.0
        };
        let chain = |default: f64| (n.map_or(default, |n| n - root)).max(1.0);
        let (drafted, acceptance, step_factor, verified) = match spec.method {
            Some(M::Eagle) => {
                let k = chain(3.0);
                (k, 0.7, 1.0 + 0.05 * k, k + 1.0)
            }
            Some(M::Eagle3) | Some(M::Mtp) => {
                let k = chain(if spec.method == Some(M::Mtp) {
                    1.0
                } else {
                    3.0
                });
                (k, 0.8, 1.0 + 0.05 * k, k + 1.0)
            }
            Some(M::Dflash) => {
                let k = (n.unwrap_or(16.0) - 1.0).max(1.0);
                (k, 0.85, 1.1, k + 1.0)
            }
            // The tree's nodes are all verified; the accepted path is one branch.
            Some(M::Ddtree) => {
                let b = n.unwrap_or(16.0).max(1.0);
                (b.min(15.0), 0.88, 1.15, b + 1.0)
            }
            Some(M::DraftModel) => {
                let k = chain(4.0);
                (k, 0.6, 1.0 + 0.1 * k, k + 1.0)
            }
            Some(M::Ngram) => {
                let k = chain(4.0);
                (k, 0.4, 1.02, k + 1.0)
            }
            None => {
                let k = n.unwrap_or(4.0).max(1.0);
                (k, 0.6, 1.2, k + 1.0)
            }
        };
        SpecPrior {
            drafted,
            acceptance,
            step_factor,
            verified,
        }
    }

    /// `speed` with this drafting applied, said in its basis.
    pub fn apply(&self, speed: &mut Speed, name: &str) {
        let tps = self.tokens_per_step();
        speed.tokens_per_step = tps;
        speed.verified_per_step = self.verified;
        speed.step_base_s *= self.step_factor;
        speed.step_per_seq_s *= self.step_factor;
        speed.basis.push_str(&format!(
            "; {name} prior: {:.0} drafts at {:.0} % acceptance each, {tps:.2} tokens/step, steps ×{:.2}, {:.0} tokens verified",
            self.drafted,
            self.acceptance * 100.0,
            self.step_factor,
            self.verified
        ));
    }
}

/// Speed from the campaign's own `[run]` guesses.
pub fn guessed_speed(decode_tok_s: f64, prefill_tok_s: f64) -> Speed {
    Speed {
        request_overhead_s: 0.0,
        prefill_tok_s,
        // A prefill rate is the GPU's: concurrent prompts share it.
        serial_prefill: true,
        prefill_quadratic_tokens: None,
        step_base_s: 1.0 / decode_tok_s.max(1e-6),
        step_per_seq_s: 0.0,
        kv_s_per_token: 0.0,
        tokens_per_step: 1.0,
        // The prefill rate is the compute rate a decode step cannot beat either.
        compute_s_per_token: 1.0 / prefill_tok_s.max(1e-6),
        verified_per_step: 1.0,
        max_running: None,
        crash_after: None,
        basis: format!("[run] guesses: {decode_tok_s} tok/s decode, {prefill_tok_s} tok/s prefill"),
    }
}

/// Bytes of the model's weight files on disk (a GGUF file or a directory of
/// safetensors/bin/gguf files), when the path is local.
pub fn model_file_bytes(path: &Path) -> Option<f64> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_file() {
        return Some(meta.len() as f64);
    }
    let mut total = 0u64;
    for e in std::fs::read_dir(path).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_lowercase();
        if [".safetensors", ".bin", ".gguf", ".pt"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            total += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    (total > 0).then_some(total as f64)
}

/// The value of `--threads`/`-t` in an argv.
fn threads_of(argv: &[String]) -> Option<u32> {
    crate::util::argv::value_of(argv, &["--threads", "-t"]).and_then(|v| v.parse().ok())
}

/// Whether the servers of `c` run on a CPU: llama.cpp, or vLLM/SGLang in a
/// campaign that names no GPU at all (no GPU list, model or memory).
pub fn runs_on_cpu(c: &Campaign) -> bool {
    let h = &c.hardware;
    match c.engine.kind {
        EngineKind::Llamacpp => true,
        EngineKind::Vllm | EngineKind::Sglang => {
            h.gpus.is_empty() && h.gpu.is_none() && h.gpu_memory_bytes.is_none()
        }
        _ => false,
    }
}

/// Whether the servers of `c` are estimated from the CPU constants: they
/// run on CPU and `[run]` does not give both guesses instead.
pub fn uses_cpu_priors(c: &Campaign) -> bool {
    runs_on_cpu(c) && !(c.run.speed_given && c.run.startup_given)
}

/// The prior speed of one server config.
pub fn prior_speed(
    c: &Campaign,
    s: &ServerConfig,
    command: Option<&[String]>,
    facts: &Facts,
    cpu: CpuSpeed,
) -> Speed {
    let explicit = c.run.speed_given;
    let model_bytes = facts
        .weights_bytes_per_gpu
        .map(|w| w * f64::from(s.gpus()))
        .or_else(|| model_file_bytes(Path::new(&c.model.path)));
    let speed = match c.engine.kind {
        EngineKind::Sim => command.and_then(sim_config).map(|cfg| sim_speed(&cfg)),
        _ if explicit => None,
        EngineKind::Vllm | EngineKind::Sglang => match (&facts.gpu, facts.weights_bytes_per_gpu) {
            (Some(g), Some(w)) => Some(gpu_speed(
                g,
                w,
                facts.kv_bytes_per_token_per_gpu.unwrap_or(0.0),
                facts.layers.unwrap_or(32),
                s.tp,
            )),
            (None, _) if runs_on_cpu(c) => model_bytes.map(|b| {
                cpu_speed(
                    c.engine.kind,
                    b,
                    command.and_then(threads_of).unwrap_or(2),
                    cpu,
                )
            }),
            _ => None,
        },
        EngineKind::Llamacpp => model_bytes.map(|b| {
            cpu_speed(
                c.engine.kind,
                b,
                command.and_then(threads_of).unwrap_or(1),
                cpu,
            )
        }),
        _ => None,
    };
    // A draft model on CPU: each step also runs k draft passes; some of
    // the drafts are kept. Its rule weighs the draft by its file size.
    let llama_draft = s.speculative.as_ref().filter(|spec| {
        c.engine.kind == EngineKind::Llamacpp
            && spec.method == Some(crate::engine::SpecMethod::DraftModel)
    });
    let mut speed = speed.map(|mut sp| {
        if let Some(spec) = llama_draft {
            let k = spec.num_draft_tokens.unwrap_or(4) as f64;
            let r = match (
                spec.draft_model
                    .as_deref()
                    .and_then(|d| model_file_bytes(Path::new(d))),
                model_bytes,
            ) {
                (Some(d), Some(m)) if m > 0.0 => d / m,
                _ => 0.2,
            };
            sp.step_base_s *= 1.0 + k * r;
            sp.step_per_seq_s *= 1.0 + k * r;
            sp.prefill_tok_s /= 1.0 + r;
            sp.tokens_per_step = 1.0 + k * DRAFT_ACCEPTANCE_PRIOR;
            sp.basis.push_str(&format!(
                "; draft model {:.0}% of the target, {k} drafts/step, {:.0}% accepted (prior)",
                r * 100.0,
                DRAFT_ACCEPTANCE_PRIOR * 100.0
            ));
        }
        sp
    });
    let mut speed = speed.take().unwrap_or_else(|| {
        let mut g = guessed_speed(c.run.decode_tok_s_estimate, c.run.prefill_tok_s_estimate);
        if !explicit {
            // Not the user's guesses: say why the plan fell back to them.
            let why = match (&facts.gpu, facts.weights_bytes_per_gpu) {
                (None, _) if matches!(c.engine.kind, EngineKind::Vllm | EngineKind::Sglang) => {
                    "no GPU model or bandwidth is declared ([hardware] gpu = \"h100\", or gpu_bandwidth = \"1.8TB/s\")"
                }
                (_, None) if matches!(c.engine.kind, EngineKind::Vllm | EngineKind::Sglang) => {
                    "the model's weights per GPU are unknown (the memory model needs [model] config and the GPU's memory)"
                }
                _ => "this engine has no speed model",
            };
            g.basis = format!(
                "default guesses ({} tok/s decode, {} tok/s prefill), since {why}",
                c.run.decode_tok_s_estimate, c.run.prefill_tok_s_estimate
            );
        }
        // The guesses, given or default, are one GPU's autoregressive
        // speed; more GPUs are faster, not free.
        if s.tp > 1 {
            let x = tp_speedup(s.tp);
            g.step_base_s /= x;
            g.prefill_tok_s *= x;
            g.compute_s_per_token /= x;
            g.basis.push_str(&format!(
                "; ×{x:.2} for TP{} ({:.0} % kept per doubling)",
                s.tp,
                TP_DOUBLING_EFFICIENCY * 100.0
            ));
        }
        g
    });
    // Drafting on an engine without a rule of its own above (the simulator
    // models its own).
    let own_rule = c.engine.kind == EngineKind::Sim || llama_draft.is_some();
    if let (Some(spec), false) = (&s.speculative, own_rule) {
        SpecPrior::of(c.engine.kind, spec).apply(&mut speed, &s.method_name());
    }
    // The fewest of what the server is told and what its memory allows.
    speed.max_running = [
        speed.max_running,
        s.max_running_requests.map(u64::from),
        facts.max_running,
    ]
    .into_iter()
    .flatten()
    .min();
    speed
}

/// Requests a cell sends its server: warm-up, measured, and for synthetic
/// prompts the probe that measures the chat template.
pub fn requests_sent(w: &WorkloadPoint) -> u64 {
    let probe = u64::from(w.source == PromptSource::Synthetic);
    w.num_requests.unwrap_or(0) + w.warmup + probe
}

/// A measured cell, as the estimates learn from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Which server config ([`server_key`]).
    pub server: String,
    /// Which configs it is a sibling of ([`shape_key`]).
    pub shape: String,
    /// Which load level ([`level_key`]).
    pub level: String,
    /// The prior's load time for this cell, s.
    pub predicted_s: f64,
    /// The measured load time, s.
    pub measured_s: f64,
}

/// A start-up time measured, with what the prior said.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupObservation {
    /// Which server config.
    pub server: String,
    /// The prior, s.
    pub predicted_s: f64,
    /// Measured, s.
    pub measured_s: f64,
}

/// The key grouping cells of the same server config (across campaigns too:
/// the id does not enter it).
pub fn server_key(s: &ServerConfig) -> String {
    format!(
        "tp={} mem={:?} max={:?} ctx={:?} spec={} args={:?}",
        s.tp,
        s.mem_fraction,
        s.max_running_requests,
        s.context_length,
        serde_json::to_string(&s.speculative).unwrap_or_default(),
        s.args
    )
}

/// The key grouping sibling configs: the same tensor-parallel size and
/// drafting method, any budget or other setting. A measured config informs
/// its unmeasured siblings before they run.
pub fn shape_key(s: &ServerConfig) -> String {
    format!("tp={} method={}", s.tp, s.method_name())
}

/// The key of a load level.
pub fn level_key(w: &WorkloadPoint) -> String {
    // The workload's name too: a long-context level and a chat level at the
    // same concurrency stress a server differently.
    format!("{}-{}", w.workload, w.load.label())
}

/// Corrections of the prior learnt from measured cells.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    cells: Vec<Observation>,
    startups: Vec<StartupObservation>,
    /// servebench's own time around measured cells (wall minus load), s.
    overheads: Vec<f64>,
}

fn ratio<'a>(obs: impl Iterator<Item = &'a Observation>) -> Option<f64> {
    let (m, p) = obs.fold((0.0, 0.0), |(m, p), o| {
        (m + o.measured_s, p + o.predicted_s)
    });
    (m > 0.0 && p > 0.0).then(|| m / p)
}

impl Calibration {
    /// Learn from these observations.
    pub fn new(cells: Vec<Observation>, startups: Vec<StartupObservation>) -> Self {
        Self {
            cells,
            startups,
            overheads: Vec::new(),
        }
    }

    /// Add the time a cell took beyond its load (sources, probes, scrapes), s.
    pub fn observe_overhead(&mut self, s: f64) {
        if s.is_finite() && s >= 0.0 {
            self.overheads.push(s);
        }
    }

    /// Time around each cell: measured mean, else [`CELL_OVERHEAD_S`].
    pub fn overhead_s(&self) -> f64 {
        if self.overheads.is_empty() {
            CELL_OVERHEAD_S
        } else {
            self.overheads.iter().sum::<f64>() / self.overheads.len() as f64
        }
    }

    /// Add a measured cell.
    pub fn observe(&mut self, o: Observation) {
        self.cells.push(o);
    }

    /// Add a measured start-up.
    pub fn observe_startup(&mut self, o: StartupObservation) {
        self.startups.push(o);
    }

    /// Measured cells so far.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The factor to apply to the prior of `server` (of siblings `shape`)
    /// at `level`. The cells it learns from are the server's own, or, while
    /// it has none, its siblings'. From those: the same level if measured;
    /// else their factor times how this level compares with the rest; else
    /// theirs, or this level's across servers; else all cells'; else 1.
    pub fn factor(&self, server: &str, shape: &str, level: &str) -> f64 {
        let own = self.cells.iter().any(|o| o.server == server);
        let mine = |o: &Observation| {
            if own {
                o.server == server
            } else {
                o.shape == shape
            }
        };
        let exact = ratio(self.cells.iter().filter(|o| mine(o) && o.level == level));
        if let Some(r) = exact {
            return r;
        }
        let by_server = ratio(self.cells.iter().filter(|o| mine(o)));
        let by_level = ratio(self.cells.iter().filter(|o| o.level == level));
        let all = ratio(self.cells.iter());
        match (by_server, by_level, all) {
            (Some(s), Some(l), Some(a)) => {
                // The level's shape relative to the servers it was measured on.
                let others = ratio(self.cells.iter().filter(|o| {
                    !mine(o)
                        && self
                            .cells
                            .iter()
                            .any(|p| p.server == o.server && p.level == level)
                }))
                .unwrap_or(a);
                s * l / others
            }
            (Some(s), None, _) => s,
            (None, Some(l), _) => l,
            (None, None, Some(a)) => a,
            _ => 1.0,
        }
    }

    /// Start-up estimate: measured for this server, else the prior scaled by
    /// how the measured start-ups compared with theirs.
    pub fn startup_s(&self, server: &str, prior_s: f64) -> f64 {
        let mine: Vec<f64> = self
            .startups
            .iter()
            .filter(|o| o.server == server)
            .map(|o| o.measured_s)
            .collect();
        if !mine.is_empty() {
            return mine.iter().sum::<f64>() / mine.len() as f64;
        }
        let (m, p) = self.startups.iter().fold((0.0, 0.0), |(m, p), o| {
            (m + o.measured_s, p + o.predicted_s)
        });
        if m > 0.0 && p > 0.0 {
            prior_s * m / p
        } else {
            prior_s
        }
    }
}

/// Estimates for every server config of a campaign.
#[derive(Debug, Clone)]
pub struct Estimator {
    /// Prior speed per server id.
    pub speeds: BTreeMap<String, Speed>,
    /// Prior start-up per server id, s.
    pub startup_priors: BTreeMap<String, f64>,
    /// Server key per id.
    pub keys: BTreeMap<String, String>,
    /// Sibling key per id ([`shape_key`]).
    pub shapes: BTreeMap<String, String>,
    /// Time to stop a server of this campaign's engine ([`stop_prior_s`]), s.
    pub stop_s: f64,
    /// What was learnt from measured cells.
    pub calibration: Calibration,
}

impl Estimator {
    /// Estimated wall time of one cell of `server`, s: its load time (prior ×
    /// calibration) plus servebench's own overhead.
    pub fn cell_s(&self, server: &str, w: &WorkloadPoint) -> f64 {
        let overhead = self.calibration.overhead_s();
        let Some(speed) = self.speeds.get(server) else {
            return overhead;
        };
        let key = self.keys.get(server).map(String::as_str).unwrap_or(server);
        let shape = self.shapes.get(server).map(String::as_str).unwrap_or(key);
        speed.load_s(w) * self.calibration.factor(key, shape, &level_key(w)) + overhead
    }

    /// Estimated cells of one server in order, stopping where its simulated
    /// crash fault fires: cells after it are not run.
    pub fn cells_s(&self, server: &str, cells: &[&WorkloadPoint]) -> Vec<f64> {
        self.cells_s_after(server, cells, 0)
    }

    /// [`Self::cells_s`] for a server that has already been sent `sent` requests.
    pub fn cells_s_after(&self, server: &str, cells: &[&WorkloadPoint], sent: u64) -> Vec<f64> {
        let crash = self.speeds.get(server).and_then(|s| s.crash_after);
        let mut sent = sent;
        let mut crashed = false;
        cells
            .iter()
            .map(|w| {
                if crashed {
                    return 0.0;
                }
                let full = self.cell_s(server, w);
                let n = requests_sent(w);
                let overhead = self.calibration.overhead_s();
                match crash {
                    Some(limit) if n > 0 && sent + n > limit => {
                        crashed = true;
                        let part = (limit - sent.min(limit)) as f64 / n as f64;
                        overhead + (full - overhead) * part
                    }
                    _ => {
                        sent += n;
                        full
                    }
                }
            })
            .collect()
    }

    /// Estimated start-up of `server` (plus stopping it), s.
    pub fn startup_s(&self, server: &str) -> f64 {
        let prior = self.startup_priors.get(server).copied().unwrap_or(0.0);
        let key = self.keys.get(server).map(String::as_str).unwrap_or(server);
        self.calibration.startup_s(key, prior) + self.stop_s
    }

    /// The prior load time of a cell (what observations are compared with), s.
    pub fn prior_load_s(&self, server: &str, w: &WorkloadPoint) -> Option<f64> {
        self.speeds.get(server).map(|s| s.load_s(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::openai::Api;
    use crate::memory::gpus::gpu_by_name;

    fn point(c: u32, n: u64, input: u64, output: u64) -> WorkloadPoint {
        WorkloadPoint {
            workload: "w".into(),
            api: Api::Completions,
            source: PromptSource::Synthetic,
            input_len: input,
            output_len: output,
            load: LoadShape::Concurrency { value: c },
            num_requests: Some(n),
            duration_s: None,
            warmup: 0,
            ignore_eos: true,
            shared_prefix: 0,
            slos: Vec::new(),
            seed: 0,
            repetition: 0,
        }
    }

    #[test]
    fn more_gpus_are_faster_by_a_stated_share_per_doubling() {
        assert_eq!(tp_speedup(1), 1.0);
        assert!((tp_speedup(2) - 1.7).abs() < 1e-12);
        assert!((tp_speedup(4) - 4.0 * 0.85 * 0.85).abs() < 1e-12);
        assert!(tp_speedup(8) > tp_speedup(4) && tp_speedup(8) < 8.0);
    }

    #[test]
    fn no_more_run_at_once_than_there_are_units_or_server_slots() {
        let s = guessed_speed(50.0, 5000.0);
        let mut sp = s.clone();
        sp.step_per_seq_s = 0.001;
        // Two requests at concurrency 4 take as long as at concurrency 2.
        assert_eq!(
            sp.load_s(&point(4, 2, 128, 64)),
            sp.load_s(&point(2, 2, 128, 64))
        );
        assert!(sp.load_s(&point(4, 2, 128, 64)) < sp.load_s(&point(4, 4, 128, 64)));
        // A server that runs two at a time: concurrency 8 is concurrency 2.
        sp.max_running = Some(2);
        assert_eq!(
            sp.load_s(&point(8, 16, 128, 64)),
            sp.load_s(&point(2, 16, 128, 64))
        );
    }

    fn session(name: &str, c: u32, sessions: u64, output: u64) -> WorkloadPoint {
        WorkloadPoint {
            api: Api::Chat,
            source: PromptSource::Scenario { name: name.into() },
            ..point(c, sessions, 0, output)
        }
    }

    #[test]
    fn a_session_is_its_turns_in_sequence_with_growing_context_and_pauses() {
        let w = session("calculator", 2, 2, 256);
        let turns = session_turns(&w).unwrap();
        assert_eq!(turns.len(), 5);
        // No pause before the first turn; then each turn's think time (2 s, 3 s, …).
        assert_eq!(turns[0].pause_s, 0.0);
        assert_eq!(turns[1].pause_s, 2.0);
        assert_eq!(turns[2].pause_s, 3.0);
        // Outputs are the turns' own (512, 1024) capped by the workload's 256.
        assert!(turns.iter().all(|t| t.output == 256.0));
        // Each turn resends the conversation: its prompt holds the answer before it.
        for pair in turns.windows(2) {
            assert!(pair[1].input > pair[0].input + pair[0].output, "{pair:?}");
        }
        let s = guessed_speed(100.0, 10_000.0);
        let one = s.unit_s(&turns, 1.0);
        let pauses: f64 = turns.iter().map(|t| t.pause_s).sum();
        let decode = 5.0 * 256.0 / 100.0;
        let prefill: f64 = turns.iter().map(|t| t.input).sum::<f64>() / 10_000.0;
        assert!((one - (pauses + decode + prefill)).abs() < 1e-9, "{one}");
        // Two sessions at concurrency 4 are two in parallel, not four.
        assert_eq!(
            s.load_s(&session("calculator", 4, 2, 256)),
            s.load_s(&session("calculator", 2, 2, 256))
        );
        assert!((s.load_s(&w) - s.unit_s(&turns, 2.0)).abs() < 1e-9);
        // Not a session: no turns.
        assert!(session_turns(&point(1, 1, 10, 10)).is_none());
    }

    #[test]
    fn long_prompts_queue_for_the_gpus_compute_under_concurrency() {
        let gpu = crate::memory::gpus::figures(Some("rtx-pro-6000"), None, None)
            .unwrap()
            .unwrap();
        let s = gpu_speed(&gpu, 54e9, 0.0, 64, 1);
        let prefill_one = 100_000.0 / s.prefill_tok_s;
        let c1 = s.load_s(&point(1, 16, 100_000, 256));
        let c8 = s.load_s(&point(8, 16, 100_000, 256));
        // Sixteen 100k prompts take sixteen prefills whatever the concurrency:
        // c8 is far from c1's time ÷ 8.
        assert!(c8 >= 16.0 * prefill_one, "{c8} vs {prefill_one}");
        assert!(c8 > c1 / 2.0, "c1 {c1} c8 {c8}");
        assert!(c8 < c1);
        // The same for the campaign's own guesses.
        let g = guessed_speed(60.0, 8000.0);
        assert!(g.load_s(&point(8, 16, 100_000, 256)) >= 16.0 * 100_000.0 / 8000.0);
    }

    #[test]
    fn speculative_priors_differ_by_method_and_budget_and_lose_at_large_batches() {
        use crate::engine::{SpecMethod, Speculative};
        let gpu = crate::memory::gpus::figures(Some("rtx-pro-6000"), None, None)
            .unwrap()
            .unwrap();
        let ar = gpu_speed(&gpu, 54e9, 0.0, 64, 1);
        let with = |method: SpecMethod, budget: Option<u32>, engine: EngineKind| {
            let spec = Speculative {
                method: Some(method),
                num_draft_tokens: budget,
                ..Default::default()
            };
            let prior = SpecPrior::of(engine, &spec);
            let mut s = ar.clone();
            prior.apply(&mut s, method.as_str());
            (prior, s)
        };
        // SGLang counts the root in num_draft_tokens; vLLM counts drafts.
        assert_eq!(
            with(SpecMethod::Eagle, Some(4), EngineKind::Sglang)
                .0
                .drafted,
            3.0
        );
        assert_eq!(
            with(SpecMethod::Eagle, Some(4), EngineKind::Vllm).0.drafted,
            4.0
        );
        let single = point(1, 8, 512, 512);
        let t_ar = ar.load_s(&single);
        let (_, ngram) = with(SpecMethod::Ngram, None, EngineKind::Sglang);
        let (_, eagle3) = with(SpecMethod::Eagle3, None, EngineKind::Sglang);
        let (_, dd16) = with(SpecMethod::Ddtree, Some(16), EngineKind::Sglang);
        let (_, dd64) = with(SpecMethod::Ddtree, Some(64), EngineKind::Sglang);
        // Alone, every method beats autoregressive decoding, by how much it accepts.
        assert!(ngram.load_s(&single) < t_ar);
        assert!(eagle3.load_s(&single) < ngram.load_s(&single));
        assert!(dd16.load_s(&single) < eagle3.load_s(&single));
        assert!(dd16.basis.contains("ddtree prior") && dd16.basis.contains("17 tokens verified"));
        // At 100 running, verifying 65 tokens per sequence is compute-bound:
        // the big tree loses to autoregressive decoding, and to the small tree.
        let busy = point(100, 200, 512, 512);
        assert!(
            dd64.load_s(&busy) > ar.load_s(&busy),
            "{} vs {}",
            dd64.load_s(&busy),
            ar.load_s(&busy)
        );
        assert!(dd64.load_s(&busy) > dd16.load_s(&busy));
    }

    #[test]
    fn an_unmeasured_config_learns_from_its_measured_siblings_first() {
        let o = |server: &str, shape: &str, level: &str, p: f64, m: f64| Observation {
            server: server.into(),
            shape: shape.into(),
            level: level.into(),
            predicted_s: p,
            measured_s: m,
        };
        let mut c = Calibration::default();
        // The autoregressive server ran on its prior; the DDTree budget-8
        // server at twice it.
        c.observe(o("ar", "tp1-ar", "c1", 10.0, 10.0));
        c.observe(o("ar", "tp1-ar", "c8", 10.0, 10.0));
        c.observe(o("dd8", "tp1-ddtree", "c1", 10.0, 20.0));
        // Budget 16 has not run: it takes its sibling's factor, not the
        // level's mean over both (1.5).
        assert_eq!(c.factor("dd16", "tp1-ddtree", "c1"), 2.0);
        // At a level only the other shape ran: the sibling's 2 × how c8 compares there (1).
        assert_eq!(c.factor("dd16", "tp1-ddtree", "c8"), 2.0);
        // A config of a shape nobody ran: the level's mean.
        assert_eq!(c.factor("tp4", "tp4-ar", "c1"), 1.5);
        // Once it has cells of its own, they come first.
        c.observe(o("dd16", "tp1-ddtree", "c1", 10.0, 30.0));
        assert_eq!(c.factor("dd16", "tp1-ddtree", "c1"), 3.0);
    }

    fn sim(args: &[&str]) -> SimConfig {
        let mut argv = vec!["/bin/servebench".to_string(), "sim".into()];
        argv.extend(args.iter().map(|s| s.to_string()));
        sim_config(&argv).unwrap()
    }

    #[test]
    fn the_sim_prior_follows_its_timing_model() {
        let cfg = sim(&[
            "--port",
            "0",
            "--decode-step-ms",
            "2",
            "--decode-step-per-seq-ms",
            "0.1",
            "--prefill-tok-s",
            "50000",
        ]);
        let s = sim_speed(&cfg);
        // One request alone: 5 ms TTFT overhead + 1 ms HTTP + 500/50000 s + 100 × 2.1 ms.
        let one = s.request_s(500.0, 100.0, 1.0);
        assert!((one - (0.006 + 0.01 + 0.21)).abs() < 1e-9, "{one}");
        // Eight at once: each step costs 2.8 ms and prefills queue.
        let w = point(8, 16, 500, 100);
        let eight = s.request_s(500.0, 100.0, 8.0);
        assert!(
            (eight - (0.006 + 0.01 * 4.5 + 0.28)).abs() < 1e-9,
            "{eight}"
        );
        assert!((s.load_s(&w) - 2.0 * eight).abs() < 1e-9);
        // Speculation: 1.3× the step for 1 + 0.75 + 0.75² + 0.75³ tokens.
        let spec = sim_speed(&sim(&[
            "--spec-draft-tokens",
            "3",
            "--spec-acceptance",
            "0.75",
        ]));
        assert!((spec.tokens_per_step - 2.734375).abs() < 1e-9);
        assert!((spec.step_base_s - 0.013).abs() < 1e-12);
    }

    #[test]
    fn a_servers_own_sim_flags_override_the_engines_in_the_prior_and_the_process() {
        // Engine-wide args come first, the server's own after them.
        assert_eq!(
            sim(&["--decode-step-ms", "6", "--decode-step-ms", "2"]).decode_step_ms,
            2.0
        );
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "servebench",
            "sim",
            "--decode-step-ms",
            "6",
            "--decode-step-ms",
            "2",
        ])
        .unwrap();
        match cli.command {
            crate::cli::Command::Sim(a) => assert_eq!(a.config.decode_step_ms, 2.0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_sim_crash_fault_ends_the_servers_cells() {
        let mut e = Estimator {
            speeds: BTreeMap::new(),
            startup_priors: BTreeMap::new(),
            keys: BTreeMap::new(),
            shapes: BTreeMap::new(),
            stop_s: 0.05,
            calibration: Calibration::default(),
        };
        e.speeds
            .insert("a".into(), sim_speed(&sim(&["--crash-after", "15"])));
        let (w1, w2, w3) = (
            point(1, 10, 64, 10),
            point(1, 10, 64, 10),
            point(1, 10, 64, 10),
        );
        let got = e.cells_s("a", &[&w1, &w2, &w3]);
        let full = e.cell_s("a", &w1);
        assert!((got[0] - full).abs() < 1e-12);
        // Each cell sends 10 requests and a probe: the 16th kills it 4/11 into the second cell.
        let part = 4.0 / 11.0;
        assert!((got[1] - (CELL_OVERHEAD_S + (full - CELL_OVERHEAD_S) * part)).abs() < 1e-9);
        assert_eq!(got[2], 0.0);
    }

    #[test]
    fn gpu_decode_is_bytes_per_step_over_bandwidth() {
        let h100 = &crate::memory::gpus::figures(Some("H100_SXM"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(gpu_by_name("h200").unwrap().bandwidth, 4.8e12);
        // 16 GB of weights on one H100: 16e9 / (0.65 × 3.35e12) + 2 ms = 9.35 ms per step.
        let s = gpu_speed(h100, 16e9, 0.0, 32, 1);
        assert!((s.step_base_s - (16e9 / (0.65 * 3.35e12) + 0.002)).abs() < 1e-12);
        let w = point(1, 128, 0, 1024);
        let t = s.load_s(&w);
        let per_token = s.step_base_s;
        assert!(
            (t - 128.0 * (0.005 + 1024.0 * per_token)).abs() < 1e-6,
            "{t}"
        );
        // 128 × 1024 tokens at ~107 tok/s is about 20 minutes, not the 45 min of a 50 tok/s guess.
        assert!(t > 1000.0 && t < 1400.0, "{t}");
        // TP2 halves the bytes per GPU and pays all-reduces.
        let tp2 = gpu_speed(h100, 8e9, 0.0, 32, 2);
        assert!(tp2.step_base_s < s.step_base_s && tp2.step_base_s > s.step_base_s / 2.0);
        assert!(gpu_by_name("tpu").is_none());
    }

    #[test]
    fn cpu_prior_matches_the_measured_small_model_rate() {
        // SmolLM2-135M Q4_1 GGUF, 98 MB, one thread: 11.9–12.3 ms per token
        // measured on the reference machine.
        let s = cpu_speed(EngineKind::Llamacpp, 98e6, 1, CpuSpeed::REFERENCE);
        let tok_s = 1.0 / (s.step_base_s + s.step_per_seq_s);
        assert!((75.0..=90.0).contains(&tok_s), "{tok_s}");
        // Four at once share the thread: 1.5–1.7× the aggregate, not 4×.
        let four = 4.0 / (s.step_base_s + 4.0 * s.step_per_seq_s);
        assert!((1.4..=1.8).contains(&(four / tok_s)), "{four} vs {tok_s}");
        // 1,500-token prompt: 9.8–10.6 s on one thread.
        let prefill = s.request_s(1500.0, 0.0, 1.0);
        assert!((8.5..=12.0).contains(&prefill), "{prefill}");
    }

    #[test]
    fn a_machine_twice_as_fast_halves_the_cpu_step_and_the_probe_factor_is_bounded() {
        for engine in [EngineKind::Llamacpp, EngineKind::Vllm] {
            let one = cpu_speed(engine, 98e6, 1, CpuSpeed::REFERENCE);
            let two = cpu_speed(
                engine,
                98e6,
                1,
                CpuSpeed {
                    probe_bytes_per_s: None,
                    factor: 2.0,
                },
            );
            let step = |s: &Speed| s.step_base_s + s.step_per_seq_s;
            assert!((step(&one) / step(&two) - 2.0).abs() < 1e-9, "{engine:?}");
            assert!(
                (one.request_s(100.0, 8.0, 1.0) / two.request_s(100.0, 8.0, 1.0) - 2.0).abs()
                    < 1e-9
            );
            assert!(two.basis.contains("× 2.00"), "{}", two.basis);
        }
        assert_eq!(
            CpuSpeed::from_probe(REFERENCE_PROBE_BYTES_PER_S).factor,
            1.0
        );
        assert_eq!(
            CpuSpeed::from_probe(2.0 * REFERENCE_PROBE_BYTES_PER_S).factor,
            2.0
        );
        assert_eq!(CpuSpeed::from_probe(0.0).factor, 0.05);
        assert_eq!(CpuSpeed::from_probe(1e300).factor, 20.0);
        assert_eq!(CpuSpeed::from_probe(f64::NAN).factor, 1.0);
    }

    #[test]
    fn vllm_on_cpu_prefills_in_batches_and_pays_a_flat_step() {
        // SmolLM2-135M BF16 (269 MB) on vLLM's CPU build, two threads.
        let s = cpu_speed(EngineKind::Vllm, 269e6, 2, CpuSpeed::REFERENCE);
        let step1 = s.step_base_s + s.step_per_seq_s;
        let step4 = s.step_base_s + 4.0 * s.step_per_seq_s;
        // 32–33 ms per step alone, 36.6 ms with two running.
        assert!((0.030..=0.035).contains(&step1), "{step1}");
        let step2 = s.step_base_s + 2.0 * s.step_per_seq_s;
        assert!((0.034..=0.039).contains(&step2), "{step2}");
        assert!(step4 < 1.5 * step1, "{step4} vs {step1}");
        // First token of 1,900 prompt tokens: ~2 s measured on a machine half
        // as fast, not llama.cpp's 15 s.
        let ttft = s.request_s(1900.0, 1.0, 1.0);
        assert!((0.7..=1.8).contains(&ttft), "{ttft}");
    }

    #[test]
    fn only_servers_estimated_from_the_cpu_constants_need_the_probe() {
        let campaign = |engine: &str, extra: &str| {
            let text = format!(
                "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"{engine}\"\n{extra}\n[[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 2\n"
            );
            let (raw, src) = crate::campaign::parse(Path::new("c.toml"), &text).unwrap();
            crate::campaign::resolve::resolve(raw, &src).unwrap()
        };
        assert!(!uses_cpu_priors(&campaign(
            "sglang",
            "[hardware]\ngpu = \"h100\""
        )));
        assert!(!uses_cpu_priors(&campaign("sim", "")));
        assert!(uses_cpu_priors(&campaign("llamacpp", "")));
        assert!(uses_cpu_priors(&campaign("vllm", "")));
        assert!(!uses_cpu_priors(&campaign(
            "vllm",
            "[hardware]\ngpus = [0]"
        )));
        // Both guesses given: the campaign's own figures replace the priors.
        let guessed = "[run]\ndecode_tok_s_estimate = 40\nstartup_estimate = \"10s\"";
        assert!(!uses_cpu_priors(&campaign("llamacpp", guessed)));
    }

    #[test]
    fn startup_priors_separate_quick_engines_from_minutes_long_ones() {
        let cpu = Some(CpuSpeed::REFERENCE);
        assert!(startup_prior_s(EngineKind::Sim, None, 1, false, cpu) < 1.0);
        let l = startup_prior_s(EngineKind::Llamacpp, Some(98e6), 1, false, cpu);
        assert!((1.0..3.0).contains(&l), "{l}");
        // A 135M vLLM on the reference CPU: 27–42 s measured when eager,
        // about 10 s more compiling.
        let v = startup_prior_s(EngineKind::Vllm, Some(270e6), 1, false, cpu);
        assert!((40.0..55.0).contains(&v), "{v}");
        let eager = startup_prior_s(EngineKind::Vllm, Some(270e6), 1, true, cpu);
        assert!((27.0..42.0).contains(&eager), "{eager}");
        // A machine half as fast takes twice as long; the simulator does not care.
        let half = Some(CpuSpeed {
            probe_bytes_per_s: None,
            factor: 0.5,
        });
        let slow = startup_prior_s(EngineKind::Vllm, Some(270e6), 1, true, half);
        assert!((slow - 2.0 * eager).abs() < 1e-9, "{slow} vs {eager}");
        assert_eq!(
            startup_prior_s(EngineKind::Sim, None, 1, false, half),
            startup_prior_s(EngineKind::Sim, None, 1, false, cpu)
        );
        // On a GPU: about a minute for a 135M model, more for 16 GB and TP.
        let gpu = startup_prior_s(EngineKind::Vllm, Some(270e6), 1, false, None);
        assert!((55.0..70.0).contains(&gpu), "{gpu}");
        let big = startup_prior_s(EngineKind::Vllm, Some(16e9), 2, false, None);
        assert!(big > gpu + 20.0);
        assert!(
            startup_prior_s(EngineKind::Sglang, Some(16e9), 8, false, None)
                > startup_prior_s(EngineKind::Sglang, Some(16e9), 1, false, None)
        );
    }

    fn obs(server: &str, level: &str, predicted: f64, measured: f64) -> Observation {
        Observation {
            server: server.into(),
            shape: server.into(),
            level: level.into(),
            predicted_s: predicted,
            measured_s: measured,
        }
    }

    #[test]
    fn calibration_is_per_server_and_per_level_not_global() {
        let mut c = Calibration::default();
        assert_eq!(c.factor("a", "a", "c1"), 1.0);
        // Server a runs twice as slow as its prior at c1, and 3× at c8.
        c.observe(obs("a", "c1", 10.0, 20.0));
        c.observe(obs("a", "c8", 10.0, 30.0));
        // Server b is exactly on its prior at c1.
        c.observe(obs("b", "c1", 10.0, 10.0));
        assert_eq!(c.factor("a", "a", "c1"), 2.0);
        assert_eq!(c.factor("b", "b", "c1"), 1.0);
        // b at c8: its own factor (1) times how c8 compares on a (3 vs a's 2.5 overall).
        assert!((c.factor("b", "b", "c8") - 1.0 * 3.0 / 2.5).abs() < 1e-9);
        // An unmeasured server at a measured level takes that level's factor.
        assert!((c.factor("z", "z", "c1") - 30.0 / 20.0).abs() < 1e-9);
        // Nothing in common: all cells.
        assert!((c.factor("z", "z", "c64") - 60.0 / 30.0).abs() < 1e-9);
        // A global factor would have given 2.0 for every cell.
        assert_ne!(c.factor("b", "b", "c1"), c.factor("a", "a", "c1"));
    }

    #[test]
    fn startups_use_the_measurement_or_scale_the_prior() {
        let mut c = Calibration::default();
        assert_eq!(c.startup_s("a", 60.0), 60.0);
        c.observe_startup(StartupObservation {
            server: "a".into(),
            predicted_s: 60.0,
            measured_s: 45.0,
        });
        assert_eq!(c.startup_s("a", 60.0), 45.0);
        assert_eq!(c.startup_s("b", 80.0), 60.0);
    }
}
