//! Load generation: arrival schedules and the one driver that runs them.

pub mod driver;
pub mod schedule;
pub mod source;
pub mod workloads;
