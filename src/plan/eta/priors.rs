//! What a server costs before it is measured: start-up and stop times from
//! its engine's [`crate::engine::Lifecycle`], and the speed of a decode
//! step and a prefill, from the simulator's own flags, a GPU's figures, a
//! CPU's measured bandwidth or the user's guesses.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::spec::SpecPrior;
use super::Speed;
use crate::campaign::{Campaign, ServerConfig};
use crate::engine::EngineKind;
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

/// Start-up prior, s, from the engine's [`crate::engine::Lifecycle`]: sim
/// and llama.cpp start in about a second, vLLM and SGLang in about a minute
/// on a GPU plus weight loading, more with TP.
///
/// `cpu`: the server runs on this CPU, where start-up is imports and
/// initialisation, CPU work: the reference machine's figure divided by its
/// speed. `eager`: the engine was told to skip compilation and graph capture
/// (vLLM `--enforce-eager`, SGLang `--disable-cuda-graph`).
pub fn startup_prior_s(
    engine: EngineKind,
    weights_total_bytes: Option<f64>,
    ranks: u32,
    eager: bool,
    cpu: Option<CpuSpeed>,
) -> f64 {
    let life = engine.lifecycle();
    let gb = weights_total_bytes.unwrap_or(0.0) / 1e9;
    let extra_ranks = ranks.saturating_sub(1) as f64;
    let mut prior = if life.python {
        // Python imports, engine core and memory profiling: the 135M model
        // came up in 27–42 s (mean 34 s) on the reference machine's 2 cores
        // with --enforce-eager, where compiling adds about 10 s; on GPUs
        // about 45 s, and torch.compile with CUDA graph capture adds about 15 s.
        let (python_base, compile) = match cpu {
            Some(_) => (35.0, 10.0),
            None => (45.0, 15.0),
        };
        python_base + life.startup_s + if eager { 0.0 } else { compile }
    } else {
        life.startup_s
    };
    if let Some(rate) = life.load_gb_per_s {
        prior += gb / rate;
    }
    prior += life.startup_s_per_extra_rank * extra_ranks;
    match cpu {
        Some(cpu) if life.startup_is_cpu_work => prior / cpu.factor,
        _ => prior,
    }
}

/// Time from asking a server to stop until it and its process tree are gone, s.
pub fn stop_prior_s(engine: EngineKind) -> f64 {
    engine.lifecycle().stop_s
}

/// The simulator config a server would run with, from its command line
/// and its environment (a simulated build sets its speed there).
pub fn sim_config(argv: &[String], env: &BTreeMap<String, String>) -> Option<SimConfig> {
    use clap::Parser;
    // The `sim` subcommand's own parser, so a flag given twice means here
    // what it means to the process; the server's variables go first, so a
    // flag on its command line wins over them as it does there.
    let at = argv.iter().position(|a| a == "sim")?;
    let v = ["servebench", "sim"]
        .into_iter()
        .map(str::to_string)
        .chain(env_flags(env))
        .chain(argv[at + 1..].iter().cloned());
    match crate::cli::Cli::try_parse_from(v).ok()?.command {
        crate::cli::Command::Sim(a) => Some(a.config),
        _ => None,
    }
}

/// The simulator flags that `env` sets through their variables
/// (`SERVEBENCH_SIM_DECODE_STEP_MS=5` → `--decode-step-ms 5`).
fn env_flags(env: &BTreeMap<String, String>) -> Vec<String> {
    use clap::CommandFactory;
    let cli = crate::cli::Cli::command();
    let Some(sim) = cli.find_subcommand("sim") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for arg in sim.get_arguments() {
        let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let Some(value) = var.to_str().and_then(|v| env.get(v)) else {
            continue;
        };
        if arg.get_action().takes_values() {
            out.extend([format!("--{long}"), value.clone()]);
        } else if matches!(
            value.to_ascii_lowercase().as_str(),
            "1" | "y" | "yes" | "t" | "true" | "on"
        ) {
            out.push(format!("--{long}"));
        }
    }
    out
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
        replicas: cfg.dp.max(1),
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
        replicas: 1,
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
            replicas: 1,
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
            replicas: 1,
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

/// Speed from the campaign's own `[run]` guesses.
pub fn guessed_speed(decode_tok_s: f64, prefill_tok_s: f64) -> Speed {
    Speed {
        replicas: 1,
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
        EngineKind::Sim => command
            .and_then(|argv| sim_config(argv, &s.env))
            .map(|cfg| sim_speed(&cfg)),
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
    // Each data rank batches its own share of the load (the simulator's
    // replicas are in its own speed already).
    let ranks = match c.engine.kind {
        EngineKind::Sglang => {
            crate::memory::data_ranks(crate::memory::EngineRule::Sglang, s.layout())
        }
        EngineKind::Vllm => crate::memory::data_ranks(crate::memory::EngineRule::Vllm, s.layout()),
        EngineKind::Sim => 1,
        _ => s.dp.max(1),
    };
    if ranks > 1 {
        speed.replicas = ranks;
        speed
            .basis
            .push_str(&format!("; {ranks} data-parallel ranks share the load"));
    }
    speed
}
