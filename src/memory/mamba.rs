//! SGLang's recurrent-state ("mamba") pool of hybrid models, as each
//! release sizes it.
//!
//! What weights leave (`rest`) is split between state and KV as
//! `--mamba-full-memory-ratio` : 1 (0.9 by default). Each state slot holds
//! one request's SSM and convolution state (`per_req`). Under speculative
//! decoding, verification also keeps one intermediate state per draft token
//! of every running request (`intermediate_ssm_state_cache` and the
//! intermediate convolution windows, shape (layers, running + 1, draft
//! tokens, state)). How the slot count `K` is then solved changed between
//! releases, read from each release's model runner (`handle_max_mamba_cache`):
//!
//! | releases | `K` from the state budget `B = rest × r / (1 + r)` | verification state |
//! |---|---|---|
//! | ≤ 0.5.6 | `B / (per_req × (1 + D))` | `D` per slot, inside `B` |
//! | 0.5.7–0.5.12 | `(rest − per_req × running × D) × r / (1 + r) / per_req` | taken first: **more running requests leave fewer slots** |
//! | 0.5.13–0.5.16 | `B / (per_req × (1 + D / ratio))` | `min(running, K / ratio) × D`, from the KV side |
//! | ≥ 0.5.17 (current 0.5.23) | `(B − per_req × (1 + D)) / (per_req × (1 + D / ratio))` | `(min(running, K / ratio) + 1) × D`, from the KV side; one padding slot per pool |
//!
//! `ratio` is the state slots one running request takes: 1 without the
//! radix cache, else 3, plus the extra tracking buffer's 2 (1 without the
//! overlap scheduler) when `--mamba-radix-cache-strategy` is `extra_buffer`,
//! which `auto` picks when the overlap scheduler or pages above 1 are on.
//! The server caps its running requests at `K / ratio`, and refuses to start
//! when `K` is not positive.

use super::MambaArgs;

/// The state : KV split of what weights leave, `--mamba-full-memory-ratio`'s default.
pub const DEFAULT_FULL_MEMORY_RATIO: f64 = 0.9;
/// Running requests SGLang assumes under speculative decoding when none is given.
pub const SPECULATIVE_DEFAULT_RUNNING: u32 = 48;
/// State slots per running request with the radix cache on (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`).
const BASE_SLOTS_PER_REQUEST: u64 = 3;

/// How a SGLang release solves its state slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Solve {
    /// ≤ 0.5.6: every slot also holds one state per draft token.
    SlotWithDrafts,
    /// 0.5.7–0.5.12: verification state for every running request first.
    ReserveFirst,
    /// 0.5.13–0.5.16: slots and verification state solved together.
    Joint,
    /// ≥ 0.5.17: as `Joint`, with one padding slot in each pool.
    JointPadded,
}

impl Solve {
    /// The solve of SGLang `version` (`0.5.12`, `v0.5.12.post1`); the
    /// current release's when the version is absent or not a 0.x release.
    pub fn of(version: Option<&str>) -> (Solve, String) {
        let parsed = version.and_then(|v| {
            let mut parts = v.trim().trim_start_matches('v').split('.');
            let major: u32 = parts.next()?.parse().ok()?;
            let minor: u32 = parts.next()?.parse().ok()?;
            let patch: String = parts
                .next()
                .unwrap_or("0")
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            Some((major, minor, patch.parse::<u32>().ok()?))
        });
        let solve = match parsed {
            Some((0, m, _)) if m < 5 => Solve::SlotWithDrafts,
            Some((0, 5, p)) if p <= 6 => Solve::SlotWithDrafts,
            Some((0, 5, p)) if p <= 12 => Solve::ReserveFirst,
            Some((0, 5, p)) if p <= 16 => Solve::Joint,
            _ => Solve::JointPadded,
        };
        let name = match version {
            Some(v) if parsed.is_some() => format!("SGLang {v}"),
            Some(v) => format!("SGLang `{v}` (not a release number; sized as 0.5.23)"),
            None => "SGLang 0.5.23 (no [engine] version given)".to_string(),
        };
        (solve, name)
    }

    /// The releases this solve covers, for notes.
    pub fn releases(self) -> &'static str {
        match self {
            Solve::SlotWithDrafts => "releases up to 0.5.6",
            Solve::ReserveFirst => "releases 0.5.7 to 0.5.12",
            Solve::Joint => "releases 0.5.13 to 0.5.16",
            Solve::JointPadded => "releases from 0.5.17",
        }
    }
}

/// The state pool one SGLang server allocates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pool {
    /// State slots (`max_mamba_cache_size`); not positive means the server cannot start.
    pub slots: i64,
    /// State slots one running request takes.
    pub slots_per_request: u64,
    /// Bytes of the slots, padding included.
    pub state_bytes: f64,
    /// Bytes of the intermediate SSM states kept for verification.
    pub intermediate_ssm_bytes: f64,
    /// Bytes of the intermediate convolution windows kept for verification.
    pub intermediate_conv_bytes: f64,
}

