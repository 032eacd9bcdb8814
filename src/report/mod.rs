//! Reports: what a campaign found, in forms people read and tools consume.
//!
//! `report` reads only stored cell results (never re-measures). The
//! aggregate [`model::Report`] is computed once, then each format is a pure
//! function from it to bytes behind [`Exporter`], one file per format, so
//! every format says the same thing and each is snapshot-tested on its own.
//!
//! Layers, with no circle between files (`tests/module_graph.rs`): [`data`]
//! holds the row types and per-cell facts and uses nothing else here; the
//! sections (agreement, checks, recommend, charts, search, trace_time,
//! timelines, builds, compare, prefix_cache) read it; [`model`] assembles
//! them into the [`model::Report`]; the renderers (table, markdown, html,
//! csv, json, answer) read the report.
//!
//! The baseline server id comes from `--baseline`, else from the
//! `campaign.json` that `run` writes next to `cells/` (name, description,
//! baseline, server and workload order).

pub mod agreement;
pub mod answer;
pub mod builds;
pub mod charts;
pub mod checks;
pub mod compare;
pub mod csv;
pub mod data;
pub mod html;
pub mod json;
pub mod markdown;
pub mod model;
pub mod prefix_cache;
pub mod recommend;
pub mod search;
pub mod svg;
pub mod table;
pub mod timelines;
pub mod trace_time;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::campaign::Campaign;
use crate::store::meta::CampaignMeta;
use crate::store::{CellResult, Store};

pub use model::{build, Report, ReportOptions};

/// Stored results of one campaign, as read from its results directory.
#[derive(Debug, Clone, Default)]
pub struct ResultSet {
    /// The directory's own name (fallback campaign name).
    pub dir_name: String,
    /// `campaign.json`, when present.
    pub meta: Option<CampaignMeta>,
    /// Every readable cell.
    pub cells: Vec<CellResult>,
    /// Files that could not be read (path relative to the directory, reason).
    pub unreadable: Vec<(String, String)>,
    /// Cells a probe left unmeasured (`goal = "answer"`).
    pub not_measured: Vec<crate::goal::Lost>,
}

/// Read a campaign's results directory (the one holding `cells/`).
pub fn load(dir: &Path) -> anyhow::Result<ResultSet> {
    if !dir.join("cells").is_dir() {
        anyhow::bail!(
            "{} has no cells/ folder: pass a campaign's results directory, such as results/quickstart",
            dir.display()
        );
    }
    let meta = crate::store::meta::read(dir)?;
    let store = Store::new(dir);
    let (mut cells, bad) = store.load_all();
    if let Some(m) = &meta {
        m.relabel(&mut cells);
    }
    let not_measured = store.not_measured();
    Ok(ResultSet {
        dir_name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        meta,
        cells,
        unreadable: bad
            .into_iter()
            .map(|(p, e)| {
                let rel = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
                (rel, e)
            })
            .collect(),
        not_measured,
    })
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Format {
    /// Aligned plain-text table for the terminal (`report.txt` when written).
    Table,
    /// Markdown page.
    Md,
    /// One row per cell.
    Csv,
    /// The aggregate view, versioned.
    Json,
    /// Self-contained page with inline SVG charts.
    Html,
}

impl Format {
    /// Every format, in the order files are written.
    pub const ALL: [Format; 5] = [
        Format::Table,
        Format::Md,
        Format::Csv,
        Format::Json,
        Format::Html,
    ];

    /// The exporter of this format.
    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            Format::Table => &table::TableExporter,
            Format::Md => &markdown::MarkdownExporter,
            Format::Csv => &csv::CsvExporter,
            Format::Json => &json::JsonExporter,
            Format::Html => &html::HtmlExporter,
        }
    }
}

/// A pure function from a report to the bytes of one file.
pub trait Exporter: Sync {
    /// File name inside the output directory.
    fn file_name(&self) -> &'static str;
    /// Render the report.
    fn render(&self, report: &Report) -> Vec<u8>;
}

/// At the end of `run`, unless `[run] report = false`: every report file
/// into the results directory; returns the HTML page's path when written.
pub fn write_for_campaign(c: &Campaign, set: &ResultSet) -> anyhow::Result<Option<PathBuf>> {
    if !c.results_dir.join("cells").is_dir() {
        return Ok(None);
    }
    if !c.run.report {
        return Ok(None);
    }
    let r = build(set, &ReportOptions::default());
    let files = [Format::Md, Format::Csv, Format::Json, Format::Html];
    let written = write_files(&r, &files, &c.results_dir)?;
    Ok(written.into_iter().last())
}

/// Write `formats` into `out`; returns the paths written.
pub fn write_files(
    report: &Report,
    formats: &[Format],
    out: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    for f in formats {
        let e = f.exporter();
        let p = out.join(e.file_name());
        crate::util::fsx::write_atomic(&p, &e.render(report))
            .with_context(|| format!("writing {}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}
