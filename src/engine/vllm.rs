//! Flags of the `vllm` engine (`vllm serve MODEL`).
//!
//! Flag names were checked against vllm-project/vllm:
//! `vllm/engine/arg_utils.py` (`EngineArgs.add_cli_args`, commit 99d7eb5d:
//! `--served-model-name`, `--max-model-len`, `--tensor-parallel-size`/`-tp`,
//! `--gpu-memory-utilization`, `--max-num-seqs`, `--speculative-config`),
//! `vllm/entrypoints/openai/cli_args.py` (`FrontendArgs.host`/`port` →
//! `--host`/`--port`) and `vllm/entrypoints/cli/serve.py` (the positional
//! `model_tag`). The keys and method names of the `--speculative-config`
//! JSON come from `vllm/config/speculative.py` (`SpeculativeConfig`, commit
//! 002e77c1): `method`, `model`, `num_speculative_tokens`,
//! `prompt_lookup_min`, `prompt_lookup_max`; methods `eagle`, `eagle3`,
//! `mtp` (the per-model names such as `deepseek_mtp` are deprecated aliases
//! of it), `draft_model`, `ngram`, `dflash`.

use serde_json::{json, Map, Value};

use super::{
    chain_only, pass_through, push, push_server_flags, spec_method, EngineError, EngineKind,
    Lifecycle, ServerFlags, ServerSpec, SpecMethod, Speculative,
};

/// vLLM's start and stop: a Python engine (the 135M model came up in 27–42 s
/// on the reference machine's 2 cores with `--enforce-eager`), weights read
/// at about 1.5 GB/s, 15 s per extra rank for its workers and their
/// communicators; on CPU it stopped its engine-core processes in 0.8 s.
pub const LIFECYCLE: Lifecycle = Lifecycle {
    startup_s: 0.0,
    python: true,
    load_gb_per_s: Some(1.5),
    startup_s_per_extra_rank: 15.0,
    startup_is_cpu_work: true,
    stop_s: 0.8,
};

/// vLLM's prefix-cache reset: `POST /reset_prefix_cache`, answering
/// `{"success": bool}` (false while running requests hold blocks); it is
/// one of the development endpoints, served only with
/// `VLLM_SERVER_DEV_MODE=1` (`vllm/entrypoints/serve/dev/cache/api_router.py`).
pub const PREFIX_CACHE_RESET: super::PrefixCacheReset = super::PrefixCacheReset {
    path: "/reset_prefix_cache",
    enable_env: Some(("VLLM_SERVER_DEV_MODE", "1")),
};

/// This engine's names for the shared server settings.
const FLAGS: ServerFlags = ServerFlags {
    tp: "--tensor-parallel-size",
    mem_fraction: "--gpu-memory-utilization",
    max_running: "--max-num-seqs",
    context: "--max-model-len",
};

/// Every flag this adapter can emit, as spelled in `arg_utils.py` and `cli_args.py`.
pub const KNOWN_FLAGS: &[&str] = &FLAGS.known_flags::<15>(&[
    "--speculative-config",
    "--enable-prompt-tokens-details",
    "--data-parallel-size",
    "--pipeline-parallel-size",
    "--enable-expert-parallel",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "--structured-outputs-config",
]);

/// Smallest n-gram the prompt-lookup proposer matches. vLLM's own fallback
/// (5 and 5) is marked arbitrary in its source; 2..4 follows the range of
/// its documentation examples and skips one-token matches, which are
/// frequent and rarely predict the continuation.
pub const NGRAM_PROMPT_LOOKUP_MIN: u32 = 2;

/// Largest n-gram the prompt-lookup proposer matches (see [`NGRAM_PROMPT_LOOKUP_MIN`]).
pub const NGRAM_PROMPT_LOOKUP_MAX: u32 = 4;

/// The methods vLLM can express, for error messages.
pub(super) const SUPPORTED: &str = "eagle, eagle3, mtp, dflash, draft-model, ngram";

/// The engine-specific arguments for `spec`; the model comes first because
/// `vllm serve` takes it as a positional argument.
pub fn args(spec: &ServerSpec) -> Result<Vec<String>, EngineError> {
    let err = |m: String| EngineError::new(spec.engine, m);
    let mut a = vec![spec.model_path.clone()];
    push_server_flags(spec, &FLAGS, &mut a)?;
    layout_args(spec, &mut a);
    // Tool calls are parsed only with auto tool choice on (vLLM refuses
    // `tools` without it).
    if let Some(p) = &spec.tool_call_parser {
        a.push("--enable-auto-tool-choice".into());
        push(&mut a, "--tool-call-parser", p);
    }
    if let Some(b) = &spec.grammar_backend {
        push(&mut a, "--structured-outputs-config", json!({"backend": b}));
    }
    // Per-request cached prompt tokens in the usage, unless the campaign says otherwise.
    if !super::mentions(spec, "enable-prompt-tokens-details") {
        a.push("--enable-prompt-tokens-details".into());
    }
    if let Some(s) = &spec.speculative {
        if let Some(config) = speculative_config(s).map_err(err)? {
            // One argv element: vLLM parses the value with json.loads.
            push(&mut a, "--speculative-config", Value::Object(config));
        }
    }
    Ok(a)
}

