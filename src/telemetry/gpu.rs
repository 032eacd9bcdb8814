//! GPU memory and utilisation from `nvidia-smi` query output.
//!
//! servebench samples `nvidia-smi` during a cell to record how much memory the
//! server really used, and before a campaign to find GPUs that are already
//! busy (someone else's production job on GPU 0).
//!
//! Invariants: parsing never panics; a field that `nvidia-smi` reports as
//! `[N/A]`, `[Not Supported]` or any other bracketed placeholder becomes `None`
//! and is left out of min/mean/max rather than counted as zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The fields queried, in the order `nvidia-smi` prints them.
pub const QUERY_FIELDS: &str = "index,uuid,memory.used,memory.total,utilization.gpu";

/// The argv that produces the CSV [`parse_query_output`] reads.
pub fn query_command() -> Vec<String> {
    vec![
        "nvidia-smi".to_string(),
        format!("--query-gpu={QUERY_FIELDS}"),
        "--format=csv,noheader,nounits".to_string(),
    ]
}

/// One GPU at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// `nvidia-smi` index (the CUDA index only when `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub index: u32,
    /// Stable GPU identifier, e.g. `GPU-5c1f...`.
    pub uuid: String,
    /// Used framebuffer memory in MiB.
    pub memory_used_mib: Option<u64>,
    /// Total framebuffer memory in MiB.
    pub memory_total_mib: Option<u64>,
    /// GPU utilisation in percent.
    pub utilization_pct: Option<f64>,
}

/// A line of `nvidia-smi` output that is not five comma-separated fields.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nvidia-smi output line {line}: {message}")]
pub struct GpuParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

fn placeholder(field: &str) -> bool {
    let f = field.trim();
    f.is_empty() || f.starts_with('[') || f.eq_ignore_ascii_case("n/a")
}

fn opt_u64(field: &str) -> Option<u64> {
    if placeholder(field) {
        return None;
    }
    let f = field.trim();
    f.parse::<u64>().ok().or_else(|| {
        f.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v.round() as u64)
    })
}

fn opt_f64(field: &str) -> Option<f64> {
    if placeholder(field) {
        return None;
    }
    field.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parses `--format=csv,noheader,nounits` output of [`query_command`].
///
/// Blank lines are skipped. A header line (from a run without `noheader`) is
/// skipped too, so output captured with a slightly different format still
/// parses.
pub fn parse_query_output(text: &str) -> Result<Vec<GpuSample>, GpuParseError> {
    let mut out = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with("index") {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != 5 {
            return Err(GpuParseError {
                line: line_no,
                message: format!("expected 5 fields, found {}", fields.len()),
            });
        }
        let index = fields[0].parse::<u32>().map_err(|_| GpuParseError {
            line: line_no,
            message: format!("invalid GPU index {:?}", fields[0]),
        })?;
        out.push(GpuSample {
            index,
            uuid: fields[1].to_string(),
            memory_used_mib: opt_u64(fields[2]),
            memory_total_mib: opt_u64(fields[3]),
            utilization_pct: opt_f64(fields[4]),
        });
    }
    Ok(out)
}

/// Minimum, mean and maximum of the values that were reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Largest value.
    pub max: f64,
    /// How many samples reported a value.
    pub n: usize,
}

impl Stat {
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
        let mut n = 0usize;
        let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
        for v in values {
            n += 1;
            min = min.min(v);
            max = max.max(v);
            sum += v;
        }
        (n > 0).then(|| Stat {
            min,
            mean: sum / n as f64,
            max,
            n,
        })
    }
}

/// A series of samples of one GPU, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// `nvidia-smi` index.
    pub index: u32,
    /// GPU identifier.
    pub uuid: String,
    /// Number of samples of this GPU.
    pub samples: usize,
    /// Total memory in MiB (largest reported).
    pub memory_total_mib: Option<u64>,
    /// Used memory in MiB over the samples.
    pub memory_used_mib: Option<Stat>,
    /// Utilisation in percent over the samples.
    pub utilization_pct: Option<Stat>,
}

