//! The process-tree supervisor: `servebench __supervise` sits between
//! servebench and a server so that the server's whole tree dies with
//! servebench, even when servebench is killed with SIGKILL.
//!
//! A process group alone is not enough: engines such as vLLM fork workers
//! that outlive a killed leader, and a grandchild may call `setsid`. The
//! supervisor is a child subreaper (so orphaned descendants are re-parented
//! to it, not to PID 1), holds the read end of a pipe whose write end only
//! servebench has (EOF means servebench is gone), and on EOF, on a stop
//! request, or when the server leader exits, kills every descendant and
//! every process carrying its random marker in the environment.
//!
//! Signals from servebench: SIGTERM asks for a graceful stop (SIGTERM to the
//! tree), SIGUSR1 for an immediate one (SIGKILL to the tree). The
//! supervisor exits with the leader's exit status (re-raising its signal).
//!
//! It also records `.procs/<log name>.procs` in the results root (its pid,
//! start time and marker); the next launch there kills any process still carrying a
//! recorded marker (the case of a supervisor that was itself SIGKILLed).

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The hidden subcommand name.
pub const SUBCOMMAND: &str = "__supervise";
/// The environment variable carrying a launch's random marker.
pub const MARKER_VAR: &str = "SERVEBENCH_LAUNCH_MARKER";

static EXE: OnceLock<PathBuf> = OnceLock::new();

/// Declare this executable as able to run the supervisor (the `servebench`
/// binary does so at start; library users without it launch servers bare).
pub fn enable(exe: PathBuf) {
    let _ = EXE.set(exe);
}

/// The executable that runs the supervisor, if enabled.
pub fn exe() -> Option<&'static Path> {
    EXE.get().map(|p| p.as_path())
}

/// A fresh random marker.
pub fn new_marker() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Where launches logging into `log`'s directory keep their records: a
/// hidden `.procs` beside the logs directory (the results root), so that
/// the logs directory holds only logs.
pub fn record_dir(log: &Path) -> PathBuf {
    let logs = log.parent().unwrap_or(Path::new("."));
    logs.parent().unwrap_or(logs).join(".procs")
}

/// The record file for a launch logging to `log`.
pub fn record_path(log: &Path) -> PathBuf {
    let name = log.file_name().map(|n| n.to_string_lossy().into_owned());
    record_dir(log).join(format!("{}.procs", name.unwrap_or_default()))
}

static STOP_TERM: AtomicBool = AtomicBool::new(false);
static STOP_KILL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP_TERM.store(true, Ordering::SeqCst);
}

extern "C" fn on_kill(_: libc::c_int) {
    STOP_KILL.store(true, Ordering::SeqCst);
}

/// Run the supervisor: `__supervise FD RECORD -- PROGRAM ARGS...`.
/// Returns only on a usage error; otherwise exits like the server.
pub fn main(args: &[String]) -> i32 {
    let (fd, record, argv) = match args {
        [fd, record, sep, argv @ ..] if sep == "--" && !argv.is_empty() => {
            match fd.parse::<i32>() {
                Ok(fd) => (fd, PathBuf::from(record), argv),
                Err(_) => return usage(),
            }
        }
        _ => return usage(),
    };
    // SAFETY: plain prctl/fcntl/signal calls on our own process; the
    // handlers only store to atomics.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR1, on_kill as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let me = std::process::id() as i32;
    let marker = std::env::var(MARKER_VAR).unwrap_or_default();
    if !marker.is_empty() {
        let start = start_time(me).unwrap_or(0);
        if let Some(d) = record.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        // The owner (the servebench that started us) is recorded too: a
        // record is only stale once its owner is gone, since concurrent
        // runs (Slurm jobs, --parallel) share a results directory.
        // SAFETY: getppid has no preconditions.
        let owner = unsafe { libc::getppid() };
        let owner_start = start_time(owner).unwrap_or(0);
        let _ = std::fs::write(
            &record,
            format!("{me} {start} {marker} {owner} {owner_start}\n"),
        );
    }
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).process_group(0);
    // SAFETY: prctl and signal are async-signal-safe; this process is
    // single-threaded, so the death signal follows this process.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("servebench: cannot start `{}`: {e}", argv[0]);
            let _ = std::fs::remove_file(&record);
            return 127;
        }
    };
    let leader = child.id() as i32;
    // The std handle is not used again: this loop reaps with waitpid(-1).
    std::mem::forget(child);
    let mut status: Option<i32> = None;
    let mut termed = false;
    loop {
        reap(leader, &mut status);
        if status.is_some() {
            break;
        }
        if STOP_KILL.load(Ordering::SeqCst) || parent_gone(fd) {
            break;
        }
        if STOP_TERM.load(Ordering::SeqCst) && !termed {
            termed = true;
            signal_tree(me, leader, &marker, libc::SIGTERM);
        }
    }
    kill_tree(me, leader, &marker, &mut status);
    let _ = std::fs::remove_file(&record);
    exit_like(status.unwrap_or(libc::SIGKILL))
}

fn usage() -> i32 {
    eprintln!("usage: servebench {SUBCOMMAND} FD RECORD -- PROGRAM [ARGS...]");
    2
}

/// Wait up to 100 ms for servebench's pipe; true once it reads EOF.
fn parent_gone(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own; a read into a local buffer.
    unsafe {
        if libc::poll(&mut p, 1, 100) <= 0 {
            return false;
        }
        if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return true;
        }
        let mut b = [0u8; 64];
        libc::read(fd, b.as_mut_ptr().cast(), b.len()) == 0
    }
}

