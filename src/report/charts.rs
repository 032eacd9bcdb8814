//! Chart data: which charts the report draws (per workload family, per
//! prompt kind, per GPU, per turn) and their series, ready for the SVG
//! renderer.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::data::{GpuPoint, KindRow, PointRow, TurnRow};

/// Families (workload, input, output) that get their own per-concurrency
/// charts; more would make the page unreadable, the CSV has them all.
pub const MAX_FAMILY_CHARTS: usize = 6;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesStyle {
    /// Solid line with markers.
    Line,
    /// Dashed line with markers.
    Dashed,
    /// Markers only.
    Markers,
    /// The Pareto frontier: a thick step line over the other series.
    Frontier,
}

/// The report section a chart belongs in, in page order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartSection {
    /// Throughput and latency vs. concurrency.
    Throughput,
    /// Throughput per GPU vs. speed per user.
    PerGpu,
    /// Speedup over the baseline.
    Speedup,
    /// Speculative budget sweep.
    Budget,
    /// Context length.
    Context,
    /// Agentic sessions.
    Agentic,
    /// Trace replays over trace time.
    Trace,
    /// Inside cells over time.
    Timeline,
}

impl ChartSection {
    /// The snake_case name used in report.json and as the HTML anchor.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throughput => "throughput",
            Self::PerGpu => "per_gpu",
            Self::Speedup => "speedup",
            Self::Budget => "budget",
            Self::Context => "context",
            Self::Agentic => "agentic",
            Self::Trace => "trace",
            Self::Timeline => "timeline",
        }
    }
}

/// One named series of a chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Colour slot (same server, same colour across charts).
    pub color: usize,
    /// How it is drawn.
    pub style: SeriesStyle,
    /// (x, y) points; for bar charts x is the group index.
    pub points: Vec<(f64, f64)>,
    /// Per-point annotations (e.g. concurrency), empty for none.
    pub labels: Vec<String>,
}

/// What kind of chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChartKind {
    /// Lines over a numeric x axis.
    Line {
        /// Logarithmic (base 2) x axis.
        log_x: bool,
    },
    /// Grouped bars over named groups.
    Bars {
        /// Group names, in x order.
        groups: Vec<String>,
        /// A horizontal reference line (speedup 1.0).
        reference: Option<f64>,
    },
}

/// A chart as data; `svg` draws it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// Section the chart belongs in.
    pub section: ChartSection,
    /// Title.
    pub title: String,
    /// X axis label with unit.
    pub x_label: String,
    /// Y axis label with unit.
    pub y_label: String,
    /// Line or bars.
    pub kind: ChartKind,
    /// The data.
    pub series: Vec<Series>,
}

/// Most series one chart holds; a chart with more is split into parts
/// that each hold at most this many, so every legend stays readable.
pub const MAX_SERIES: usize = 12;

/// Split every chart of more than [`MAX_SERIES`] series into parts. Series
/// of one colour slot (one server: its p50 and p99, its TTFT and E2E) stay
/// in one part; a Pareto frontier is drawn in every part, since it is the
/// frontier of them all.
pub(super) fn facet(charts: Vec<Chart>) -> Vec<Chart> {
    let mut out = Vec::new();
    for chart in charts {
        if chart.series.len() <= MAX_SERIES {
            out.push(chart);
            continue;
        }
        let (frontier, rest): (Vec<Series>, Vec<Series>) = chart
            .series
            .iter()
            .cloned()
            .partition(|s| s.style == SeriesStyle::Frontier);
        let room = MAX_SERIES - frontier.len().min(MAX_SERIES - 1);
        // Groups of one colour slot, in order of first appearance.
        let mut groups: Vec<Vec<Series>> = Vec::new();
        for s in rest {
            match groups.iter_mut().find(|g| g[0].color == s.color) {
                Some(g) => g.push(s),
                None => groups.push(vec![s]),
            }
        }
        let mut parts: Vec<Vec<Series>> = Vec::new();
        for g in groups {
            for piece in g.chunks(room) {
                match parts.last_mut() {
                    Some(p) if p.len() + piece.len() <= room => p.extend_from_slice(piece),
                    _ => parts.push(piece.to_vec()),
                }
            }
        }
        let n = parts.len();
        for (i, mut series) in parts.into_iter().enumerate() {
            series.extend(frontier.iter().cloned());
            out.push(Chart {
                title: format!("{} (part {} of {n})", chart.title, i + 1),
                series,
                ..chart.clone()
            });
        }
    }
    out
}

