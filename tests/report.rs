//! Report exporters on a fixed, hand-built result set: every format is
//! compared byte for byte with tests/fixtures/report/, and the aggregate is
//! checked for what a reader relies on (failures shown with their reason,
//! never as numbers; speedups against the right baseline twin).
//!
//! Regenerate the snapshots after an intended change with
//! `SERVEBENCH_UPDATE_SNAPSHOTS=1 cargo test --test main report::`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use servebench::campaign::resolve::{EngineSpec, ModelSpec};
use servebench::campaign::{PromptSource, ServerConfig, WorkloadPoint};
use servebench::client::openai::Api;
use servebench::client::record::{Outcome, RequestRecord};
use servebench::engine::{EngineKind, SpecMethod, Speculative};
use servebench::failure::{Failure, FailureClass};
use servebench::load::driver::LevelRun;
use servebench::load::schedule::LoadShape;
use servebench::metrics::level::summarize;
use servebench::report::charts::ChartSection;
use servebench::report::model::{build, Report, ReportOptions};
use servebench::report::{Format, ResultSet};
use servebench::store::meta::CampaignMeta;
use servebench::store::{CellResult, CellStatus};
use servebench::util::units::parse_slo;
use servebench::workload::PromptKind;

fn server(id: &str, tp: u32, budget: Option<u32>) -> ServerConfig {
    ServerConfig {
        id: id.into(),
        tp,
        dp: 1,
        dp_attention: 1,
        ep: 1,
        pp: 1,
        mem_fraction: None,
        max_running_requests: None,
        context_length: Some(32768),
        speculative: budget.map(|k| Speculative {
            method: Some(SpecMethod::Eagle),
            num_draft_tokens: Some(k),
            ..Default::default()
        }),
        tool_call_parser: None,
        grammar_backend: None,
        args: vec![],
        env: BTreeMap::new(),
        expected_failure: false,
        secret_env: vec![],
        build: None,
    }
}

fn point(workload: &str, input_len: u64, conc: u32, rep: u32) -> WorkloadPoint {
    WorkloadPoint {
        workload: workload.into(),
        api: Api::Chat,
        source: if workload == "kinds" {
            PromptSource::PromptKinds {
                kinds: vec![PromptKind::Quicksort, PromptKind::Haiku],
            }
        } else {
            PromptSource::Synthetic
        },
        input_len,
        output_len: 64,
        load: LoadShape::Concurrency { value: conc },
        num_requests: Some(8),
        duration_s: None,
        warmup: 0,
        ignore_eos: true,
        tool_choice: None,
        shared_prefix: 0,
        slos: if workload == "chat" {
            vec![parse_slo("ttft=60ms,tpot=12ms").unwrap()]
        } else {
            vec![]
        },
        seed: 0,
        repetition: rep,
    }
}

/// How one server behaves in the fixture: per-token gap and tokens per chunk.
#[derive(Clone, Copy)]
struct Perf {
    gap_ms: f64,
    tokens_per_chunk: u32,
    ttft_ms: f64,
}

/// Eight deterministic requests: small, fixed variation between them.
fn records(
    p: Perf,
    input_len: u64,
    conc: u32,
    rep: u32,
    labels: &[&str],
    turns: bool,
) -> Vec<RequestRecord> {
    (0..8u32)
        .map(|i| {
            let wobble = 1.0 + 0.02 * ((i * 7 + rep * 3) % 5) as f64;
            let load = 1.0 + 0.15 * (conc as f64 - 1.0);
            let ttft = p.ttft_ms * wobble * load * (input_len as f64 / 512.0).sqrt();
            let mut r = RequestRecord::new(i as f64 * 10.0, i as f64 * 10.0);
            r.planned_input_tokens = Some(input_len);
            r.push_chunk(ttft, 1);
            let mut t = ttft;
            let mut sent = 1u32;
            while sent < 64 {
                let k = p.tokens_per_chunk.min(64 - sent);
                t += p.gap_ms * load * wobble * k as f64;
                r.push_chunk(t, k);
                sent += k;
            }
            r.output_tokens = Some(64);
            r.input_tokens = Some(input_len);
            if !labels.is_empty() {
                r.label = Some(labels[i as usize % labels.len()].to_string());
            }
            if turns {
                r.session = Some((i / 4) as u64);
                r.turn = Some(i % 4);
                r.input_tokens = Some(input_len + 300 * (i % 4) as u64);
            }
            r.finish(Outcome::Ok, t + 0.5);
            r
        })
        .collect()
}

