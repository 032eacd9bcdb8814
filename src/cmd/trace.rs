//! `servebench trace`: a trace's shape, read without a server.

use std::process::ExitCode;

use anyhow::anyhow;

use crate::cli::TraceArgs;
use crate::metrics::stats::Stats;
use crate::metrics::trace_shape::TraceShape;
use crate::util::table;
use crate::workload::prefix_reuse::PrefixReuse;
use crate::workload::trace::{self, ReplaySettings, TraceFormat};

/// `servebench trace FILE`: print the shape of a trace.
pub fn run(a: TraceArgs) -> anyhow::Result<ExitCode> {
    let seconds = super::seconds_flag;
    let settings = ReplaySettings {
        start_s: seconds("--trace-start", &a.trace_start)?.unwrap_or(0.0),
        end_s: seconds("--trace-end", &a.trace_end)?,
        max_requests: a.num_requests,
        block_size: a.block_size,
        length_scale: a.length_scale,
        ..ReplaySettings::default()
    };
    let format: Option<TraceFormat> = a
        .format
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e: crate::workload::WorkloadError| anyhow!("--format: {e}"))?;
    if a.cache_block == Some(0) {
        anyhow::bail!("--cache-block must be at least 1 token");
    }
    let window = seconds("--window", &a.window)?;
    if window.is_some_and(|w| w <= 0.0) {
        anyhow::bail!("--window must be longer than zero");
    }
    let replay = trace::load(&a.file, format, &settings)?;
    let shape = TraceShape::of(&replay, window, a.cache_block);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&shape)?);
    } else {
        print!("{}", render(&a, &shape, &replay.stats.changes()));
    }
    Ok(ExitCode::SUCCESS)
}

fn render(a: &TraceArgs, s: &TraceShape, changes: &[String]) -> String {
    let mut out = format!(
        "{}: {} requests of {} rows over {:.1} s of trace",
        a.file.display(),
        s.requests,
        s.rows_read,
        s.span_s
    );
    if let Some(r) = s.mean_rate {
        out += &format!(" ({r:.2} requests/s)");
    }
    out.push('\n');
    for c in changes {
        out += &format!("  {c}\n");
    }
    let dist = |name: &str, st: &Option<Stats>| match st {
        Some(st) => vec![
            name.to_string(),
            format!("{:.0}", st.mean),
            format!("{:.0}", st.min),
            format!("{:.0}", st.p50),
            format!("{:.0}", st.p90),
            format!("{:.0}", st.p99),
            format!("{:.0}", st.max),
        ],
        None => vec![name.to_string(), "-".into()],
    };
    out += &table::render(
        &["tokens", "mean", "min", "p50", "p90", "p99", "max"],
        &[dist("prompt", &s.input), dist("output", &s.output)],
    );
    out += &match (&s.reuse, &s.reuse_at_cache_block) {
        (None, _) => "predicted prefix reuse: unknown (the trace has no block ids)\n".to_string(),
        (Some(r), at) => {
            let mut line = format!(
                "predicted prefix reuse (infinite cache, blocks of {} tokens): {}\n",
                s.block,
                reuse_words(r)
            );
            if let Some(b) = at {
                line += &format!(
                    "  with a cache block of {} tokens: {}\n",
                    b.cache_block,
                    reuse_words(b)
                );
            }
            line
        }
    };
    let peak = s.windows.iter().map(|w| w.rate).fold(0.0, f64::max);
    let rows: Vec<Vec<String>> = s
        .windows
        .iter()
        .map(|w| {
            let bar = if peak > 0.0 {
                "#".repeat((w.rate / peak * 30.0).round() as usize)
            } else {
                String::new()
            };
            vec![
                format!("{:.0}s", w.start_s),
                w.requests.to_string(),
                format!("{:.2}", w.rate),
                format!("{:.0}", w.prompt_tokens as f64 / s.window_s),
                w.reuse
                    .map_or("-".into(), |r| format!("{:.1} %", r * 100.0)),
                bar,
            ]
        })
        .collect();
    out += &format!("rate over trace time (windows of {} s):\n", s.window_s);
    out += &table::render(
        &["from", "requests", "req/s", "prompt tok/s", "reuse", ""],
        &rows,
    );
    out
}

fn reuse_words(r: &PrefixReuse) -> String {
    format!(
        "{:.1} % of prompt tokens ({} of {}; {} requests reuse a prefix)",
        r.hit_rate() * 100.0,
        r.reused_tokens,
        r.prompt_tokens,
        r.requests_reusing
    )
}