/// Most budget-sweep charts in one report; the rest are in report.csv.
const MAX_BUDGET_CHARTS: usize = 12;

/// Throughput (and acceptance length) against the speculative budget. Each
/// (method, TP) is one series over every budget measured, so a DDTree sweep
/// at TP1 and TP4 reads as two lines next to DFlash's; a chart holds one
/// workload family at one load, at the family's lowest load (where drafting
/// pays most) and at its highest (where it can cost).
fn budget_charts(points: &[PointRow], notes: &mut Vec<String>) -> Vec<Chart> {
    let sweep: Vec<&PointRow> = points
        .iter()
        .filter(|p| p.budget.is_some() && p.output_tok_s.is_some())
        .collect();
    let budgets: BTreeSet<u32> = sweep.iter().filter_map(|p| p.budget).collect();
    if budgets.len() < 2 {
        notes.push(format!(
            "speculative budget sweep needs at least two budgets (num_draft_tokens); {} measured: chart skipped",
            budgets.len()
        ));
        return Vec::new();
    }
    let load_key = |p: &PointRow| -> f64 {
        match p.concurrency {
            Some(c) => f64::from(c),
            None => {
                1e9 + p
                    .load
                    .trim_start_matches("rate")
                    .parse::<f64>()
                    .unwrap_or(0.0)
            }
        }
    };
    let mut families: Vec<&str> = Vec::new();
    let mut series_keys: Vec<(&str, u32)> = Vec::new();
    for p in &sweep {
        if !families.contains(&p.family.as_str()) {
            families.push(&p.family);
        }
        if !series_keys.contains(&(p.method.as_str(), p.gpus)) {
            series_keys.push((&p.method, p.gpus));
        }
    }
    series_keys.sort();
    let mut charts = Vec::new();
    for fam in families {
        let in_fam: Vec<&PointRow> = sweep.iter().copied().filter(|p| p.family == fam).collect();
        let mut loads: Vec<(f64, &str)> = in_fam
            .iter()
            .map(|p| (load_key(p), p.load.as_str()))
            .collect();
        loads.sort_by(|a, b| a.0.total_cmp(&b.0));
        loads.dedup_by(|a, b| a.1 == b.1);
        let mut shown: Vec<&str> = loads.first().map(|l| l.1).into_iter().collect();
        if let Some(last) = loads.last().filter(|l| !shown.contains(&l.1)) {
            shown.push(last.1);
        }
        let series_of = |load: &str, f: &dyn Fn(&PointRow) -> Option<f64>| -> Vec<Series> {
            series_keys
                .iter()
                .enumerate()
                .filter_map(|(i, (method, gpus))| {
                    let pts: Vec<(f64, f64)> = in_fam
                        .iter()
                        .filter(|p| p.load == load && p.method == *method && p.gpus == *gpus)
                        .filter_map(|p| Some((f64::from(p.budget?), f(p)?)))
                        .collect();
                    (!pts.is_empty())
                        .then(|| line(format!("{method} tp{gpus}"), i, SeriesStyle::Line, pts))
                })
                .collect()
        };
        for load in &shown {
            let series = series_of(load, &|p| p.output_tok_s.map(|s| s.mean));
            if distinct_budgets(&series) < 2 {
                continue;
            }
            charts.push(Chart {
                section: ChartSection::Budget,
                title: format!("Output throughput vs. speculative budget — {fam} at {load}"),
                x_label: "budget (num_draft_tokens; DDTree: tree size)".into(),
                y_label: "output throughput (tokens/s)".into(),
                kind: ChartKind::Line { log_x: false },
                series,
            });
        }
        if let Some(load) = shown.first() {
            let acc = series_of(load, &|p| p.acceptance_length.map(|s| s.mean));
            if distinct_budgets(&acc) >= 2 {
                charts.push(Chart {
                    section: ChartSection::Budget,
                    title: format!("Acceptance length vs. speculative budget — {fam} at {load}"),
                    x_label: "budget (num_draft_tokens; DDTree: tree size)".into(),
                    y_label: "acceptance length (tokens/step)".into(),
                    kind: ChartKind::Line { log_x: false },
                    series: acc,
                });
            }
        }
    }
    if charts.is_empty() {
        notes.push(
            "no workload family and load was measured at two budgets: budget charts skipped".into(),
        );
    } else if charts.len() > MAX_BUDGET_CHARTS {
        notes.push(format!(
            "{} budget-sweep charts; the first {MAX_BUDGET_CHARTS} are shown, report.csv has every point",
            charts.len()
        ));
        charts.truncate(MAX_BUDGET_CHARTS);
    }
    charts
}

