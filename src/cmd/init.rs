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

/// The files an example campaign reads (its model's config for the memory
/// model, llama.cpp's start script), as (path relative to the campaign,
/// content): written beside it so `plan` works from any directory.
pub fn example_files(engine: cli::InitEngine) -> &'static [(&'static str, &'static str)] {
    match engine {
        cli::InitEngine::Sglang => &[
            (
                "models/Qwen3.6-27B/config.json",
                include_str!("../../examples/models/Qwen3.6-27B/config.json"),
            ),
            (
                "models/Qwen3.6-27B-DFlash/config.json",
                include_str!("../../examples/models/Qwen3.6-27B-DFlash/config.json"),
            ),
        ],
        cli::InitEngine::Vllm => &[
            (
                "models/Llama-3.1-8B-Instruct/config.json",
                include_str!("../../examples/models/Llama-3.1-8B-Instruct/config.json"),
            ),
            (
                "models/Llama-3.1-8B-Instruct/model.safetensors.index.json",
                include_str!(
                    "../../examples/models/Llama-3.1-8B-Instruct/model.safetensors.index.json"
                ),
            ),
        ],
        // The script that starts llama.cpp's server from the PyPI package,
        // so the campaign runs from any directory without a native build.
        cli::InitEngine::Llamacpp => &[(
            "scripts/llama-server",
            include_str!("../../scripts/llama-server"),
        )],
        cli::InitEngine::Sim => &[],
    }
}

/// An example campaign as `init` writes it to `output`: its results, its
/// scripts and the commands in its comments are those of the new file,
/// not of the example inside the source tree.
pub fn as_written(example: &str, output: &std::path::Path) -> String {
    let mut text = example
        .replace("results_dir = \"../results\"", "results_dir = \"results\"")
        .replace("results land in ../results/", "results land in results/")
        .replace("\"../scripts/", "\"scripts/")
        .replace(
            "`scripts/setup-test-env.sh`",
            "the source tree's `scripts/setup-test-env.sh`",
        );
    let shown = output.display().to_string();
    for name in ["quickstart", "llamacpp", "sglang-hybrid-8gpu", "vllm"] {
        text = text.replace(&format!("examples/{name}.toml"), &shown);
    }
    text
}

/// `servebench init`: write an example campaign.
pub fn run(a: cli::InitArgs) -> anyhow::Result<ExitCode> {
    if a.output.exists() {
        anyhow::bail!(
            "{} already exists; choose another --output",
            a.output.display()
        );
    }
    let text = as_written(example_campaign(a.engine), &a.output);
    util::fsx::write_atomic(&a.output, text.as_bytes())?;
    let dir = a.output.parent().unwrap_or(std::path::Path::new(""));
    for (rel, content) in example_files(a.engine) {
        let path = dir.join(rel);
        // A model file already there is the user's: left as it is.
        if path.exists() {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        util::fsx::write_atomic(&path, content.as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!(
        "wrote {}; next: servebench plan {}",
        a.output.display(),
        a.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
