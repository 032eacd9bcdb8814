//! Flags of the `llamacpp` engine (`llama-server`).
//!
//! Flag names and `--spec-type` values were checked against llama.cpp's
//! `common/arg.cpp` and `common/speculative.cpp` as vendored in xllamacpp
//! 2026.10.11549 (`thirdparty/llama.cpp/`, the build that
//! `scripts/setup-test-env.sh` installs), cross-read with ggml-org/llama.cpp
//! `common/arg.cpp`. The current long names are used: `--spec-draft-model`
//! (formerly `--model-draft`, short `-md`) and `--spec-draft-n-max`
//! (formerly `--draft-max`/`--draft-n`, which now fail with "the argument
//! has been removed"). The removed `--spec-ngram-size-n` family is never
//! emitted. Every emitted flag is also accepted by `scripts/llama-server`,
//! the launcher the test machines run instead of a native build; only the
//! `draft-dflash` spec type is missing from its choices.

use super::{
    chain_only, push, spec_method, EngineError, EngineKind, Lifecycle, ServerSpec, SpecMethod,
    Speculative,
};

/// llama.cpp's start and stop: about a second after process start, then
/// reading the GGUF (about 1 GB/s) dominates; it exits at once.
pub const LIFECYCLE: Lifecycle = Lifecycle {
    startup_s: 1.0,
    python: false,
    load_gb_per_s: Some(1.0),
    startup_s_per_extra_rank: 0.0,
    startup_is_cpu_work: true,
    stop_s: 0.15,
};

/// Every flag this adapter can emit, as spelled in `common/arg.cpp`.
pub const KNOWN_FLAGS: &[&str] = &[
    "--model",
    "--host",
    "--port",
    "--alias",
    "--parallel",
    "--ctx-size",
    "--spec-type",
    "--spec-draft-model",
    "--spec-draft-n-max",
];

/// Every `--spec-type` value of `common/speculative.cpp`
/// (`common_speculative_type_from_name_map`), `none` excluded.
pub const SPEC_TYPES: &[&str] = &[
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
];

/// The n-gram type used when `llamacpp_type` names none: plain prompt
/// lookup, the closest match to SGLang's NGRAM and vLLM's `ngram`.
pub const DEFAULT_NGRAM_TYPE: &str = "ngram-simple";

/// The methods llama.cpp can express, for error messages.
pub(super) const SUPPORTED: &str = "eagle3, mtp, dflash, draft-model, ngram";

/// The engine-specific arguments for `spec`.
///
/// `max_running_requests` becomes `--parallel`, the number of server slots.
/// Unless the KV cache is unified (`--kv-unified`), llama.cpp divides
/// `--ctx-size` among the slots, so each request gets
/// `context_length / max_running_requests` tokens of context.
pub fn args(spec: &ServerSpec) -> Result<Vec<String>, EngineError> {
    let err = |m: String| EngineError::new(spec.engine, m);
    if spec.tp != 1 {
        return Err(err(format!(
            "llama.cpp has no tensor-parallel size (got tp {}); it spreads the model over \
             every visible GPU. Set tp to 1, pick the split with extra_args such as \
             [\"--split-mode\", \"row\"] (or \"layer\"), and choose GPUs with \
             CUDA_VISIBLE_DEVICES in env",
            spec.tp
        )));
    }
    if spec.mem_fraction.is_some() {
        return Err(err(
            "llama.cpp has no GPU memory fraction setting; remove mem_fraction \
             (KV cache size follows --ctx-size)"
                .into(),
        ));
    }
    let mut a = Vec::new();
    push(&mut a, "--model", &spec.model_path);
    push(&mut a, "--host", &spec.host);
    push(&mut a, "--port", spec.port);
    if let Some(name) = &spec.served_model_name {
        // --alias takes a comma-separated list of names.
        if name.contains(',') {
            return Err(err(format!(
                "served_model_name {name:?} contains a comma, which llama.cpp's --alias \
                 reads as a list separator"
            )));
        }
        push(&mut a, "--alias", name);
    }
    if spec.tool_call_parser.is_some() {
        return Err(err(
            "llama.cpp parses tool calls with the model's own chat template (add \"--jinja\" \
             to args); it has no tool_call_parser setting"
                .into(),
        ));
    }
    if spec.grammar_backend.is_some() {
        return Err(err(
            "llama.cpp constrains answers with its own grammar engine; it has no \
             grammar_backend setting"
                .into(),
        ));
    }
    if let Some(n) = spec.max_running_requests {
        // llama-server parses --parallel as a C int and rejects 0.
        if n == 0 || n > i32::MAX as u32 {
            return Err(err(format!(
                "max_running_requests must be between 1 and {} (--parallel), got {n}",
                i32::MAX
            )));
        }
        push(&mut a, "--parallel", n);
    }
    if let Some(c) = spec.context_length {
        // 0 would mean "from the model"; larger than a C int fails to parse.
        if c == 0 || c > i32::MAX as u64 {
            return Err(err(format!(
                "context_length must be between 1 and {} (--ctx-size), got {c}",
                i32::MAX
            )));
        }
        push(&mut a, "--ctx-size", c);
    }
    if let Some(s) = &spec.speculative {
        speculative(s, &mut a).map_err(err)?;
    }
    Ok(a)
}

