//! The summary of one load level, computed from its raw records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::goodput::{goodput, Goodput};
use super::stats::{latency_stats, LatencyStats, Stats};
use crate::client::record::RequestRecord;
use crate::failure::FailureClass;
use crate::load::driver::LevelRun;
use crate::load::schedule::LoadShape;
use crate::util::units::Slo;

/// Dispatch lag p99 above which the client is suspected of limiting the load, ms.
pub const LAG_WARN_MS: f64 = 10.0;
/// Share of the client's cores in use above which it is suspected of limiting the load.
pub const CPU_WARN_SHARE: f64 = 0.8;

/// How the client itself fared while generating load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Actual minus scheduled send time.
    pub dispatch_lag_ms: Option<Stats>,
    /// User plus system CPU seconds the client process spent on the level.
    pub cpu_seconds: f64,
    /// `cpu_seconds` over wall time, in cores.
    pub cpu_cores_used: f64,
    /// Worker threads the client ran with.
    pub client_threads: usize,
    /// Reasons to distrust the level's numbers because of the client.
    pub warnings: Vec<String>,
}

/// Everything reported for one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    /// The load that was applied.
    pub load: LoadShape,
    /// Requests that completed.
    pub completed: usize,
    /// Requests that failed.
    pub failed: usize,
    /// Failed requests per class.
    pub failures_by_class: BTreeMap<FailureClass, usize>,
    /// Wall time of the measured part, s.
    pub duration_s: f64,
    /// Completed requests per second.
    pub request_throughput_rps: f64,
    /// Output tokens of completed requests per second.
    pub output_throughput_tok_s: f64,
    /// Input plus output tokens of completed requests per second.
    pub total_throughput_tok_s: f64,
    /// Latency distributions of the completed requests; flattened so the
    /// six statistics stay top-level fields of the level in the JSON.
    #[serde(flatten)]
    pub latency: LatencyStats,
    /// Goodput against each declared SLO.
    pub goodput: Vec<Goodput>,
    /// Speculative draft tokens proposed / accepted, summed over requests, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    /// See `draft_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_draft_tokens: Option<u64>,
    /// Warm-up requests sent before measuring (excluded from all of the above).
    pub warmup_requests: u64,
    /// Warm-up requests that failed.
    pub warmup_failed: u64,
    /// Whether the level was interrupted.
    pub cancelled: bool,
    /// The client's own measurements.
    pub client: ClientStats,
    /// How the prompts were built and counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::load::workloads::SourceInfo>,
    /// Requests in flight during the measured part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
    /// Throughput and latency over the steady-state window, without ramp-up
    /// and drain (see `metrics::steady`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<super::steady::SteadyState>,
    /// Output tokens the completed requests spent on reasoning, where any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens served from the prefix cache, where the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<PromptCache>,
    /// What a trace's block ids predict an infinite prefix cache serves,
    /// over the completed requests of a replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_reuse: Option<PredictedReuse>,
    /// Multi-turn sessions, and those that derailed, for session workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// Reasons the completed requests' numbers are not believable (see
    /// `metrics::judge`); empty when they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspicious: Vec<String>,
    /// Every measured request's raw record.
    pub requests: Vec<RequestRecord>,
}

/// A level's multi-turn sessions: how many ran and how many derailed (a
/// turn's reply failed its check: the wrong tool, wrong arguments, a call
/// an agent cannot use, no call, or a call where words were expected), so
/// a derailed session is counted, not hidden among shorter ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    /// Sessions with at least one measured turn.
    pub sessions: usize,
    /// Turns sent, over all of them.
    pub turns: usize,
    /// Sessions stopped by a turn that failed its check.
    pub derailed: usize,
}

impl Sessions {
    /// Over the records of a level; `None` without session turns.
    pub fn of(records: &[RequestRecord]) -> Option<Sessions> {
        let mut all = std::collections::BTreeSet::new();
        let mut derailed = std::collections::BTreeSet::new();
        let mut turns = 0;
        for r in records {
            let Some(s) = r.session else { continue };
            let unit = (r.index, s);
            turns += 1;
            all.insert(unit);
            if r.answer_check == Some(false) {
                derailed.insert(unit);
            }
        }
        (!all.is_empty()).then_some(Sessions {
            sessions: all.len(),
            turns,
            derailed: derailed.len(),
        })
    }
}

/// Prompt tokens the server took from its prefix cache, per level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PromptCache {
    /// Completed requests whose server reported cached tokens.
    pub requests: usize,
    /// Their prompt tokens taken from the cache.
    pub cached_tokens: u64,
    /// Their prompt tokens.
    pub prompt_tokens: u64,
    /// `cached_tokens / prompt_tokens`.
    pub hit_rate: f64,
}

