//! Small helpers shared across modules: unit parsing and atomic file writes.

pub mod fsx;
pub mod proc;
pub mod secret;
pub mod units;
