//! Workloads end to end on the simulator: multi-turn sessions, datasets,
//! trace slices and their replay, and long-context planning (the same on
//! the real llama.cpp server: `real::llamacpp_workloads`).

use crate::common::{bench, fast_sim, sim_campaign, start_sim, trace_fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datasets_drive_requests_and_malformed_lines_are_named() {
    let sim = start_sim(fast_sim()).await;
    let url = sim.url();
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/workload/prompts.jsonl"
    );
    let (r, ok) = bench(&[
        "--url",
        &url,
        "--dataset",
        data,
        "--concurrency",
        "2",
        "--num-requests",
        "4",
    ])
    .await;
    assert!(ok);
    let l = &r.levels[0];
    assert_eq!(l.completed, 4);
    assert!(l
        .requests
        .iter()
        .all(|q| q.label.as_deref().unwrap().starts_with("dataset:line")));
    // Without --ignore-eos each record's own output length is asked for.
    let first_line: serde_json::Value = serde_json::from_str(
        include_str!("fixtures/workload/prompts.jsonl")
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(l
        .requests
        .iter()
        .any(|q| q.requested_output_tokens == first_line["output_len"].as_u64()));
    // The simulator counts words; the planned length came from its /tokenize.
    assert!(l
        .requests
        .iter()
        .all(|q| q.planned_input_tokens == q.input_tokens));

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"ok\"}\n{\"prompt\": 3}\n").unwrap();
    let out = std::process::Command::new(crate::common::BIN)
        .args([
            "bench",
            "--url",
            &url,
            "--dataset",
            bad.to_str().unwrap(),
            "--concurrency",
            "1",
            "--num-requests",
            "1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bad.jsonl") && err.contains("line 2"), "{err}");
}

