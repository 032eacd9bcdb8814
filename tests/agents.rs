//! Agent traffic: function calls and schema-constrained answers sent with
//! `tools` and `response_format`, judged by value, on the simulator.

use crate::common::{cells, example, run, write_campaign};

/// The requests of `server`'s cell `cell`.
fn requests(
    cells: &std::collections::BTreeMap<String, serde_json::Value>,
    server: &str,
    cell: &str,
) -> Vec<serde_json::Value> {
    cells[&format!("{server}/{cell}")]["summary"]["requests"]
        .as_array()
        .unwrap_or_else(|| panic!("no requests in {server}/{cell}"))
        .clone()
}

/// `server`'s checked answers of `kind` in `report` (`answers[].checks[]`).
fn check_of(report: &serde_json::Value, server: &str, kind: &str) -> serde_json::Value {
    report["answers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["server_id"] == server)
        .and_then(|a| a["checks"].as_array()?.iter().find(|k| k["kind"] == kind))
        .unwrap_or_else(|| panic!("no {kind} checks of {server}: {}", report["answers"]))
        .clone()
}

/// The reasons `server`'s failed answers of `kind` give.
fn reasons(reqs: &[serde_json::Value], kind: &str) -> Vec<String> {
    reqs.iter()
        .filter(|r| r["label"] == kind && r["answer_check"] == false)
        .map(|r| r["answer_reason"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn wrong_arguments_a_broken_schema_and_malformed_calls_are_flagged_and_never_recommended() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_campaign(dir.path(), example("tool-calls.toml"));
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "the faulty servers fail the run\n{out}\n{err}");
    let root = dir.path().join("results/tool-calls");
    let cells = cells(&root);
    let cell = "agent-kinds-out128-c2";
    // The baseline's calls and schema answers all pass, and say what they called.
    let base = requests(&cells, "baseline", cell);
    assert_eq!(base.len(), 14);
    for r in &base {
        assert_eq!(r["answer_check"], true, "{r}");
        // Structured requests are not forced to their length: they end with their grammar.
        assert!(r["output_tokens"].as_u64().unwrap() < 128, "{r}");
    }
    let call = base.iter().find(|r| r["label"] == "tool-call").unwrap();
    assert!(
        call["output"]["text"]
            .as_str()
            .unwrap()
            .contains("[tool call "),
        "{call}"
    );
    // Plausible, wrong arguments: the right function, a wrong value named by its path.
    let wrong = requests(&cells, "wrong-args", cell);
    let why = reasons(&wrong, "tool-call");
    assert_eq!(why.len(), 7, "{why:?}");
    assert!(
        why.iter()
            .all(|w| w.contains("arguments.") && w.contains("expected")),
        "{why:?}"
    );
    // Numbers written as strings: the values hold, the schema does not.
    let broken = requests(&cells, "broken-schema", cell);
    assert!(reasons(&broken, "tool-call").is_empty());
    let why = reasons(&broken, "json-schema");
    // Two of the seven references (events, an address) hold no number.
    assert_eq!(why.len(), 5, "{why:?}");
    assert!(
        why.iter().all(|w| w.starts_with("breaks its schema at /")),
        "{why:?}"
    );
    // Calls an agent cannot use are recorded with what was wrong, and the
    // stream itself is fine.
    let bad = requests(&cells, "bad-calls", cell);
    assert!(bad.iter().all(|r| r["status"] == "ok"), "{bad:?}");
    let why = reasons(&bad, "tool-call").join(" | ");
    for needle in ["has no id", "arguments are not JSON", "without an `index`"] {
        assert!(why.contains(needle), "{needle}: {why}");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    for (server, kind) in [
        ("wrong-args", "tool-call"),
        ("broken-schema", "json-schema"),
        ("bad-calls", "tool-call"),
    ] {
        let k = check_of(&report, server, kind);
        assert_eq!(k["flagged"], true, "{server}: {k}");
    }
    for pick in report["slo_picks"].as_array().unwrap() {
        assert_eq!(pick["best"]["server_id"], "baseline", "{pick}");
    }
}

#[test]
fn structured_kinds_need_the_chat_api_and_refuse_a_forced_length() {
    let dir = tempfile::tempdir().unwrap();
    for (edit, needle) in [
        (("api = \"chat\"\n", ""), "need `api = \"chat\"`"),
        (
            ("api = \"chat\"\n", "api = \"chat\"\nignore_eos = true\n"),
            "remove `ignore_eos = true`",
        ),
    ] {
        let text = example("tool-calls.toml").replace(edit.0, edit.1);
        let p = write_campaign(dir.path(), text);
        let (code, out, err) = run(&["plan", p.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains(needle), "{err}");
        // The error points at the kinds, by line and column.
        assert!(err.contains("campaign.toml:"), "{err}");
    }
}

#[test]
fn tool_choice_goes_with_the_requests_that_offer_tools_and_is_refused_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let only_baseline = |text: String| {
        let cut = text.find("[[server]]\nid = \"wrong-args\"").unwrap();
        let rest = &text[text.find("[[workload]]").unwrap()..];
        format!("{}{rest}", &text[..cut])
    };
    // `none`: the model must answer in words, so every tool-call prompt
    // fails its check for want of a call; the schema answers still pass.
    let text = only_baseline(example("tool-calls.toml").replace(
        "api = \"chat\"\n",
        "api = \"chat\"\ntool_choice = \"none\"\n",
    ));
    assert!(!text.contains("id = \"wrong-args\"") && text.contains("tool_choice"));
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let cells = cells(&dir.path().join("results/tool-calls"));
    let reqs = requests(&cells, "baseline", "agent-kinds-out128-c2");
    let why = reasons(&reqs, "tool-call");
    assert_eq!(why.len(), 7, "{reqs:?}");
    assert!(why[0].starts_with("expected a call of"), "{why:?}");
    assert!(reasons(&reqs, "json-schema").is_empty());
    // A workload none of whose requests offers tools refuses it, by line.
    let text = text.replace(
        "prompt_kinds = [\"tool-call\", \"json-schema\"]",
        "prompt_kinds = [\"json-schema\"]",
    );
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("campaign.toml:")
            && err.contains("`tool_choice` applies to requests that offer tools"),
        "{err}"
    );
    // A value it does not know is refused with the ones it does.
    let text = text.replace("tool_choice = \"none\"", "tool_choice = \"always\"");
    let p = write_campaign(dir.path(), &text);
    let (code, _, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("campaign.toml:") && err.contains("required"),
        "{err}"
    );
}

/// A campaign of agent sessions on the simulator: `baseline` answers right,
/// `wrong-args` calls with plausible, wrong arguments, `bad-calls` streams
/// calls an agent cannot use.
fn agent_sessions(scenario: &str, output_len: u64) -> String {
    format!(
        r#"[campaign]
name = "agent-sessions"
results_dir = "results"
[model]
path = "sim-model"
[engine]
kind = "sim"
args = ["--decode-step-ms", "1", "--decode-step-per-seq-ms", "0", "--prefill-tok-s", "0"]
[[server]]
id = "baseline"
[[server]]
id = "wrong-args"
args = ["--plausible-wrong-answers"]
[[server]]
id = "bad-calls"
args = ["--malformed-tool-calls"]
[[workload]]
name = "agent"
api = "chat"
scenario = "{scenario}"
output_len = {output_len}
concurrency = 2
num_requests = 6
slo = ["ttft=5s"]
[run]
baseline = "baseline"
"#
    )
}

#[test]
fn an_agent_session_calls_tools_gets_their_results_and_a_derailed_one_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_campaign(dir.path(), agent_sessions("calculator-agent", 64));
    // A turn that asks for more than the workload's output_len is named before the run.
    let (code, plan, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{plan}\n{err}");
    assert!(
        plan.contains("scenario `calculator-agent`: turn 2 asks 96, turn 4 asks 96, turn 6 asks 128 output tokens; the workload's output_len 64 caps every turn"),
        "{plan}"
    );
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "the derailing servers fail the run\n{out}\n{err}");
    let root = dir.path().join("results/agent-sessions");
    let cells = cells(&root);
    let cell = "agent-sessions-out64-c2";
    let level = |server: &str| cells[&format!("{server}/{cell}")]["summary"].clone();
    // Every baseline session runs its six turns: three calls, each judged
    // and answered, and three replies built on the tools' results.
    let base = level("baseline");
    assert_eq!(
        base["sessions"],
        serde_json::json!({"sessions": 6, "turns": 36, "derailed": 0})
    );
    let reqs = base["requests"].as_array().unwrap();
    for r in reqs {
        let turn = r["turn"].as_u64().unwrap();
        assert_eq!(r["answer_check"].is_boolean(), turn % 2 == 0, "{r}");
        assert_ne!(r["answer_check"], false, "{r}");
    }
    // A session whose first call has wrong arguments stops there, counted.
    let wrong = level("wrong-args");
    assert_eq!(
        wrong["sessions"],
        serde_json::json!({"sessions": 6, "turns": 6, "derailed": 6})
    );
    let why = reasons(wrong["requests"].as_array().unwrap(), "calculator-agent");
    assert_eq!(why.len(), 6);
    assert!(
        why[0].starts_with("`calculator` arguments.") && why[0].contains("expected"),
        "{why:?}"
    );
    let bad = level("bad-calls");
    assert_eq!(bad["sessions"]["derailed"], 6, "{bad}");
    let why = reasons(bad["requests"].as_array().unwrap(), "calculator-agent").join(" | ");
    assert!(why.contains("malformed tool call"), "{why}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    for server in ["wrong-args", "bad-calls"] {
        let k = check_of(&report, server, "calculator-agent");
        assert_eq!(k["flagged"], true, "{server}: {k}");
    }
    for pick in report["slo_picks"].as_array().unwrap() {
        assert_eq!(pick["best"]["server_id"], "baseline", "{pick}");
    }
}

#[test]
fn the_report_sets_each_constraints_decode_cost_beside_the_same_prompts_unconstrained() {
    // The simulator's grammar adds 2 ms to each 2 ms decode step of a
    // constrained request: a schema, JSON mode and offered tools each decode
    // at half the speed of the same prompts without them, in the same cells.
    let dir = tempfile::tempdir().unwrap();
    let text = example("tool-calls.toml")
        .replace(
            "prompt_kinds = [\"tool-call\", \"json-schema\"]",
            "prompt_kinds = [\"json-extraction\", \"json-schema\", \"json-object\", \"tool-call\", \"tool-call-text\"]\nnum_requests = 40",
        )
        .replace("num_requests = 14\n", "")
        .replace(
            "args = [\"--decode-step-ms\", \"2\",",
            "args = [\"--grammar-step-ms\", \"2\", \"--decode-step-ms\", \"2\",",
        )
        .replace(
            "[[server]]\nid = \"wrong-args\"\nargs = [\"--plausible-wrong-answers\"]\n",
            "",
        )
        .replace(
            "[[server]]\nid = \"broken-schema\"\nargs = [\"--break-schema\"]\n",
            "",
        )
        .replace(
            "[[server]]\nid = \"bad-calls\"\nargs = [\"--malformed-tool-calls\"]\n",
            "",
        );
    assert!(text.contains("--grammar-step-ms") && !text.contains("id = \"bad-calls\""));
    let p = write_campaign(dir.path(), text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let root = dir.path().join("results/tool-calls");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let kinds = report["kinds"].as_array().unwrap();
    let row = |kind: &str| kinds.iter().find(|k| k["kind"] == kind).unwrap().clone();
    for (constrained, twin) in [
        ("json-schema", "json-extraction"),
        ("json-object", "json-extraction"),
        ("tool-call", "tool-call-text"),
    ] {
        let (c, plain) = (row(constrained), row(twin));
        let unconstrained = c["unconstrained_tok_s_p50"].as_f64().unwrap();
        assert_eq!(unconstrained, plain["decode_tok_s_p50"].as_f64().unwrap());
        assert!(plain.get("unconstrained_tok_s_p50").is_none(), "{plain}");
        let change = c["decode_tok_s_p50"].as_f64().unwrap() / unconstrained - 1.0;
        assert!((-0.6..-0.4).contains(&change), "{change}: {c}");
    }
    // Every answer of the five kinds is right: the twins are judged too
    // (the tool prompts without tools, by the figure the call would give).
    let cells = cells(&root);
    for r in requests(&cells, "baseline", "agent-kinds-out128-c2") {
        assert_eq!(r["answer_check"], true, "{r}");
    }
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(md.contains("vs unconstrained"), "{md}");
    assert!(md.contains("% (unconstrained "), "{md}");
}

#[test]
fn a_checks_file_brings_its_own_tool_calls_and_schemas() {
    use servebench::workload::PromptKind;
    let dir = tempfile::tempdir().unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"drug": {"type": "string"}, "dose_mg": {"type": "number"}},
        "required": ["drug", "dose_mg"]
    });
    let lines = [
        serde_json::json!({"prompt": PromptKind::ToolCall.variants()[3], "check": "tool", "tools": "builtin",
            "expected": {"name": "calculator", "arguments": {"operation": "power", "a": 2, "b": 20}}, "kind": "calls"}),
        serde_json::json!({"prompt": PromptKind::JsonExtraction.variants()[6], "check": "schema", "schema": schema,
            "expected": {"drug": "amoxicillin", "dose_mg": 500}, "kind": "forms"}),
    ];
    let file: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("mine.jsonl"), file).unwrap();
    let text = example("tool-calls.toml").replace(
        "prompt_kinds = [\"tool-call\", \"json-schema\"]",
        "checks = \"mine.jsonl\"",
    );
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}\n{err}");
    let cells = cells(&dir.path().join("results/tool-calls"));
    let cell = "agent-checks-out128-c2";
    for r in requests(&cells, "baseline", cell) {
        assert_eq!(r["answer_check"], true, "{r}");
    }
    let wrong = requests(&cells, "wrong-args", cell);
    assert_eq!(reasons(&wrong, "calls").len(), 7, "{wrong:?}");
    let broken = requests(&cells, "broken-schema", cell);
    let why = reasons(&broken, "forms");
    assert_eq!(why.len(), 7, "{why:?}");
    assert!(
        why[0].starts_with("breaks its schema at /dose_mg"),
        "{why:?}"
    );
    assert!(reasons(&broken, "calls").is_empty());
    // A line whose expected values break its own schema is refused, by line.
    let bad = serde_json::json!({"prompt": "x", "check": "schema", "schema": {"type": "object", "properties": {"n": {"type": "number"}}},
        "expected": {"n": "seven"}});
    let unknown = serde_json::json!({"prompt": "x", "check": "tool", "tools": "builtin",
        "expected": {"name": "rm", "arguments": {}}});
    for (line, needle) in [
        (bad, "`expected` does not satisfy `schema`"),
        (unknown, "tool `rm` is not among the `tools`"),
    ] {
        std::fs::write(dir.path().join("mine.jsonl"), format!("{line}\n")).unwrap();
        let (code, out, err) = run(&["plan", p.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(
            err.contains("mine.jsonl: line 1") && err.contains(needle),
            "{err}"
        );
    }
}
