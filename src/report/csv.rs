//! `report.csv`: one row per stored cell for spreadsheets and scripts. The
//! column names are a stable interface (documented in README.md): add
//! columns at the end, never rename or reorder.

use super::model::{CellRow, Report};
use super::Exporter;

/// Renders one row per cell.
pub struct CsvExporter;

/// The columns, in order.
pub const COLUMNS: [&str; 44] = [
    "server_id",
    "cell_name",
    "point",
    "workload",
    "repetition",
    "status",
    "failure_class",
    "reason",
    "tp",
    "gpus",
    "method",
    "budget",
    "prompt",
    "input_len",
    "output_len",
    "load",
    "concurrency",
    "rate_rps",
    "requests_ok",
    "requests_failed",
    "output_tok_s",
    "output_tok_s_per_gpu",
    "decode_tok_s_p50",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "itl_per_token_p50_ms",
    "acceptance_length",
    "acceptance_source",
    "acceptance_rate",
    "speedup_decode",
    "speedup_output",
    "usable",
    "identity",
    "output_identical",
    "in_flight",
    "ttfa_p50_ms",
    "reasoning_tokens",
    "prompt_cache_hit_rate",
    "steady_output_tok_s",
    "over_saturated",
    "joules_per_token",
    "tokens_per_joule",
    "usd_per_mtok",
];

/// Quote a field when it holds a separator, quote or line break (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.4}"))
        .unwrap_or_default()
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_default()
}

fn row(c: &CellRow) -> Vec<String> {
    vec![
        c.server_id.clone(),
        c.cell_name.clone(),
        c.point.clone(),
        c.workload.clone(),
        c.repetition.to_string(),
        c.status.as_str().to_string(),
        opt(&c.failure_class),
        opt(&c.reason),
        c.tp.to_string(),
        c.gpus.to_string(),
        c.method.clone(),
        opt(&c.budget),
        c.prompt.clone(),
        c.input_len.to_string(),
        c.output_len.to_string(),
        c.load.clone(),
        opt(&c.concurrency),
        num(c.rate),
        opt(&c.requests_ok),
        opt(&c.requests_failed),
        num(c.output_tok_s),
        num(c.output_tok_s_per_gpu),
        num(c.decode_tok_s_p50),
        num(c.ttft_p50_ms),
        num(c.ttft_p99_ms),
        num(c.tpot_p50_ms),
        num(c.itl_per_token_p50_ms),
        num(c.acceptance_length),
        opt(&c.acceptance_source),
        num(c.acceptance_rate),
        num(c.speedup_decode),
        num(c.speedup_output),
        c.usable.to_string(),
        c.identity.clone(),
        num(c.output_identical),
        num(c.in_flight),
        num(c.ttfa_p50_ms),
        c.reasoning_tokens
            .map(|n| n.to_string())
            .unwrap_or_default(),
        num(c.prompt_cache_hit_rate),
        num(c.steady_output_tok_s),
        opt(&c.over_saturated),
        num(c.joules_per_token),
        num(c.tokens_per_joule),
        num(c.usd_per_mtok),
    ]
}

impl Exporter for CsvExporter {
    fn file_name(&self) -> &'static str {
        "report.csv"
    }

    fn render(&self, r: &Report) -> Vec<u8> {
        let mut out = COLUMNS.join(",");
        out.push('\n');
        for c in &r.cells {
            out.push_str(
                &row(c)
                    .iter()
                    .map(|f| field(f))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            out.push('\n');
        }
        out.into_bytes()
    }
}
