//! Engine builds side by side: `[[build]]` entries as a matrix axis, each
//! build asked for its version, stored in its own cells and judged stale
//! only against its own earlier cells.

use crate::common::{cells, run, sim_campaign, write_campaign};

/// Two simulated builds of one config: `old` decodes a step in 20 ms,
/// `new` in 5 ms. `keys(name)` adds lines to each build's table and
/// `env(name)` to its environment.
fn two_builds(keys: impl Fn(&str) -> String, env: impl Fn(&str) -> String) -> String {
    let build = |name: &str, step: &str| {
        format!(
            "[[build]]\nname = \"{name}\"\n{}[build.env]\nSERVEBENCH_SIM_DECODE_STEP_MS = \"{step}\"\n\
             SERVEBENCH_SIM_DECODE_STEP_PER_SEQ_MS = \"0\"\nSERVEBENCH_SIM_PREFILL_TOK_S = \"0\"\n{}",
            keys(name),
            env(name)
        )
    };
    sim_campaign("builds", &[])
        + &build("old", "20")
        + &build("new", "5")
        + r#"[[matrix]]
id = "s-{build}"
max_running_requests = 4
build = ["old", "new"]
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = [1, 2]
num_requests = 4
"#
}

#[test]
fn two_builds_run_side_by_side_each_with_its_version_detected_and_stored() {
    let dir = tempfile::tempdir().unwrap();
    let text = two_builds(
        |_| "version = \"1.0\"\n".into(),
        |name| {
            let v = if name == "old" { "1.0" } else { "1.1" };
            format!("SERVEBENCH_SIM_VERSION = \"{v}\"\n")
        },
    );
    let p = write_campaign(dir.path(), &text);
    let (code, plan, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("build `old`: 1.0 (from `") && plan.contains("build `new`: 1.1 (from `"),
        "{plan}"
    );
    assert!(plan.contains(" sim --print-version`)"), "{plan}");
    assert!(
        plan.contains("warning: build `new`'s version says 1.0 but it reports 1.1"),
        "{plan}"
    );
    assert!(!plan.contains("warning: build `old`"), "{plan}");
    assert!(
        !plan.contains("engine build:"),
        "no server runs [engine] as written: {plan}"
    );
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // The answer names the build its picks run on, and no regression.
    assert!(
        out.contains("build to deploy: `new` (1 of 1 picks above run on it)"),
        "{out}"
    );
    assert!(
        out.contains("builds: no regression from one build to the next (2 comparisons)"),
        "{out}"
    );
    let root = dir.path().join("results/builds");
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(md.contains("\n## Builds\n"), "{md}");
    assert!(
        md.contains("- `old` → `new` (s-old → s-new) at w-in64-out8-c1: output_tok_s "),
        "{md}"
    );
    assert!(!md.contains("REGRESSION"), "{md}");
    let stored = cells(&root);
    assert_eq!(stored.len(), 4, "{:?}", stored.keys());
    let schema = crate::schema::validator("servebench/cell-result.schema.json");
    for (name, c) in &stored {
        assert_eq!(
            crate::schema::errors(&schema, c),
            Vec::<String>::new(),
            "{name}"
        );
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let schema = crate::schema::validator("servebench/report.schema.json");
    assert_eq!(
        crate::schema::errors(&schema, &report),
        Vec::<String>::new()
    );
    let mut tput = std::collections::BTreeMap::new();
    for (name, c) in &stored {
        let (server, _) = name.split_once('/').unwrap();
        let want = if server == "s-old" { "1.0" } else { "1.1" };
        assert_eq!(c["engine_build"]["version"], want, "{name}");
        assert_eq!(c["server"]["build"]["name"], &server[2..], "{name}");
        tput.entry(server.to_string())
            .or_insert_with(Vec::new)
            .push(c["summary"]["output_throughput_tok_s"].as_f64().unwrap());
    }
    // Each build ran with its own environment: the new one decodes 4× faster.
    let mean = |s: &str| tput[s].iter().sum::<f64>() / tput[s].len() as f64;
    assert!(mean("s-new") > 2.5 * mean("s-old"), "{tput:?}");
}

#[test]
fn a_new_version_of_one_build_makes_only_its_cells_stale_and_a_renamed_build_keeps_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let text = |new_version: &str| {
        two_builds(
            |name| {
                let v = if name == "old" { "1.0" } else { new_version };
                format!("version_command = [\"sh\", \"-c\", \"echo sim {v}\"]\n")
            },
            |_| String::new(),
        )
    };
    let p = write_campaign(dir.path(), text("2.0"));
    let (code, _, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    write_campaign(dir.path(), text("2.1"));
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    let lines = |plan: &str, server: &str, what: &str| {
        plan.lines()
            .skip_while(|l| !l.starts_with(&format!("server {server} ")))
            .skip(1)
            .take_while(|l| !l.starts_with("server "))
            .filter(|l| l.starts_with("  w-") && l.contains(what))
            .count()
    };
    assert_eq!(
        lines(&plan, "s-new", "stale: engine version 2.0 → 2.1"),
        2,
        "{plan}"
    );
    assert_eq!(lines(&plan, "s-old", " cached"), 2, "{plan}");
    // The build's name is not part of any identity: renamed, its cells stay.
    let renamed = text("2.0").replace("\"old\"", "\"legacy\"");
    write_campaign(dir.path(), &renamed);
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(lines(&plan, "s-legacy", " cached"), 2, "{plan}");
    assert_eq!(lines(&plan, "s-new", " cached"), 2, "{plan}");
}

/// A campaign of nine simulated builds `b0`…`b8` of one config, build `i`
/// with the environment `env(i)` (lines of its `[build.env]`).
fn nine_builds(name: &str, env: impl Fn(usize) -> String) -> String {
    let mut text = sim_campaign(name, &[]);
    for i in 0..9 {
        text += &format!(
            "[[build]]\nname = \"b{i}\"\n[build.env]\nSERVEBENCH_SIM_VERSION = \"0.{i}\"\n\
             SERVEBENCH_SIM_DECODE_STEP_PER_SEQ_MS = \"0\"\nSERVEBENCH_SIM_PREFILL_TOK_S = \"0\"\n{}",
            env(i)
        );
    }
    let all: Vec<String> = (0..9).map(|i| format!("\"b{i}\"")).collect();
    text + &format!(
        "[[matrix]]\nid = \"s-{{build}}\"\nbuild = [{}]\n[[workload]]\nname = \"w\"\n\
         input_len = 64\noutput_len = 24\nconcurrency = 2\nnum_requests = 4\n",
        all.join(", ")
    )
}

/// The servers with stored cells under `root`.
fn measured_servers(root: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = cells(root)
        .keys()
        .map(|k| k.split_once('/').unwrap().0.to_string())
        .collect();
    v.dedup();
    v
}

#[test]
fn bisect_finds_an_injected_speed_regression_among_nine_builds_in_five_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    // Builds from b5 on take 30 ms a decode step instead of 10 ms; b6
    // cannot even start (its program fails), and is skipped.
    let text = nine_builds("speed", |i| {
        let step = if i >= 5 { "30" } else { "10" };
        format!("SERVEBENCH_SIM_DECODE_STEP_MS = \"{step}\"\n")
    });
    let text = text.replace(
        "name = \"b6\"\n",
        "name = \"b6\"\nexecutable = [\"/bin/false\"]\n",
    );
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["bisect", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("first build where output_tok_s changed: `b5` (server s-b5)"),
        "{out}"
    );
    let root = dir.path().join("results/speed");
    let servers = measured_servers(&root);
    assert!(
        servers.len() <= 5,
        "⌈log2 9⌉ + 1 = 5 at most: {servers:?}\n{out}"
    );
    assert!(
        out.contains(&format!("{} of 9 builds measured", servers.len())),
        "{out}"
    );
    // Both sides of the change are shown with their numbers.
    assert!(out.contains("  last good `b4`: output_tok_s "), "{out}");
    assert!(out.contains("  first bad `b5`: output_tok_s "), "{out}");
    // Run again: the same answer from the stored cells, nothing measured.
    let (code, again, err) = run(&["bisect", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        again.lines().last(),
        out.lines().last(),
        "{again}\n---\n{out}"
    );
    assert_eq!(measured_servers(&root), servers);
    let totals: Vec<&str> = err.lines().filter(|l| l.starts_with("total: ")).collect();
    assert!(!totals.is_empty(), "{err}");
    assert!(
        totals.iter().all(|l| l.contains("0 servers to launch")),
        "no server launched again: {err}"
    );
    // The report compares each measured build with the one before it: the
    // slowdown at b5 and b6's failure to start are flagged.
    let (code, table, err) = run(&["report", root.to_str().unwrap(), "--table"]);
    assert_eq!(code, 0, "{err}");
    let flagged: Vec<&str> = table
        .lines()
        .filter(|l| l.trim_end().ends_with("REGRESSION"))
        .collect();
    assert!(
        flagged
            .iter()
            .any(|l| l.contains("`b4` → `b5`") && l.contains("output_tok_s")),
        "{table}"
    );
    assert!(
        flagged
            .iter()
            .any(|l| l.contains("`b5` → `b6`") && l.contains("stopped working")),
        "{table}"
    );
    assert!(
        !flagged.iter().any(|l| l.contains("`b0` → `b4`")),
        "{table}"
    );
    // A range whose ends do not differ is refused, naming both.
    let (code, _, err) = run(&["bisect", p.to_str().unwrap(), "--bad", "b3"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("the ends do not differ in output_tok_s")
            && err.contains("good `b0`: output_tok_s ")
            && err.contains("bad `b3`: output_tok_s "),
        "{err}"
    );
}

#[test]
fn bisect_finds_the_first_build_answering_with_one_word_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let text = nine_builds("answers", |i| {
        if i >= 6 {
            "SERVEBENCH_SIM_DEGENERATE_AFTER = \"0\"\n".into()
        } else {
            String::new()
        }
    });
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["bisect", p.to_str().unwrap(), "--watch", "answers"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("first build where answers changed: `b6` (server s-b6)"),
        "{out}"
    );
    assert!(out.contains("first bad `b6`: degenerate_output: "), "{out}");
    let servers = measured_servers(&dir.path().join("results/answers"));
    assert!(servers.len() <= 5, "{servers:?}\n{out}");
}

#[test]
fn the_builds_example_plans_each_build_and_bisect_finds_its_slow_build() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_campaign(dir.path(), crate::common::example("builds.toml"));
    let (code, plan, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for i in 0..8 {
        assert!(
            plan.contains(&format!("build `1.{i}`: 1.{i} (from `")),
            "{plan}"
        );
    }
    assert!(!plan.contains("warning:"), "{plan}");
    let (code, out, err) = run(&["bisect", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("first build where output_tok_s changed: `1.4` (server mrr16-1.4); 5 of 8 builds measured"),
        "{out}"
    );
}