/// How many budgets (x values) the series of one chart hold together.
fn distinct_budgets(series: &[Series]) -> usize {
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs.len()
}

/// A line series, its points in x order.
fn line(name: String, color: usize, style: SeriesStyle, mut points: Vec<(f64, f64)>) -> Series {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Series {
        name,
        color,
        style,
        points,
        labels: Vec::new(),
    }
}

/// The servers in report order and their colours, shared by every chart.
struct Palette<'a> {
    servers: &'a [String],
    color: &'a HashMap<&'a str, usize>,
}

impl Palette<'_> {
    fn col(&self, s: &str) -> usize {
        self.color.get(s).copied().unwrap_or(0)
    }
}

#[allow(clippy::too_many_arguments)]
/// The charts of a report, with notes on what they leave out.
pub(super) fn charts(
    servers: &[String],
    color: &HashMap<&str, usize>,
    points: &[PointRow],
    kinds: &[KindRow],
    gpu: &[GpuPoint],
    turns: &[TurnRow],
    baseline: Option<&str>,
    notes: &mut Vec<String>,
) -> Vec<Chart> {
    let pal = Palette { servers, color };
    let mut out = throughput_charts(&pal, points, notes);
    match baseline {
        None => notes.push("no baseline: speedup chart skipped".into()),
        Some(b) => out.extend(speedup_chart(&pal, kinds, b, notes)),
    }
    // Budget sweep: one series per (method, TP), one chart per workload
    // family at its lowest and its highest load.
    out.extend(budget_charts(points, notes));
    out.extend(context_charts(&pal, points, notes));
    out.extend(per_gpu_charts(&pal, gpu));
    out.extend(turn_chart(&pal, turns, notes));
    out
}

/// Throughput and TTFT against concurrency, a pair per workload family.
fn throughput_charts(
    pal: &Palette<'_>,
    points: &[PointRow],
    notes: &mut Vec<String>,
) -> Vec<Chart> {
    let (servers, col) = (pal.servers, |s: &str| pal.col(s));
    let mut out = Vec::new();
    let usable_pts: Vec<&PointRow> = points
        .iter()
        .filter(|p| p.output_tok_s.is_some() && p.concurrency.is_some())
        .collect();
    let mut families: Vec<String> = Vec::new();
    for p in &usable_pts {
        if !families.contains(&p.family) {
            families.push(p.family.clone());
        }
    }
    if families.len() > MAX_FAMILY_CHARTS {
        notes.push(format!(
            "{} workload families measured; charts show the first {MAX_FAMILY_CHARTS}, report.csv has them all",
            families.len()
        ));
        families.truncate(MAX_FAMILY_CHARTS);
    }
    if families.is_empty() {
        notes.push("no usable closed-loop measurements: no throughput or latency charts".into());
    }
    for fam in &families {
        let in_fam: Vec<&&PointRow> = usable_pts.iter().filter(|p| &p.family == fam).collect();
        let per_server =
            |f: &dyn Fn(&PointRow) -> Option<f64>, style: SeriesStyle, suffix: &str| {
                servers
                    .iter()
                    .filter_map(|s| {
                        let pts: Vec<(f64, f64)> = in_fam
                            .iter()
                            .filter(|p| &p.server_id == s)
                            .filter_map(|p| Some((p.concurrency? as f64, f(p)?)))
                            .collect();
                        (!pts.is_empty()).then(|| line(format!("{s}{suffix}"), col(s), style, pts))
                    })
                    .collect::<Vec<_>>()
            };
        let conc: BTreeSet<u32> = in_fam.iter().filter_map(|p| p.concurrency).collect();
        let log_x = conc
            .iter()
            .next()
            .zip(conc.iter().last())
            .is_some_and(|(a, b)| *b >= 4 * (*a).max(1));
        out.push(Chart {
            section: ChartSection::Throughput,
            title: format!("Output throughput vs. concurrency — {fam}"),
            x_label: "concurrency (users)".into(),
            y_label: "output throughput (tokens/s)".into(),
            kind: ChartKind::Line { log_x },
            series: per_server(&|p| p.output_tok_s.map(|s| s.mean), SeriesStyle::Line, ""),
        });
        let mut lat = per_server(
            &|p| p.ttft_p50_ms.map(|s| s.mean),
            SeriesStyle::Line,
            " p50",
        );
        lat.extend(per_server(
            &|p| p.ttft_p99_ms.map(|s| s.mean),
            SeriesStyle::Dashed,
            " p99",
        ));
        out.push(Chart {
            section: ChartSection::Throughput,
            title: format!("TTFT p50 / p99 vs. concurrency — {fam}"),
            x_label: "concurrency (users)".into(),
            y_label: "time to first token (ms)".into(),
            kind: ChartKind::Line { log_x },
            series: lat,
        });
    }
    out
}