impl Pool {
    /// Everything the pool takes from what weights leave.
    pub fn bytes(&self) -> f64 {
        self.state_bytes + self.intermediate_ssm_bytes + self.intermediate_conv_bytes
    }
}

/// What the solve needs to know of one server.
pub struct Inputs<'a> {
    /// Bytes weights leave for state and KV.
    pub rest: f64,
    /// SSM state bytes of one request.
    pub ssm_per_req: f64,
    /// Convolution state bytes of one request.
    pub conv_per_req: f64,
    /// Tokens verified per speculative step, when speculative decoding is on.
    pub draft_tokens: Option<u64>,
    /// `--max-running-requests`, when given.
    pub max_running_requests: Option<u32>,
    /// The hybrid options in force.
    pub args: &'a MambaArgs,
}

/// State slots per running request under `args`.
pub fn slots_per_request(args: &MambaArgs) -> u64 {
    if args.disable_radix_cache {
        return 1;
    }
    let extra_buffer = match args.radix_cache_strategy.as_deref() {
        Some("extra_buffer") | Some("extra_buffer_lazy") => true,
        Some("no_buffer") => false,
        // `auto`: the extra buffer when the overlap scheduler or pages above 1 want it.
        _ => !args.disable_overlap_schedule || args.page_size.is_some_and(|p| p > 1),
    };
    let extra = match (extra_buffer, args.disable_overlap_schedule) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) if args.radix_cache_strategy.as_deref() == Some("extra_buffer_lazy") => 1,
        (true, false) => 2,
    };
    BASE_SLOTS_PER_REQUEST + extra
}

/// The pool `solve` allocates for `i`.
pub fn pool(solve: Solve, i: &Inputs) -> Pool {
    let per_req = i.ssm_per_req + i.conv_per_req;
    let ratio_f = i
        .args
        .full_memory_ratio
        .unwrap_or(DEFAULT_FULL_MEMORY_RATIO);
    let share = ratio_f / (1.0 + ratio_f);
    let ratio = match solve {
        // Before 0.5.13 a running request took three slots whatever the strategy.
        Solve::SlotWithDrafts | Solve::ReserveFirst if !i.args.disable_radix_cache => {
            BASE_SLOTS_PER_REQUEST
        }
        _ => slots_per_request(i.args),
    };
    let pad = if solve == Solve::JointPadded {
        1.0
    } else {
        0.0
    };
    let d = i.draft_tokens.unwrap_or(0) as f64;
    let running = f64::from(
        i.max_running_requests
            .unwrap_or(SPECULATIVE_DEFAULT_RUNNING)
            .max(1),
    );
    // Slots fixed by the flag, or by the running requests without the radix cache.
    let given = i
        .args
        .max_cache_size
        .or_else(|| {
            i.max_running_requests
                .filter(|_| i.args.disable_radix_cache)
                .map(u64::from)
        })
        .map(|k| k as f64);
    // The intermediate states are per_req per (request, draft token), split
    // as the state is into SSM and convolution parts.
    let split = |requests: f64| -> (f64, f64) {
        let n = requests * d;
        (n * i.ssm_per_req, n * i.conv_per_req)
    };
    let speculative = i.draft_tokens.is_some();
    let (slots, state_bytes, (issm, iconv)) = match (solve, given) {
        (Solve::SlotWithDrafts, k) => {
            let k = k.unwrap_or_else(|| (i.rest * share / (per_req * (1.0 + d))).floor());
            (k, k * per_req, split(k))
        }
        (Solve::ReserveFirst, k) => {
            let inter = if speculative {
                split(running)
            } else {
                (0.0, 0.0)
            };
            let left = i.rest - inter.0 - inter.1;
            let k = k.unwrap_or_else(|| (left * share / per_req).floor());
            (k, k * per_req, inter)
        }
        (Solve::Joint | Solve::JointPadded, k) => {
            let k = k.unwrap_or_else(|| {
                let budget = i.rest * share;
                if speculative {
                    ((budget - pad * per_req * (1.0 + d)) / (per_req * (1.0 + d / ratio as f64)))
                        .floor()
                } else {
                    ((budget - pad * per_req) / per_req).floor()
                }
            });
            let inter = if speculative {
                let capped = running.min((k.max(0.0) / ratio as f64).floor());
                split(capped + pad)
            } else {
                (0.0, 0.0)
            };
            (k, (k + pad).max(0.0) * per_req, inter)
        }
    };
    Pool {
        slots: slots as i64,
        slots_per_request: ratio,
        state_bytes: state_bytes.max(0.0),
        intermediate_ssm_bytes: issm,
        intermediate_conv_bytes: iconv,
    }
}
