//! The ETA's priors, sessions, speculative priors and calibration on
//! hand-built campaigns and workload points.

use super::calibration::*;
use super::priors::*;
use super::shapes::*;
use super::spec::*;
use super::*;
use std::path::Path;

use crate::client::openai::Api;
use crate::engine::EngineKind;
use crate::memory::gpus::gpu_by_name;
use crate::sim::SimConfig;

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
        tool_choice: None,
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
        sp.load_s(&point(4, 2, 128, 64), &scenarios()),
        sp.load_s(&point(2, 2, 128, 64), &scenarios())
    );
    assert!(
        sp.load_s(&point(4, 2, 128, 64), &scenarios())
            < sp.load_s(&point(4, 4, 128, 64), &scenarios())
    );
    // A server that runs two at a time: concurrency 8 is concurrency 2.
    sp.max_running = Some(2);
    assert_eq!(
        sp.load_s(&point(8, 16, 128, 64), &scenarios()),
        sp.load_s(&point(2, 16, 128, 64), &scenarios())
    );
}

/// The built-in scenarios the session points of these tests name.
fn scenarios() -> Scenarios {
    ["calculator"]
        .into_iter()
        .map(|n| {
            let sc = crate::workload::session::resolve(n).unwrap();
            (n.to_string(), std::sync::Arc::new(sc))
        })
        .collect()
}

fn session(name: &str, c: u32, sessions: u64, output: u64) -> WorkloadPoint {
    WorkloadPoint {
        api: Api::Chat,
        source: PromptSource::Scenario {
            name: name.into(),
            digest: None,
        },
        ..point(c, sessions, 0, output)
    }
}

#[test]
fn a_session_is_its_turns_in_sequence_with_growing_context_and_pauses() {
    let w = session("calculator", 2, 2, 256);
    let turns = session_turns(&w, &scenarios()).unwrap();
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
        s.load_s(&session("calculator", 4, 2, 256), &scenarios()),
        s.load_s(&session("calculator", 2, 2, 256), &scenarios())
    );
    assert!((s.load_s(&w, &scenarios()) - s.unit_s(&turns, 2.0)).abs() < 1e-9);
    // Not a session: no turns.
    assert!(session_turns(&point(1, 1, 10, 10), &scenarios()).is_none());
}

#[test]
fn long_prompts_queue_for_the_gpus_compute_under_concurrency() {
    let gpu = crate::memory::gpus::figures(Some("rtx-pro-6000"), None, None)
        .unwrap()
        .unwrap();
    let s = gpu_speed(&gpu, 54e9, 0.0, 64, 1);
    let prefill_one = 100_000.0 / s.prefill_tok_s;
    let c1 = s.load_s(&point(1, 16, 100_000, 256), &scenarios());
    let c8 = s.load_s(&point(8, 16, 100_000, 256), &scenarios());
    // Sixteen 100k prompts take sixteen prefills whatever the concurrency:
    // c8 is far from c1's time ÷ 8.
    assert!(c8 >= 16.0 * prefill_one, "{c8} vs {prefill_one}");
    assert!(c8 > c1 / 2.0, "c1 {c1} c8 {c8}");
    assert!(c8 < c1);
    // The same for the campaign's own guesses.
    let g = guessed_speed(60.0, 8000.0);
    assert!(g.load_s(&point(8, 16, 100_000, 256), &scenarios()) >= 16.0 * 100_000.0 / 8000.0);
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
    let t_ar = ar.load_s(&single, &scenarios());
    let (_, ngram) = with(SpecMethod::Ngram, None, EngineKind::Sglang);
    let (_, eagle3) = with(SpecMethod::Eagle3, None, EngineKind::Sglang);
    let (_, dd16) = with(SpecMethod::Ddtree, Some(16), EngineKind::Sglang);
    let (_, dd64) = with(SpecMethod::Ddtree, Some(64), EngineKind::Sglang);
    // Alone, every method beats autoregressive decoding, by how much it accepts.
    assert!(ngram.load_s(&single, &scenarios()) < t_ar);
    assert!(eagle3.load_s(&single, &scenarios()) < ngram.load_s(&single, &scenarios()));
    assert!(dd16.load_s(&single, &scenarios()) < eagle3.load_s(&single, &scenarios()));
    assert!(dd16.basis.contains("ddtree prior") && dd16.basis.contains("17 tokens verified"));
    // At 100 running, verifying 65 tokens per sequence is compute-bound:
    // the big tree loses to autoregressive decoding, and to the small tree.
    let busy = point(100, 200, 512, 512);
    assert!(
        dd64.load_s(&busy, &scenarios()) > ar.load_s(&busy, &scenarios()),
        "{} vs {}",
        dd64.load_s(&busy, &scenarios()),
        ar.load_s(&busy, &scenarios())
    );
    assert!(dd64.load_s(&busy, &scenarios()) > dd16.load_s(&busy, &scenarios()));
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
    sim_config(&argv, &Default::default()).unwrap()
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
    assert!((s.load_s(&w, &scenarios()) - 2.0 * eight).abs() < 1e-9);
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
fn a_simulated_builds_environment_sets_its_timing_and_its_command_line_wins() {
    let env: std::collections::BTreeMap<String, String> = [
        ("SERVEBENCH_SIM_DECODE_STEP_MS", "7"),
        ("SERVEBENCH_SIM_WRONG_ANSWERS", "1"),
        ("UNRELATED", "x"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let argv = |extra: &[&str]| {
        let mut v = vec!["/bin/servebench".to_string(), "sim".into()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cfg = sim_config(&argv(&[]), &env).unwrap();
    assert_eq!(cfg.decode_step_ms, 7.0);
    assert!(cfg.wrong_answers);
    let cfg = sim_config(&argv(&["--decode-step-ms", "3"]), &env).unwrap();
    assert_eq!(cfg.decode_step_ms, 3.0);
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
        scenarios: scenarios(),
        prompt_build: PromptBuild {
            counter: PromptCounter::ServerTokenize(EngineKind::Sim),
            cpu_factor: 1.0,
        },
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
    let t = s.load_s(&w, &scenarios());
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
            (one.request_s(100.0, 8.0, 1.0) / two.request_s(100.0, 8.0, 1.0) - 2.0).abs() < 1e-9
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