fn cell(
    s: &ServerConfig,
    w: WorkloadPoint,
    status: CellStatus,
    recs: Vec<RequestRecord>,
) -> CellResult {
    let duration_s = recs
        .iter()
        .filter_map(|r| r.e2e_ms.map(|e| r.sent_ms + e))
        .fold(0.0f64, f64::max)
        / 1000.0
        * 8.0
        / match w.load {
            LoadShape::Concurrency { value } => value as f64,
            LoadShape::Rate { .. } | LoadShape::Replay { .. } => 1.0,
        };
    let summary = (!recs.is_empty()).then(|| {
        summarize(
            w.load,
            LevelRun {
                records: recs,
                duration_s,
                warmup_sent: 0,
                warmup_failed: 0,
                cancelled: false,
            },
            &w.slos,
            0.1,
            4,
        )
    });
    let name = w.cell_name();
    CellResult {
        schema_version: 1,
        tool_version: "0.1.0".into(),
        method_version: 1,
        campaign: "fixture".into(),
        identity: format!("id-{}-{name}", s.id),
        server_id: s.id.clone(),
        cell_name: name,
        server: s.clone(),
        workload: w,
        engine: EngineSpec {
            kind: EngineKind::Sim,
            executable: vec![],
            version: None,
            url: None,
        },
        model: ModelSpec {
            path: "sim-model".into(),
            served_name: "sim-model".into(),
            config: None,
            tokenizer: None,
            config_digest: None,
            tokenizer_digest: None,
        },
        status,
        failure: None,
        warnings: vec![],
        started_at: "2026-01-02T03:04:05Z".into(),
        finished_at: "2026-01-02T03:14:05Z".into(),
        server_run: None,
        summary,
        telemetry: None,
        engine_build: None,
        prefix_cache_reset: None,
        definitions: BTreeMap::new(),
    }
}

/// The fixed result set: a baseline, two speculative configs (one on TP2),
/// a crashed server, a context overflow, a suspicious cell, a skipped cell,
/// prompt kinds and agentic turns.
pub fn fixture() -> ResultSet {
    let ar = server("ar", 1, None);
    let k4 = server("eagle-k4", 1, Some(4));
    let k8 = server("eagle-k8-tp2", 2, Some(8));
    let crashy = server("crashy", 1, Some(6));
    let tp8 = ServerConfig {
        tp: 8,
        ..server("ar-tp8", 8, None)
    };
    let perf = |gap, k, ttft| Perf {
        gap_ms: gap,
        tokens_per_chunk: k,
        ttft_ms: ttft,
    };
    let mut cells = Vec::new();
    for (s, p) in [
        (&ar, perf(10.0, 1, 40.0)),
        (&k4, perf(5.0, 3, 44.0)),
        (&k8, perf(3.5, 4, 38.0)),
    ] {
        for conc in [1, 4] {
            for rep in 0..2 {
                let mut c = cell(
                    s,
                    point("chat", 512, conc, rep),
                    CellStatus::Ok,
                    records(p, 512, conc, rep, &[], false),
                );
                if s.id == "eagle-k8-tp2" && conc == 4 && rep == 1 {
                    c.status = CellStatus::Suspicious;
                    c.warnings = vec!["zero accepted drafts: the drafter proposed 512 tokens and none were accepted".into()];
                }
                cells.push(c);
            }
        }
        cells.push(cell(
            s,
            point("ctx", 4096, 1, 0),
            CellStatus::Ok,
            records(p, 4096, 1, 0, &[], false),
        ));
        cells.push(cell(
            s,
            point("kinds", 0, 1, 0),
            CellStatus::Ok,
            records(p, 200, 1, 0, &["quicksort", "haiku"], false),
        ));
    }
    // The baseline cannot take a 40k prompt: every request got HTTP 400.
    let mut overflow = cell(&ar, point("ctx", 40000, 1, 0), CellStatus::Failed, vec![]);
    let mut f = Failure::new(
        FailureClass::ContextOverflow,
        "HTTP 400: This model's maximum context length is 32768 tokens. However, you requested 40064 tokens",
    );
    f.status = Some(400);
    overflow.failure = Some(f);
    cells.push(overflow);
    cells.push(cell(
        &ar,
        point("agent", 1000, 1, 0),
        CellStatus::Ok,
        records(perf(10.0, 1, 40.0), 1000, 1, 0, &[], true),
    ));
    // The crashed server: first cell crashed, the rest never ran.
    let mut crashed = cell(
        &crashy,
        point("chat", 512, 1, 0),
        CellStatus::Failed,
        vec![],
    );
    crashed.failure = Some(
        Failure::new(
            FailureClass::Crashed,
            "server exited with signal 6 during the cell",
        )
        .with_log("RuntimeError: CUDA error: an illegal instruction was encountered"),
    );
    cells.push(crashed);
    let mut not_run = cell(
        &crashy,
        point("chat", 512, 4, 0),
        CellStatus::NotRun,
        vec![],
    );
    not_run.failure = Some(Failure::new(
        FailureClass::Crashed,
        "not run: server `crashy` crashed earlier",
    ));
    cells.push(not_run);
    let mut skipped = cell(&tp8, point("chat", 512, 1, 0), CellStatus::Skipped, vec![]);
    skipped.failure = Some(Failure::new(
        FailureClass::StartFailed,
        "skipped by the plan: tp=8 needs 8 GPUs but the pool has 4",
    ));
    cells.push(skipped);
    ResultSet {
        dir_name: "fixture".into(),
        meta: Some(CampaignMeta {
            schema_version: 1,
            name: "fixture".into(),
            description: Some("hand-built results for snapshot tests".into()),
            baseline: Some("ar".into()),
            servers: vec![
                "ar".into(),
                "eagle-k4".into(),
                "eagle-k8-tp2".into(),
                "crashy".into(),
                "ar-tp8".into(),
            ],
            workloads: vec!["chat".into(), "ctx".into(), "kinds".into(), "agent".into()],
            searches: vec![],
            builds: vec![],
            gpu_hour_cost: Some(2.0),
            renamed: BTreeMap::new(),
        }),
        cells,
        unreadable: vec![],
        not_measured: vec![],
    }
}