impl PromptCache {
    /// Over the completed requests that report cached tokens; `None` when none does.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a RequestRecord>) -> Option<PromptCache> {
        let (mut n, mut cached, mut prompt) = (0, 0, 0);
        for r in records.into_iter().filter(|r| r.is_ok()) {
            let (Some(c), Some(p)) = (r.cached_tokens, r.input_tokens.or(r.planned_input_tokens))
            else {
                continue;
            };
            n += 1;
            cached += c.min(p);
            prompt += p;
        }
        (n > 0 && prompt > 0).then(|| PromptCache {
            requests: n,
            cached_tokens: cached,
            prompt_tokens: prompt,
            hit_rate: cached as f64 / prompt as f64,
        })
    }
}

/// Prompt tokens a trace's block ids predict an infinite prefix cache
/// serves (see `workload::prefix_reuse`), beside what the server reported
/// for the same requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PredictedReuse {
    /// Completed requests with a prediction.
    pub requests: usize,
    /// The cache block the prediction is cut to, tokens.
    pub cache_block: u64,
    /// Their prompt tokens.
    pub prompt_tokens: u64,
    /// Of those, tokens an infinite cache would serve.
    pub reused_tokens: u64,
    /// `reused_tokens / prompt_tokens`.
    pub hit_rate: f64,
    /// Cached tokens the server reported for the same requests, when it
    /// reported them for every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_cached_tokens: Option<u64>,
}

impl PredictedReuse {
    /// Over the completed requests with a prediction, cut to whole blocks
    /// of `cache_block` tokens; `None` when none has one.
    pub fn of<'a>(
        records: impl IntoIterator<Item = &'a RequestRecord>,
        cache_block: u64,
    ) -> Option<PredictedReuse> {
        let (mut n, mut reused, mut prompt) = (0, 0, 0);
        let mut reported = Some(0u64);
        for r in records.into_iter().filter(|r| r.is_ok()) {
            let (Some(c), Some(p)) = (
                r.predicted_cached_tokens,
                r.input_tokens.or(r.planned_input_tokens),
            ) else {
                continue;
            };
            n += 1;
            reused += crate::workload::prefix_reuse::whole_blocks(c, cache_block).min(p);
            prompt += p;
            reported = reported.zip(r.cached_tokens).map(|(a, b)| a + b.min(p));
        }
        (n > 0 && prompt > 0).then(|| PredictedReuse {
            requests: n,
            cache_block: cache_block.max(1),
            prompt_tokens: prompt,
            reused_tokens: reused,
            hit_rate: reused as f64 / prompt as f64,
            reported_cached_tokens: reported,
        })
    }
}

/// Requests in flight from the client's side during the measured window:
/// each request counts from its send to the last byte of its answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InFlight {
    /// Time-weighted mean over the window from the first send to the last answer.
    pub mean: f64,
    /// Most at once.
    pub max: u64,
}

impl InFlight {
    /// In-flight figures of `records`; `None` without any.
    pub fn of(records: &[RequestRecord]) -> Option<InFlight> {
        let spans: Vec<(f64, f64)> = records
            .iter()
            .map(|r| (r.sent_ms, r.sent_ms + r.e2e_ms.unwrap_or(0.0).max(0.0)))
            .collect();
        let start = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
        let end = spans.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        if !start.is_finite() {
            return None;
        }
        // Ends sort before starts at the same instant: a closed loop's next
        // request leaves as the last one ends, which is not one more at once.
        let mut events: Vec<(f64, i64)> =
            spans.iter().flat_map(|&(a, b)| [(a, 1), (b, -1)]).collect();
        events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        let (mut now, mut max) = (0i64, 0i64);
        for (_, d) in events {
            now += d;
            max = max.max(now);
        }
        let busy: f64 = spans.iter().map(|s| s.1 - s.0).sum();
        let window = end - start;
        Some(InFlight {
            mean: if window > 0.0 {
                busy / window
            } else {
                max as f64
            },
            max: max.max(0) as u64,
        })
    }
}

/// Why a concurrency level did not run at the concurrency it asked for, or
/// `None` when it did. A level is **under-loaded** when the requests in
/// flight never reached the asked concurrency (too few requests, or a
/// client that could not keep them going), or when the server's own limit
/// on running requests (`server_limit`: max running requests, slots, state
/// slots) is below it: its numbers describe a lower load than its name.
pub fn under_load(
    load: &LoadShape,
    in_flight: Option<&InFlight>,
    measured: usize,
    server_limit: Option<u64>,
) -> Option<String> {
    let LoadShape::Concurrency { value } = load else {
        return None;
    };
    let asked = u64::from(*value);
    let f = in_flight?;
    if asked <= 1 {
        return None;
    }
    let reached = |max: u64, mean: f64| {
        format!(
            "asked concurrency {asked}, reached {mean:.1} in flight on average and {max} at most"
        )
    };
    if (measured as u64) < asked {
        return Some(format!(
            "{}: only {measured} requests were measured, fewer than the concurrency",
            reached(f.max, f.mean)
        ));
    }
    if f.max < asked {
        return Some(format!(
            "{}: the client did not keep {asked} requests going",
            reached(f.max, f.mean)
        ));
    }
    match server_limit {
        Some(limit) if limit < asked => Some(format!(
            "{}: the server runs at most {limit} requests at once, the rest queue",
            reached(limit.min(f.max), f.mean.min(limit as f64))
        )),
        _ => None,
    }
}

