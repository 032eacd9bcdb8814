//! The integration tests, in one binary so they link once and share the
//! cores: each module below is one suite. The suites under `real` run real
//! components that `scripts/setup-test-env.sh` installs (llama.cpp, vLLM on
//! CPU, SGLang's argument parser, Chromium, sshd, Slurm); the others need
//! only this crate. `cargo test --test main real::` runs the real suites,
//! `cargo test --test main -- --skip real::` the rest.

mod common;

// Pure and simulator suites.
/// Tool calls and schema-constrained answers, judged by value.
mod agents;
/// `goal = "answer"`: probes, what was left and why, the grid's answer.
mod answer_first;
/// Malformed and hostile campaign files refused with file, line and column.
mod bad_campaigns;
/// Arbitrary `bench` command lines: no panic, every error names a flag.
mod bench_args_prop;
/// `bench` against the simulator's ground truth.
mod bench_sim;
/// `bench` against a server that misbehaves on purpose.
mod bench_torture;
/// Engine builds side by side: versions, identities, staleness.
mod builds;
/// `plan` and `run` end to end: launches, results, evidence, resume, signals.
mod campaign;
/// Exit codes, one-line errors and the simulator process.
mod cli;
/// A new user's first hour: what plan refuses, what init writes, start failures.
mod first_hour;
/// Parallel layouts: GPUs per server, packing, replicas on the simulator.
mod layouts;
/// The module graph: no cycles, pure modules stay pure.
mod module_graph;
/// Every report format byte for byte against snapshots.
mod report;
/// `compare` verdicts on stored results with chosen noise.
mod report_compare;
/// The recommendation checked against the stored cells.
mod report_recommend;
/// The committed JSON Schemas against real output.
mod schema;
/// SLO searches on the simulator.
mod search;
/// Workloads on the simulator: sessions, datasets, traces and their replay, long contexts.
mod workloads;

/// Suites with real components.
mod real {
    /// A real headless Chromium renders the HTML report offline.
    mod browser;
    /// `--parallel`, and the ssh, Slurm and systemd launchers with real sshd and Slurm.
    mod cluster;
    /// `bench` against the real llama.cpp server.
    mod llamacpp;
    /// Campaigns on the real llama.cpp server: cache, correctness, speculation.
    mod llamacpp_campaign;
    /// An SLO search against the real llama.cpp server.
    mod llamacpp_search;
    /// Workloads on the real llama.cpp server: exact lengths, sessions, a trace.
    mod llamacpp_workloads;
    /// SGLang's own parser accepts every command line the adapter emits.
    mod sglang_args;
    /// A campaign on the real vLLM (CPU build), SIGKILL included.
    mod vllm;
}
