//! Flags of the `sglang` engine (`python3 -m sglang.launch_server`).
//!
//! Every flag name and `--speculative-algorithm` value was checked against
//! sgl-project/sglang, `python/sglang/srt/server_args.py` (commit 001067ff):
//! the `ServerArgs` dataclass derives each flag from its field name
//! (`tp_size` → `--tp-size`, alias `--tensor-parallel-size`;
//! `model_path` → `--model-path`, alias `--model`). The speculative
//! consistency rules come from `python/sglang/srt/arg_groups/speculative_hook.py`
//! (`_handle_eagle_family`, `_handle_ngram`, `_handle_dflash`) and the tree
//! size limit from `python/sglang/srt/speculative/eagle_utils.py`
//! (`organize_draft_results`, commit 003ddbce). Older releases kept the same
//! checks inline in `ServerArgs.__post_init__`.

use super::{
    pass_through, push, push_server_flags, spec_method, EngineError, EngineKind, Lifecycle,
    PassThrough, ServerFlags, ServerSpec, SpecMethod, Speculative,
};

/// SGLang's prefix-cache reset: `/flush_cache` (GET or POST) empties the
/// radix cache, 200 when done, 400 while requests run or wait
/// (`sglang/srt/entrypoints/http_server.py`).
pub const PREFIX_CACHE_RESET: super::PrefixCacheReset = super::PrefixCacheReset {
    path: "/flush_cache",
    enable_env: None,
};

/// SGLang's start and stop: a Python engine about 10 s quicker to come up
/// than vLLM, weights read at about 1.5 GB/s, 10 s per extra rank; its
/// scheduler and detokenizer processes stop like vLLM's engine core.
pub const LIFECYCLE: Lifecycle = Lifecycle {
    startup_s: -10.0,
    python: true,
    load_gb_per_s: Some(1.5),
    startup_s_per_extra_rank: 10.0,
    startup_is_cpu_work: true,
    stop_s: 0.8,
};

/// This engine's names for the shared server settings.
const FLAGS: ServerFlags = ServerFlags {
    tp: "--tp-size",
    mem_fraction: "--mem-fraction-static",
    max_running: "--max-running-requests",
    context: "--context-length",
};

/// Flags this adapter emits that belong to an SGLang extension, not to the
/// release whose parser the tests run (0.5.23): the DDTree pull request
/// (and the fork that carries it) adds the tree budget. They are checked
/// against this list instead of SGLang's parser.
pub const EXTENSION_FLAGS: &[(&str, &str)] =
    &[("--speculative-ddtree-budget", "the DDTree extension")];

/// Every flag this adapter can emit, as spelled in `server_args.py`.
pub const KNOWN_FLAGS: &[&str] = &FLAGS.known_flags::<25>(&[
    "--tool-call-parser",
    "--grammar-backend",
    "--model-path",
    "--dp-size",
    "--attn-dp-size",
    "--ep-size",
    "--pp-size",
    "--enable-cache-report",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-dflash-block-size",
    "--speculative-ddtree-budget",
    "--speculative-ngram-max-bfs-breadth",
    "--page-size",
    "--disable-overlap-schedule",
]);

/// The methods SGLang can express, for error messages.
pub(super) const SUPPORTED: &str = "eagle, eagle3, mtp, dflash, ddtree, draft-model, ngram";

/// The engine-specific arguments for `spec`.
pub fn args(spec: &ServerSpec) -> Result<Vec<String>, EngineError> {
    let err = |m: String| EngineError::new(spec.engine, m);
    let mut a = Vec::new();
    push(&mut a, "--model-path", &spec.model_path);
    push_server_flags(spec, &FLAGS, &mut a)?;
    // The layout beyond TP (already checked). SGLang 0.5.23 counts replicas
    // with --dp-size and attention-DP groups with --attn-dp-size (the
    // `--enable-dp-attention` spelling is deprecated).
    if let Some(p) = &spec.tool_call_parser {
        push(&mut a, "--tool-call-parser", p);
    }
    if let Some(b) = &spec.grammar_backend {
        push(&mut a, "--grammar-backend", b);
    }
    for (flag, size) in [
        ("--dp-size", spec.dp),
        ("--attn-dp-size", spec.dp_attention),
        ("--ep-size", spec.ep),
        ("--pp-size", spec.pp),
    ] {
        if size > 1 {
            push(&mut a, flag, size);
        }
    }
    // Per-request cached prompt tokens in the usage, unless the campaign says otherwise.
    if !super::mentions(spec, "enable-cache-report") {
        a.push("--enable-cache-report".into());
    }
    if let Some(s) = &spec.speculative {
        speculative(s, &mut a).map_err(err)?;
    }
    Ok(a)
}

