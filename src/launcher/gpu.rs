//! The GPU pool: which of the campaign's GPUs may be used, and disjoint sets
//! of them handed to servers that run side by side (`--parallel`).
//!
//! GPUs that `nvidia-smi` shows holding another process's memory are left
//! out unless `[hardware] use_busy_gpus = true`. A pool with no GPUs (CPU
//! engines, the simulator) hands out empty sets, so only `--parallel` limits
//! how many servers run at once. Inside a Slurm job the allocation already
//! sets `CUDA_VISIBLE_DEVICES`, so the pool is empty there and servers inherit it.

use crate::campaign::Campaign;
use crate::telemetry::gpu::{busy_gpus, parse_query_output, query_command};

/// Memory in use above which a GPU counts as busy, MiB. An idle GPU shows a
/// few MiB of driver state; any real process holds far more.
pub const BUSY_THRESHOLD_MIB: u64 = 1024;

/// GPUs free to hand out.
#[derive(Debug, Clone, Default)]
pub struct GpuPool {
    free: Vec<u32>,
    total: usize,
}

impl GpuPool {
    /// A pool of these GPU indices.
    pub fn new(gpus: Vec<u32>) -> Self {
        let total = gpus.len();
        Self { free: gpus, total }
    }

    /// Whether the pool has no GPUs at all.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Take `n` GPUs (all of them when the pool has fewer than `n` in total,
    /// once all are free); `None` when they are not free now. An empty pool
    /// always answers with an empty set.
    pub fn acquire(&mut self, n: u32) -> Option<Vec<u32>> {
        if self.total == 0 {
            return Some(Vec::new());
        }
        let want = (n as usize).min(self.total);
        if self.free.len() < want {
            return None;
        }
        Some(self.free.drain(..want).collect())
    }

    /// Give GPUs back.
    pub fn release(&mut self, gpus: &[u32]) {
        self.free.extend_from_slice(gpus);
        self.free.sort_unstable();
    }
}

/// Ask `nvidia-smi` which GPUs hold memory now.
pub fn probe_busy() -> Result<Vec<u32>, String> {
    let argv = query_command();
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| format!("cannot run nvidia-smi: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "nvidia-smi failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let samples =
        parse_query_output(&String::from_utf8_lossy(&out.stdout)).map_err(|e| e.to_string())?;
    Ok(busy_gpus(&samples, BUSY_THRESHOLD_MIB))
}

/// The campaign's GPUs minus busy ones; returns the pool and a note for the
/// user when GPUs were left out or could not be checked.
pub fn pool_for(
    c: &Campaign,
    probe: impl FnOnce() -> Result<Vec<u32>, String>,
) -> (GpuPool, Option<String>) {
    if c.hardware.gpus.is_empty() {
        return (GpuPool::default(), None);
    }
    if std::env::var_os("SLURM_JOB_ID").is_some()
        && std::env::var_os("CUDA_VISIBLE_DEVICES").is_some()
    {
        return (
            GpuPool::default(),
            Some("inside a Slurm job: servers use the job's allocated GPUs".into()),
        );
    }
    if c.hardware.use_busy_gpus {
        return (GpuPool::new(c.hardware.gpus.clone()), None);
    }
    match probe() {
        Ok(busy) => {
            let (skipped, usable): (Vec<u32>, Vec<u32>) =
                c.hardware.gpus.iter().partition(|g| busy.contains(g));
            let note = (!skipped.is_empty()).then(|| {
                format!(
                    "GPUs {skipped:?} hold another process's memory and are left out \
                     (set [hardware] use_busy_gpus = true to use them)"
                )
            });
            (GpuPool::new(usable), note)
        }
        Err(e) => (
            GpuPool::new(c.hardware.gpus.clone()),
            Some(format!(
                "cannot check for busy GPUs ({e}); using all declared GPUs"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_sets_until_released() {
        let mut p = GpuPool::new(vec![1, 2, 3, 4, 5, 6, 7]);
        let a = p.acquire(1).unwrap();
        let b = p.acquire(2).unwrap();
        let c = p.acquire(4).unwrap();
        assert_eq!(
            (a.clone(), b.clone(), c.clone()),
            (vec![1], vec![2, 3], vec![4, 5, 6, 7])
        );
        assert_eq!(p.acquire(1), None);
        p.release(&b);
        assert_eq!(p.acquire(1), Some(vec![2]));
        // More than the pool holds: everything, once everything is free.
        assert_eq!(p.acquire(8), None);
        p.release(&a);
        p.release(&c);
        p.release(&[2]);
        assert_eq!(p.acquire(8).unwrap().len(), 7);
    }

    #[test]
    fn an_empty_pool_never_blocks() {
        let mut p = GpuPool::default();
        assert!(p.is_empty());
        assert_eq!(p.acquire(4), Some(vec![]));
        assert_eq!(p.acquire(4), Some(vec![]));
    }

    #[test]
    fn busy_gpus_are_left_out_unless_allowed() {
        let text = "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"sim\"\n\
                    [hardware]\ngpus = [0, 1, 2, 3]\n[[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 1\n";
        let (raw, src) = crate::campaign::parse(std::path::Path::new("c.toml"), text).unwrap();
        let mut c = crate::campaign::resolve(raw, &src).unwrap();
        // The nvidia-smi output of a box where GPU 0 runs someone's job.
        let smi = "0, GPU-a, 70000, 81559, 97\n1, GPU-b, 3, 81559, 0\n2, GPU-c, 3, 81559, 0\n3, GPU-d, [N/A], 81559, 0\n";
        let probe = || {
            Ok(busy_gpus(
                &parse_query_output(smi).unwrap(),
                BUSY_THRESHOLD_MIB,
            ))
        };
        let (mut pool, note) = pool_for(&c, probe);
        assert!(note.unwrap().contains("[0]"));
        assert_eq!(pool.acquire(3), Some(vec![1, 2, 3]));
        c.hardware.use_busy_gpus = true;
        let (mut pool, note) = pool_for(&c, || panic!("not probed when busy GPUs are allowed"));
        assert!(note.is_none());
        assert_eq!(pool.acquire(4), Some(vec![0, 1, 2, 3]));
        let (mut pool, note) = {
            c.hardware.use_busy_gpus = false;
            pool_for(&c, || Err("no nvidia-smi".into()))
        };
        assert!(note.unwrap().contains("no nvidia-smi"));
        assert_eq!(pool.acquire(4).unwrap().len(), 4);
    }
}