/// Groups samples (from any number of `nvidia-smi` runs) by GPU and summarises each.
///
/// GPUs are keyed by UUID, so a changed index order between runs cannot mix
/// two GPUs; the result is ordered by index.
pub fn summarize(samples: &[GpuSample]) -> Vec<GpuSummary> {
    let mut by_gpu: BTreeMap<&str, Vec<&GpuSample>> = BTreeMap::new();
    for s in samples {
        by_gpu.entry(s.uuid.as_str()).or_default().push(s);
    }
    let mut out: Vec<GpuSummary> = by_gpu
        .into_iter()
        .filter_map(|(uuid, series)| {
            let first = series.first()?;
            Some(GpuSummary {
                index: first.index,
                uuid: uuid.to_string(),
                samples: series.len(),
                memory_total_mib: series.iter().filter_map(|s| s.memory_total_mib).max(),
                memory_used_mib: Stat::of(
                    series
                        .iter()
                        .filter_map(|s| s.memory_used_mib)
                        .map(|v| v as f64),
                ),
                utilization_pct: Stat::of(series.iter().filter_map(|s| s.utilization_pct)),
            })
        })
        .collect();
    out.sort_by_key(|g| g.index);
    out
}

/// Indices of GPUs whose used memory exceeds `threshold_mib` in any sample.
///
/// A GPU with unknown memory use is not called busy: the decision would rest
/// on no evidence, and the campaign's explicit GPU list remains the authority.
pub fn busy_gpus(samples: &[GpuSample], threshold_mib: u64) -> Vec<u32> {
    let mut busy: Vec<u32> = samples
        .iter()
        .filter(|s| s.memory_used_mib.is_some_and(|m| m > threshold_mib))
        .map(|s| s.index)
        .collect();
    busy.sort_unstable();
    busy.dedup();
    busy
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/telemetry/nvidia_smi_samples.csv");

    fn data_lines(text: &str) -> String {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn command_is_the_documented_query() {
        assert_eq!(
            query_command(),
            vec![
                "nvidia-smi",
                "--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu",
                "--format=csv,noheader,nounits"
            ]
        );
    }

    #[test]
    fn parses_recorded_samples_with_placeholders() {
        let samples = parse_query_output(&data_lines(FIXTURE)).unwrap();
        assert_eq!(samples.len(), 12);
        let na = samples
            .iter()
            .find(|s| s.index == 3 && s.utilization_pct.is_none())
            .expect("a [N/A] utilisation sample");
        assert_eq!(na.memory_used_mib, Some(0));
        assert!(samples.iter().any(|s| s.memory_used_mib.is_none()));

        let summary = summarize(&samples);
        assert_eq!(summary.len(), 4);
        assert_eq!(
            summary.iter().map(|g| g.index).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        let g1 = &summary[1];
        assert_eq!(g1.samples, 3);
        assert_eq!(g1.memory_total_mib, Some(97871));
        let mem = g1.memory_used_mib.unwrap();
        assert_eq!((mem.min, mem.max), (71234.0, 88012.0));
        assert!((mem.mean - (71234.0 + 86550.0 + 88012.0) / 3.0).abs() < 1e-9);
        let util = g1.utilization_pct.unwrap();
        assert_eq!((util.min, util.max, util.n), (12.0, 100.0, 3));

        assert_eq!(busy_gpus(&samples, 1024), vec![0, 1, 2]);
        assert_eq!(busy_gpus(&samples, 80_000), vec![0, 1]);
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        assert_eq!(parse_query_output("0, GPU-a, 1, 2\n").unwrap_err().line, 1);
        assert_eq!(
            parse_query_output("\nx, GPU-a, 1, 2, 3\n")
                .unwrap_err()
                .line,
            2
        );
        let ok = parse_query_output("0, GPU-a, [Not Supported], 81559, [N/A]\n").unwrap();
        assert_eq!(ok[0].memory_used_mib, None);
        assert_eq!(ok[0].utilization_pct, None);
        assert!(summarize(&[]).is_empty());
        assert!(parse_query_output("").unwrap().is_empty());
    }
}
