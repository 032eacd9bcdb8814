//! A new user's first hour: what `plan` refuses before anything starts,
//! what `init` writes, and what the terminal says when a server cannot start.

use crate::common::*;

/// A simulator campaign with one server and one workload reading `dataset`.
fn dataset_campaign(dataset: &str) -> String {
    steady_sim_campaign("first-hour", "0")
        + &format!(
            "[[server]]\nid = \"a\"\n[[workload]]\nname = \"rows\"\ndataset = \"{dataset}\"\n\
             output_len = 4\nconcurrency = 1\nnum_requests = 2\n"
        )
}

#[test]
fn sharegpt_rows_in_jsonl_run_and_a_bad_line_anywhere_is_refused_by_plan_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        r#"{"conversations": [{"from": "human", "value": "Name a colour."}, {"from": "gpt", "value": "Blue."}]}"#,
        r#"{"conversations": [{"from": "human", "value": "Name a fruit."}, {"from": "gpt", "value": "A pear."}]}"#,
        r#"{"prompt": "Count to three.", "output_len": 4}"#,
    ];
    let data = dir.path().join("rows.jsonl");
    std::fs::write(&data, rows.join("\n")).unwrap();
    let campaign = write_campaign(dir.path(), dataset_campaign("rows.jsonl"));
    let (code, plan, err) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("rows-dataset-out4-c1  0.2s  run") || plan.contains("rows-dataset-out4-c1"),
        "{plan}"
    );
    let (code, _, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let stored = cells(&dir.path().join("results/first-hour"));
    assert_eq!(stored.len(), 1, "{stored:?}");
    let cell = stored.values().next().unwrap();
    assert_eq!(cell["status"], "ok", "{cell}");

    // A malformed row far down the file: refused before any server starts,
    // naming the dataset's file and line and the campaign's own line.
    let mut bad: Vec<&str> = rows.iter().cycle().take(300).copied().collect();
    bad.push(r#"{"conversations": [{"from": "human", "value": 7}]}"#);
    std::fs::write(&data, bad.join("\n")).unwrap();
    let (code, out, err) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains(&data.display().to_string()), "{err}");
    assert!(err.contains("line 301"), "{err}");
    assert!(err.contains("campaign.toml:"), "{err}");
    let (code, _, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("line 301"), "{err}");
}

/// A llama.cpp campaign whose `executable` is `script` run by `sh`.
fn failing_engine_campaign(dir: &std::path::Path, script: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("engine.sh"), script).unwrap();
    let text = campaign_head("broken", "model.gguf", "llamacpp", &[])
        + &format!("executable = [\"sh\", \"{}\"]\n", dir.join("engine.sh").display())
        + "\
           [[server]]\nid = \"a\"\n[[server]]\nid = \"b\"\n\
           [[workload]]\nname = \"w\"\ninput_len = 64\noutput_len = 4\nconcurrency = [1, 2]\nnum_requests = 2\n";
    write_campaign(dir, text)
}

#[test]
fn an_engine_that_cannot_start_is_found_by_plan_and_no_server_is_launched() {
    let dir = tempfile::tempdir().unwrap();
    // Fails the way a missing Python module does, on `--version` as on any launch.
    let campaign = failing_engine_campaign(
        dir.path(),
        "echo 'Traceback (most recent call last):' >&2\n\
         echo '  File \"<string>\", line 1, in <module>' >&2\n\
         echo \"ModuleNotFoundError: No module named 'xllamacpp'\" >&2\nexit 1\n",
    );
    let (code, plan, err) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("engine build: version unknown: `sh ")
            && plan
                .contains("failed (exit code 1): ModuleNotFoundError: No module named 'xllamacpp'"),
        "{plan}"
    );
    assert!(!plan.contains("engine build: 1"), "{plan}");
    assert!(
        plan.contains("the engine cannot start here, so no cell runs: install llama.cpp"),
        "{plan}"
    );
    assert_eq!(
        plan.matches("all 2 cells skipped: the engine cannot start here")
            .count(),
        2,
        "{plan}"
    );
    let (code, _, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // Only the version command ran: no server was launched.
    assert!(!err.contains("healthy"), "{err}");
    let (_, json, _) = run(&["plan", "--json", campaign.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["totals"]["servers_to_launch"], 0, "{json}");

    // A missing executable is the same: a reason, never a version.
    let text = std::fs::read_to_string(&campaign).unwrap().replace(
        &format!("[\"sh\", \"{}\"]", dir.path().join("engine.sh").display()),
        "[\"/no/such/llama-server\"]",
    );
    std::fs::write(&campaign, text).unwrap();
    let (code, plan, err) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("`/no/such/llama-server --version` cannot run: No such file or directory"),
        "{plan}"
    );
}

