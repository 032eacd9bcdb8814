//! How long reading and scheduling a large trace takes, and how much memory
//! it needs: writes a 100,000-row Mooncake-style trace (conversations that
//! share their first blocks, 64-bit hash ids, Poisson-like arrivals) to a
//! temporary file, then times `workload::trace::load` and prints its CPU
//! time and the process's peak resident memory.
//!
//!     cargo run --release --example trace_bench

use std::io::Write;
use std::time::Instant;

use servebench::util::proc::{cpu_seconds, peak_rss_bytes};
use servebench::workload::trace::{self, ReplaySettings};

const ROWS: u64 = 100_000;

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("synthetic.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        // xorshift64*: enough for lengths and gaps.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut at_ms = 0u64;
    for i in 0..ROWS {
        at_ms += next() % 40;
        let input = 512 + next() % 16_000;
        let blocks = input.div_ceil(512);
        // A tenth of the conversations share a long system prompt: the
        // same first ids, high 64-bit values included.
        let shared = if i % 10 == 0 { blocks.min(4) } else { 0 };
        let ids: Vec<String> = (0..blocks)
            .map(|b| {
                if b < shared {
                    (u64::MAX - b).to_string()
                } else {
                    (i * 64 + b).to_string()
                }
            })
            .collect();
        writeln!(
            out,
            "{{\"timestamp\": {at_ms}, \"input_length\": {input}, \"output_length\": {}, \"hash_ids\": [{}]}}",
            1 + next() % 800,
            ids.join(", ")
        )?;
    }
    out.flush()?;
    drop(out);
    let size = std::fs::metadata(&path)?.len();
    let (rss0, cpu0, wall) = (peak_rss_bytes(), cpu_seconds(), Instant::now());
    let replay = trace::load(&path, None, &ReplaySettings::default())?;
    let (cpu, wall) = (cpu_seconds() - cpu0, wall.elapsed().as_secs_f64());
    let digest_wall = Instant::now();
    let digest = servebench::workload::file_digest(&path)?;
    println!(
        "trace: {ROWS} rows, {:.1} MB; replay: {} requests over {:.0} s of trace time",
        size as f64 / 1e6,
        replay.requests.len(),
        replay.stats.replay_span_s
    );
    println!("read + schedule: {cpu:.2} s CPU, {wall:.2} s wall (goal < 2 s)");
    println!(
        "peak RSS: {:.0} MB (before reading: {:.0} MB; goal < 200 MB)",
        peak_rss_bytes() as f64 / 1e6,
        rss0 as f64 / 1e6
    );
    println!(
        "file digest {digest}: {:.2} s wall",
        digest_wall.elapsed().as_secs_f64()
    );
    Ok(())
}
