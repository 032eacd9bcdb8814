//! vLLM `bench serve`'s flags, as its users type them: those with the same
//! meaning are taken and turned into servebench's own settings; the others
//! are refused with the exact servebench equivalent.

use std::path::PathBuf;

use anyhow::bail;

use crate::cli::BenchArgs;
use crate::client::openai::Api;

/// vLLM `bench serve` flags servebench does not take, each with what to
/// do instead. Flags with the same meaning are aliases in [`BenchArgs`].
const NOT_TAKEN: &[(&str, &str)] = &[
    ("--backend", "servebench speaks the OpenAI-compatible API to every engine: choose the endpoint with --api completions|chat (or --endpoint /v1/chat/completions)"),
    ("--trust-remote-code", "not needed: servebench loads no model code; give --tokenizer a tokenizer.json for exact prompt lengths"),
    ("--tokenizer-mode", "not needed: --tokenizer takes the model's tokenizer.json"),
    ("--disable-tqdm", "not needed: servebench prints one line per level"),
    ("--profile", "not taken: start the engine's profiler on the server"),
    ("--save-detailed", "--output FILE (or --save-result) stores every request's record"),
    ("--append-result", "not taken: each result file holds one run; --expect compares two"),
    ("--metadata", "not taken: the result file records the settings; name the file to label it"),
    ("--label", "not taken: name the result file with --result-filename"),
    ("--ready-check-timeout-sec", "not needed: servebench checks the endpoint before loading it; `servebench run` waits for the servers it starts ([run] health_timeout)"),
    ("--served-model-name", "--model"),
    ("--temperature", "not taken: requests are greedy so answers can be checked"),
    ("--top-p", "not taken: requests are greedy so answers can be checked"),
    ("--top-k", "not taken: requests are greedy so answers can be checked"),
    ("--min-p", "not taken: requests are greedy so answers can be checked"),
    ("--sharegpt-output-len", "--output-len"),
    ("--random-range-ratio", "not taken: synthetic prompts have exactly --input-len tokens; a --dataset gives varied lengths"),
    ("--random-prefix-len", "--shared-prefix"),
    ("--num-warmups", "--warmup"),
    ("--logprobs", "not taken: servebench asks for no log-probabilities"),
    ("--request-id-prefix", "not needed: servebench numbers its requests"),
    ("--ramp-up-strategy", "--request-rate with a list of rates (e.g. 1,2,4), one level each"),
    ("--ramp-up-start-rps", "--request-rate with a list of rates (e.g. 1,2,4), one level each"),
    ("--ramp-up-end-rps", "--request-rate with a list of rates (e.g. 1,2,4), one level each"),
    ("--extra-body", "not taken: servebench sends the same request body to every engine"),
];

/// The error for a vLLM flag servebench does not take, when `argv` (the
/// whole command line) is a `bench` holding one.
pub fn refused_flag(argv: &[String]) -> Option<String> {
    if argv.get(1).map(String::as_str) != Some("bench") {
        return None;
    }
    argv[2..].iter().find_map(|arg| {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        NOT_TAKEN
            .iter()
            .find(|(f, _)| *f == flag)
            .map(|(f, instead)| {
                format!("`{f}` is a flag of vLLM's `bench serve`; servebench bench: {instead}")
            })
    })
}

/// Turn the vLLM spellings in `a` into servebench's settings: the URL from
/// --host/--port, the API from --endpoint, `--request-rate inf`, the
/// dataset name, --goodput and --save-result.
pub fn apply(a: &mut BenchArgs) -> anyhow::Result<()> {
    a.url = Some(url(a)?);
    if let Some(endpoint) = &a.endpoint {
        a.api = api_of(endpoint)?;
    }
    if let Some(rates) = a.request_rate.clone() {
        unlimited_rate(a, &rates)?;
    }
    if let Some(name) = &a.dataset_name {
        match (name.as_str(), &a.dataset) {
            ("random", None) => {}
            ("random", Some(_)) => bail!("--dataset-name random makes synthetic prompts; drop --dataset-path, or name its format: sharegpt"),
            ("sharegpt", Some(_)) => {}
            ("sharegpt", None) => bail!("--dataset-name sharegpt needs --dataset-path FILE (ShareGPT JSON or JSONL)"),
            (other, _) => bail!("--dataset-name {other}: servebench reads `random` (synthetic prompts) and `sharegpt` (--dataset-path FILE, ShareGPT JSON or JSONL); other prompts: --prompt-kind, --scenario or --trace"),
        }
    }
    // Checked before any load is sent, not after the measurement.
    metrics_asked(a)?;
    percentiles_asked(a)?;
    if !a.goodput.is_empty() {
        a.slo.push(slo_of_goodput(&a.goodput)?);
    }
    if a.save_result {
        let name = a.result_filename.clone().unwrap_or_else(|| {
            let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            format!("servebench-bench-{}.json", now.replace(':', ""))
        });
        let dir = a.result_dir.clone().unwrap_or_else(|| PathBuf::from("."));
        a.output = Some(dir.join(name));
    }
    Ok(())
}

