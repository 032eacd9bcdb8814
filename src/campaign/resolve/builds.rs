//! `[[build]]` entries: builds of the engine compared side by side in one
//! campaign. Each server config runs once per build it names; the build's
//! executable and environment replace the engine's for that server, and are
//! part of its cells' identities (its name is not: renaming a build keeps
//! its cells, as renaming a server does).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::super::{CampaignError, RawCampaign, Source};
use super::{check_path_id, expand_env, resolve_script};

/// One build of the engine as the campaign declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Build {
    /// Its name, as servers and matrices refer to it (`{build}`).
    pub name: String,
    /// Program and leading arguments (empty: `[engine] executable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executable: Vec<String>,
    /// Environment of its servers, over `[engine] env` (already in each
    /// server's `env`; kept here for the version command).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// How to ask it for its version, when not the engine's usual command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_command: Option<Vec<String>>,
    /// The version it should report, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The build a server runs, as it enters the server's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerBuild {
    /// The build's name (left out of identities).
    pub name: String,
    /// Its executable (empty: the engine's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executable: Vec<String>,
    /// Its declared version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl Build {
    /// What a server of this build carries of it.
    pub fn for_server(&self) -> ServerBuild {
        ServerBuild {
            name: self.name.clone(),
            executable: self.executable.clone(),
            version: self.version.clone(),
        }
    }
}

/// Every `[[build]]`, checked: names safe as path parts and unique, paths
/// and `${VAR}` references resolved as `[engine]`'s are.
pub(super) fn resolve_builds(
    raw: &RawCampaign,
    src: &Source,
    base: &Path,
) -> Result<Vec<Build>, CampaignError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for b in &raw.builds {
        let name = b.name.get_ref().trim().to_string();
        if let Err(rule) = check_path_id(&name) {
            return Err(src.error(&b.name, format!("build name `{name}` {rule}")));
        }
        if !seen.insert(name.clone()) {
            return Err(src.error(
                &b.name,
                format!("build `{name}` is declared twice; build names must be unique"),
            ));
        }
        let argv = |v: &Spanned<Vec<String>>| -> Result<Vec<String>, CampaignError> {
            if v.get_ref().is_empty() {
                return Err(src.error(v, "an empty command; leave the key out for the default"));
            }
            v.get_ref()
                .iter()
                .map(|a| expand_env(src, v.span().start, a).map(|a| resolve_script(base, a)))
                .collect()
        };
        out.push(Build {
            name,
            executable: b
                .executable
                .as_ref()
                .map(argv)
                .transpose()?
                .unwrap_or_default(),
            env: b
                .env
                .iter()
                .map(|(k, v)| Ok((k.clone(), expand_env(src, v.span().start, v.get_ref())?)))
                .collect::<Result<_, CampaignError>>()?,
            version_command: b.version_command.as_ref().map(argv).transpose()?,
            version: b.version.clone(),
        });
    }
    Ok(out)
}

/// The index in `raw.builds` of the build `name` names, or an error at it
/// listing the builds there are.
pub(super) fn find(
    raw: &RawCampaign,
    src: &Source,
    name: &Spanned<String>,
) -> Result<usize, CampaignError> {
    raw.builds
        .iter()
        .position(|b| b.name.get_ref().trim() == name.get_ref())
        .ok_or_else(|| {
            let names: Vec<String> = raw
                .builds
                .iter()
                .map(|b| format!("`{}`", b.name.get_ref()))
                .collect();
            let known = if names.is_empty() {
                "the campaign declares no [[build]]".to_string()
            } else {
                format!("declared: {}", names.join(", "))
            };
            src.error(name, format!("unknown build `{}`; {known}", name.get_ref()))
        })
}
