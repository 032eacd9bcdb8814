//! Every command line the SGLang adapter emits for the main campaign is
//! parsed by SGLang's own argument parser (`ServerArgs.add_cli_args`, from
//! the SGLang 0.5.23 wheel without its CUDA kernels, installed by
//! scripts/setup-sglang-env.sh), as scripts/vllm_check_args.py does for
//! vLLM. Flags of extensions SGLang's release lacks (DDTree's budget) are
//! declared by the adapter and set aside; everything else must parse.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The main campaign with an MTP server and SGLang's own hybrid-model flags added,
/// and three layouts beyond TP.
fn campaign(dir: &Path) -> servebench::campaign::Campaign {
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models");
    let text = include_str!("../../examples/sglang-hybrid-8gpu.toml")
        .replace("\"models/", &format!("\"{models}/"))
        + r#"
[[server]]
id = "mtp-tp1"
tp = 1
speculative = { method = "mtp", num_steps = 3, topk = 1, num_draft_tokens = 4 }
args = ["--max-mamba-cache-size", "64", "--mamba-ssm-dtype", "bfloat16", "--mamba-full-memory-ratio", "0.5", "--mamba-radix-cache-strategy", "no_buffer"]
[[server]]
id = "tp4-dp2"
tp = 4
dp = 2
[[server]]
id = "tp8-adp8-ep8"
tp = 8
dp_attention = 8
ep = 8
[[server]]
id = "tp4-pp2"
tp = 4
pp = 2
[[server]]
id = "tools"
tool_call_parser = "hermes"
grammar_backend = "llguidance"
"#;
    let p = dir.join("campaign.toml");
    std::fs::write(&p, text).unwrap();
    servebench::campaign::load_campaign(&p).unwrap()
}

/// Run the parser check over `argvs`; (exit code, what it printed).
fn check(argvs: &[Vec<String>]) -> (i32, String) {
    let python = std::env::var("SERVEBENCH_SGLANG_PYTHON").expect("run through scripts/test.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sglang_check_args.py");
    let extensions: Vec<&str> = servebench::engine::sglang::EXTENSION_FLAGS
        .iter()
        .map(|(f, _)| *f)
        .collect();
    let input = serde_json::json!({ "argvs": argvs, "extensions": extensions });
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn every_sglang_command_line_of_the_main_campaign_parses_with_sglangs_own_parser() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(dir.path());
    let plan = servebench::plan::build(&c, &Default::default(), &Default::default(), "servebench");
    let argvs: Vec<Vec<String>> = plan
        .groups
        .iter()
        .map(|g| {
            g.command
                .clone()
                .unwrap_or_else(|e| panic!("{}: {e}", g.server.id))
        })
        .collect();
    // AR, DFlash and DDTree at TP 1/4/8, every DDTree budget, MTP with
    // SGLang's own mamba flags, three layouts beyond TP, and a tool-call
    // parser with a grammar backend.
    assert_eq!(
        argvs.len(),
        3 + 3 + 18 + 1 + 3 + 1,
        "{:?}",
        plan.groups.len()
    );
    let joined: Vec<String> = argvs.iter().map(|a| a.join(" ")).collect();
    for part in [
        "--speculative-algorithm DDTREE",
        "--speculative-ddtree-budget 64",
        "--speculative-algorithm NEXTN",
        "--max-mamba-cache-size 64",
        "--tp-size 8",
        "--dp-size 2",
        "--attn-dp-size 8 --ep-size 8",
        "--pp-size 2",
        "--tool-call-parser hermes --grammar-backend llguidance",
    ] {
        assert!(
            joined.iter().any(|l| l.contains(part)),
            "no command has {part}"
        );
    }
    let (code, out) = check(&argvs);
    assert_eq!(code, 0, "SGLang's parser refused:\n{out}");

    // The check can fail: a flag SGLang does not have is named.
    let mut bad = argvs[0].clone();
    bad.push("--speculative-no-such-budget".into());
    bad.push("8".into());
    let (code, out) = check(&[bad]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--speculative-no-such-budget"), "{out}");
    // An extension flag is set aside only when declared as one.
    let mut undeclared = argvs[0].clone();
    undeclared.extend(["--speculative-jetspec-budget".into(), "16".into()]);
    let (code, out) = check(&[undeclared]);
    assert_eq!(code, 1, "{out}");
}
