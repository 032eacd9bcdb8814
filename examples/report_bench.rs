//! How long `servebench report` takes on a large campaign: writes 10,000
//! synthetic cell files (eight requests each, a mix of servers, lengths,
//! concurrencies and failures) into a temporary results directory, then
//! times loading them and rendering every format.
//!
//!     cargo run --release --example report_bench

use std::collections::BTreeMap;
use std::time::Instant;

use servebench::campaign::resolve::{EngineSpec, ModelSpec};
use servebench::campaign::{PromptSource, ServerConfig, WorkloadPoint};
use servebench::client::openai::Api;
use servebench::client::record::{Outcome, RequestRecord};
use servebench::engine::{EngineKind, SpecMethod, Speculative};
use servebench::failure::{Failure, FailureClass};
use servebench::load::driver::LevelRun;
use servebench::load::schedule::LoadShape;
use servebench::metrics::level::summarize;
use servebench::report::{self, Format};
use servebench::store::meta::CampaignMeta;
use servebench::store::{CellResult, CellStatus, Store};
use servebench::util::units::parse_slo;

const CELLS: usize = 10_000;

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::new(dir.path());
    let servers: Vec<ServerConfig> = (0..20)
        .map(|i| ServerConfig {
            id: format!("s{i:02}"),
            tp: 1 << (i % 3),
            dp: 1,
            dp_attention: 1,
            ep: 1,
            pp: 1,
            mem_fraction: None,
            max_running_requests: None,
            context_length: None,
            speculative: (i % 4 != 0).then(|| Speculative {
                method: Some(SpecMethod::Eagle),
                num_draft_tokens: Some(2 + i % 6),
                ..Default::default()
            }),
            tool_call_parser: None,
            grammar_backend: None,
            args: vec![],
            env: BTreeMap::new(),
            expected_failure: false,
            secret_env: vec![],
            build: None,
        })
        .collect();
    let slo = parse_slo("ttft=100ms,tpot=20ms").map_err(anyhow::Error::msg)?;
    let per_server = CELLS / servers.len();
    for (si, s) in servers.iter().enumerate() {
        for j in 0..per_server {
            let conc = [1, 2, 4, 8, 16][j % 5];
            let w = WorkloadPoint {
                workload: format!("w{}", j / 50),
                api: Api::Chat,
                source: PromptSource::Synthetic,
                input_len: 256 << (j / 5 % 5),
                output_len: 128 << (j / 25 % 2),
                load: LoadShape::Concurrency { value: conc },
                num_requests: Some(8),
                duration_s: None,
                warmup: 0,
                ignore_eos: true,
                tool_choice: None,
                shared_prefix: 0,
                slos: vec![slo],
                seed: 0,
                repetition: 0,
            };
            let records: Vec<RequestRecord> = (0..8)
                .map(|i| {
                    let mut r = RequestRecord::new(0.0, i as f64);
                    let gap = 5.0 + si as f64 * 0.1 + conc as f64 * 0.2 + i as f64 * 0.01;
                    let mut t = 20.0 + (j % 7) as f64;
                    r.push_chunk(t, 1);
                    for _ in 0..32 {
                        t += gap;
                        r.push_chunk(t, 2);
                    }
                    r.output_tokens = Some(65);
                    r.finish(Outcome::Ok, t);
                    r
                })
                .collect();
            let failed = (si * per_server + j) % 97 == 0;
            let name = w.cell_name();
            let summary = summarize(
                w.load,
                LevelRun {
                    records,
                    duration_s: 1.5,
                    warmup_sent: 0,
                    warmup_failed: 0,
                    cancelled: false,
                },
                &w.slos,
                0.1,
                4,
            );
            store.write(&CellResult {
                schema_version: 1,
                tool_version: "bench".into(),
                method_version: 1,
                campaign: "bench".into(),
                identity: format!("{}-{name}-{j}", s.id),
                server_id: s.id.clone(),
                cell_name: format!("{name}-{j}"),
                server: s.clone(),
                workload: w,
                engine: EngineSpec {
                    kind: EngineKind::Sim,
                    executable: vec![],
                    version: None,
                    url: None,
                },
                model: ModelSpec {
                    path: "m".into(),
                    served_name: "m".into(),
                    config: None,
                    tokenizer: None,
                    config_digest: None,
                    tokenizer_digest: None,
                },
                status: if failed {
                    CellStatus::Failed
                } else {
                    CellStatus::Ok
                },
                failure: failed.then(|| Failure::new(FailureClass::Crashed, "synthetic crash")),
                warnings: vec![],
                started_at: "2026-01-01T00:00:00Z".into(),
                finished_at: "2026-01-01T00:00:01Z".into(),
                server_run: None,
                summary: (!failed).then_some(summary),
                telemetry: None,
                engine_build: None,
                prefix_cache_reset: None,
                definitions: BTreeMap::new(),
            })?;
        }
    }
    CampaignMeta {
        schema_version: 1,
        name: "bench".into(),
        description: None,
        baseline: Some("s00".into()),
        servers: servers.iter().map(|s| s.id.clone()).collect(),
        workloads: vec![],
        searches: vec![],
        builds: vec![],
        gpu_hour_cost: None,
        renamed: BTreeMap::new(),
    }
    .write(dir.path())?;

    let start = Instant::now();
    let set = report::load(dir.path())?;
    let loaded = start.elapsed();
    let r = report::build(&set, &report::ReportOptions::default());
    let built = start.elapsed();
    let out = tempfile::tempdir()?;
    let mut bytes = report::Format::Table.exporter().render(&r).len();
    for p in report::write_files(
        &r,
        &[Format::Md, Format::Csv, Format::Json, Format::Html],
        out.path(),
    )? {
        bytes += std::fs::metadata(p)?.len() as usize;
    }
    let total = start.elapsed();
    println!(
        "report on {} cells: {:.2} s total (load {:.2} s, aggregate {:.2} s, render+write {:.2} s), {:.1} MB written",
        set.cells.len(),
        total.as_secs_f64(),
        loaded.as_secs_f64(),
        (built - loaded).as_secs_f64(),
        (total - built).as_secs_f64(),
        bytes as f64 / 1e6
    );
    Ok(())
}
