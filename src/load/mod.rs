//! Load generation: arrival schedules and the one driver that runs them.

pub mod driver;
pub mod journal;
pub mod live;
pub mod schedule;
pub mod source;
pub mod workloads;

/// File descriptors kept free for everything besides request sockets
/// (runtime, logs, result files, the tokenizer).
pub const RESERVED_FDS: u64 = 64;

/// The soft limit on open files, `None` when unlimited or unknown.
pub fn open_file_limit() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    (rc == 0 && rl.rlim_cur != libc::RLIM_INFINITY).then_some(rl.rlim_cur)
}

/// Refuse a concurrency that needs more sockets than the open-file limit
/// allows: past it, connections fail with EMFILE mid-level and the numbers
/// describe the client, not the server.
pub fn check_concurrency(n: u64) -> Result<(), String> {
    check_concurrency_against(n, open_file_limit())
}

fn check_concurrency_against(n: u64, limit: Option<u64>) -> Result<(), String> {
    let Some(limit) = limit else {
        return Ok(());
    };
    let needed = n.saturating_add(RESERVED_FDS);
    if needed > limit {
        return Err(format!(
            "concurrency {n} needs about {needed} open files but this shell allows {limit}; raise the limit (`ulimit -n {needed}`) or lower the concurrency to at most {}",
            limit.saturating_sub(RESERVED_FDS)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_beyond_the_file_limit_names_the_number_and_the_fix() {
        let e = check_concurrency_against(1_000_000_000, Some(1024)).unwrap_err();
        assert!(
            e.contains("1000000064") && e.contains("ulimit -n") && e.contains("960"),
            "{e}"
        );
        assert!(check_concurrency_against(960, Some(1024)).is_ok());
        assert!(check_concurrency_against(u64::MAX, None).is_ok());
    }
}