fn report() -> Report {
    build(&fixture(), &ReportOptions::default())
}

fn snapshot(format: Format) {
    let r = report();
    let e = format.exporter();
    let got = String::from_utf8(e.render(&r)).unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(e.file_name());
    if std::env::var_os("SERVEBENCH_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; set SERVEBENCH_UPDATE_SNAPSHOTS=1 to create it",
            path.display()
        )
    });
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        panic!(
            "{} differs from the snapshot at line {}:\n got: {:?}\nwant: {:?}",
            e.file_name(),
            line + 1,
            got.lines().nth(line),
            want.lines().nth(line)
        );
    }
    // Rendering twice gives the same bytes: nothing depends on the clock or a hash order.
    assert_eq!(e.render(&report()), got.into_bytes());
}

#[test]
fn table_snapshot() {
    snapshot(Format::Table);
}

#[test]
fn markdown_snapshot() {
    snapshot(Format::Md);
}

#[test]
fn csv_snapshot() {
    snapshot(Format::Csv);
}

#[test]
fn json_snapshot() {
    snapshot(Format::Json);
}

#[test]
fn html_snapshot() {
    snapshot(Format::Html);
}

#[test]
fn failed_skipped_and_suspicious_cells_are_listed_with_their_reason_and_carry_no_speedup() {
    let r = report();
    let problem = |server: &str, cell: &str| {
        r.problems
            .iter()
            .find(|p| p.server_id == server && p.cell_name == cell)
            .unwrap_or_else(|| panic!("{server}/{cell} missing from problems"))
    };
    let crash = problem("crashy", "chat-in512-out64-c1");
    assert_eq!(crash.class, Some(FailureClass::Crashed));
    assert!(crash
        .log_excerpt
        .as_deref()
        .unwrap()
        .contains("illegal instruction"));
    let ovf = problem("ar", "ctx-in40000-out64-c1");
    assert_eq!(ovf.class, Some(FailureClass::ContextOverflow));
    assert!(ovf.evidence.contains("maximum context length"));
    assert!(problem("eagle-k8-tp2", "chat-in512-out64-c4-rep1")
        .evidence
        .contains("zero accepted"));
    assert!(problem("ar-tp8", "chat-in512-out64-c1")
        .evidence
        .contains("tp=8"));
    assert_eq!(
        problem("crashy", "chat-in512-out64-c4").status,
        CellStatus::NotRun
    );
    for c in r.cells.iter().filter(|c| {
        matches!(
            c.status,
            CellStatus::Failed | CellStatus::Skipped | CellStatus::NotRun
        )
    }) {
        assert_eq!(
            (c.output_tok_s, c.speedup_decode),
            (None, None),
            "{} must carry no number",
            c.cell_name
        );
    }
    let sus = r
        .cells
        .iter()
        .find(|c| c.status == CellStatus::Suspicious)
        .unwrap();
    assert!(
        sus.output_tok_s.is_some(),
        "suspicious numbers stay visible as evidence"
    );
    assert_eq!(sus.speedup_decode, None, "but never become a speedup");
    // The TP2 point at c4 aggregates only its believable repetition.
    let p = r
        .points
        .iter()
        .find(|p| p.server_id == "eagle-k8-tp2" && p.point == "chat-in512-out64-c4")
        .unwrap();
    assert_eq!(p.output_tok_s.unwrap().n, 1);
    assert_eq!(p.status.to_string(), "ok×1 suspicious×1");
    assert!(
        !p.status.all_ok(),
        "a suspicious repetition marks the point"
    );
}

