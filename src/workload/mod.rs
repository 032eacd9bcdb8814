//! Workload content: what servebench sends to an engine, independent of how it is sent.
//!
//! - [`tokenize`]: counting tokens with the model's own tokenizer (or a declared
//!   approximation when none is available).
//! - [`exact_len`]: long-context prompts of exactly N tokens, unique per request
//!   beyond an optional shared prefix.
//! - [`prompts`]: the built-in prompt kinds (code, arithmetic, JSON extraction, haiku).
//! - [`trace`]: production traces (Mooncake, Azure, BurstGPT) read as a stream into a replay schedule.
//! - [`prefix_reuse`]: the prefix-cache reuse a trace's block ids predict.
//! - [`answer_check`]: the checks of the built-in prompts whose right answer is known.
//! - [`dataset`]: ShareGPT JSON and JSONL prompt files, sampled and length-filtered.
//! - [`session`]: multi-turn agentic scenarios (TOML files and built-ins).
//! - [`structured`]: tools and response formats sent beside a prompt.
//!
//! Invariants shared by the submodules:
//! - Everything is deterministic for a given seed, so a campaign can be re-run
//!   and resumed with the same requests.
//! - Bad input (files, names, lengths) is reported as a [`WorkloadError`] that
//!   names the file and the place in it; nothing panics on user data and no
//!   record is dropped without being counted.

pub mod answer_check;
pub mod dataset;
pub mod exact_len;
pub mod prefix_reuse;
pub mod prompts;
pub mod server_tokenizer;
pub mod session;
pub mod structured;
pub mod tokenize;
pub mod trace;

// Needs SERVEBENCH_TOKENIZER_JSON (see the module) and fails loudly without it.
#[cfg(test)]
mod tests_real;

use std::path::PathBuf;

pub use dataset::{DatasetFormat, DatasetReport, DatasetRequest, DatasetSample, LengthFilter};
pub use exact_len::{max_prompt_tokens, ExactPrompt, ExactPromptBuilder, ExactPromptSpec};
pub use prompts::{PromptKind, PromptSampler, PromptSelection};
pub use session::{ChatMessage, Conversation, Role, Scenario, Turn};
pub use tokenize::{ApproxCounter, HfTokenizer, TokenCounter};

/// The first 16 hex digits of a file's SHA-256, read as a stream: the one
/// digest of every file a cell's identity holds (traces, datasets, checks
/// files, the model's config and tokenizer).
pub fn file_digest(path: &std::path::Path) -> Result<String, WorkloadError> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let io = |source| WorkloadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    Ok(crate::util::hash::hex(&hash.finalize()[..8]))
}

/// Errors raised while building workload content.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file that failed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file's content is malformed; `location` is a line, line:column or record index.
    #[error("{path}: {location}: {message}")]
    Parse {
        /// The file (or built-in name) being parsed.
        path: String,
        /// Where in the file, e.g. `line 7`, `line 3, column 9` or `record 12`.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The tokenizer could not be loaded or failed on a text.
    #[error("tokenizer {context}: {message}")]
    Tokenizer {
        /// The tokenizer file or operation involved.
        context: String,
        /// The tokenizer's own message.
        message: String,
    },
    /// A name (prompt kind, scenario, ...) is not one of the allowed values.
    #[error("unknown {what} `{given}`; allowed: {allowed}")]
    UnknownName {
        /// What kind of name, e.g. `prompt kind`.
        what: &'static str,
        /// The name that was given.
        given: String,
        /// The allowed values, comma-separated.
        allowed: String,
    },
    /// A requested length cannot be met (too small for the fixed parts, or above a limit).
    #[error("cannot build a prompt of {target} tokens: {reason}")]
    Length {
        /// The requested token count.
        target: usize,
        /// Why it cannot be met.
        reason: String,
    },
    /// Adjusting a prompt to an exact token count did not converge.
    #[error("prompt of exactly {target} tokens did not converge after {attempts} attempts (last count {last})")]
    NoConvergence {
        /// The requested token count.
        target: usize,
        /// How many full re-encodings were tried.
        attempts: usize,
        /// The token count of the last attempt.
        last: usize,
    },
    /// A caller passed arguments that contradict each other or the data.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
