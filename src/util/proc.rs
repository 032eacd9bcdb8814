//! Process self-measurement: CPU time and peak memory from `getrusage`.

/// User plus system CPU seconds this process has used so far.
pub fn cpu_seconds() -> f64 {
    let u = rusage();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Peak resident set size of this process, bytes.
pub fn peak_rss_bytes() -> u64 {
    // Linux reports ru_maxrss in KiB.
    rusage().ru_maxrss as u64 * 1024
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage writes a plain struct that we own; RUSAGE_SELF is always valid.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_grows_with_work() {
        let before = super::cpu_seconds();
        let mut x = 0u64;
        // Work until the counter moves; a loaded machine only makes this
        // take longer, and the wall bound only catches a counter that never moves.
        let start = std::time::Instant::now();
        while super::cpu_seconds() - before <= 0.02 {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            assert!(start.elapsed().as_secs() < 120, "cpu_seconds never grew");
        }
        std::hint::black_box(x);
        assert!(super::peak_rss_bytes() > 1024 * 1024);
    }
}
