//! Each engine's dialect in a file of its own: the names of its Prometheus
//! metrics (read by [`super::engine_metrics`]) and the phrases of its log
//! (read by [`super::logscan`]'s scanner). Adding an engine's telemetry is
//! adding a file here and its arm in those two dispatches.

pub(super) mod llamacpp;
pub(super) mod sglang;
pub(super) mod sim;
pub(super) mod vllm;