/// Most answer text a level keeps, in bytes: the first answers in send
/// order keep theirs until this much is kept; every answer keeps its digest.
pub const OUTPUT_SAMPLE_BYTES: usize = 1 << 20;

/// Keep the text of the first answers up to [`OUTPUT_SAMPLE_BYTES`] in all
/// and drop the rest, so a large level's stored cell stays bounded.
pub fn sample_output_text(records: &mut [RequestRecord]) {
    let mut kept = 0;
    for r in records {
        let Some(out) = r.output.as_mut() else {
            continue;
        };
        let len = out.text.as_ref().map_or(0, String::len);
        if kept + len <= OUTPUT_SAMPLE_BYTES {
            kept += len;
        } else {
            out.text = None;
        }
    }
}

/// Summarise a finished level.
pub fn summarize(
    load: LoadShape,
    run: LevelRun,
    slos: &[Slo],
    cpu_seconds: f64,
    client_threads: usize,
) -> LevelSummary {
    let mut records = run.records;
    sample_output_text(&mut records);
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.is_ok()).collect();
    let mut failures_by_class = BTreeMap::new();
    for r in records.iter().filter(|r| !r.is_ok()) {
        // A failed record always carries its failure (`RequestRecord::finish`);
        // one without is an exchange the client could not make sense of.
        let class = r
            .failure
            .as_ref()
            .map_or(FailureClass::Protocol, |f| f.class);
        *failures_by_class.entry(class).or_insert(0) += 1;
    }
    let out_tokens: u64 = ok.iter().filter_map(|r| r.credible_output_tokens()).sum();
    let in_tokens: u64 = ok
        .iter()
        .filter_map(|r| r.input_tokens.or(r.planned_input_tokens))
        .sum();
    let per_s = |v: f64| {
        if run.duration_s > 0.0 {
            v / run.duration_s
        } else {
            0.0
        }
    };
    let lag = Stats::from_values(records.iter().map(|r| r.dispatch_lag_ms()).collect());
    let cores_used = per_s(cpu_seconds);
    let mut warnings = Vec::new();
    if let Some(l) = &lag {
        if l.p99 > LAG_WARN_MS {
            warnings.push(format!(
                "dispatch lag p99 is {:.1} ms: requests left later than scheduled, so the client (or a concurrency cap) limited the load",
                l.p99
            ));
        }
    }
    let unknown: Vec<&&RequestRecord> = ok.iter().filter(|r| r.chunk_tokens_unknown()).collect();
    if let Some(r) = unknown.first() {
        warnings.push(format!(
            "per-token ITL leaves out {} of {} completed requests: the server sent no per-chunk token counts and its usage ({} tokens) differs from the {} chunks streamed",
            unknown.len(),
            ok.len(),
            r.output_tokens.unwrap_or(0),
            r.chunks.len()
        ));
    }
    if client_threads > 0 && cores_used > CPU_WARN_SHARE * client_threads as f64 {
        warnings.push(format!(
            "the client used {cores_used:.2} of its {client_threads} cores: it may be the bottleneck, not the server"
        ));
    }
    let sum_opt = |f: fn(&RequestRecord) -> Option<u64>| {
        let v: Vec<u64> = ok.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    LevelSummary {
        load,
        completed: ok.len(),
        failed: records.len() - ok.len(),
        failures_by_class,
        duration_s: run.duration_s,
        request_throughput_rps: per_s(ok.len() as f64),
        output_throughput_tok_s: per_s(out_tokens as f64),
        total_throughput_tok_s: per_s((out_tokens + in_tokens) as f64),
        latency: {
            let mut l = latency_stats(ok.iter().copied());
            if !matches!(load, LoadShape::Concurrency { .. }) {
                (l.ttft_from_schedule_ms, l.e2e_from_schedule_ms) =
                    super::stats::from_schedule(ok.iter().copied());
            }
            l
        },
        goodput: slos
            .iter()
            .map(|s| goodput(&records, s, run.duration_s))
            .collect(),
        draft_tokens: sum_opt(|r| r.draft_tokens),
        accepted_draft_tokens: sum_opt(|r| r.accepted_draft_tokens),
        warmup_requests: run.warmup_sent,
        warmup_failed: run.warmup_failed,
        cancelled: run.cancelled,
        client: ClientStats {
            dispatch_lag_ms: lag,
            cpu_seconds,
            cpu_cores_used: cores_used,
            client_threads,
            warnings,
        },
        source: None,
        in_flight: InFlight::of(&records),
        steady: super::steady::steady_state(&load, &records, run.duration_s),
        reasoning_tokens: sum_opt(|r| r.reasoning_tokens).filter(|n| *n > 0),
        prompt_cache: PromptCache::of(&records),
        predicted_reuse: PredictedReuse::of(&records, 1),
        sessions: Sessions::of(&records),
        suspicious: Vec::new(),
        requests: records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::record::Outcome;
    use crate::failure::{Failure, FailureClass};

    #[test]
    fn in_flight_counts_a_closed_loops_successor_as_no_extra_request() {
        let rec = |sent: f64, e2e: f64| {
            let mut r = RequestRecord::new(sent, sent);
            r.e2e_ms = Some(e2e);
            r
        };
        // Two users, each sending its next request as the last one ends.
        let recs = [
            rec(0.0, 10.0),
            rec(0.0, 10.0),
            rec(10.0, 10.0),
            rec(10.0, 10.0),
        ];
        let f = InFlight::of(&recs).unwrap();
        assert_eq!((f.max, f.mean), (2, 2.0));
        let c = |value| LoadShape::Concurrency { value };
        assert_eq!(under_load(&c(2), Some(&f), 4, None), None);
        assert_eq!(under_load(&c(2), Some(&f), 4, Some(8)), None);
        let why = under_load(&c(4), Some(&f), 4, None).unwrap();
        assert_eq!(
            why,
            "asked concurrency 4, reached 2.0 in flight on average and 2 at most: the client did not keep 4 requests going"
        );
        assert!(under_load(&c(8), Some(&f), 4, None)
            .unwrap()
            .ends_with("only 4 requests were measured, fewer than the concurrency"));
        assert!(under_load(&c(2), Some(&f), 4, Some(1))
            .unwrap()
            .contains("reached 1.0 in flight on average and 1 at most: the server runs at most 1 requests at once"));
        // One user is never under-loaded; a rate is judged elsewhere.
        assert_eq!(under_load(&c(1), Some(&f), 4, Some(0)), None);
    }

    #[test]
    fn every_answer_keeps_its_digest_and_the_first_keep_their_text_up_to_the_cap() {
        let answer = |n: usize| {
            let mut r = RequestRecord::new(0.0, 0.0);
            r.output = Some(crate::client::record::OutputText::of("x".repeat(n)));
            r
        };
        let third = OUTPUT_SAMPLE_BYTES / 3;
        let mut recs = vec![answer(third), answer(third), answer(third + 10), answer(5)];
        sample_output_text(&mut recs);
        let kept: Vec<bool> = recs
            .iter()
            .map(|r| r.output.as_ref().unwrap().text.is_some())
            .collect();
        // The third answer would pass the cap; a short one after it still fits.
        assert_eq!(kept, [true, true, false, true]);
        assert!(recs
            .iter()
            .all(|r| r.output.as_ref().unwrap().digest.len() == 16));
        assert_eq!(recs[2].output.as_ref().unwrap().chars, third as u64 + 10);
        let same = crate::client::record::OutputText::of("x".repeat(third));
        assert_eq!(recs[0].output.as_ref().unwrap().digest, same.digest);
        assert_ne!(recs[3].output.as_ref().unwrap().digest, same.digest);
    }

    #[test]
    fn latency_statistics_are_top_level_fields_that_read_back() {
        let mut ok = RequestRecord::new(0.0, 0.0);
        ok.push_chunk(5.0, 1);
        ok.push_chunk(7.0, 1);
        ok.output_tokens = Some(2);
        ok.finish(Outcome::Ok, 9.0);
        let mut failed = RequestRecord::new(1.0, 1.0);
        failed.finish(
            Outcome::Failed(Failure::new(FailureClass::Timeout, "t")),
            2.0,
        );
        let run = LevelRun {
            records: vec![ok, failed],
            duration_s: 1.0,
            warmup_sent: 0,
            warmup_failed: 0,
            cancelled: false,
        };
        let s = summarize(LoadShape::Concurrency { value: 1 }, run, &[], 0.0, 1);
        assert_eq!(s.latency.ttft_ms.unwrap().p50, 5.0);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["ttft_ms"]["p50"], 5.0);
        assert_eq!(v["e2e_ms"]["max"], 9.0);
        assert!(v["itl_per_token_ms"].is_object() && v["decode_tok_s"].is_object());
        assert!(v.get("latency").is_none());
        assert_eq!(v["failures_by_class"], serde_json::json!({"timeout": 1}));
        let back: LevelSummary = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }
}