/// Decode speedup over the baseline per prompt kind, output length and load.
fn speedup_chart(
    pal: &Palette<'_>,
    kinds: &[KindRow],
    b: &str,
    notes: &mut Vec<String>,
) -> Option<Chart> {
    let (servers, col) = (pal.servers, |s: &str| pal.col(s));
    let rows: Vec<&KindRow> = kinds
        .iter()
        .filter(|k| k.speedup_decode.is_some())
        .collect();
    let mut groups: Vec<String> = Vec::new();
    for k in &rows {
        let g = format!("{} · out {} · {}", k.kind, k.output_len, k.load);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    if rows.is_empty() {
        notes.push(format!(
            "no usable cell shares a workload point with baseline `{b}`: speedup chart skipped"
        ));
        return None;
    }
    let series = servers
        .iter()
        .filter(|s| s.as_str() != b)
        .filter_map(|s| {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|k| &k.server_id == s)
                .filter_map(|k| {
                    let g = format!("{} · out {} · {}", k.kind, k.output_len, k.load);
                    Some((
                        groups.iter().position(|x| *x == g)? as f64,
                        k.speedup_decode?,
                    ))
                })
                .collect();
            (!pts.is_empty()).then(|| line(s.clone(), col(s), SeriesStyle::Line, pts))
        })
        .collect();
    Some(Chart {
        section: ChartSection::Speedup,
        title: format!("Decode speedup over `{b}` per prompt kind and output length"),
        x_label: "prompt kind · output length (tokens) · load".into(),
        y_label: "per-request decode speed ratio (×)".into(),
        kind: ChartKind::Bars {
            groups,
            reference: Some(1.0),
        },
        series,
    })
}