#[test]
fn a_server_that_exits_at_start_shows_its_last_log_line_in_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    // Says its version, then fails at every launch with a line no
    // classifier knows.
    let campaign = failing_engine_campaign(
        dir.path(),
        "case \"$*\" in *--version*) echo 'version: 42 (abc)'; exit 0;; esac\n\
         echo 'loading model.gguf'\necho 'model.gguf: wrong magic number 0x00' >&2\nexit 2\n",
    );
    let (code, _, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_ne!(code, 0, "four cells failed: {err}");
    assert!(
        err.contains(
            "a failed to start: start_failed (server exited before becoming healthy (exit code 2)); \
             its log ends: model.gguf: wrong magic number 0x00"
        ),
        "{err}"
    );
}

#[test]
fn init_for_each_engine_from_an_empty_directory_plans_or_says_what_to_install() {
    for engine in ["sim", "llamacpp", "sglang", "vllm"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("c.toml");
        let (code, _, err) = run(&[
            "init",
            "--engine",
            engine,
            "--output",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            !text.contains("../"),
            "{engine}: a path outside its directory:\n{text}"
        );
        // llama.cpp's model and tokenizer are the user's to name.
        let plan = std::process::Command::new(BIN)
            .args(["plan", out.to_str().unwrap()])
            .env("SERVEBENCH_TEST_GGUF", dir.path().join("m.gguf"))
            .env(
                "SERVEBENCH_TOKENIZER_JSON",
                dir.path().join("tokenizer.json"),
            )
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&plan.stdout);
        let stderr = String::from_utf8_lossy(&plan.stderr);
        assert_eq!(plan.status.code(), Some(0), "{engine}: {stderr}");
        let cannot = stdout.contains("the engine cannot start here, so no cell runs: install");
        let detected = stdout.lines().any(|l| {
            l.strip_prefix("engine build: ")
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        });
        assert!(
            cannot != detected,
            "{engine}: either it runs or it says what to install:\n{stdout}"
        );
        if cannot {
            assert!(
                stdout.contains("engine build: version unknown: "),
                "{engine}: {stdout}"
            );
            assert!(!stdout.contains(": run\n"), "{engine}: {stdout}");
        }
    }
}

#[test]
fn bench_takes_vllms_flags_and_prints_goodput_attainment_and_the_percentiles_asked() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim_process(
        &["--decode-step-ms", "1", "--prefill-tok-s", "0"],
        &dir.path().join("sim.log"),
    );
    let port = sim.url.rsplit(':').next().unwrap().trim_end_matches('/');
    let saved = dir.path().join("saved");
    std::fs::create_dir(&saved).unwrap();
    let (code, out, err) = run(&[
        "bench",
        "--host",
        "127.0.0.1",
        "--port",
        port,
        "--endpoint",
        "/v1/chat/completions",
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--num-prompts",
        "12",
        "--request-rate",
        "inf",
        "--max-concurrency",
        "4",
        "--goodput",
        "ttft:60000",
        "e2el:60000",
        "--percentile-metrics",
        "ttft,e2el",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--result-dir",
        saved.to_str().unwrap(),
        "--result-filename",
        "r.json",
    ]);
    assert_eq!(code, 0, "{err}");
    // Unlimited rate under a cap of 4 is a closed loop of 4 users.
    assert!(
        out.contains("goodput at concurrency 4 (ttft<=60000ms, e2e<=60000ms): ")
            && out.contains(
                "attainment 100.0 % (12 of 12 requests met every bound): meets the SLO at 90 %"
            ),
        "{out}"
    );
    assert!(out.contains("concurrency 4 ttft (ms): mean "), "{out}");
    assert!(
        out.contains("concurrency 4 e2el (ms): mean ")
            && out.contains(", P50 ")
            && out.contains(", P99 "),
        "{out}"
    );
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(saved.join("r.json")).unwrap()).unwrap();
    assert_eq!(saved["target"]["api"], "chat");
    assert_eq!(saved["settings"]["input_len"], 64);
    assert_eq!(saved["levels"][0]["completed"], 12);

    // A flag of vLLM's without a servebench meaning names the equivalent,
    // not the nearest spelling.
    let (code, _, err) = run(&["bench", "--url", &sim.url, "--backend", "vllm"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("`--backend` is a flag of vLLM's `bench serve`") && err.contains("--api"),
        "{err}"
    );
    assert!(!err.contains("similar argument"), "{err}");
}

