//! Reports: what a campaign found, in forms people read and tools consume.
//!
//! `report` reads only stored cell results (never re-measures). The
//! aggregate [`model::Report`] is computed once, then each format is a pure
//! function from it to bytes behind [`Exporter`], one file per format, so
//! every format says the same thing and each is snapshot-tested on its own.
//!
//! The baseline server id comes from `--baseline`, else from the
//! `campaign.json` that `run` writes next to `cells/` (name, description,
//! baseline, server and workload order).

pub mod charts;
pub mod compare;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod model;
pub mod recommend;
pub mod search;
pub mod svg;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::campaign::Campaign;
use crate::store::{CellResult, Store};

pub use model::{build, Report, ReportOptions};

/// Name of the campaign description file in a results directory.
pub const CAMPAIGN_FILE: &str = "campaign.json";
/// Version of the `campaign.json` layout.
pub const CAMPAIGN_SCHEMA_VERSION: u32 = 1;

/// What a report needs to know about the campaign beyond the cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignMeta {
    /// Layout version.
    pub schema_version: u32,
    /// Campaign name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Server id speedups are computed against.
    pub baseline: Option<String>,
    /// Server ids in declaration order.
    pub servers: Vec<String>,
    /// Workload names in declaration order.
    #[serde(default)]
    pub workloads: Vec<String>,
    /// SLO searches, replayed from the stored probes.
    #[serde(default)]
    pub searches: Vec<crate::campaign::resolve::Search>,
}

impl CampaignMeta {
    /// The description of a resolved campaign.
    pub fn from_campaign(c: &Campaign) -> Self {
        let mut workloads: Vec<String> = Vec::new();
        for w in c.workloads.iter().chain(c.searches.iter().map(|s| &s.base)) {
            if !workloads.contains(&w.workload) {
                workloads.push(w.workload.clone());
            }
        }
        Self {
            schema_version: CAMPAIGN_SCHEMA_VERSION,
            name: c.name.clone(),
            description: c.description.clone(),
            baseline: c.run.baseline.clone(),
            servers: c.servers.iter().map(|s| s.id.clone()).collect(),
            workloads,
            searches: c.searches.clone(),
        }
    }

    /// Write it into a results directory.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let p = dir.join(CAMPAIGN_FILE);
        let mut bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        crate::util::fsx::write_atomic(&p, &bytes)?;
        Ok(p)
    }
}

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
}

/// Read a campaign's results directory (the one holding `cells/`).
pub fn load(dir: &Path) -> anyhow::Result<ResultSet> {
    if !dir.join("cells").is_dir() {
        anyhow::bail!(
            "{} has no cells/ folder: pass a campaign's results directory, such as results/quickstart",
            dir.display()
        );
    }
    let meta = match std::fs::read(dir.join(CAMPAIGN_FILE)) {
        Ok(b) => Some(
            serde_json::from_slice(&b)
                .with_context(|| format!("reading {}", dir.join(CAMPAIGN_FILE).display()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).context(format!("reading {}", dir.join(CAMPAIGN_FILE).display())),
    };
    let (cells, bad) = Store::new(dir).load_all();
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

/// At the end of `run`: write `campaign.json` and, unless `[run] report =
/// false`, every report file into the results directory; returns the HTML
/// page's path when written.
pub fn write_for_campaign(c: &Campaign) -> anyhow::Result<Option<PathBuf>> {
    if !c.results_dir.join("cells").is_dir() {
        return Ok(None);
    }
    CampaignMeta::from_campaign(c).write(&c.results_dir)?;
    if !c.run.report {
        return Ok(None);
    }
    let set = load(&c.results_dir)?;
    let r = build(&set, &ReportOptions::default());
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