/// TTFT and decode speed against prompt length, a pair per workload and
/// output length, so an axis holds only its own workload's prompt lengths.
fn context_charts(pal: &Palette<'_>, points: &[PointRow], notes: &mut Vec<String>) -> Vec<Chart> {
    let (servers, col) = (pal.servers, |s: &str| pal.col(s));
    let mut out = Vec::new();
    let ctx: Vec<&PointRow> = points
        .iter()
        .filter(|p| p.ttft_p50_ms.is_some() && !p.family.contains("-kinds-"))
        .collect();
    let mut ctx_groups: Vec<(String, u64)> = Vec::new();
    for p in &ctx {
        let k = (p.workload.clone(), p.output_len);
        if !ctx_groups.contains(&k) {
            ctx_groups.push(k);
        }
    }
    ctx_groups.retain(|(w, o)| {
        ctx.iter()
            .filter(|p| &p.workload == w && p.output_len == *o)
            .map(|p| p.input_len)
            .collect::<BTreeSet<u64>>()
            .len()
            >= 2
    });
    if ctx_groups.is_empty() {
        notes.push(
            "no workload measured at two prompt lengths (input_len): context-length charts skipped"
                .into(),
        );
    }
    ctx_groups.truncate(MAX_FAMILY_CHARTS);
    for (workload, output_len) in &ctx_groups {
        let mine: Vec<&&PointRow> = ctx
            .iter()
            .filter(|p| &p.workload == workload && p.output_len == *output_len)
            .collect();
        // One concurrency so the lines compare like with like: the lowest measured.
        let c0 = mine.iter().filter_map(|p| p.concurrency).min();
        let mk = |f: &dyn Fn(&PointRow) -> Option<f64>| -> Vec<Series> {
            servers
                .iter()
                .filter_map(|s| {
                    let mut by_len: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                    for p in mine
                        .iter()
                        .filter(|p| &p.server_id == s && p.concurrency == c0)
                    {
                        if let Some(v) = f(p) {
                            by_len.entry(p.input_len).or_default().push(v);
                        }
                    }
                    let pts: Vec<(f64, f64)> = by_len
                        .into_iter()
                        .map(|(l, v)| (l as f64, v.iter().sum::<f64>() / v.len() as f64))
                        .collect();
                    (!pts.is_empty()).then(|| line(s.clone(), col(s), SeriesStyle::Line, pts))
                })
                .collect()
        };
        let at = c0.map(|c| format!(", concurrency {c}")).unwrap_or_default();
        let what = format!("{workload}, output {output_len}{at}");
        out.push(Chart {
            section: ChartSection::Context,
            title: format!("TTFT p50 vs. context length ({what})"),
            x_label: "prompt length (tokens)".into(),
            y_label: "time to first token (ms)".into(),
            kind: ChartKind::Line { log_x: false },
            series: mk(&|p| p.ttft_p50_ms.map(|s| s.mean)),
        });
        out.push(Chart {
            section: ChartSection::Context,
            title: format!("Decode speed p50 vs. context length ({what})"),
            x_label: "prompt length (tokens)".into(),
            y_label: "per-request decode speed (tokens/s)".into(),
            kind: ChartKind::Line { log_x: false },
            series: mk(&|p| p.decode_tok_s_p50.map(|s| s.mean)),
        });
    }
    out
}

/// Throughput per GPU against speed per user, with the Pareto frontier.
fn per_gpu_charts(pal: &Palette<'_>, gpu: &[GpuPoint]) -> Vec<Chart> {
    let (servers, col) = (pal.servers, |s: &str| pal.col(s));
    let mut out = Vec::new();
    let mut gfam: Vec<String> = Vec::new();
    for g in gpu {
        if !gfam.contains(&g.family) {
            gfam.push(g.family.clone());
        }
    }
    gfam.truncate(MAX_FAMILY_CHARTS);
    // A campaign over parallel layouts beyond TP draws one series per
    // layout, each point labelled with its server, so TP 8 and TP 4 × DP 2
    // read as two shapes of the same GPUs; TP sizes alone keep a series per
    // server.
    let mut layouts: Vec<&str> = Vec::new();
    for g in gpu {
        if !layouts.contains(&g.layout.as_str()) {
            layouts.push(&g.layout);
        }
    }
    let by_layout = layouts.len() > 1 && layouts.iter().any(|l| l.contains('-'));
    for fam in &gfam {
        let in_fam: Vec<&GpuPoint> = gpu.iter().filter(|g| &g.family == fam).collect();
        let series_of = |name: String, color: usize, mine: Vec<&&GpuPoint>| Series {
            name,
            color,
            style: SeriesStyle::Markers,
            points: mine
                .iter()
                .map(|g| (g.tok_s_per_user, g.tok_s_per_gpu))
                .collect(),
            labels: mine
                .iter()
                .map(|g| match by_layout {
                    true => format!("{} {}", g.server_id, g.load),
                    false => g.load.clone(),
                })
                .collect(),
        };
        let mut series: Vec<Series> = if by_layout {
            layouts
                .iter()
                .enumerate()
                .filter_map(|(i, l)| {
                    let mine: Vec<&&GpuPoint> = in_fam.iter().filter(|g| g.layout == *l).collect();
                    (!mine.is_empty()).then(|| series_of(l.to_string(), i, mine))
                })
                .collect()
        } else {
            servers
                .iter()
                .filter_map(|s| {
                    let mine: Vec<&&GpuPoint> =
                        in_fam.iter().filter(|g| &g.server_id == s).collect();
                    (!mine.is_empty()).then(|| series_of(s.clone(), col(s), mine))
                })
                .collect()
        };
        let mut front: Vec<(f64, f64)> = in_fam
            .iter()
            .filter(|g| g.pareto)
            .map(|g| (g.tok_s_per_user, g.tok_s_per_gpu))
            .collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series {
            name: "Pareto frontier".into(),
            color: 0,
            style: SeriesStyle::Frontier,
            points: front,
            labels: Vec::new(),
        });
        out.push(Chart {
            section: ChartSection::PerGpu,
            title: format!("Throughput per GPU vs. speed per user — {fam}"),
            x_label: "tokens/s per user (decode p50)".into(),
            y_label: "output tokens/s per GPU".into(),
            kind: ChartKind::Line { log_x: false },
            series,
        });
        out.extend(energy_chart(pal, fam, &in_fam));
    }
    out
}