#[test]
fn a_closed_stdout_ends_output_quietly_on_every_command() {
    let quick = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/quickstart.toml");
    for args in [
        vec!["plan", quick],
        vec!["plan", "--json", quick],
        vec!["--help"],
        vec!["memory", "--help"],
    ] {
        // The reading end is closed before the program starts: every write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(BIN)
            .args(&args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
    }
}

#[test]
fn a_missing_file_and_a_bad_baseline_are_said_plainly_and_change_nothing() {
    let (code, _, err) = run(&["plan", "nothere.toml"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "error: cannot read nothere.toml: No such file or directory"
    );

    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(
        dir.path(),
        steady_sim_campaign("edges", "0")
            + "[[server]]\nid = \"base\"\n[[server]]\nid = \"fast\"\nargs = [\"--decode-step-ms\", \"0\"]\n\
               [[workload]]\nname = \"w\"\ninput_len = 64\noutput_len = 4\nconcurrency = 1\nnum_requests = 2\n",
    );
    let (code, _, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let results = dir.path().join("results/edges");
    let md = results.join("report.md");
    let before = std::fs::read(&md).unwrap();
    let (code, _, err) = run(&["report", results.to_str().unwrap(), "--baseline", "bse"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--baseline bse: no server of that name")
            && err.contains("did you mean `base`?"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&md).unwrap(),
        before,
        "a refused report rewrote report.md"
    );

    // A report written elsewhere in markdown alone names no HTML report.
    let other = dir.path().join("md-only");
    let (code, out, err) = run(&[
        "report",
        results.to_str().unwrap(),
        "--out",
        other.to_str().unwrap(),
        "--format",
        "md",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(other.join("report.md").exists());
    assert!(!out.contains("report.html"), "{out}");

    // compare names the builds on both sides.
    let (_, out, _) = run(&[
        "compare",
        results.to_str().unwrap(),
        results.to_str().unwrap(),
    ]);
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        out.contains(&format!(
            "engine build: BASE {version} (2 cells); NEW {version} (2 cells)"
        )),
        "{out}"
    );
}

#[test]
fn an_answer_from_part_of_the_campaign_says_what_it_rests_on_and_reports_no_search_that_never_ran()
{
    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(
        dir.path(),
        steady_sim_campaign("partial", "1")
            + "[[server]]\nid = \"ar\"\n[[server]]\nid = \"fast\"\nargs = [\"--decode-step-ms\", \"0.5\"]\n\
               [[workload]]\nname = \"chat\"\ninput_len = 64\noutput_len = 4\nconcurrency = [1, 2]\nnum_requests = 2\n\
               [[workload]]\nname = \"other\"\ninput_len = 64\noutput_len = 4\nconcurrency = 1\nnum_requests = 2\n\
               [[workload]]\nname = \"long\"\ninput_len = 64\noutput_len = 8\nnum_requests = 4\n\
               search = { slo = \"ttft_p99=10s\", over = \"concurrency\", min = 1, max = 4 }\n\
               [run]\nbaseline = \"ar\"\n",
    );
    let (code, out, err) = run(&["run", campaign.to_str().unwrap(), "--only", "workload=chat"]);
    assert_eq!(code, 0, "{err}");
    let answer = &out[out.find("Answer\n").expect("an answer")..];
    assert!(
        answer.contains(
            "this answer rests on 4 of the campaign's 6 points; not measured (left out by --only): \
             `ar` (other-in64-out4-c1); `fast` (other-in64-out4-c1)"
        ),
        "{answer}"
    );
    assert!(
        !answer.contains("SLO search"),
        "a search that never ran: {answer}"
    );
    assert!(answer.contains("deploy `fast`"), "{answer}");

    // The whole campaign measured: nothing to qualify.
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let answer = &out[out.find("Answer\n").expect("an answer")..];
    assert!(!answer.contains("rests on"), "{answer}");
    assert!(answer.contains("SLO search"), "{answer}");
}

/// A certificate authority and a certificate for `localhost` it signed:
/// (the authority's PEM, the leaf's DER, the leaf's key).
fn test_certificates() -> (
    String,
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "servebench test authority");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(leaf_key.serialize_der());
    (ca.pem(), leaf.der().clone(), key.into())
}

/// A TLS-terminating proxy on 127.0.0.1 serving `cert` in front of the
/// plain HTTP server at `upstream` (`host:port`); returns its port. It
/// lives as long as the test process.
fn tls_proxy(
    upstream: String,
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> u16 {
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    #[allow(deprecated)] // the provider servebench's client uses
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    port
}

#[test]
fn bench_measures_an_https_endpoint_whose_certificate_the_system_roots_trust() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim_process(
        &["--decode-step-ms", "1", "--prefill-tok-s", "0"],
        &dir.path().join("sim.log"),
    );
    let upstream = sim.url.trim_start_matches("http://").trim_end_matches('/');
    let (ca_pem, cert, key) = test_certificates();
    let port = tls_proxy(upstream.to_string(), cert, key);
    let roots = dir.path().join("roots.pem");
    std::fs::write(&roots, &ca_pem).unwrap();
    let bench = |roots: &std::path::Path| {
        let out = std::process::Command::new(BIN)
            .args(["bench", "--url", &format!("https://localhost:{port}")])
            .args([
                "--input-len",
                "64",
                "--output-len",
                "8",
                "--concurrency",
                "2",
            ])
            .args(["--num-requests", "6"])
            .env("SSL_CERT_FILE", roots)
            .env_remove("SSL_CERT_DIR")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = bench(&roots);
    assert_eq!(code, Some(0), "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("concurrency 2"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.split_whitespace().nth(2) == Some("6"),
        "six requests ok: {row}"
    );

    // Roots that do not include its authority: refused, never measured.
    let (other_pem, _, _) = test_certificates();
    let other = dir.path().join("other.pem");
    std::fs::write(&other, other_pem).unwrap();
    let (code, _, err) = bench(&other);
    assert_ne!(code, Some(0));
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

/// The keys the campaign parser takes in the table where `text` holds an
/// unknown key, read from its own refusal of it.
fn parser_keys(text: &str) -> std::collections::BTreeSet<String> {
    let e = servebench::campaign::parse(std::path::Path::new("c.toml"), text)
        .expect_err("an unknown key is refused");
    let allowed = e
        .message
        .split_once("; allowed: ")
        .unwrap_or_else(|| panic!("{text}: {}", e.message))
        .1;
    allowed.split(", ").map(str::to_string).collect()
}

#[test]
fn readme_lists_every_campaign_key_the_parser_takes_and_no_other() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("### Campaign keys")
        .expect("a campaign key reference");
    let section = &readme[start + 3..];
    let section = &section[..section.find("\n### ").unwrap_or(section.len())];
    let mut documented: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let mut table = String::new();
    for line in section.lines() {
        if let Some(h) = line.strip_prefix("#### ") {
            table = h.split('`').nth(1).unwrap_or(h).to_string();
        } else if let Some(row) = line.strip_prefix("| `") {
            let key = row.split('`').next().unwrap().to_string();
            assert!(
                documented
                    .entry(table.clone())
                    .or_default()
                    .insert(key.clone()),
                "{table}: `{key}` twice"
            );
        }
    }
    const Z: &str = "zzz_not_a_key = 1\n";
    let head = |c: &str, m: &str, e: &str| {
        format!(
            "[campaign]\nname = \"t\"\n{c}[model]\npath = \"m\"\n{m}[engine]\nkind = \"sim\"\n{e}"
        )
    };
    let base = head("", "", "");
    let tables = [
        ("[campaign]", head(Z, "", "")),
        ("[model]", head("", Z, "")),
        ("[engine]", head("", "", Z)),
        ("[hardware]", format!("{base}[hardware]\n{Z}")),
        ("[[build]]", format!("{base}[[build]]\nname = \"b\"\n{Z}")),
        ("[defaults]", format!("{base}[[server]]\nid = \"a\"\n{Z}")),
        (
            "speculative = { … }",
            format!("{base}[[server]]\nid = \"a\"\nspeculative = {{ zzz_not_a_key = 1 }}\n"),
        ),
        (
            "[[matrix]]",
            format!("{base}[[matrix]]\nid = \"m{{tp}}\"\n{Z}"),
        ),
        (
            "[[workload]]",
            format!("{base}[[workload]]\nname = \"w\"\n{Z}"),
        ),
        (
            "search = { … }",
            format!("{base}[[workload]]\nname = \"w\"\nsearch = {{ zzz_not_a_key = 1 }}\n"),
        ),
        ("[run]", format!("{base}[run]\n{Z}")),
        ("[launcher]", format!("{base}[launcher]\n{Z}")),
    ];
    for (name, text) in &tables {
        let keys = parser_keys(text);
        assert!(keys.len() >= 3, "{name}: {keys:?}");
        let got = documented.remove(*name).unwrap_or_default();
        assert_eq!(got, keys, "README's `{name}` keys against the parser's");
    }
    assert!(
        documented.is_empty(),
        "tables the parser has not: {documented:?}"
    );
}