#[test]
fn a_points_status_tally_reads_back_as_written_and_repeated_oks_are_all_ok() {
    let r = build(&fixture(), &ReportOptions::default());
    let tally = |server: &str, point: &str| {
        r.points
            .iter()
            .find(|p| p.server_id == server && p.point == point)
            .map(|p| p.status.clone())
            .unwrap()
    };
    let twice = tally("ar", "chat-in512-out64-c1");
    assert_eq!(twice.to_string(), "ok×2");
    assert!(twice.all_ok(), "two ok repetitions are not a warning");
    let once = tally("ar", "ctx-in4096-out64-c1");
    assert_eq!(once.to_string(), "ok");
    let failed = tally("ar", "ctx-in40000-out64-c1");
    assert_eq!(failed.to_string(), "failed");
    assert!(!failed.all_ok());
    // report.json holds the text; reading it back gives the same tally.
    for p in &r.points {
        let json = serde_json::to_value(p).unwrap();
        assert_eq!(json["status"], p.status.to_string());
        let back: servebench::report::model::PointRow = serde_json::from_value(json).unwrap();
        assert_eq!(back.status, p.status);
    }
}

#[test]
fn speedup_divides_by_the_baseline_twin_of_the_same_repetition() {
    let set = fixture();
    let r = build(&set, &ReportOptions::default());
    for row in r.cells.iter().filter(|c| c.speedup_decode.is_some()) {
        let me = set
            .cells
            .iter()
            .find(|c| c.identity == row.identity)
            .unwrap();
        let twin = set
            .cells
            .iter()
            .find(|c| {
                c.server_id == "ar"
                    && c.workload.workload == me.workload.workload
                    && c.workload.input_len == me.workload.input_len
                    && c.workload.load == me.workload.load
                    && c.workload.repetition == me.workload.repetition
            })
            .unwrap();
        let (a, b) = (me.summary.as_ref().unwrap(), twin.summary.as_ref().unwrap());
        let want = a.latency.decode_tok_s.unwrap().p50 / b.latency.decode_tok_s.unwrap().p50;
        assert!((row.speedup_decode.unwrap() - want).abs() < 1e-12);
        let want = a.output_throughput_tok_s / b.output_throughput_tok_s;
        assert!((row.speedup_output.unwrap() - want).abs() < 1e-12);
    }
    // Every usable non-baseline cell of a point the baseline measured has one.
    let n = r
        .cells
        .iter()
        .filter(|c| c.speedup_decode.is_some())
        .count();
    assert_eq!(
        n,
        6 + 5,
        "eagle-k4: 4 chat + ctx + kinds; eagle-k8: 3 usable chat + ctx + kinds"
    );
}

#[test]
fn per_gpu_throughput_divides_by_tp_and_the_frontier_is_not_dominated() {
    let r = report();
    for c in r.cells.iter().filter(|c| c.output_tok_s.is_some()) {
        assert!(
            (c.output_tok_s_per_gpu.unwrap() * c.tp as f64 - c.output_tok_s.unwrap()).abs() < 1e-9
        );
    }
    let fam: Vec<_> = r
        .gpu_points
        .iter()
        .filter(|g| g.family == "chat-in512-out64")
        .collect();
    assert_eq!(fam.len(), 6, "three servers × two concurrencies");
    for g in &fam {
        let dominated = fam.iter().any(|o| {
            o.tok_s_per_user >= g.tok_s_per_user
                && o.tok_s_per_gpu >= g.tok_s_per_gpu
                && (o.tok_s_per_user > g.tok_s_per_user || o.tok_s_per_gpu > g.tok_s_per_gpu)
        });
        assert_eq!(g.pareto, !dominated, "{} {}", g.server_id, g.load);
    }
}

#[test]
fn baseline_flag_overrides_campaign_json_and_no_baseline_means_no_speedups() {
    let mut set = fixture();
    let r = build(
        &set,
        &ReportOptions {
            baseline: Some("eagle-k4".into()),
            ..Default::default()
        },
    );
    assert_eq!(r.baseline.as_deref(), Some("eagle-k4"));
    assert!(r
        .cells
        .iter()
        .filter(|c| c.server_id == "eagle-k4")
        .all(|c| c.speedup_decode.is_none()));
    assert!(r
        .cells
        .iter()
        .any(|c| c.server_id == "ar" && c.speedup_decode.is_some_and(|s| s < 1.0)));
    set.meta = None;
    let r = build(&set, &ReportOptions::default());
    assert_eq!(r.baseline, None);
    assert!(r.cells.iter().all(|c| c.speedup_decode.is_none()));
    assert!(r.charts.iter().all(|c| c.section != ChartSection::Speedup));
}