/// The layout beyond TP (already checked): DP engine instances, pipeline
/// stages, and experts spread over all TP × DP ranks.
fn layout_args(spec: &ServerSpec, a: &mut Vec<String>) {
    if spec.dp > 1 {
        push(a, "--data-parallel-size", spec.dp);
    }
    if spec.pp > 1 {
        push(a, "--pipeline-parallel-size", spec.pp);
    }
    if spec.ep > 1 {
        a.push("--enable-expert-parallel".into());
    }
}

/// The `--speculative-config` object for `s`, or `None` when `s` asks for nothing.
fn speculative_config(s: &Speculative) -> Result<Option<Map<String, Value>>, String> {
    // vLLM's proposers draft a chain of num_speculative_tokens; there is no
    // separate step count or branching factor to pass through.
    chain_only(s, "vllm", "num_speculative_tokens")?;
    if s.num_draft_tokens == Some(0) {
        return Err("num_draft_tokens must be at least 1 (num_speculative_tokens > 0)".into());
    }
    let mut c = Map::new();
    if let Some(p) = pass_through(s)? {
        if p.budget_flag.is_some() {
            return Err(format!(
                "vllm takes every speculative setting in --speculative-config: the budget of \
                 algorithm {} goes in num_speculative_tokens, so remove budget_flag",
                p.name
            ));
        }
        c.insert("method".into(), json!(p.name));
        if let Some(d) = &s.draft_model {
            c.insert("model".into(), json!(d));
        }
        if let Some(n) = s.num_draft_tokens {
            c.insert("num_speculative_tokens".into(), json!(n));
        }
        return Ok(Some(c));
    }
    let Some(method) = spec_method(s, EngineKind::Vllm, SUPPORTED)? else {
        return Ok(None);
    };
    let name = match method {
        SpecMethod::Eagle => "eagle",
        SpecMethod::Eagle3 => "eagle3",
        SpecMethod::Mtp => "mtp",
        SpecMethod::DraftModel => "draft_model",
        SpecMethod::Ngram => "ngram",
        SpecMethod::Dflash => "dflash",
        SpecMethod::Ddtree => {
            return Err(
                "vllm has no DDTree (SGLang's --speculative-algorithm DDTREE); use dflash, \
                 or algorithm = \"<name>\" for a method this vLLM build registers"
                    .into(),
            )
        }
    };
    c.insert("method".into(), json!(name));
    match method {
        SpecMethod::Ngram => {
            if s.draft_model.is_some() {
                return Err("method ngram drafts from the prompt and takes no draft_model".into());
            }
            if s.num_draft_tokens.is_none() {
                return Err(
                    "vllm's ngram method needs num_draft_tokens (num_speculative_tokens)".into(),
                );
            }
            c.insert("prompt_lookup_min".into(), json!(NGRAM_PROMPT_LOOKUP_MIN));
            c.insert("prompt_lookup_max".into(), json!(NGRAM_PROMPT_LOOKUP_MAX));
        }
        // Without a model vLLM loads the MTP layers from the target model,
        // but only when num_speculative_tokens is given.
        SpecMethod::Mtp => match &s.draft_model {
            Some(d) => {
                c.insert("model".into(), json!(d));
            }
            None if s.num_draft_tokens.is_none() => {
                return Err(
                    "vllm's mtp method needs num_draft_tokens (num_speculative_tokens) \
                     when no draft_model is given"
                        .into(),
                );
            }
            None => {}
        },
        SpecMethod::Eagle
        | SpecMethod::Eagle3
        | SpecMethod::DraftModel
        | SpecMethod::Dflash
        | SpecMethod::Ddtree => {
            let Some(d) = &s.draft_model else {
                return Err(format!(
                    "method {} needs draft_model (the speculative config's model)",
                    method.as_str()
                ));
            };
            c.insert("model".into(), json!(d));
        }
    }
    // Model-based methods fall back to the draft checkpoint's own count.
    if let Some(n) = s.num_draft_tokens {
        c.insert("num_speculative_tokens".into(), json!(n));
    }
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::super::{err_of, test_spec, value_of, EngineKind};
    use super::*;

    fn spec_with(s: Speculative) -> ServerSpec {
        let mut spec = test_spec(EngineKind::Vllm);
        spec.speculative = Some(s);
        spec
    }

    fn config_of(s: Speculative) -> Value {
        let argv = args(&spec_with(s)).unwrap();
        serde_json::from_str(value_of(&argv, "--speculative-config").unwrap()).unwrap()
    }

    #[test]
    fn resources_map_to_vllm_flags() {
        let mut spec = test_spec(EngineKind::Vllm);
        spec.tp = 8;
        spec.mem_fraction = Some(0.9);
        spec.max_running_requests = Some(256);
        spec.context_length = Some(131072);
        let argv = args(&spec).unwrap();
        assert_eq!(value_of(&argv, "--tensor-parallel-size"), Some("8"));
        assert_eq!(value_of(&argv, "--gpu-memory-utilization"), Some("0.9"));
        assert_eq!(value_of(&argv, "--max-num-seqs"), Some("256"));
        assert_eq!(value_of(&argv, "--max-model-len"), Some("131072"));
    }

    #[test]
    fn eagle_family_json_round_trips() {
        for (method, name) in [
            (SpecMethod::Eagle, "eagle"),
            (SpecMethod::Eagle3, "eagle3"),
            (SpecMethod::DraftModel, "draft_model"),
            (SpecMethod::Dflash, "dflash"),
        ] {
            let v = config_of(Speculative {
                method: Some(method),
                draft_model: Some("/models/d \"q\"".into()),
                num_draft_tokens: Some(5),
                topk: Some(1),
                ..Default::default()
            });
            assert_eq!(
                v,
                json!({"method": name, "model": "/models/d \"q\"", "num_speculative_tokens": 5})
            );
        }
    }

    #[test]
    fn draft_token_count_may_come_from_the_checkpoint() {
        let v = config_of(Speculative {
            method: Some(SpecMethod::Eagle3),
            draft_model: Some("/d".into()),
            ..Default::default()
        });
        assert_eq!(v, json!({"method": "eagle3", "model": "/d"}));
    }

    #[test]
    fn mtp_uses_the_target_model_by_default() {
        let v = config_of(Speculative {
            method: Some(SpecMethod::Mtp),
            num_draft_tokens: Some(3),
            ..Default::default()
        });
        assert_eq!(v, json!({"method": "mtp", "num_speculative_tokens": 3}));
        let msg = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Mtp),
            ..Default::default()
        }));
        assert!(msg.contains("mtp method needs num_draft_tokens"), "{msg}");
    }

    #[test]
    fn ngram_gets_lookup_defaults() {
        let v = config_of(Speculative {
            method: Some(SpecMethod::Ngram),
            num_draft_tokens: Some(4),
            ..Default::default()
        });
        assert_eq!(
            v,
            json!({"method": "ngram", "num_speculative_tokens": 4,
                   "prompt_lookup_min": 2, "prompt_lookup_max": 4})
        );
        let msg = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Ngram),
            ..Default::default()
        }));
        assert!(msg.contains("ngram method needs num_draft_tokens"), "{msg}");
    }

    #[test]
    fn other_rejections_name_the_problem() {
        let msg = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Dflash),
            ..Default::default()
        }));
        assert!(msg.contains("dflash needs draft_model"), "{msg}");
        let argv = args(&spec_with(Speculative::default())).unwrap();
        assert!(!argv.contains(&"--speculative-config".to_string()));
    }

    #[test]
    fn every_emitted_flag_is_known() {
        let mut spec = test_spec(EngineKind::Vllm);
        spec.mem_fraction = Some(0.8);
        spec.max_running_requests = Some(16);
        spec.context_length = Some(8192);
        (spec.tp, spec.dp, spec.ep, spec.pp) = (2, 2, 4, 2);
        spec.tool_call_parser = Some("hermes".into());
        spec.grammar_backend = Some("xgrammar".into());
        spec.speculative = Some(Speculative {
            method: Some(SpecMethod::Ngram),
            num_draft_tokens: Some(3),
            ..Default::default()
        });
        let argv = args(&spec).unwrap();
        let flags: Vec<_> = argv.iter().filter(|a| a.starts_with('-')).collect();
        assert_eq!(flags.len(), KNOWN_FLAGS.len());
        for flag in flags {
            assert!(KNOWN_FLAGS.contains(&flag.as_str()), "unknown flag {flag}");
        }
    }
}