/// Reap every exited child; note the leader's raw wait status.
fn reap(leader: i32, status: &mut Option<i32>) {
    loop {
        let mut st = 0;
        // SAFETY: waitpid on our own children.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if pid == leader {
            *status = Some(st);
        }
    }
}

fn signal_tree(me: i32, leader: i32, marker: &str, sig: i32) {
    // SAFETY: signalling the group we created and processes that descend
    // from us or carry our marker.
    unsafe {
        libc::kill(-leader, sig);
        for p in ours(me, marker) {
            libc::kill(p, sig);
        }
    }
}

/// SIGKILL the tree until nothing of it is left (bounded at 10 s).
fn kill_tree(me: i32, leader: i32, marker: &str, status: &mut Option<i32>) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        signal_tree(me, leader, marker, libc::SIGKILL);
        std::thread::sleep(Duration::from_millis(20));
        reap(leader, status);
        if ours(me, marker).is_empty() || Instant::now() > until {
            return;
        }
    }
}

fn exit_like(raw: i32) -> i32 {
    if libc::WIFEXITED(raw) {
        std::process::exit(libc::WEXITSTATUS(raw));
    }
    let sig = if libc::WIFSIGNALED(raw) {
        libc::WTERMSIG(raw)
    } else {
        libc::SIGKILL
    };
    // SAFETY: restoring the default action and signalling ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
    }
    std::process::exit(128 + sig)
}

/// Live (non-zombie) processes descending from `root` or carrying `marker`
/// in their environment, `root` excluded.
pub fn ours(root: i32, marker: &str) -> Vec<i32> {
    let procs = list();
    let mut found: BTreeSet<i32> = BTreeSet::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for q in &procs {
            if q.ppid == p && found.insert(q.pid) {
                frontier.push(q.pid);
            }
        }
    }
    if !marker.is_empty() {
        for q in &procs {
            if q.pid != root && has_marker(q.pid, marker) {
                found.insert(q.pid);
            }
        }
    }
    procs
        .iter()
        .filter(|q| found.contains(&q.pid) && !q.zombie)
        .map(|q| q.pid)
        .collect()
}

struct Proc {
    pid: i32,
    ppid: i32,
    zombie: bool,
}

fn list() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let f = stat_fields(&stat)?;
            Some(Proc {
                pid,
                ppid: f.get(1)?.parse().ok()?,
                zombie: f.first() == Some(&"Z"),
            })
        })
        .collect()
}

/// The fields of `/proc/PID/stat` after the command name (state first).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// A process's start time (clock ticks since boot), to tell a recorded pid
/// from a reused one.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?.get(19)?.parse().ok()
}

fn has_marker(pid: i32, marker: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("{MARKER_VAR}={marker}");
    env.split(|b| *b == 0).any(|kv| kv == want.as_bytes())
}

/// Kill what earlier launches recorded in `dir` and left alive after their
/// servebench ended (records of a still-running servebench are left alone): every
/// process carrying a recorded marker (the supervisor included, when its
/// pid and start time still match). Returns how many were killed.
pub fn reap_recorded(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut killed = 0;
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "procs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut it = text.split_whitespace();
        let (Some(pid), Some(start), Some(marker)) = (
            it.next().and_then(|s| s.parse::<i32>().ok()),
            it.next().and_then(|s| s.parse::<u64>().ok()),
            it.next(),
        ) else {
            continue;
        };
        if marker.len() != 32 {
            continue;
        }
        let owner = it.next().and_then(|s| s.parse::<i32>().ok());
        let owner_start = it.next().and_then(|s| s.parse::<u64>().ok());
        if let (Some(o), Some(os)) = (owner, owner_start) {
            if start_time(o) == Some(os) {
                // Its servebench still runs: a concurrent launch, not debris.
                continue;
            }
        }
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let mut victims = ours(pid, marker);
            let supervisor_alive = start_time(pid) == Some(start) && has_marker(pid, marker);
            if supervisor_alive {
                victims.push(pid);
            } else {
                // A reused pid: only marked processes are ours.
                victims.retain(|p| has_marker(*p, marker));
            }
            if victims.is_empty() || Instant::now() > until {
                break;
            }
            for p in victims {
                // SAFETY: the process carries our marker (or is the recorded
                // supervisor with a matching start time).
                unsafe { libc::kill(p, libc::SIGKILL) };
                killed += 1;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(&path);
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_spaces_and_parens_in_the_name() {
        let f = stat_fields("42 (a) b (c)) S 7 42 42 0 -1").unwrap();
        assert_eq!(f[0], "S");
        assert_eq!(f[1], "7");
    }

    #[test]
    fn this_process_has_a_start_time_and_no_marker() {
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        assert!(!has_marker(me, &new_marker()));
        assert_eq!(new_marker().len(), 32);
    }

    #[test]
    fn a_record_without_live_processes_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let rec = record_path(&dir.path().join("logs/a.log"));
        assert_eq!(rec, dir.path().join(".procs/a.log.procs"));
        std::fs::create_dir_all(rec.parent().unwrap()).unwrap();
        std::fs::write(&rec, format!("999999 1 {}\n", new_marker())).unwrap();
        assert_eq!(reap_recorded(rec.parent().unwrap()), 0);
        assert!(!rec.exists());
        // A record whose owner (here: this process) still runs is kept.
        let me = std::process::id() as i32;
        let owned = format!(
            "999999 1 {} {me} {}\n",
            new_marker(),
            start_time(me).unwrap()
        );
        std::fs::write(&rec, owned).unwrap();
        assert_eq!(reap_recorded(rec.parent().unwrap()), 0);
        assert!(rec.exists());
    }
}
