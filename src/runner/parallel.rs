//! Running server groups side by side (`--parallel N`).
//!
//! Groups start in plan order. Each one takes a disjoint set of GPUs (its
//! tensor-parallel size) from the pool; when the next group's GPUs are not
//! free, or N groups already run, the scheduler waits for one to finish.
//! With no GPUs declared, N groups simply run at once. Each group has its own
//! port and log; cells land in the same results directory as in a serial run.
//!
//! Whether neighbours disturb the numbers is the user's call: every cell
//! records the other cells whose measurement windows overlapped its own
//! (`server_run.concurrent_with`).

use std::sync::Mutex;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;

use super::group::GroupRun;
use super::{announce, RunOptions, RunOutcome};
use crate::campaign::launcher::Launcher;
use crate::campaign::Campaign;
use crate::launcher::gpu;
use crate::plan::ServerGroup;
use crate::store::Store;

/// What one group runs with: its GPUs, the launcher, the shared tracker.
pub struct Slot<'a> {
    /// GPUs assigned to this group (`CUDA_VISIBLE_DEVICES`); empty = none set.
    pub gpus: Vec<u32>,
    /// How servers start.
    pub launcher: &'a Launcher,
    /// Measurement windows of all groups.
    pub tracker: &'a Tracker,
    /// The campaign's remaining time.
    pub eta: &'a super::eta::LiveEta,
    /// The best search boundaries so far, for stopping configs that cannot win.
    pub leaders: &'a super::search::Leaders,
    /// Where the group tells what happens.
    pub events: &'a super::events::Events,
    /// The answer-first board, under `goal = "answer"`.
    pub answer: Option<&'a super::answer::AnswerFirst>,
}

/// Measurement windows of cells, to tell which ran at the same time.
#[derive(Debug, Default)]
pub struct Tracker {
    windows: Mutex<Vec<(String, Instant, Option<Instant>)>>,
}

/// A handle to one open window.
#[derive(Debug, Clone, Copy)]
pub struct Window(usize);

impl Tracker {
    /// A cell of `server` starts measuring.
    pub fn begin(&self, server: &str, cell: &str) -> Window {
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        w.push((format!("{server}/{cell}"), Instant::now(), None));
        Window(w.len() - 1)
    }

    /// The cell ends; returns the other cells whose windows overlapped it.
    pub fn finish(&self, window: Window) -> Vec<String> {
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        w[window.0].2 = Some(now);
        let start = w[window.0].1;
        let mut out: Vec<String> = w
            .iter()
            .enumerate()
            .filter(|(i, (_, s, e))| *i != window.0 && *s <= now && e.is_none_or(|e| e >= start))
            .map(|(_, (name, _, _))| name.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Run `groups`, at most `opts.parallel` at once, on disjoint GPU sets.
pub async fn run_groups(
    c: &Campaign,
    groups: &[&ServerGroup],
    store: &Store,
    cancel: &CancellationToken,
    opts: &RunOptions,
    out: &mut RunOutcome,
    (eta, leaders, events, answer): (
        &super::eta::LiveEta,
        &super::search::Leaders,
        &super::events::Events,
        Option<&super::answer::AnswerFirst>,
    ),
) -> anyhow::Result<()> {
    use super::events::Event;
    let (mut pool, note) = gpu::pool_for(c, gpu::probe_busy);
    if let Some(n) = note {
        events.emit(Event::Note {
            message: format!("note: {n}"),
        });
    }
    let launcher = if opts.local {
        &Launcher::Local
    } else {
        &c.launcher
    };
    let width = opts.parallel.max(1);
    if width > 1 {
        events.emit(Event::Note {
            message: format!("running up to {width} server groups at once"),
        });
    }
    let tracker = Tracker::default();
    let mut running = FuturesUnordered::new();
    let mut next = 0;
    let mut done = 0;
    let mut stop = false;
    loop {
        while !stop && !cancel.is_cancelled() && next < groups.len() && running.len() < width {
            let g = groups[next];
            let Some(gpus) = pool.acquire(g.server.gpus()) else {
                if running.is_empty() {
                    // Can never fit; the pool's size is all there is.
                    anyhow::bail!("server {} needs GPUs the pool cannot provide", g.server.id);
                }
                break;
            };
            next += 1;
            events.emit(announce(g, eta.left_s(None)));
            let tracker = &tracker;
            running.push(async move {
                let slot = Slot {
                    gpus: gpus.clone(),
                    launcher,
                    tracker,
                    eta,
                    leaders,
                    events,
                    answer,
                };
                let mut group = GroupRun::new(c, g, store, (cancel, opts), &slot);
                let end = group.run().await;
                let stop = end.map(|e| e.stops_campaign(opts.fail_fast));
                (gpus, group.out, stop, &g.server.id)
            });
        }
        let Some((gpus, mine, r, server)) = running.next().await else {
            break;
        };
        pool.release(&gpus);
        done += 1;
        if let Some(a) = answer {
            events.emit(Event::AnswerSoFar {
                message: a.so_far(server, done, groups.len()),
            });
        }
        out.launches += mine.launches;
        out.measured += mine.measured;
        out.failed += mine.failed;
        if r? {
            stop = true;
        }
    }
    if cancel.is_cancelled() {
        out.interrupted = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_windows_are_reported_both_ways() {
        let t = Tracker::default();
        let a = t.begin("a", "c1");
        let b = t.begin("b", "c1");
        assert_eq!(t.finish(a), vec!["b/c1"]);
        let a2 = t.begin("a", "c2");
        assert_eq!(t.finish(b), vec!["a/c1", "a/c2"]);
        assert!(t.finish(a2).contains(&"b/c1".to_string()));
        let alone = t.begin("a", "c3");
        assert!(t.finish(alone).is_empty());
    }
}
