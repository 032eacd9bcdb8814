//! `servebench init`: write one of the shipped example campaigns.

use std::process::ExitCode;

use crate::{cli, util};

/// Example campaigns shipped with the tool, by engine.
pub fn example_campaign(engine: cli::InitEngine) -> &'static str {
    match engine {
        cli::InitEngine::Sim => include_str!("../../examples/quickstart.toml"),
        cli::InitEngine::Llamacpp => include_str!("../../examples/llamacpp.toml"),
        cli::InitEngine::Sglang => include_str!("../../examples/sglang-hybrid-8gpu.toml"),
        cli::InitEngine::Vllm => include_str!("../../examples/vllm.toml"),
    }
}

/// `servebench init`: write an example campaign.
pub fn run(a: cli::InitArgs) -> anyhow::Result<ExitCode> {
    if a.output.exists() {
        anyhow::bail!(
            "{} already exists; choose another --output",
            a.output.display()
        );
    }
    let text = example_campaign(a.engine)
        .replace("results_dir = \"../results\"", "results_dir = \"results\"");
    util::fsx::write_atomic(&a.output, text.as_bytes())?;
    eprintln!(
        "wrote {}; next: servebench plan {}",
        a.output.display(),
        a.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