#[test]
fn long_context_runs_30k_and_refuses_100k_against_a_32k_context() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("c.toml");
    std::fs::write(
        &campaign,
        sim_campaign(
            "ctx",
            &["--prefill-tok-s", "200000", "--decode-step-ms", "0.2"],
        ) + r#"[defaults]
context_length = 32768
[[workload]]
name = "context"
input_len = [30000, 100000]
output_len = 256
concurrency = 1
num_requests = 1
"#,
    )
    .unwrap();
    let bin = crate::common::BIN;
    let plan = std::process::Command::new(bin)
        .args(["plan", campaign.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains("context-in30000-out256-c1") && text.contains("run"),
        "{text}"
    );
    assert!(
        text.contains("skip: input 100000 + output 256 + margin 64 = 100320 tokens exceed the context length 32768"),
        "{text}"
    );
    let run = std::process::Command::new(bin)
        .args(["run", campaign.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let cell: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("results/ctx/cells/default/context-in30000-out256-c1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let req = &cell["summary"]["requests"][0];
    assert_eq!(req["input_tokens"], 30000);
    assert_eq!(req["planned_input_tokens"], 30000);
    assert_eq!(req["output_tokens"], 256);
    let skipped: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("results/ctx/cells/default/context-in100000-out256-c1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(skipped["status"], "skipped");
}

#[test]
fn real_trace_slices_are_read_whole_with_their_own_times_lengths_and_block_ids() {
    use servebench::workload::trace::{self, ReplaySettings, TraceFormat};
    let conv = trace_fixture("mooncake-conversation-400.jsonl");
    let r = trace::load(&conv, None, &ReplaySettings::default()).unwrap();
    // Independently: every line's fields, read as plain JSON.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&conv)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(r.requests.len(), lines.len());
    assert_eq!(r.stats.changes(), Vec::<String>::new());
    for (q, l) in r.requests.iter().zip(&lines) {
        assert_eq!(q.input_len, l["input_length"].as_u64().unwrap());
        assert_eq!(q.output_len, l["output_length"].as_u64().unwrap());
        assert_eq!(q.offset_ms, l["timestamp"].as_f64().unwrap());
        let ids: Vec<u64> = l["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(q.hash_ids, ids);
    }
    assert_eq!(r.stats.replay_span_s, 141.0);
    // Block 0 opens most conversations: the system prompt they share.
    let opening_with_0 = r.requests.iter().filter(|q| q.hash_ids[0] == 0).count();
    assert!(opening_with_0 > 200, "{opening_with_0}");
    let synthetic = trace::load(
        &trace_fixture("mooncake-synthetic-300.jsonl"),
        Some(TraceFormat::Mooncake),
        &ReplaySettings::default(),
    )
    .unwrap();
    assert_eq!(synthetic.requests.len(), 300);

    let azure = trace_fixture("azure-conv-500.csv");
    assert_eq!(TraceFormat::detect(&azure).unwrap(), TraceFormat::Azure);
    let r = trace::load(&azure, None, &ReplaySettings::default()).unwrap();
    let rows: Vec<Vec<String>> = std::fs::read_to_string(&azure)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    assert_eq!(r.requests.len(), rows.len());
    // All on one day: seconds of the day are enough to check the offsets.
    let secs = |t: &str| {
        let clock = t.split(' ').nth(1).unwrap();
        let p: Vec<f64> = clock.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2]
    };
    let t0 = secs(&rows[0][0]);
    for (q, row) in r.requests.iter().zip(&rows) {
        assert!((q.offset_ms - (secs(&row[0]) - t0) * 1000.0).abs() < 1e-3);
        assert_eq!(q.input_len, row[1].parse::<u64>().unwrap());
        assert_eq!(q.output_len, row[2].parse::<u64>().unwrap());
        assert!(q.hash_ids.is_empty());
    }
}

/// Per request, (trace time s, prompt, output, block ids) read from a
/// shipped slice as plain JSON or CSV, without servebench's reader.
fn slice_rows(name: &str) -> Vec<(f64, u64, u64, Vec<u64>)> {
    let text = std::fs::read_to_string(trace_fixture(name)).unwrap();
    if name.ends_with(".jsonl") {
        return text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let ids = v["hash_ids"].as_array().unwrap().iter();
                (
                    v["timestamp"].as_f64().unwrap() / 1000.0,
                    v["input_length"].as_u64().unwrap(),
                    v["output_length"].as_u64().unwrap(),
                    ids.map(|x| x.as_u64().unwrap()).collect(),
                )
            })
            .collect();
    }
    // The Azure slice lies within one day: the clock time is enough.
    let rows: Vec<(f64, u64, u64, Vec<u64>)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let clock: Vec<f64> = f[0]
                .split(' ')
                .nth(1)
                .unwrap()
                .split(':')
                .map(|x| x.parse().unwrap())
                .collect();
            let t = clock[0] * 3600.0 + clock[1] * 60.0 + clock[2];
            (t, f[1].parse().unwrap(), f[2].parse().unwrap(), vec![])
        })
        .collect();
    let t0 = rows[0].0;
    rows.into_iter()
        .map(|(t, i, o, h)| (t - t0, i, o, h))
        .collect()
}

/// Reused prompt tokens of a slice under an infinite cache, the naive way:
/// every earlier prompt's prefix of block ids kept whole, as a list, with
/// the longest run of its last block; no hashing, no incremental walk.
fn naive_reuse(rows: &[(f64, u64, u64, Vec<u64>)], block: u64, cache_block: u64) -> u64 {
    let mut seen: std::collections::HashMap<Vec<u64>, u64> = Default::default();
    let mut total = 0;
    for (_, input, _, ids) in rows {
        let len = |j: usize| {
            if j + 1 < ids.len() {
                block
            } else {
                input - block * j as u64
            }
        };
        let mut matched = 0;
        for j in 0..ids.len() {
            match seen.get(&ids[..=j]) {
                Some(&had) => {
                    matched += had.min(len(j));
                    if had < len(j) {
                        break;
                    }
                }
                None => break,
            }
        }
        total += matched.min(input - 1) / cache_block * cache_block;
        for j in 0..ids.len() {
            let e = seen.entry(ids[..=j].to_vec()).or_insert(0);
            *e = (*e).max(len(j));
        }
    }
    total
}