fn speculative(s: &Speculative, a: &mut Vec<String>) -> Result<(), String> {
    if s.num_steps == Some(0) || s.topk == Some(0) || s.num_draft_tokens == Some(0) {
        return Err("speculative num_steps, topk and num_draft_tokens must be at least 1".into());
    }
    if let Some(p) = pass_through(s)? {
        return algorithm(s, &p, a);
    }
    let Some(method) = spec_method(s, EngineKind::Sglang, SUPPORTED)? else {
        return Ok(());
    };
    match method {
        SpecMethod::Eagle | SpecMethod::Eagle3 | SpecMethod::DraftModel => {
            let algo = match method {
                SpecMethod::Eagle => "EAGLE",
                SpecMethod::Eagle3 => "EAGLE3",
                _ => "STANDALONE",
            };
            let Some(draft) = &s.draft_model else {
                return Err(format!(
                    "method {} needs draft_model (--speculative-draft-model-path); \
                     for a model's own MTP layers use method mtp",
                    method.as_str()
                ));
            };
            push(a, "--speculative-algorithm", algo);
            push(a, "--speculative-draft-model-path", draft);
            eagle_budget(s, a)
        }
        // SGLang resolves NEXTN to EAGLE and, for DeepSeek/GLM-MoE/Bailing/
        // Mistral-Large-3 style checkpoints, points the draft at the target
        // model itself; a separate MTP checkpoint may still be given.
        SpecMethod::Mtp => {
            push(a, "--speculative-algorithm", "NEXTN");
            if let Some(draft) = &s.draft_model {
                push(a, "--speculative-draft-model-path", draft);
            }
            eagle_budget(s, a)
        }
        SpecMethod::Dflash => {
            let Some(draft) = &s.draft_model else {
                return Err(
                    "method dflash needs draft_model (--speculative-draft-model-path)".into(),
                );
            };
            // DFLASH drafts a whole block per step: SGLang overrides
            // num_steps to 1 and rejects --speculative-eagle-topk, so any
            // other value would not be what the benchmark measures.
            if s.num_steps.is_some_and(|n| n != 1) {
                return Err(
                    "dflash drafts one block per step; SGLang forces num_steps to 1, \
                     so leave num_steps unset (the block size is num_draft_tokens)"
                        .into(),
                );
            }
            if s.topk.is_some_and(|k| k != 1) {
                return Err(
                    "dflash has no EAGLE topk; SGLang rejects --speculative-eagle-topk \
                     for DFLASH, so leave topk unset"
                        .into(),
                );
            }
            push(a, "--speculative-algorithm", "DFLASH");
            push(a, "--speculative-draft-model-path", draft);
            // The block size is the verify window. `--speculative-num-draft-tokens`
            // is accepted as an alias, but only the explicit flag stays
            // unambiguous once DFLASH tree widths are used.
            if let Some(n) = s.num_draft_tokens {
                push(a, "--speculative-dflash-block-size", n);
            }
            Ok(())
        }
        // DDTree searches the DFlash drafter's block as a tree of `budget`
        // nodes; the target verifies them with the root (budget + 1 tokens).
        // Tree verification needs one-token pages and runs without overlap
        // scheduling, so both are stated rather than left to the hook.
        SpecMethod::Ddtree => {
            let Some(draft) = &s.draft_model else {
                return Err("method ddtree needs draft_model, the DFlash drafter \
                     (--speculative-draft-model-path)"
                    .into());
            };
            if s.num_steps.is_some() || s.topk.is_some() {
                return Err("ddtree sizes its tree with the budget (num_draft_tokens → \
                     --speculative-ddtree-budget); leave num_steps and topk unset"
                    .into());
            }
            push(a, "--speculative-algorithm", "DDTREE");
            push(a, "--speculative-draft-model-path", draft);
            if let Some(n) = s.num_draft_tokens {
                push(a, "--speculative-ddtree-budget", n);
            }
            push(a, "--page-size", 1);
            a.push("--disable-overlap-schedule".into());
            Ok(())
        }
        SpecMethod::Ngram => {
            if s.draft_model.is_some() {
                return Err("method ngram drafts from the prompt and takes no draft_model".into());
            }
            push(a, "--speculative-algorithm", "NGRAM");
            // `_handle_ngram` overwrites speculative_eagle_topk with
            // --speculative-ngram-max-bfs-breadth, so that is where a tree
            // breadth has to go.
            if let Some(k) = s.topk {
                push(a, "--speculative-ngram-max-bfs-breadth", k);
            }
            if let Some(n) = s.num_steps {
                push(a, "--speculative-num-steps", n);
            }
            if let Some(n) = s.num_draft_tokens {
                push(a, "--speculative-num-draft-tokens", n);
            }
            Ok(())
        }
    }
}