fn speculative(s: &Speculative, a: &mut Vec<String>) -> Result<(), String> {
    let Some(method) = spec_method(s, EngineKind::Llamacpp, SUPPORTED)? else {
        return Ok(());
    };
    chain_only(s, "llama.cpp", "--spec-draft-n-max")?;
    let (default_type, needs_draft) = match method {
        SpecMethod::DraftModel => ("draft-simple", true),
        SpecMethod::Eagle3 => ("draft-eagle3", true),
        SpecMethod::Dflash => ("draft-dflash", true),
        // The MTP head normally lives in the target GGUF; a separate MTP
        // GGUF may still be given as the draft.
        SpecMethod::Mtp => ("draft-mtp", false),
        SpecMethod::Ngram => (DEFAULT_NGRAM_TYPE, false),
        SpecMethod::Ddtree => {
            return Err(format!(
                "llama.cpp has no DDTree (an SGLang algorithm); methods llama.cpp supports: \
                 {SUPPORTED}"
            ));
        }
        SpecMethod::Eagle => {
            return Err(format!(
                "llama.cpp implements EAGLE-3 only (--spec-type draft-eagle3), not EAGLE; \
                 use method eagle3 with an EAGLE-3 GGUF draft. Methods llama.cpp supports: \
                 {SUPPORTED}"
            ));
        }
    };
    let ty = match &s.llamacpp_type {
        None => default_type,
        Some(t) => {
            let Some(known) = SPEC_TYPES.iter().find(|k| **k == t.as_str()) else {
                return Err(format!(
                    "llamacpp_type {t:?} is not a llama.cpp --spec-type; known types: {}",
                    SPEC_TYPES.join(", ")
                ));
            };
            // Draft-model types need a draft context and n-gram types must
            // not get one, so the override stays within the method's family.
            let ngram_type = known.starts_with("ngram-");
            if ngram_type != (method == SpecMethod::Ngram) {
                return Err(format!(
                    "llamacpp_type {t:?} does not fit method {}: n-gram methods take an \
                     ngram-* type, draft methods a draft-* type",
                    method.as_str()
                ));
            }
            known
        }
    };
    if method == SpecMethod::Ngram {
        if s.draft_model.is_some() {
            return Err("method ngram drafts from the prompt and takes no draft_model".into());
        }
        if s.num_draft_tokens.is_some() {
            // --spec-draft-n-max does not bound n-gram drafts; each n-gram
            // type has its own length flag, and the test launcher accepts
            // none of them.
            return Err(format!(
                "llama.cpp sizes {ty} drafts with its own --spec-ngram-* length flag, not \
                 num_draft_tokens; leave num_draft_tokens unset and pass that flag in \
                 extra_args on a native llama-server"
            ));
        }
    }
    if needs_draft && s.draft_model.is_none() {
        return Err(format!(
            "method {} needs a GGUF draft_model (--spec-draft-model)",
            method.as_str()
        ));
    }
    if s.num_draft_tokens == Some(0) {
        return Err("num_draft_tokens must be at least 1 (--spec-draft-n-max)".into());
    }
    push(a, "--spec-type", ty);
    if let Some(d) = &s.draft_model {
        push(a, "--spec-draft-model", d);
    }
    if let Some(n) = s.num_draft_tokens {
        push(a, "--spec-draft-n-max", n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{err_of, test_spec, value_of, EngineKind};
    use super::*;

    fn spec_with(s: Speculative) -> ServerSpec {
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.speculative = Some(s);
        spec
    }

    fn draft(method: SpecMethod) -> Speculative {
        Speculative {
            method: Some(method),
            draft_model: Some("/models/d.gguf".into()),
            num_draft_tokens: Some(8),
            ..Default::default()
        }
    }

    #[test]
    fn plain_config() {
        let argv = args(&test_spec(EngineKind::Llamacpp)).unwrap();
        assert_eq!(
            argv,
            [
                "--model",
                "/models/m",
                "--host",
                "127.0.0.1",
                "--port",
                "30000",
                "--alias",
                "m"
            ]
        );
    }

    #[test]
    fn slots_and_context_map_to_llamacpp_flags() {
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.max_running_requests = Some(4);
        spec.context_length = Some(16384);
        let argv = args(&spec).unwrap();
        assert_eq!(value_of(&argv, "--parallel"), Some("4"));
        assert_eq!(value_of(&argv, "--ctx-size"), Some("16384"));
    }

    #[test]
    fn tp_and_mem_fraction_are_rejected_with_advice() {
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.tp = 2;
        let msg = err_of(&spec);
        assert!(
            msg.starts_with("llamacpp: ") && msg.contains("--split-mode"),
            "{msg}"
        );
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.mem_fraction = Some(0.9);
        assert!(err_of(&spec).contains("remove mem_fraction"));
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.max_running_requests = Some(0);
        assert!(err_of(&spec).contains("--parallel"));
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.context_length = Some(1 << 40);
        assert!(err_of(&spec).contains("--ctx-size"));
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.served_model_name = Some("a,b".into());
        assert!(err_of(&spec).contains("comma"));
    }

    #[test]
    fn draft_methods_map_to_spec_types() {
        for (method, ty) in [
            (SpecMethod::DraftModel, "draft-simple"),
            (SpecMethod::Eagle3, "draft-eagle3"),
            (SpecMethod::Dflash, "draft-dflash"),
            (SpecMethod::Mtp, "draft-mtp"),
        ] {
            let argv = args(&spec_with(draft(method))).unwrap();
            let tail = &argv[argv.len() - 6..];
            assert_eq!(
                tail,
                [
                    "--spec-type",
                    ty,
                    "--spec-draft-model",
                    "/models/d.gguf",
                    "--spec-draft-n-max",
                    "8"
                ]
            );
        }
    }

    #[test]
    fn mtp_needs_no_draft_file() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Mtp),
            num_draft_tokens: Some(3),
            topk: Some(1),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--spec-type"), Some("draft-mtp"));
        assert!(!argv.contains(&"--spec-draft-model".to_string()));
        assert_eq!(value_of(&argv, "--spec-draft-n-max"), Some("3"));
    }

    #[test]
    fn ngram_uses_the_default_or_the_override_type() {
        let ngram = Speculative {
            method: Some(SpecMethod::Ngram),
            ..Default::default()
        };
        let argv = args(&spec_with(ngram.clone())).unwrap();
        assert_eq!(value_of(&argv, "--spec-type"), Some("ngram-simple"));
        let argv = args(&spec_with(Speculative {
            llamacpp_type: Some("ngram-mod".into()),
            ..ngram.clone()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--spec-type"), Some("ngram-mod"));
        let msg = err_of(&spec_with(Speculative {
            num_draft_tokens: Some(8),
            ..ngram.clone()
        }));
        assert!(
            msg.contains("--spec-ngram-*") && msg.contains("extra_args"),
            "{msg}"
        );
        let msg = err_of(&spec_with(Speculative {
            draft_model: Some("/d.gguf".into()),
            ..ngram
        }));
        assert!(msg.contains("takes no draft_model"), "{msg}");
    }

    #[test]
    fn type_override_is_validated() {
        let msg = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Ngram),
            llamacpp_type: Some("ngram-fancy".into()),
            ..Default::default()
        }));
        assert!(msg.contains("not a llama.cpp --spec-type"), "{msg}");
        let msg = err_of(&spec_with(Speculative {
            llamacpp_type: Some("ngram-simple".into()),
            ..draft(SpecMethod::DraftModel)
        }));
        assert!(msg.contains("does not fit method draft-model"), "{msg}");
        let argv = args(&spec_with(Speculative {
            llamacpp_type: Some("draft-dspark".into()),
            ..draft(SpecMethod::Dflash)
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--spec-type"), Some("draft-dspark"));
    }

    #[test]
    fn unsupported_speculative_settings_are_rejected() {
        let msg = err_of(&spec_with(draft(SpecMethod::Eagle)));
        assert!(
            msg.contains("EAGLE-3 only") && msg.contains(SUPPORTED),
            "{msg}"
        );
        let msg = err_of(&spec_with(Speculative {
            draft_model: None,
            ..draft(SpecMethod::Eagle3)
        }));
        assert!(msg.contains("needs a GGUF draft_model"), "{msg}");
    }

    /// Flags and spec types emitted for every supported configuration.
    fn emitted() -> Vec<Vec<String>> {
        let mut spec = test_spec(EngineKind::Llamacpp);
        spec.max_running_requests = Some(2);
        spec.context_length = Some(4096);
        let mut specs: Vec<Speculative> = [
            SpecMethod::DraftModel,
            SpecMethod::Eagle3,
            SpecMethod::Dflash,
            SpecMethod::Mtp,
        ]
        .into_iter()
        .map(draft)
        .collect();
        for ty in SPEC_TYPES.iter().filter(|t| t.starts_with("ngram-")) {
            specs.push(Speculative {
                method: Some(SpecMethod::Ngram),
                llamacpp_type: Some(ty.to_string()),
                ..Default::default()
            });
        }
        specs
            .into_iter()
            .map(|s| {
                spec.speculative = Some(s);
                args(&spec).unwrap()
            })
            .collect()
    }

    #[test]
    fn every_emitted_flag_is_known() {
        for argv in emitted() {
            for flag in argv.iter().filter(|a| a.starts_with('-')) {
                assert!(KNOWN_FLAGS.contains(&flag.as_str()), "unknown flag {flag}");
            }
            let ty = value_of(&argv, "--spec-type").unwrap();
            assert!(SPEC_TYPES.contains(&ty), "unknown spec type {ty}");
        }
    }

    #[test]
    fn the_test_launcher_accepts_every_emitted_flag() {
        let launcher =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server"))
                .unwrap();
        for flag in KNOWN_FLAGS {
            assert!(
                launcher.contains(&format!("\"{flag}\"")),
                "scripts/llama-server does not accept {flag}"
            );
        }
        // draft-dflash exists in llama.cpp but the launcher's SPEC_TYPES lacks it.
        for argv in emitted() {
            let ty = value_of(&argv, "--spec-type").unwrap();
            if ty != "draft-dflash" {
                assert!(
                    launcher.contains(&format!("\"{ty}\":")),
                    "scripts/llama-server does not accept --spec-type {ty}"
                );
            }
        }
    }
}
