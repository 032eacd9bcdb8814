//! Malformed and hostile campaign files: `plan` refuses each one with the
//! file, the line:col and the rule, and writes nothing.

use std::path::Path;

/// Each fixture's first line is `# expect: <fragment of the error>`.
fn expectation(text: &str) -> String {
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("# expect: "))
        .expect("fixture starts with `# expect: `")
        .to_string()
}

#[test]
fn plan_refuses_every_bad_campaign_with_file_line_col_and_the_rule() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-campaigns");
    let mut cases = 0;
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let src = entry.unwrap().path();
        if src.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&src).unwrap();
        let want = expectation(&text);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, &text).unwrap();
        let (code, _, err) = crate::common::run(&["plan", file.to_str().unwrap()]);
        let name = src.file_name().unwrap().to_string_lossy();
        assert_ne!(code, 0, "{name}: plan accepted it\n{err}");
        assert_ne!(code, -1, "{name}: plan was killed by a signal\n{err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        let located = format!("{}:", file.display());
        let at = err
            .find(&located)
            .unwrap_or_else(|| panic!("{name}: no file in {err}"));
        let rest = &err[at + located.len()..];
        let mut parts = rest.splitn(3, ':');
        let line = parts.next().unwrap_or("");
        let col = parts.next().unwrap_or("");
        assert!(
            line.parse::<u32>().is_ok_and(|l| l > 1) && col.parse::<u32>().is_ok(),
            "{name}: no line:col beyond the first line in {err}"
        );
        assert!(err.contains(&want), "{name}: expected `{want}` in {err}");
        let written: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(written.len(), 1, "{name}: plan wrote files");
        cases += 1;
    }
    assert!(cases >= 20, "only {cases} fixtures found");
}

mod generated {
    //! Arbitrary campaign documents built from the loader's real keys with
    //! hostile values, plus arbitrary text: the loader never panics, and
    //! every error names the file with a line:col.

    use proptest::prelude::*;

    /// Cases run; the corpus above adds its fixtures.
    const CASES: u32 = 3000;

    /// `(section, key)` pairs the campaign schema knows.
    const KEYS: &[(&str, &str)] = &[
        ("campaign", "name"),
        ("campaign", "results_dir"),
        ("model", "path"),
        ("model", "config"),
        ("model", "tokenizer"),
        ("engine", "kind"),
        ("engine", "executable"),
        ("engine", "args"),
        ("engine", "env"),
        ("engine", "url"),
        ("engine", "api_key_env"),
        ("engine", "secret_env"),
        ("hardware", "gpus"),
        ("hardware", "gpu_memory"),
        ("hardware", "gpu"),
        ("[server]", "id"),
        ("[server]", "tp"),
        ("[server]", "mem_fraction"),
        ("[server]", "max_running_requests"),
        ("[server]", "context_length"),
        ("[server]", "speculative"),
        ("[matrix]", "id"),
        ("[matrix]", "tp"),
        ("[matrix]", "budget"),
        ("[matrix]", "speculative"),
        ("[workload]", "name"),
        ("[workload]", "api"),
        ("[workload]", "prompt_kinds"),
        ("[workload]", "input_len"),
        ("[workload]", "output_len"),
        ("[workload]", "concurrency"),
        ("[workload]", "rate"),
        ("[workload]", "arrival"),
        ("[workload]", "burstiness"),
        ("[workload]", "num_requests"),
        ("[workload]", "duration"),
        ("[workload]", "warmup"),
        ("[workload]", "scenario"),
        ("run", "repetitions"),
        ("run", "health_timeout"),
        ("run", "grace_period"),
        ("run", "baseline"),
        ("run", "server_warmup"),
        ("launcher", "kind"),
    ];

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "0",
                "-1",
                "1",
                "1e-300",
                "1e300",
                "1e12",
                "4294967296",
                "nan",
                "inf",
                "-inf",
                "true",
                "[]",
                "[1, 4]",
                "[-1]",
                "[0.5, 2]",
                "[\"a\", 1]",
                "{}",
                "{ a = 1 }",
                "\"\"",
                "\"..\"",
                "\".\"",
                "\"a/b\"",
                "\"${SB_UNSET_PROP_VAR}\"",
                "\"${HOME}\"",
                "\"0s\"",
                "\"1e9h\"",
                "\"99999999999999999999h\"",
                "\"sim\"",
                "\"vllm\"",
                "\"command\"",
                "\"none\"",
                "\"all\"",
                "\"chat\"",
                "\"http://127.0.0.1:1/v1?x#y\"",
                "\"/dev/full\"",
                "[\"none\", { method = \"mtp\" }]",
                "{ method = \"eagle\", num_draft_tokens = 0 }",
            ])
            .prop_map(str::to_string),
            any::<i64>().prop_map(|v| v.to_string()),
            "[a-z0-9 ._/${}-]{0,24}".prop_map(|s| format!("{s:?}")),
        ]
    }

    const BASE: &str =
        "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"sim\"\n";

    /// A document: the minimal campaign plus overrides, or arbitrary text.
    fn document() -> impl Strategy<Value = String> {
        let keyed = prop::collection::vec((prop::sample::select(KEYS.to_vec()), value()), 1..8)
            .prop_map(|pairs| {
                let mut doc = String::from(BASE);
                for ((section, key), value) in pairs {
                    let header = match section.strip_prefix('[') {
                        Some(array) => format!("[[{array}]]"),
                        None => format!("[{section}]"),
                    };
                    doc.push_str(&format!("{header}\n{key} = {value}\n"));
                }
                doc
            });
        prop_oneof![
            8 => keyed,
            1 => "\\PC{0,200}",
            1 => "[\\[\\]a-z=\"\\n 0-9.,{}-]{0,200}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: CASES,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn the_loader_never_panics_and_every_error_is_located(doc in document()) {
            let path = std::path::Path::new("/nonexistent/servebench-prop/c.toml");
            let result = servebench::campaign::parse(path, &doc)
                .and_then(|(raw, src)| servebench::campaign::resolve(raw, &src));
            if let Err(e) = result {
                prop_assert_eq!(&e.path, &path.display().to_string());
                prop_assert!(e.line >= 1 && e.col >= 1, "no line:col: {:?}\n{}", e, doc);
                prop_assert!(!e.message.is_empty());
            }
        }
    }
}