/// An algorithm SGLang knows by name and servebench does not: its name,
/// draft model, steps and topk go under SGLang's generic flags, the budget
/// under the flag the campaign names.
fn algorithm(s: &Speculative, p: &PassThrough, a: &mut Vec<String>) -> Result<(), String> {
    push(a, "--speculative-algorithm", p.name);
    if let Some(d) = &s.draft_model {
        push(a, "--speculative-draft-model-path", d);
    }
    if let Some(n) = s.num_steps {
        push(a, "--speculative-num-steps", n);
    }
    if let Some(k) = s.topk {
        push(a, "--speculative-eagle-topk", k);
    }
    match (s.num_draft_tokens, p.budget_flag) {
        (Some(n), Some(flag)) => push(a, flag, n),
        (Some(n), None) => {
            return Err(format!(
                "algorithm {} has budget {n} but no budget_flag: name the flag that takes it \
                 (e.g. budget_flag = \"--speculative-{}-budget\")",
                p.name,
                p.name.to_lowercase()
            ))
        }
        (None, _) => {}
    }
    Ok(())
}

/// Steps, topk and draft-token budget of the EAGLE family (EAGLE, EAGLE3,
/// NEXTN, STANDALONE), checked against the rules SGLang applies at start-up.
fn eagle_budget(s: &Speculative, a: &mut Vec<String>) -> Result<(), String> {
    if s.num_steps.is_none() && s.topk.is_none() && s.num_draft_tokens.is_none() {
        // SGLang picks (steps, topk, draft tokens) from the architecture.
        return Ok(());
    }
    let Some(steps) = s.num_steps else {
        return Err(
            "SGLang requires num_steps whenever topk or num_draft_tokens is set \
             (it asserts both are unset when it auto-chooses the steps)"
                .into(),
        );
    };
    // An unset topk would crash SGLang's `topk > 1` checks; a chain is the
    // only reading of "steps without a branching factor".
    let topk = s.topk.unwrap_or(1);
    let draft_tokens = if topk == 1 {
        let chain = steps + 1;
        match s.num_draft_tokens {
            Some(n) if n != chain => {
                // SGLang would silently rewrite it, so the run would not
                // measure the configured budget.
                return Err(format!(
                    "with topk 1 SGLang requires num_draft_tokens == num_steps + 1 \
                     (= {chain} for num_steps {steps}), got {n}; raise topk above 1 for a tree"
                ));
            }
            _ => chain,
        }
    } else {
        let Some(n) = s.num_draft_tokens else {
            return Err(format!(
                "a tree drafter (topk {topk}) needs num_draft_tokens, the number of tree \
                 nodes verified per step"
            ));
        };
        // Step 1 expands the root into topk candidates, every later step
        // expands topk beams into topk each; SGLang keeps the best
        // num_draft_tokens - 1 of them (torch.topk fails on a larger k).
        let (k, st) = (u64::from(topk), u64::from(steps));
        let pool = k + (st - 1) * k * k;
        if u64::from(n) < 2 || u64::from(n) - 1 > pool {
            return Err(format!(
                "num_draft_tokens {n} does not fit the draft tree: SGLang needs \
                 2 <= num_draft_tokens <= 1 + topk + (num_steps - 1) * topk^2 \
                 (= {} for num_steps {steps}, topk {topk})",
                pool + 1
            ));
        }
        n
    };
    push(a, "--speculative-num-steps", steps);
    push(a, "--speculative-eagle-topk", topk);
    push(a, "--speculative-num-draft-tokens", draft_tokens);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{err_of, test_spec, value_of, EngineKind};
    use super::*;

    fn spec_with(s: Speculative) -> ServerSpec {
        let mut spec = test_spec(EngineKind::Sglang);
        spec.speculative = Some(s);
        spec
    }

    fn tree(steps: u32, topk: u32, budget: u32) -> Speculative {
        Speculative {
            method: Some(SpecMethod::Eagle),
            draft_model: Some("/models/eagle".into()),
            num_steps: Some(steps),
            topk: Some(topk),
            num_draft_tokens: Some(budget),
            ..Default::default()
        }
    }

    #[test]
    fn resources_map_to_sglang_flags() {
        let mut spec = test_spec(EngineKind::Sglang);
        spec.tp = 4;
        spec.mem_fraction = Some(0.85);
        spec.max_running_requests = Some(64);
        spec.context_length = Some(32768);
        spec.served_model_name = None;
        let argv = args(&spec).unwrap();
        assert_eq!(value_of(&argv, "--tp-size"), Some("4"));
        assert_eq!(value_of(&argv, "--mem-fraction-static"), Some("0.85"));
        assert_eq!(value_of(&argv, "--max-running-requests"), Some("64"));
        assert_eq!(value_of(&argv, "--context-length"), Some("32768"));
        assert!(!argv.contains(&"--served-model-name".to_string()));
    }

    #[test]
    fn eagle_chain() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Eagle3),
            draft_model: Some("/models/eagle3".into()),
            num_steps: Some(3),
            topk: Some(1),
            num_draft_tokens: Some(4),
            ..Default::default()
        }))
        .unwrap();
        let tail = &argv[argv.len() - 10..];
        assert_eq!(
            tail,
            [
                "--speculative-algorithm",
                "EAGLE3",
                "--speculative-draft-model-path",
                "/models/eagle3",
                "--speculative-num-steps",
                "3",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "4"
            ]
        );
    }

    #[test]
    fn chain_budget_is_derived_and_topk_defaults_to_one() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Eagle),
            draft_model: Some("/d".into()),
            num_steps: Some(5),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--speculative-eagle-topk"), Some("1"));
        assert_eq!(value_of(&argv, "--speculative-num-draft-tokens"), Some("6"));
    }

    #[test]
    fn auto_chosen_budget_emits_only_the_algorithm() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Eagle),
            draft_model: Some("/d".into()),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("EAGLE"));
        assert!(!argv.iter().any(|a| a.starts_with("--speculative-num")));
        assert!(!argv.contains(&"--speculative-eagle-topk".to_string()));
    }

    #[test]
    fn tree_drafter_budgets_8_16_64_with_topk_8() {
        for (steps, budget) in [(1, 8), (2, 16), (2, 64)] {
            let argv = args(&spec_with(tree(steps, 8, budget))).unwrap();
            assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("EAGLE"));
            assert_eq!(
                value_of(&argv, "--speculative-num-steps"),
                Some(steps.to_string().as_str())
            );
            assert_eq!(value_of(&argv, "--speculative-eagle-topk"), Some("8"));
            assert_eq!(
                value_of(&argv, "--speculative-num-draft-tokens"),
                Some(budget.to_string().as_str())
            );
        }
    }

    #[test]
    fn tree_budget_beyond_the_candidate_pool_is_rejected() {
        // One step of topk 8 yields 8 candidates: at most 9 tokens verified.
        let msg = err_of(&spec_with(tree(1, 8, 16)));
        assert!(msg.contains("does not fit the draft tree"), "{msg}");
        assert!(msg.contains("= 9 for num_steps 1, topk 8"), "{msg}");
        assert!(args(&spec_with(tree(1, 8, 9))).is_ok());
        assert!(err_of(&spec_with(tree(2, 8, 74))).contains("= 73"));
    }

    #[test]
    fn chain_budget_mismatch_is_rejected() {
        let msg = err_of(&spec_with(tree(3, 1, 8)));
        assert!(msg.contains("num_draft_tokens == num_steps + 1"), "{msg}");
        assert!(msg.contains("= 4 for num_steps 3"), "{msg}");
    }

    #[test]
    fn tree_without_budget_or_budget_without_steps_is_rejected() {
        let mut s = tree(3, 4, 8);
        s.num_draft_tokens = None;
        assert!(err_of(&spec_with(s)).contains("needs num_draft_tokens"));
        let mut s = tree(3, 4, 8);
        s.num_steps = None;
        assert!(err_of(&spec_with(s)).contains("requires num_steps"));
        let mut s = tree(3, 4, 8);
        s.topk = Some(0);
        assert!(err_of(&spec_with(s)).contains("at least 1"));
    }

    #[test]
    fn mtp_uses_nextn_and_the_draft_is_optional() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Mtp),
            num_steps: Some(3),
            topk: Some(1),
            num_draft_tokens: Some(4),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("NEXTN"));
        assert!(!argv.contains(&"--speculative-draft-model-path".to_string()));
        assert_eq!(value_of(&argv, "--speculative-num-draft-tokens"), Some("4"));
    }

    #[test]
    fn draft_model_is_standalone() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::DraftModel),
            draft_model: Some("/models/small".into()),
            num_steps: Some(3),
            topk: Some(1),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            value_of(&argv, "--speculative-algorithm"),
            Some("STANDALONE")
        );
        assert_eq!(
            value_of(&argv, "--speculative-draft-model-path"),
            Some("/models/small")
        );
        assert_eq!(value_of(&argv, "--speculative-num-draft-tokens"), Some("4"));
    }

    #[test]
    fn dflash_maps_the_budget_to_the_block_size() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Dflash),
            draft_model: Some("/models/dflash".into()),
            num_draft_tokens: Some(16),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("DFLASH"));
        assert_eq!(
            value_of(&argv, "--speculative-dflash-block-size"),
            Some("16")
        );
        assert!(!argv.contains(&"--speculative-num-steps".to_string()));
        assert!(!argv.contains(&"--speculative-eagle-topk".to_string()));
    }

    #[test]
    fn ddtree_sends_its_budget_with_one_token_pages_and_no_overlap() {
        for budget in [8, 12, 15, 16, 32, 64] {
            let s = Speculative {
                method: Some(SpecMethod::Ddtree),
                draft_model: Some("/models/dflash".into()),
                num_draft_tokens: Some(budget),
                ..Default::default()
            };
            // The target verifies the tree and its root.
            assert_eq!(s.verified_tokens_per_step(), Some(budget + 1));
            let argv = args(&spec_with(s)).unwrap();
            assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("DDTREE"));
            assert_eq!(
                value_of(&argv, "--speculative-draft-model-path"),
                Some("/models/dflash")
            );
            assert_eq!(
                value_of(&argv, "--speculative-ddtree-budget"),
                Some(budget.to_string().as_str())
            );
            assert_eq!(value_of(&argv, "--page-size"), Some("1"));
            assert!(argv.contains(&"--disable-overlap-schedule".to_string()));
            for absent in [
                "--speculative-num-draft-tokens",
                "--speculative-dflash-block-size",
                "--speculative-eagle-topk",
            ] {
                assert!(!argv.contains(&absent.to_string()), "{absent}");
            }
        }
        let no_draft = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Ddtree),
            num_draft_tokens: Some(8),
            ..Default::default()
        }));
        assert!(no_draft.contains("DFlash drafter"), "{no_draft}");
        let topk = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Ddtree),
            draft_model: Some("d".into()),
            topk: Some(4),
            ..Default::default()
        }));
        assert!(topk.contains("leave num_steps and topk unset"), "{topk}");
    }

    #[test]
    fn a_pass_through_algorithm_goes_as_written_with_its_own_budget_flag() {
        let s = Speculative {
            algorithm: Some("JETSPEC".into()),
            draft_model: Some("/models/jet".into()),
            budget_flag: Some("--speculative-jetspec-budget".into()),
            num_draft_tokens: Some(24),
            ..Default::default()
        };
        assert_eq!(s.name().as_deref(), Some("jetspec"));
        assert_eq!(s.verified_tokens_per_step(), None);
        let argv = args(&spec_with(s.clone())).unwrap();
        assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("JETSPEC"));
        assert_eq!(
            value_of(&argv, "--speculative-draft-model-path"),
            Some("/models/jet")
        );
        assert_eq!(value_of(&argv, "--speculative-jetspec-budget"), Some("24"));
        assert!(!argv.contains(&"--speculative-num-draft-tokens".to_string()));
        // A budget with nowhere to go, a second method, a bad flag: refused.
        let no_flag = err_of(&spec_with(Speculative {
            budget_flag: None,
            ..s.clone()
        }));
        assert!(no_flag.contains("no budget_flag"), "{no_flag}");
        let both = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Dflash),
            ..s.clone()
        }));
        assert!(
            both.contains("both method (dflash) and algorithm"),
            "{both}"
        );
        let flag = err_of(&spec_with(Speculative {
            budget_flag: Some("--x 3".into()),
            ..s.clone()
        }));
        assert!(flag.contains("must be one flag"), "{flag}");
        let name = err_of(&spec_with(Speculative {
            algorithm: Some("A; rm".into()),
            ..s
        }));
        assert!(name.contains("must be a name"), "{name}");
    }

    #[test]
    fn dflash_rejections() {
        let base = Speculative {
            method: Some(SpecMethod::Dflash),
            draft_model: Some("/d".into()),
            ..Default::default()
        };
        let s = Speculative {
            draft_model: None,
            ..base.clone()
        };
        assert!(err_of(&spec_with(s)).contains("dflash needs draft_model"));
        let s = Speculative {
            topk: Some(4),
            ..base.clone()
        };
        assert!(err_of(&spec_with(s)).contains("rejects --speculative-eagle-topk"));
        let s = Speculative {
            num_steps: Some(3),
            ..base
        };
        assert!(err_of(&spec_with(s)).contains("forces num_steps to 1"));
    }

    #[test]
    fn ngram_maps_topk_to_the_bfs_breadth() {
        let argv = args(&spec_with(Speculative {
            method: Some(SpecMethod::Ngram),
            topk: Some(8),
            num_draft_tokens: Some(16),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(value_of(&argv, "--speculative-algorithm"), Some("NGRAM"));
        assert_eq!(
            value_of(&argv, "--speculative-ngram-max-bfs-breadth"),
            Some("8")
        );
        assert_eq!(
            value_of(&argv, "--speculative-num-draft-tokens"),
            Some("16")
        );
    }

    #[test]
    fn other_rejections_name_the_problem() {
        let msg = err_of(&spec_with(Speculative {
            method: Some(SpecMethod::Eagle),
            ..Default::default()
        }));
        assert!(msg.starts_with("sglang: ") && msg.contains("eagle needs draft_model"));
    }

    #[test]
    fn every_emitted_flag_is_known() {
        let mut spec = test_spec(EngineKind::Sglang);
        spec.tp = 2;
        (spec.dp_attention, spec.ep, spec.pp) = (2, 2, 2);
        spec.mem_fraction = Some(0.9);
        spec.max_running_requests = Some(8);
        spec.context_length = Some(4096);
        spec.tool_call_parser = Some("hermes".into());
        spec.grammar_backend = Some("xgrammar".into());
        let specs = [
            tree(2, 8, 16),
            Speculative {
                method: Some(SpecMethod::Dflash),
                draft_model: Some("/d".into()),
                num_draft_tokens: Some(8),
                ..Default::default()
            },
            Speculative {
                method: Some(SpecMethod::Ngram),
                num_steps: Some(2),
                topk: Some(4),
                num_draft_tokens: Some(8),
                ..Default::default()
            },
        ];
        for s in specs {
            spec.speculative = Some(s);
            for flag in args(&spec).unwrap().iter().filter(|a| a.starts_with("--")) {
                assert!(KNOWN_FLAGS.contains(&flag.as_str()), "unknown flag {flag}");
            }
        }
    }
}
