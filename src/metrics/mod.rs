//! Statistics derived from raw request records (SPEC section 7).
//!
//! Definitions — every number in a result file follows these:
//! - **TTFT**: send → first content-bearing chunk (role-only and usage-only
//!   chunks do not count).
//! - **E2E**: send → last byte of the response.
//! - **TPOT**: (E2E − TTFT) / (output tokens − 1), per request with ≥ 2 tokens.
//! - **ITL per chunk**: gaps between consecutive content chunks, pooled over
//!   requests.
//! - **ITL per token**: each chunk gap divided by the tokens that chunk
//!   carried, counted once per token (speculative decoding puts several
//!   tokens in one chunk).
//! - **Decode speed**: (output tokens − 1) / (E2E − TTFT), tokens/s per request.
//! - **Throughput**: tokens of completed requests / wall time of the level.
//! - **Goodput**: completed requests meeting every SLO bound, as a share of
//!   all requests and as a rate.
//!
//! Failed requests are counted by class and never enter latency statistics.
//! Percentiles interpolate linearly between closest ranks.

pub mod bootstrap;
pub mod energy;
pub mod goodput;
pub mod judge;
pub mod level;
pub mod output;
pub mod stats;
pub mod steady;
pub mod trace_shape;

/// One sentence per metric, copied into every result file.
pub fn definitions() -> Vec<(&'static str, &'static str)> {
    vec![
        ("ttft_ms", "Time to first token: from sending the request to the arrival of the first content-bearing chunk, reasoning or answer (role-only and usage-only chunks excluded), in ms."),
        ("ttfa_ms", "Time to first answer token: from sending the request to the first chunk carrying answer text (delta.content or text) rather than only reasoning (delta.reasoning or delta.reasoning_content), in ms; reported where requests streamed reasoning first, else equal to TTFT."),
        ("reasoning_tokens", "Output tokens a reasoning model spent thinking before its answer: the usage's completion_tokens_details.reasoning_tokens where the server gives it, else the tokens of the chunks that carried only reasoning. Answer tokens are output tokens minus reasoning tokens. TPOT, ITL and decode speed cover every output token, reasoning included. A request that streamed reasoning and no answer failed as reasoning_exhausted."),
        ("prompt_cache_hit_rate", "Share of the prompt tokens of a level's completed requests that the server took from its prefix cache, over the requests whose server reported it (usage prompt_tokens_details.cached_tokens, llama.cpp timings.cache_n)."),
        ("e2e_ms", "End-to-end latency: from sending the request to the last byte of the response, in ms."),
        ("e2e_from_schedule_ms", "Open-loop levels (a rate, a trace replay): end-to-end latency from the request's scheduled send time rather than its actual one, so a client that sent late is charged for it, in ms; TTFT likewise as ttft_from_schedule_ms."),
        ("tpot_ms", "Time per output token: (E2E - TTFT) / (output tokens - 1), per request with at least 2 output tokens, in ms."),
        ("itl_ms", "Inter-chunk latency: gaps between consecutive content chunks of a request, pooled over requests, in ms."),
        ("itl_per_token_ms", "Inter-token latency: each chunk gap divided by the number of tokens in that chunk, counted once per token, in ms. Requests whose per-chunk token counts are unknown (no continuous usage) and whose chunk count differs from their output tokens are left out, with a warning."),
        ("decode_tok_s", "Per-request decode speed: (output tokens - 1) / (E2E - TTFT), in tokens/s."),
        ("output_throughput_tok_s", "Output tokens of completed requests divided by the level's wall time (first dispatch to last completion), in tokens/s."),
        ("total_throughput_tok_s", "Input plus output tokens of completed requests divided by the level's wall time, in tokens/s."),
        ("request_throughput_rps", "Completed requests divided by the level's wall time, in requests/s."),
        ("goodput", "Completed requests meeting every SLO bound (TTFT, TPOT, E2E): their share of all requests and their rate per second."),
        ("steady_state", "The part of a level where the load held what it was asked to be. Closed loop: from the moment every request of the first wave has its first token to the moment the requests in flight last drop below the concurrency (the drain). Open loop (a rate, a trace replay): from the first completion to the last send. Its throughput is the output tokens streamed inside it per second of it; its latencies are those of the requests that finished inside it. A window under 20 % of the level or under 100 output tokens is flagged as too short to trust."),
        ("over_saturated", "The server fell behind the load: over the steady window, the median time to first token of the last third of the requests sent in it exceeds the first third's by more than half and by at least 50 ms, or the engine's waiting-requests gauge averages over its last third more than 1.5 times its first third plus 0.5 (and at least 1). Such a level is kept out of SLO picks."),
        ("energy", "GPU energy per output token: the power of the server's GPUs (nvidia-smi power.draw summed over them, or the engine's own power gauge where it models one, as the simulator does), sampled on the cell's timeline and integrated over the steady window (trapezoids, each end held at its nearest sample), divided by the output tokens streamed in the window; over the whole level when the window is too short to trust. joules_per_token and its inverse tokens_per_joule."),
        ("cost", "Dollars per million output tokens: [hardware] gpu_hour_cost times the GPUs the server holds, per hour, over the output tokens per hour of the steady window (the whole level when the window is too short to trust)."),
        ("dispatch_lag_ms", "How late the client sent each request against its schedule, in ms; large values mean the client, not the server, limited the load."),
        ("output_tokens", "Output tokens as reported by the server's usage; counted from chunks only when the server reports none. Throughput, TPOT and decode speed count at most max_tokens per request, so a usage that claims more cannot inflate them."),
    ]
}
