//! `servebench memory`: the memory model for one configuration.

use std::process::ExitCode;

use super::EXIT_SOME_FAILED;
use crate::{cli, memory};

/// `servebench memory`: what fits on the GPUs.
pub fn run(a: cli::MemoryArgs) -> anyhow::Result<ExitCode> {
    let model = memory::load_model_info(&a.model)?;
    let gpu =
        memory::parse_bytes(&a.gpu_memory).map_err(|e| anyhow::anyhow!("--gpu-memory: {e}"))?;
    let mut inputs = memory::MemoryInputs::new(a.engine, a.tp, gpu);
    inputs.layout = crate::engine::layout::Layout {
        tp: a.tp,
        dp: a.dp,
        dp_attention: a.dp_attention,
        ep: a.ep,
        pp: a.pp,
    };
    let kind = match a.engine {
        memory::EngineRule::Sglang => crate::engine::EngineKind::Sglang,
        memory::EngineRule::Vllm => crate::engine::EngineKind::Vllm,
    };
    inputs
        .layout
        .check(kind)
        .map_err(|e| anyhow::anyhow!("{kind}: {e}"))?;
    inputs.mem_fraction = a.mem_fraction;
    inputs.max_running_requests = a.max_running_requests;
    inputs.context_length = a.context_length;
    inputs.kv_cache_dtype = a.kv_cache_dtype;
    inputs.draft = a
        .draft_model
        .as_deref()
        .map(memory::load_model_info)
        .transpose()?;
    inputs.speculative_num_draft_tokens = a.speculative_num_draft_tokens;
    inputs.reserve_bytes = a
        .reserve
        .as_deref()
        .map(memory::parse_bytes)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--reserve: {e}"))?;
    inputs.max_batched_tokens = a.max_batched_tokens;
    inputs.gpus_available = a.gpus;
    inputs.request_tokens = a.request_tokens;
    inputs.concurrency = a.concurrency;
    inputs.engine_version = a.engine_version;
    if let Some(args) = &a.engine_args {
        let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
        inputs
            .apply_engine_args(&args)
            .map_err(|e| anyhow::anyhow!("--engine-args: {e}"))?;
    }
    let est = memory::estimate(&model, &inputs);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&est)?);
    } else {
        print!("{}", memory::render_table(&est));
    }
    let blocked = est.verdicts.iter().any(|v| v.level == memory::Level::Error);
    Ok(if blocked {
        ExitCode::from(EXIT_SOME_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