/// Tokens per joule against speed per user, with its own frontier, where
/// the family's cells sampled power.
fn energy_chart(pal: &Palette<'_>, fam: &str, in_fam: &[&GpuPoint]) -> Option<Chart> {
    let with: Vec<&GpuPoint> = in_fam
        .iter()
        .copied()
        .filter(|g| g.tokens_per_joule.is_some())
        .collect();
    if with.is_empty() {
        return None;
    }
    let xy = |g: &GpuPoint| (g.tok_s_per_user, g.tokens_per_joule.unwrap_or(0.0));
    let mut series: Vec<Series> = pal
        .servers
        .iter()
        .filter_map(|s| {
            let mine: Vec<&&GpuPoint> = with.iter().filter(|g| &g.server_id == s).collect();
            (!mine.is_empty()).then(|| Series {
                name: s.clone(),
                color: pal.col(s),
                style: SeriesStyle::Markers,
                points: mine.iter().map(|g| xy(g)).collect(),
                labels: mine.iter().map(|g| g.load.clone()).collect(),
            })
        })
        .collect();
    // Fastest first: a point is on the frontier when it beats the energy
    // efficiency of every faster point.
    let mut all: Vec<(f64, f64)> = with.iter().map(|g| xy(g)).collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let mut best = f64::NEG_INFINITY;
    let mut front: Vec<(f64, f64)> = all
        .into_iter()
        .filter(|p| {
            let on = p.1 > best;
            best = best.max(p.1);
            on
        })
        .collect();
    front.reverse();
    series.push(Series {
        name: "Pareto frontier".into(),
        color: 0,
        style: SeriesStyle::Frontier,
        points: front,
        labels: Vec::new(),
    });
    Some(Chart {
        section: ChartSection::PerGpu,
        title: format!("Output tokens per joule vs. speed per user — {fam}"),
        x_label: "tokens/s per user (decode p50)".into(),
        y_label: "output tokens per joule (GPU energy)".into(),
        kind: ChartKind::Line { log_x: false },
        series,
    })
}

/// Agentic sessions: latency per turn.
fn turn_chart(pal: &Palette<'_>, turns: &[TurnRow], notes: &mut Vec<String>) -> Option<Chart> {
    let col = |s: &str| pal.col(s);
    if turns.is_empty() {
        notes.push("no agentic sessions (requests with a turn index) in these results: per-turn latency chart skipped".into());
        return None;
    }
    {
        let mut keys: Vec<(String, String)> = Vec::new();
        for t in turns {
            let k = (t.server_id.clone(), t.workload.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut series = Vec::new();
        for (s, w) in &keys {
            let rows: Vec<&TurnRow> = turns
                .iter()
                .filter(|t| &t.server_id == s && &t.workload == w)
                .collect();
            series.push(line(
                format!("{s} {w} TTFT"),
                col(s),
                SeriesStyle::Line,
                rows.iter()
                    .map(|t| (t.turn as f64, t.ttft_p50_ms))
                    .collect(),
            ));
            series.push(line(
                format!("{s} {w} E2E"),
                col(s),
                SeriesStyle::Dashed,
                rows.iter().map(|t| (t.turn as f64, t.e2e_p50_ms)).collect(),
            ));
        }
        Some(Chart {
            section: ChartSection::Agentic,
            title: "Agentic sessions: latency per turn (p50)".into(),
            x_label: "turn".into(),
            y_label: "latency (ms)".into(),
            kind: ChartKind::Line { log_x: false },
            series,
        })
    }
}