/// --url, or `http://HOST:PORT` from --host and --port.
fn url(a: &BenchArgs) -> anyhow::Result<String> {
    match (&a.url, &a.host, a.port) {
        (Some(u), _, _) => Ok(u.clone()),
        (None, None, None) => {
            bail!("give the server's --url (or vLLM's --base-url, or --host and --port)")
        }
        (None, host, port) => Ok(format!(
            "http://{}:{}",
            host.as_deref().unwrap_or("127.0.0.1"),
            port.unwrap_or(8000)
        )),
    }
}

/// The API an endpoint path names.
fn api_of(endpoint: &str) -> anyhow::Result<Api> {
    match endpoint.trim_end_matches('/') {
        "/v1/completions" => Ok(Api::Completions),
        "/v1/chat/completions" => Ok(Api::Chat),
        other => {
            bail!("--endpoint {other}: servebench loads /v1/completions or /v1/chat/completions")
        }
    }
}

/// `--request-rate inf`: every request at once, as vLLM sends them; with
/// --max-concurrency, that many at a time. Both are closed loops.
fn unlimited_rate(a: &mut BenchArgs, rates: &str) -> anyhow::Result<()> {
    let items: Vec<&str> = rates.split(',').map(str::trim).collect();
    let unlimited = |s: &str| s.eq_ignore_ascii_case("inf");
    if !items.iter().any(|s| unlimited(s)) {
        return Ok(());
    }
    if items.len() > 1 {
        bail!("--request-rate: `inf` is one level of its own; measure it in a run of its own, or list concurrencies with --concurrency");
    }
    let users = match (a.max_concurrency, a.num_requests) {
        (Some(cap), _) => u64::from(cap),
        (None, Some(n)) => n,
        (None, None) => bail!("--request-rate inf sends every request at once: give --num-requests (or --max-concurrency)"),
    };
    a.concurrency = Some(users.to_string());
    a.request_rate = None;
    a.max_concurrency = None;
    Ok(())
}

/// vLLM's `--goodput ttft:200 tpot:50 e2el:1000` (milliseconds) as one
/// `--slo` (`ttft=200ms,tpot=50ms,e2e=1000ms`).
fn slo_of_goodput(items: &[String]) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    for item in items.iter().flat_map(|i| i.split_whitespace()) {
        let Some((key, ms)) = item.split_once(':') else {
            bail!("--goodput {item}: write KEY:MILLISECONDS, e.g. ttft:200 tpot:50 e2el:1000");
        };
        let key = match key {
            "ttft" | "tpot" => key,
            "e2el" | "e2e" => "e2e",
            other => bail!("--goodput {item}: `{other}` is not a bound; use ttft, tpot or e2el"),
        };
        let v: f64 = ms
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                anyhow::anyhow!("--goodput {item}: `{ms}` is not a positive number of milliseconds")
            })?;
        parts.push(format!("{key}={v}ms"));
    }
    Ok(parts.join(","))
}

/// The percentiles --metric-percentiles asks for (99 by default).
fn percentiles_asked(a: &BenchArgs) -> anyhow::Result<Vec<u32>> {
    let Some(list) = &a.metric_percentiles else {
        return Ok(vec![99]);
    };
    list.split(',')
        .map(|p| match p.trim().trim_end_matches(".0") {
            "50" => Ok(50),
            "90" => Ok(90),
            "95" => Ok(95),
            "99" => Ok(99),
            other => bail!("--metric-percentiles {other}: servebench keeps 50, 90, 95 and 99"),
        })
        .collect()
}

/// The latencies --percentile-metrics names, checked.
fn metrics_asked(a: &BenchArgs) -> anyhow::Result<Vec<&str>> {
    let Some(list) = &a.percentile_metrics else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(str::trim)
        .map(|m| match m {
            "ttft" | "tpot" | "itl" | "e2el" | "e2e" => Ok(m),
            other => {
                bail!("--percentile-metrics {other}: servebench measures ttft, tpot, itl and e2el")
            }
        })
        .collect()
}

