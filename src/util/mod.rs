//! Small helpers shared across modules: units and their formatting, flag
//! values in a command line, shell quoting, atomic file writes, process helpers, the seeded generator,
//! secret redaction, plain-text tables, short SHA-256 digests and "did you
//! mean" suggestions.

pub mod argv;
pub mod fsx;
pub mod hash;
pub mod proc;
pub mod rng;
pub mod secret;
pub mod shell;
pub mod suggest;
pub mod table;
pub mod units;
