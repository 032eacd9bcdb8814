//! Malformed and hostile campaign files: `plan` refuses each one with the
//! file, the line:col and the rule, and writes nothing.

mod common;

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
        let (code, _, err) = common::run(&["plan", file.to_str().unwrap()]);
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
    assert!(cases >= 9, "only {cases} fixtures found");
}