/// The latencies --percentile-metrics names, at the --metric-percentiles
/// asked, one line per level and metric, as vLLM prints them.
pub fn percentile_lines(
    a: &BenchArgs,
    levels: &[crate::metrics::level::LevelSummary],
) -> anyhow::Result<String> {
    use crate::metrics::stats::Stats;
    let (metrics, percentiles) = (metrics_asked(a)?, percentiles_asked(a)?);
    let pick = |s: &Stats, p: u32| match p {
        50 => s.p50,
        90 => s.p90,
        95 => s.p95,
        _ => s.p99,
    };
    let mut out = String::new();
    for level in levels {
        for m in &metrics {
            let stats = match *m {
                "ttft" => &level.latency.ttft_ms,
                "tpot" => &level.latency.tpot_ms,
                "itl" => &level.latency.itl_ms,
                _ => &level.latency.e2e_ms,
            };
            let values: Vec<String> = percentiles
                .iter()
                .map(|p| match stats {
                    Some(s) => format!("P{p} {:.2}", pick(s, *p)),
                    None => format!("P{p} -"),
                })
                .collect();
            let mean = stats
                .as_ref()
                .map_or("-".into(), |s| format!("{:.2}", s.mean));
            out.push_str(&format!(
                "{} {m} (ms): mean {mean}, {}\n",
                level.load,
                values.join(", ")
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parsed(extra: &[&str]) -> BenchArgs {
        let mut v = vec!["servebench", "bench"];
        v.extend(extra);
        match crate::cli::Cli::try_parse_from(v).unwrap().command {
            crate::cli::Command::Bench(a) => *a,
            _ => unreachable!(),
        }
    }

    fn applied(extra: &[&str]) -> anyhow::Result<BenchArgs> {
        let mut a = parsed(extra);
        apply(&mut a).map(|()| a)
    }

    #[test]
    fn vllm_spellings_become_the_same_settings() {
        let a = applied(&[
            "--host",
            "localhost",
            "--port",
            "9001",
            "--endpoint",
            "/v1/chat/completions",
            "--num-prompts",
            "40",
            "--dataset-name",
            "random",
            "--random-input-len",
            "256",
            "--random-output-len",
            "32",
            "--goodput",
            "ttft:200",
            "tpot:50",
            "e2el:1000",
            "--request-rate",
            "inf",
            "--max-concurrency",
            "8",
        ])
        .unwrap();
        assert_eq!(a.url.as_deref(), Some("http://localhost:9001"));
        assert_eq!(a.api, Api::Chat);
        assert_eq!(a.num_requests, Some(40));
        assert_eq!((a.input_len, a.output_len), (256, 32));
        assert_eq!(a.slo, ["ttft=200ms,tpot=50ms,e2e=1000ms"]);
        // Unlimited rate under a cap of 8 is a closed loop of 8.
        assert_eq!(a.concurrency.as_deref(), Some("8"));
        assert_eq!((a.request_rate.as_deref(), a.max_concurrency), (None, None));
        let a = applied(&[
            "--base-url",
            "https://example.test",
            "--request-rate",
            "inf",
            "--num-prompts",
            "5",
        ])
        .unwrap();
        assert_eq!(a.url.as_deref(), Some("https://example.test"));
        assert_eq!(a.concurrency.as_deref(), Some("5"));
        let a = applied(&[
            "--url",
            "http://x",
            "--save-result",
            "--result-dir",
            "/r",
            "--result-filename",
            "a.json",
        ])
        .unwrap();
        assert_eq!(a.output, Some(PathBuf::from("/r/a.json")));
    }

    #[test]
    fn what_cannot_mean_the_same_is_refused_with_what_to_write() {
        let err = |extra: &[&str]| applied(extra).unwrap_err().to_string();
        assert!(err(&[]).contains("--url"));
        assert!(
            err(&["--url", "http://x", "--request-rate", "1,inf"]).contains("one level of its own")
        );
        assert!(err(&["--url", "http://x", "--request-rate", "inf"]).contains("--num-requests"));
        assert!(err(&["--url", "http://x", "--dataset-name", "sonnet"]).contains("random"));
        assert!(
            err(&["--url", "http://x", "--endpoint", "/v1/embeddings"]).contains("/v1/completions")
        );
        assert!(err(&["--url", "http://x", "--goodput", "tbt:5"]).contains("ttft, tpot or e2el"));
        assert!(err(&["--url", "http://x", "--percentile-metrics", "ttft,foo"]).contains("itl"));
        assert!(err(&["--url", "http://x", "--metric-percentiles", "99.9"]).contains("50, 90, 95"));
        let argv = |s: &str| -> Vec<String> { s.split(' ').map(String::from).collect() };
        let msg = refused_flag(&argv("servebench bench --url http://x --backend vllm")).unwrap();
        assert!(
            msg.contains("--backend") && msg.contains("--api completions|chat"),
            "{msg}"
        );
        let msg = refused_flag(&argv("servebench bench --temperature=0.7")).unwrap();
        assert!(msg.contains("greedy"), "{msg}");
        assert_eq!(refused_flag(&argv("servebench plan --backend")), None);
    }
}
