//! `servebench logs`: read an engine's log as servebench does.

use std::process::ExitCode;

use crate::{cli, failure, telemetry};

/// `servebench logs`: the facts and failure cause in an engine log.
pub fn run(a: cli::LogsArgs) -> anyhow::Result<ExitCode> {
    use telemetry::TelemetryEngine as E;
    let engine = match a.engine {
        cli::LogEngineArg::Sglang => E::Sglang,
        cli::LogEngineArg::Vllm => E::Vllm,
        cli::LogEngineArg::Llamacpp => E::Llamacpp,
        cli::LogEngineArg::Sim => E::Sim,
    };
    let bytes = std::fs::read(&a.file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", a.file.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let facts = telemetry::logscan::scan_log(engine, &text);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&facts)?);
        return Ok(ExitCode::SUCCESS);
    }
    let v = serde_json::to_value(&facts)?;
    let mut rows = Vec::new();
    if let Some(obj) = v.as_object() {
        for (k, val) in obj {
            if val.is_null() || val.as_array().is_some_and(|a| a.is_empty()) {
                continue;
            }
            let shown = match val {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            rows.push(vec![k.clone(), failure::truncate(&shown, 200)]);
        }
    }
    print!("{}", crate::util::table::render(&["fact", "value"], &rows));
    if let Some(cause) = telemetry::logscan::classify_failure(&text) {
        println!(
            "failure cause: {:?} at line {}: {}",
            cause.kind, cause.line_number, cause.evidence
        );
    }
    Ok(ExitCode::SUCCESS)
}
