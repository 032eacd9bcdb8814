//! Times `plan` on a 10,000-cell campaign: 100 server configs (a TP ×
//! speculative-budget matrix on a hybrid model with the memory model on)
//! × 100 workload points, against an empty results directory.
//!
//! Run: `cargo run --release --example plan_bench`

use std::time::Instant;

fn main() {
    let dir = std::env::temp_dir().join(format!("servebench-plan-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/Qwen3.5-27B");
    let text = format!(
        r#"
[campaign]
name = "bench"
[model]
path = "Qwen/Qwen3.5-27B"
config = "{model}"
[engine]
kind = "sglang"
[hardware]
gpus = [0, 1, 2, 3, 4, 5, 6, 7]
gpu_memory = "96GiB"
[[matrix]]
id = "tree-tp{{tp}}-b{{budget}}-m{{max_running_requests}}"
tp = [1, 2, 4, 8]
max_running_requests = [16, 32, 64, 100, 128]
speculative = [{{ method = "mtp", num_steps = 3, topk = 8 }}]
budget = [8, 12, 16, 32, 64]
[[workload]]
name = "sweep"
input_len = [1000, 2000, 3000, 4000, 8000, 16000, 30000, 60000, 100000, 120000]
output_len = [128, 256, 512, 1024, 2048]
concurrency = [1, 8]
num_requests = 16
"#
    );
    let path = dir.join("campaign.toml");
    std::fs::write(&path, text).expect("write campaign");
    let start = Instant::now();
    let campaign = servebench::campaign::load_campaign(&path).expect("campaign parses");
    let parsed = start.elapsed();
    let store = servebench::store::Store::new(&campaign.results_dir);
    let plan =
        servebench::plan::build(&campaign, &store.index(), &Default::default(), "servebench");
    let total = start.elapsed();
    let cells: usize = plan.groups.iter().map(|g| g.cells.len()).sum();
    let skipped: usize = plan
        .groups
        .iter()
        .flat_map(|g| &g.cells)
        .filter(|c| matches!(c.verdict, servebench::plan::Verdict::Skip(_)))
        .count();
    println!(
        "planned {cells} cells ({} servers, {skipped} skipped) in {:.3} s (parse {:.3} s)",
        plan.groups.len(),
        total.as_secs_f64(),
        parsed.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
