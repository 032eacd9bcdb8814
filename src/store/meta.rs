//! `campaign.json`: what a results directory says about its campaign beyond
//! the cells (name, description, baseline, declaration order, searches),
//! written by `run` and read by `report`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::campaign::Campaign;

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
    /// `[[build]]` names in declaration order, the order builds are compared in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<String>,
    /// Dollars one GPU costs an hour (`[hardware] gpu_hour_cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_cost: Option<f64>,
    /// Server ids the campaign's cells are stored under that are no longer
    /// servers, each with the id its server has now (a renamed server's
    /// cells are reused, where they were stored): reports show the new one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub renamed: BTreeMap<String, String>,
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
            builds: c.builds.iter().map(|b| b.name.clone()).collect(),
            gpu_hour_cost: c.hardware.gpu_hour_cost,
            renamed: renamed_servers(c, &super::Store::new(&c.results_dir)),
        }
    }

    /// Give every cell stored under a renamed server's old id the id its
    /// server has now.
    pub fn relabel(&self, cells: &mut [super::CellResult]) {
        for c in cells {
            if let Some(now) = self.renamed.get(&c.server_id) {
                c.server_id = now.clone();
            }
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

/// Old id → current id of each server whose cells `store` holds under an
/// id the campaign no longer has: found by the identity of its current
/// cells, which leaves the id out.
fn renamed_servers(c: &Campaign, store: &super::Store) -> BTreeMap<String, String> {
    let current: std::collections::HashSet<&str> =
        c.servers.iter().map(|s| s.id.as_str()).collect();
    let index = store.index();
    let mut out = BTreeMap::new();
    for s in &c.servers {
        for w in &c.workloads {
            let id = super::identity::cell_identity(c, s, w);
            if let Some(stored) = index.by_identity.get(&id) {
                if stored.server_id != s.id && !current.contains(stored.server_id.as_str()) {
                    out.insert(stored.server_id.clone(), s.id.clone());
                }
            }
        }
    }
    out
}

/// Read `campaign.json` from a results directory; `None` when it has none.
pub fn read(dir: &Path) -> anyhow::Result<Option<CampaignMeta>> {
    let p = dir.join(CAMPAIGN_FILE);
    match std::fs::read(&p) {
        Ok(b) => Ok(Some(
            serde_json::from_slice(&b).with_context(|| format!("reading {}", p.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).context(format!("reading {}", p.display())),
    }
}