#[test]
fn a_config_that_crashed_in_a_family_is_not_recommended_for_it_unless_asked() {
    let mut set = fixture();
    // `crashy` crashed in the chat family; at one stream on the ctx prompts
    // it was the fastest of all, and those synthetic requests share a
    // single-stream pick with the chat family's.
    let crashy = server("crashy", 1, Some(6));
    let fast = Perf {
        gap_ms: 1.0,
        tokens_per_chunk: 6,
        ttft_ms: 30.0,
    };
    set.cells.push(cell(
        &crashy,
        point("ctx", 4096, 1, 0),
        CellStatus::Ok,
        records(fast, 4096, 1, 0, &[], false),
    ));
    let pick = |r: &Report| {
        r.stream_picks
            .iter()
            .find(|p| p.kind == "synthetic")
            .cloned()
            .expect("a synthetic single-stream pick")
    };
    let default = build(&set, &ReportOptions::default());
    let p = pick(&default);
    assert_ne!(p.best.server_id, "crashy");
    assert_eq!(p.excluded.len(), 1);
    assert_eq!(p.excluded[0].server_id, "crashy");
    assert_eq!(
        p.excluded[0].crashed_in,
        vec!["chat-in512-out64-c1".to_string()]
    );
    let table = String::from_utf8(Format::Table.exporter().render(&default)).unwrap();
    assert!(
        table.contains("not ranked: `crashy` (crashed in chat-in512-out64-c1)"),
        "{table}"
    );
    let asked = build(
        &set,
        &ReportOptions {
            include_crashed: true,
            ..Default::default()
        },
    );
    let p = pick(&asked);
    assert_eq!(p.best.server_id, "crashy");
    assert!(p.excluded.is_empty());
    // Its caveat still says what went wrong.
    assert!(
        p.caveat.as_deref().is_some_and(|c| c.contains("crashed")),
        "{:?}",
        p.caveat
    );
}

#[test]
fn a_point_meets_an_slo_only_at_its_attainment_and_the_runner_up_is_another_config() {
    let r = build(&fixture(), &ReportOptions::default());
    assert!(!r.slo_picks.is_empty());
    for p in &r.slo_picks {
        assert_eq!(p.attainment, 0.9, "{p:?}");
        assert!(p.best_share >= 0.9, "{p:?}");
        if let Some(u) = &p.runner_up {
            assert_ne!(u.server_id, p.best.server_id, "{p:?}");
        }
    }
    let answer = servebench::report::answer::lines(&r).join("\n");
    assert!(
        answer.contains("of its requests within the SLO (at least 90 % asked)"),
        "{answer}"
    );
    assert!(
        answer.contains("confident over runner-up `eagle-k4` at c1"),
        "{answer}"
    );

    // The points that kept fewer than all of their requests within the SLO:
    // asked for all, none of them is deployed, and the closest is named.
    let share = |c: &CellResult| Some(c.summary.as_ref()?.goodput.first()?.share);
    let mut short = fixture();
    short
        .cells
        .retain(|c| share(c).is_some_and(|s| s < 1.0) && c.status.is_usable());
    assert!(short.cells.len() >= 2, "the fixture has points below 100 %");
    let closest = short.cells.iter().filter_map(share).fold(0.0, f64::max);
    for c in &mut short.cells {
        for g in &mut c.summary.as_mut().unwrap().goodput {
            g.slo.attainment = Some(1.0);
        }
    }
    let r = build(&short, &ReportOptions::default());
    assert!(
        r.slo_picks.iter().all(|p| !p.slo.starts_with("ttft<=60ms")),
        "{:?}",
        r.slo_picks
    );
    let miss = r
        .slo_misses
        .iter()
        .find(|m| m.slo.starts_with("ttft<=60ms"))
        .expect("the SLO no point met is named");
    assert_eq!(miss.attainment, 1.0);
    assert!(
        (miss.closest_share - closest).abs() < 1e-9,
        "{miss:?} vs {closest}"
    );
    let answer = servebench::report::answer::lines(&r).join("\n");
    assert!(
        answer.contains("no config kept 100 % of its requests within the SLO; closest `"),
        "{answer}"
    );
}
