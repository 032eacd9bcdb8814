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
pub const QUERY_FIELDS: &str = "index,uuid,memory.used,memory.total,utilization.gpu,power.draw";

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
    /// Power draw in W (absent from output captured without `power.draw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
}

/// A line of `nvidia-smi` output that is not five or six comma-separated fields.
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

/// A value without the unit `--format=csv` (without `nounits`) appends:
/// `38742 MiB`, `100 %`, `297.57 W`.
fn number_part(field: &str) -> &str {
    field.split_whitespace().next().unwrap_or("")
}

fn opt_u64(field: &str) -> Option<u64> {
    if placeholder(field) {
        return None;
    }
    let f = number_part(field);
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
    number_part(field)
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// What a column of `nvidia-smi --query-gpu` output holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Index,
    Uuid,
    MemoryUsed,
    MemoryTotal,
    Utilization,
    Power,
    /// A field servebench does not read (name, temperature, timestamp).
    Other,
}

/// The columns of [`query_command`]'s output, in its order.
const QUERY_COLUMNS: [Column; 6] = [
    Column::Index,
    Column::Uuid,
    Column::MemoryUsed,
    Column::MemoryTotal,
    Column::Utilization,
    Column::Power,
];

/// The columns a header line names, when the line is one: every field a
/// query name (`memory.used [MiB]` reads as `memory.used`).
fn header(fields: &[&str]) -> Option<Vec<Column>> {
    let names: Vec<&str> = fields
        .iter()
        .map(|f| f.split(" [").next().unwrap_or("").trim())
        .collect();
    let is_name = |n: &&str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_')
    };
    names.iter().all(is_name).then(|| {
        names
            .iter()
            .map(|n| match *n {
                "index" => Column::Index,
                "uuid" | "gpu_uuid" => Column::Uuid,
                "memory.used" => Column::MemoryUsed,
                "memory.total" => Column::MemoryTotal,
                "utilization.gpu" => Column::Utilization,
                "power.draw" => Column::Power,
                _ => Column::Other,
            })
            .collect()
    })
}

/// One data line read through `columns`.
fn sample(fields: &[&str], columns: &[Column], line: usize) -> Result<GpuSample, GpuParseError> {
    let field = |want: Column| {
        columns
            .iter()
            .position(|c| *c == want)
            .and_then(|i| fields.get(i).copied())
    };
    let raw_index = field(Column::Index).ok_or_else(|| GpuParseError {
        line,
        message: "no index column".into(),
    })?;
    let index = raw_index.parse::<u32>().map_err(|_| GpuParseError {
        line,
        message: format!("invalid GPU index {raw_index:?}"),
    })?;
    Ok(GpuSample {
        index,
        // Output without UUIDs still keeps GPUs apart, by index.
        uuid: field(Column::Uuid).map_or_else(|| format!("index-{index}"), str::to_string),
        memory_used_mib: field(Column::MemoryUsed).and_then(opt_u64),
        memory_total_mib: field(Column::MemoryTotal).and_then(opt_u64),
        utilization_pct: field(Column::Utilization).and_then(opt_f64),
        power_w: field(Column::Power).and_then(opt_f64).filter(|w| *w >= 0.0),
    })
}

/// Parses `--format=csv,noheader,nounits` output of [`query_command`], or
/// output captured with a header (`--format=csv`, units or not, any of
/// the fields in any order): the header says what each column holds.
///
/// Blank lines are skipped. Without a header, a line holds the query's six
/// fields, or its first five (output captured before power was asked).
pub fn parse_query_output(text: &str) -> Result<Vec<GpuSample>, GpuParseError> {
    let mut out = Vec::new();
    let mut columns: Option<Vec<Column>> = None;
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if let Some(h) = header(&fields) {
            columns = Some(h);
            continue;
        }
        let cols: &[Column] = match &columns {
            Some(c) if c.len() == fields.len() => c,
            Some(c) => {
                return Err(GpuParseError {
                    line: line_no,
                    message: format!("expected {} fields, found {}", c.len(), fields.len()),
                })
            }
            None if (5..=6).contains(&fields.len()) => &QUERY_COLUMNS[..fields.len()],
            None => {
                return Err(GpuParseError {
                    line: line_no,
                    message: format!("expected 5 or 6 fields, found {}", fields.len()),
                })
            }
        };
        out.push(sample(&fields, cols, line_no)?);
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
    /// Power draw in W over the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<Stat>,
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
                power_w: Stat::of(series.iter().filter_map(|s| s.power_w)),
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
pub(crate) mod tests {
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
                "--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,power.draw",
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

    /// The recorded blocks of `nvidia_smi_power_recorded.txt`: each one's
    /// seconds after the first and its CSV lines (header and GPU rows).
    pub(crate) fn recorded_power_blocks() -> Vec<(f64, String)> {
        let text = include_str!("../../tests/fixtures/telemetry/nvidia_smi_power_recorded.txt");
        let mut blocks: Vec<(f64, String)> = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some(rest) = line.strip_prefix("--- witness ") {
                // `pre-ref 2026-09-18T23:22:19Z ---`: seconds of the minute.
                let stamp = rest.split_whitespace().nth(1).unwrap_or_default();
                let secs: f64 = stamp[17..19].parse().unwrap();
                blocks.push((secs, String::new()));
            } else if line.starts_with("index,") || line.contains(", NVIDIA ") {
                let block = &mut blocks.last_mut().unwrap().1;
                block.push_str(line);
                block.push('\n');
            }
        }
        let first = blocks[0].0;
        blocks.into_iter().map(|(t, b)| (t - first, b)).collect()
    }

    #[test]
    fn recorded_output_with_a_header_and_units_gives_each_gpus_power() {
        let blocks = recorded_power_blocks();
        assert_eq!(blocks.len(), 4);
        let power: Vec<(f64, Vec<Option<f64>>)> = blocks
            .iter()
            .map(|(t, b)| {
                let s = parse_query_output(b).unwrap();
                (*t, s.iter().map(|g| g.power_w).collect())
            })
            .collect();
        assert_eq!(power[0], (0.0, vec![Some(30.65), Some(297.57)]));
        assert_eq!(power[3], (4.0, vec![Some(145.33), Some(297.69)]));
        let first = parse_query_output(&blocks[0].1).unwrap();
        // Without UUIDs, GPUs are told apart by index; units are dropped.
        assert_eq!(first[1].uuid, "index-1");
        assert_eq!(first[1].memory_used_mib, Some(38742));
        assert_eq!(first[1].utilization_pct, Some(100.0));
        assert_eq!(first[1].memory_total_mib, None);
        let all: Vec<GpuSample> = blocks
            .iter()
            .flat_map(|(_, b)| parse_query_output(b).unwrap())
            .collect();
        let summary = summarize(&all);
        let p = summary[0].power_w.unwrap();
        assert_eq!((p.min, p.max, p.n), (30.65, 145.33, 4));
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        assert_eq!(parse_query_output("0, GPU-a, 1, 2\n").unwrap_err().line, 1);
        // A header then a row that does not match it.
        let e = parse_query_output("index, power.draw [W]\n0, 1, 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(
            parse_query_output("name, power.draw [W]\nNVIDIA L4, 16.89 W\n")
                .unwrap_err()
                .message,
            "no index column"
        );
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
