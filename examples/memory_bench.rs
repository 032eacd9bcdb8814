//! Times 10,000 memory estimates over the published model configs in
//! `tests/fixtures/models` (dense GQA, MLA, MoE, hybrid linear attention,
//! hybrid Mamba), alternating engine rules, TP sizes, GPU sizes, memory
//! fractions, request lengths and concurrency.
//!
//! Run: `cargo run --release --example memory_bench`

use std::path::Path;
use std::time::Instant;

use servebench::memory::{estimate, load_model_info, EngineRule, MemoryInputs};

const GIB: u64 = 1 << 30;

fn main() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/models"
    ));
    let models: Vec<_> = [
        "Llama-3.1-8B-Instruct",
        "DeepSeek-R1",
        "gpt-oss-20b",
        "Qwen3-Next-80B-A3B-Instruct",
        "granite-4.0-h-micro",
    ]
    .iter()
    .map(|n| load_model_info(&dir.join(n)).unwrap_or_else(|e| panic!("fixture {n}: {e}")))
    .collect();
    let rounds = 10_000u32;
    let start = Instant::now();
    let mut slots = 0u64;
    for k in 0..rounds {
        let m = &models[k as usize % models.len()];
        let engine = if k % 2 == 0 {
            EngineRule::Sglang
        } else {
            EngineRule::Vllm
        };
        let mut i = MemoryInputs::new(engine, 1 << (k % 4), (40 + u64::from(k % 5) * 20) * GIB);
        i.mem_fraction = Some(0.80 + f64::from(k % 10) / 100.0);
        i.request_tokens = Some(1024 * u64::from(1 + k % 32));
        i.concurrency = Some(1 + k % 64);
        slots += estimate(m, &i).max_concurrent_requests.unwrap_or(0);
    }
    let elapsed = start.elapsed();
    println!(
        "{rounds} estimates in {:.1} ms ({:.2} µs each; {slots} request slots in all)",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e6 / f64::from(rounds)
    );
}