#[test]
fn trace_prints_each_shipped_slices_shape_as_computed_independently() {
    for name in [
        "mooncake-conversation-400.jsonl",
        "mooncake-synthetic-300.jsonl",
        "azure-conv-500.csv",
    ] {
        let path = trace_fixture(name);
        let (code, out, err) = crate::common::run(&[
            "trace",
            path.to_str().unwrap(),
            "--json",
            "--window",
            "10s",
            "--cache-block",
            "16",
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        let shape: serde_json::Value = serde_json::from_str(&out).unwrap();
        let rows = slice_rows(name);
        let n = rows.len() as f64;
        let span = rows.iter().map(|r| r.0).fold(0.0, f64::max);
        assert_eq!(shape["requests"], rows.len() as u64, "{name}");
        assert!(
            (shape["span_s"].as_f64().unwrap() - span).abs() < 1e-6,
            "{name}"
        );
        assert!(
            (shape["mean_rate"].as_f64().unwrap() / (n / span) - 1.0).abs() < 1e-9,
            "{name}"
        );
        let inputs: Vec<u64> = rows.iter().map(|r| r.1).collect();
        let outputs: Vec<u64> = rows.iter().map(|r| r.2).collect();
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        for (key, v) in [("input", &inputs), ("output", &outputs)] {
            let st = &shape[key];
            assert!(
                (st["mean"].as_f64().unwrap() - mean(v)).abs() < 1e-6,
                "{name} {key}"
            );
            assert_eq!(st["max"].as_f64().unwrap(), *v.iter().max().unwrap() as f64);
            assert_eq!(st["min"].as_f64().unwrap(), *v.iter().min().unwrap() as f64);
            // The median of a sorted copy, between the two middle ones.
            let mut s = v.clone();
            s.sort();
            let mid = (s[(s.len() - 1) / 2] + s[s.len() / 2]) as f64 / 2.0;
            assert_eq!(st["p50"].as_f64().unwrap(), mid, "{name} {key}");
        }
        // Rate over time: requests per 10 s window.
        let windows = shape["windows"].as_array().unwrap();
        assert_eq!(windows.len(), (span / 10.0).floor() as usize + 1, "{name}");
        for (i, w) in windows.iter().enumerate() {
            let inside = rows
                .iter()
                .filter(|r| (r.0 / 10.0).floor() as usize == i)
                .count();
            assert_eq!(w["requests"], inside as u64, "{name} window {i}");
            assert!((w["rate"].as_f64().unwrap() - inside as f64 / 10.0).abs() < 1e-9);
        }
        let prompt_tokens: u64 = inputs.iter().sum();
        if name.ends_with(".csv") {
            assert!(shape["reuse"].is_null(), "no block ids, no prediction");
            continue;
        }
        for (key, cache_block) in [("reuse", 1), ("reuse_at_cache_block", 16)] {
            let reuse = &shape[key];
            let reused = naive_reuse(&rows, 512, cache_block);
            assert_eq!(reuse["prompt_tokens"], prompt_tokens, "{name}");
            assert_eq!(reuse["reused_tokens"], reused, "{name} {key}");
            assert!(reused > 0, "{name}: its conversations share prefixes");
        }
    }
    // The table form says the same in words.
    let (code, out, _) = crate::common::run(&[
        "trace",
        trace_fixture("mooncake-conversation-400.jsonl")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("400 requests of 400 rows over 141.0 s of trace (2.84 requests/s)"),
        "{out}"
    );
    assert!(
        out.contains("predicted prefix reuse (infinite cache, blocks of 512 tokens): 13.7 %"),
        "{out}"
    );
    let (code, _, err) =
        crate::common::run(&["trace", trace_fixture("README.md").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("README.md: line 1: not a known trace format"),
        "{err}"
    );
}

#[test]
fn a_replay_is_scaled_windowed_and_time_compressed_as_declared_and_says_so() {
    use servebench::workload::trace::{self, ReplaySettings};
    let s = ReplaySettings {
        time_scale: 10.0,
        max_idle_gap_s: Some(0.5),
        start_s: 20.0,
        end_s: Some(80.0),
        length_scale: 1.0 / 16.0,
        max_context: Some(1024),
        ..Default::default()
    };
    let r = trace::load(&trace_fixture("mooncake-conversation-400.jsonl"), None, &s).unwrap();
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(trace_fixture("mooncake-conversation-400.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let inside: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| (20_000.0..80_000.0).contains(&l["timestamp"].as_f64().unwrap()))
        .collect();
    assert_eq!(r.requests.len(), inside.len());
    assert_eq!(r.block, 32);
    for (q, l) in r.requests.iter().zip(&inside) {
        assert!(q.input_len + q.output_len <= 1024, "{q:?}");
        // Full blocks keep 32 tokens each; the partial one its share.
        let n = l["hash_ids"].as_array().unwrap().len() as u64;
        if q.hash_ids.len() as u64 == n {
            assert!(q.input_len > (n - 1) * 32 && q.input_len <= n * 32, "{q:?}");
        }
    }
    // Gaps are a tenth of the trace's, none longer than half a second.
    for w in r.requests.windows(2) {
        let gap = w[1].offset_ms - w[0].offset_ms;
        let traced = (w[1].trace_ms - w[0].trace_ms) / 10.0;
        assert!(gap <= 500.0 + 1e-9 && (gap - traced.min(500.0)).abs() < 1e-6);
    }
    let changes = r.stats.changes().join("; ");
    assert!(
        changes.contains("outputs shortened to fit the context"),
        "{changes}"
    );
}

#[test]
fn broken_trace_rows_name_their_file_and_line() {
    use servebench::workload::trace::{self, ReplaySettings};
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "ids.jsonl",
            "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1]}\n",
            "ids.jsonl: line 2: 1 hash ids for 600 prompt tokens, which need 2 blocks of 512 tokens (block_size)",
        ),
        (
            "neg.jsonl",
            "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [-1]}\n",
            "neg.jsonl: line 1: not a Mooncake row",
        ),
        (
            "big.jsonl",
            "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [18446744073709551615]}\n\n{\"timestamp\": 1}\n",
            "big.jsonl: line 3: not a Mooncake row",
        ),
        (
            "azure.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47,lots,44\n",
            "azure.csv: line 3: ContextTokens `lots` is not a token count",
        ),
        (
            "burst.csv",
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n-3,ChatGPT,472,18,490,Conversation log\n",
            "burst.csv: line 3: Timestamp `-3` is not a time",
        ),
        (
            "other.csv",
            "when,prompt,answer\n1,2,3\n",
            "other.csv: line 1: not a known trace format",
        ),
    ];
    for (name, text, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let err = trace::load(&p, None, &ReplaySettings::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{name}: {err}");
    }
    // BurstGPT rows without a response failed in production: skipped, counted.
    let p = dir.path().join("ok.csv");
    std::fs::write(
        &p,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n7.5,GPT-4,100,0,100,Conversation log\n9,GPT-4,100,3,103,API log\n",
    )
    .unwrap();
    let r = trace::load(&p, None, &ReplaySettings::default()).unwrap();
    let offsets: Vec<f64> = r.requests.iter().map(|q| q.offset_ms).collect();
    assert_eq!(offsets, [0.0, 4000.0]);
    assert_eq!(r.stats.skipped_empty, 1);
}

/// What a Mooncake row becomes under `length_scale` 1/`div` and
/// `output_scale` 1/50 in a context of `ctx`, computed here apart from the
/// replay's code: whole blocks of 512 become 512/`div` tokens, the last
/// block its share; the output is cut first, then the prompt.
pub(crate) fn scaled_mooncake(row: &serde_json::Value, div: u64, ctx: u64) -> (u64, u64) {
    let n = row["hash_ids"].as_array().unwrap().len() as u64;
    let last = row["input_length"].as_u64().unwrap() - (n - 1) * 512;
    let block = 512 / div;
    let mut input = (n - 1) * block + ((last as f64 / div as f64).round() as u64).clamp(1, block);
    let mut output = ((row["output_length"].as_u64().unwrap() as f64 / 50.0).round() as u64).max(1);
    if input + output > ctx {
        output = ctx.saturating_sub(input).max(1).min(output);
        input = input.min(ctx - output);
    }
    (input, output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_slice_replays_on_the_simulator_with_its_schedule_and_exact_lengths() {
    // A prefix cache in 16-token blocks, large enough for the whole slice.
    let sim = start_sim(servebench::sim::SimConfig {
        prefix_cache_block: 16,
        kv_capacity_tokens: 1 << 22,
        ..fast_sim()
    })
    .await;
    let path = trace_fixture("mooncake-conversation-400.jsonl");
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (r, ok) = bench(&[
        "--url",
        &sim.url(),
        "--api",
        "chat",
        "--trace",
        path.to_str().unwrap(),
        "--time-scale",
        "20",
        "--length-scale",
        "0.0625",
        "--output-scale",
        "0.02",
        "--max-context",
        "2048",
    ])
    .await;
    assert!(ok);
    let level = &r.levels[0];
    assert_eq!(level.completed, 400);
    // Records come sorted by send time; the trace's order is by index.
    let mut reqs: Vec<_> = level.requests.iter().collect();
    reqs.sort_by_key(|q| q.index.unwrap());
    for (q, row) in reqs.iter().zip(&rows) {
        let (input, output) = scaled_mooncake(row, 16, 2048);
        assert_eq!(q.input_tokens, Some(input), "line {}", q.index.unwrap() + 1);
        assert_eq!(q.planned_input_tokens, Some(input));
        assert_eq!(q.output_tokens, Some(output));
        let due = row["timestamp"].as_f64().unwrap() / 20.0;
        assert!(
            (q.scheduled_ms - due).abs() < 1e-6,
            "{} vs {due}",
            q.scheduled_ms
        );
    }
    let source = level.source.as_ref().unwrap();
    let said = source.dataset.as_deref().unwrap();
    assert!(
        said.starts_with("400 requests over 7.0 s (141.0 s of trace time), blocks of 32 tokens")
            && said.contains("prompts shortened to fit the context"),
        "{said}"
    );
    assert_eq!(r.levels[0].load.to_string(), "trace replay x20");
    // Latency from the schedule charges every late send: never below the
    // latency from the actual send, and above it by the dispatch lag.
    let (from_send, from_schedule) = (
        level.latency.e2e_ms.unwrap(),
        level.latency.e2e_from_schedule_ms.unwrap(),
    );
    assert_eq!(from_schedule.count, 400);
    let lag = level.client.dispatch_lag_ms.unwrap();
    assert!(
        from_schedule.max >= from_send.max && from_schedule.max <= from_send.max + lag.max + 1e-9
    );
    assert!(level.latency.ttft_from_schedule_ms.is_some());
    // The simulator's cache served what the trace's block ids predict for
    // its 16-token blocks, less the chat template's closing tokens the
    // prediction counts as shared.
    let predicted = servebench::metrics::level::PredictedReuse::of(&level.requests, 16).unwrap();
    let served = predicted.reported_cached_tokens.unwrap();
    eprintln!(
        "simulator prefix cache: predicted {} tokens ({:.2} %), served {served} ({:.2} %)",
        predicted.reused_tokens,
        predicted.hit_rate * 100.0,
        served as f64 / predicted.prompt_tokens as f64 * 100.0
    );
    assert!(served > 0 && served <= predicted.reused_tokens);
    assert!(
        (predicted.reused_tokens - served) as f64 / predicted.prompt_tokens as f64 * 100.0
            <= servebench::report::prefix_cache::AGREEMENT_POINTS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_is_a_dataset_under_a_concurrency_with_every_request_its_own_lengths() {
    let sim = start_sim(fast_sim()).await;
    let path = trace_fixture("azure-conv-500.csv");
    let rows: Vec<Vec<u64>> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .skip(1)
        .take(60)
        .map(|l| {
            l.split(',')
                .skip(1)
                .map(|x| x.trim().parse().unwrap())
                .collect()
        })
        .collect();
    let (r, ok) = bench(&[
        "--url",
        &sim.url(),
        "--api",
        "chat",
        "--trace",
        path.to_str().unwrap(),
        "--concurrency",
        "3",
        "--num-requests",
        "60",
        "--length-scale",
        "0.5",
    ])
    .await;
    assert!(ok);
    let level = &r.levels[0];
    assert_eq!(level.load.to_string(), "concurrency 3");
    assert_eq!(level.completed, 60);
    // Three users ask for the next request at once: each still gets its own.
    let mut reqs: Vec<_> = level.requests.iter().collect();
    reqs.sort_by_key(|q| q.index.unwrap());
    for (i, (q, row)) in reqs.iter().zip(&rows).enumerate() {
        assert_eq!(q.index, Some(i as u64));
        assert_eq!(q.output_tokens, Some(row[1]));
    }
}
