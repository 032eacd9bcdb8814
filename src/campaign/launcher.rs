//! `[launcher]`: where and how servers are started — on this machine
//! (`local`), on a host reached over SSH (`ssh`), as transient systemd units
//! (`systemd`), or as one Slurm job per server config (`slurm`).
//!
//! The table is flat as written (every key optional, unknown keys rejected by
//! serde with file:line:col); resolving checks that each key belongs to the
//! chosen kind and points at the first one that does not. The launcher never
//! changes the numbers a cell measures, so it is not part of a cell's identity.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{CampaignError, Source};
use crate::util::units::parse_duration;

/// Which launcher starts the servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LauncherKind {
    /// A child process on this machine.
    #[default]
    Local,
    /// A process on a remote host, started through the system `ssh` client.
    Ssh,
    /// A transient systemd unit (here or on `ssh_host`).
    Systemd,
    /// One Slurm job per server config.
    Slurm,
}

impl LauncherKind {
    /// The name used in campaign files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Ssh => "ssh",
            Self::Systemd => "systemd",
            Self::Slurm => "slurm",
        }
    }
}

/// How Slurm is asked for GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpusFlag {
    /// `--gpus=N`.
    #[default]
    Gpus,
    /// `--gres=gpu:N`.
    Gres,
}

/// `[launcher]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLauncher {
    /// local, ssh, systemd or slurm (default local).
    #[serde(default)]
    pub kind: Option<LauncherKind>,
    /// ssh: host name or address (an alias from ~/.ssh/config works).
    #[serde(default)]
    pub host: Option<Spanned<String>>,
    /// ssh: remote user.
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    /// ssh: SSH port.
    #[serde(default)]
    pub port: Option<Spanned<u16>>,
    /// ssh, systemd over ssh: extra `ssh` arguments (`-i KEY`, `-o Opt=value`).
    #[serde(default)]
    pub options: Option<Spanned<Vec<String>>>,
    /// ssh: reach the server through `ssh -L` instead of the host's address.
    #[serde(default)]
    pub forward_port: Option<Spanned<bool>>,
    /// systemd: run `systemd-run` on this host over SSH (default: here).
    #[serde(default)]
    pub ssh_host: Option<Spanned<String>>,
    /// systemd: extra `--property=` values for each unit.
    #[serde(default)]
    pub properties: Option<Spanned<Vec<String>>>,
    /// slurm: partition.
    #[serde(default)]
    pub partition: Option<Spanned<String>>,
    /// slurm: account.
    #[serde(default)]
    pub account: Option<Spanned<String>>,
    /// slurm: `gpus` (`--gpus=N`) or `gres` (`--gres=gpu:N`).
    #[serde(default)]
    pub gpus_flag: Option<Spanned<GpusFlag>>,
    /// slurm: nodes per job (`--nodes`).
    #[serde(default)]
    pub nodes: Option<Spanned<u32>>,
    /// slurm: extra `sbatch` arguments.
    #[serde(default)]
    pub extra_sbatch: Option<Spanned<Vec<String>>>,
    /// slurm: time added to each job's estimated duration for `--time` (default 15m).
    #[serde(default)]
    pub time_margin: Option<Spanned<String>>,
}

/// Options of the `ssh` launcher (also used by `systemd` over SSH).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SshTarget {
    /// Host name, address or ~/.ssh/config alias.
    pub host: String,
    /// Remote user (default: ssh's own choice).
    pub user: Option<String>,
    /// SSH port (default: ssh's own choice).
    pub port: Option<u16>,
    /// Extra ssh arguments.
    pub options: Vec<String>,
}

impl SshTarget {
    /// The `ssh` argv up to (and including) the destination, with the
    /// options that keep it non-interactive and make a dead peer noticed.
    pub fn argv(&self) -> Vec<String> {
        let mut v = vec![
            "ssh".to_string(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "ServerAliveInterval=5".into(),
            "-o".into(),
            "ServerAliveCountMax=3".into(),
        ];
        if let Some(p) = self.port {
            v.push("-p".into());
            v.push(p.to_string());
        }
        v.extend(self.options.iter().cloned());
        v.push(self.destination());
        v
    }

    /// `user@host` or `host`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// The resolved launcher.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Launcher {
    /// A child process here.
    #[default]
    Local,
    /// A process on a remote host.
    Ssh {
        /// Where.
        target: SshTarget,
        /// Health checks and load go through `ssh -L`.
        forward_port: bool,
    },
    /// A transient systemd unit.
    Systemd {
        /// Run systemd-run there instead of here.
        ssh: Option<SshTarget>,
        /// Extra unit properties.
        properties: Vec<String>,
    },
    /// One Slurm job per server config.
    Slurm(SlurmOptions),
}

/// Options of the `slurm` launcher.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// How GPUs are requested.
    pub gpus_flag: GpusFlag,
    /// `--nodes`.
    pub nodes: Option<u32>,
    /// Extra sbatch arguments.
    pub extra_sbatch: Vec<String>,
    /// Added to the estimated duration for `--time`.
    pub time_margin: Duration,
}

impl Launcher {
    /// Which kind this is.
    pub fn kind(&self) -> LauncherKind {
        match self {
            Launcher::Local => LauncherKind::Local,
            Launcher::Ssh { .. } => LauncherKind::Ssh,
            Launcher::Systemd { .. } => LauncherKind::Systemd,
            Launcher::Slurm(_) => LauncherKind::Slurm,
        }
    }
}

fn span_of<T>(v: &Option<Spanned<T>>) -> Option<usize> {
    v.as_ref().map(|s| s.span().start)
}

/// Resolve `[launcher]`; `at` is the table's offset for errors about missing keys.
pub fn resolve(raw: &RawLauncher, src: &Source, at: usize) -> Result<Launcher, CampaignError> {
    let kind = raw.kind.unwrap_or_default();
    let keys: [(&str, Option<usize>, &[LauncherKind]); 13] = [
        ("host", span_of(&raw.host), &[LauncherKind::Ssh]),
        ("user", span_of(&raw.user), &[LauncherKind::Ssh]),
        ("port", span_of(&raw.port), &[LauncherKind::Ssh]),
        (
            "options",
            span_of(&raw.options),
            &[LauncherKind::Ssh, LauncherKind::Systemd],
        ),
        (
            "forward_port",
            span_of(&raw.forward_port),
            &[LauncherKind::Ssh],
        ),
        ("ssh_host", span_of(&raw.ssh_host), &[LauncherKind::Systemd]),
        (
            "properties",
            span_of(&raw.properties),
            &[LauncherKind::Systemd],
        ),
        ("partition", span_of(&raw.partition), &[LauncherKind::Slurm]),
        ("account", span_of(&raw.account), &[LauncherKind::Slurm]),
        ("gpus_flag", span_of(&raw.gpus_flag), &[LauncherKind::Slurm]),
        ("nodes", span_of(&raw.nodes), &[LauncherKind::Slurm]),
        (
            "extra_sbatch",
            span_of(&raw.extra_sbatch),
            &[LauncherKind::Slurm],
        ),
        (
            "time_margin",
            span_of(&raw.time_margin),
            &[LauncherKind::Slurm],
        ),
    ];
    for (key, span, kinds) in keys {
        if let Some(offset) = span {
            if !kinds.contains(&kind) {
                let owners: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
                return Err(src.error_at(
                    offset,
                    format!(
                        "`{key}` is a key of the {} launcher, not of kind = \"{}\"",
                        owners.join(" and "),
                        kind.as_str()
                    ),
                ));
            }
        }
    }
    let text = |v: &Option<Spanned<String>>| v.as_ref().map(|s| s.get_ref().trim().to_string());
    let list = |v: &Option<Spanned<Vec<String>>>| {
        v.as_ref().map(|s| s.get_ref().clone()).unwrap_or_default()
    };
    Ok(match kind {
        LauncherKind::Local => Launcher::Local,
        LauncherKind::Ssh => {
            let host = text(&raw.host).filter(|h| !h.is_empty()).ok_or_else(|| {
                src.error_at(at, "[launcher] kind = \"ssh\" needs `host` (a name, address or ~/.ssh/config alias)")
            })?;
            Launcher::Ssh {
                target: SshTarget {
                    host,
                    user: text(&raw.user),
                    port: raw.port.as_ref().map(|p| *p.get_ref()),
                    options: list(&raw.options),
                },
                forward_port: raw
                    .forward_port
                    .as_ref()
                    .map(|f| *f.get_ref())
                    .unwrap_or(false),
            }
        }
        LauncherKind::Systemd => Launcher::Systemd {
            ssh: text(&raw.ssh_host).map(|host| SshTarget {
                host,
                user: None,
                port: None,
                options: list(&raw.options),
            }),
            properties: list(&raw.properties),
        },
        LauncherKind::Slurm => {
            if let Some(n) = &raw.nodes {
                if *n.get_ref() == 0 {
                    return Err(src.error(n, "nodes must be at least 1"));
                }
            }
            Launcher::Slurm(SlurmOptions {
                partition: text(&raw.partition),
                account: text(&raw.account),
                gpus_flag: raw
                    .gpus_flag
                    .as_ref()
                    .map(|g| *g.get_ref())
                    .unwrap_or_default(),
                nodes: raw.nodes.as_ref().map(|n| *n.get_ref()),
                extra_sbatch: list(&raw.extra_sbatch),
                time_margin: match &raw.time_margin {
                    None => Duration::from_secs(15 * 60),
                    Some(s) => parse_duration(s.get_ref()).map_err(|e| src.error(s, e))?,
                },
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::campaign::tests::MINIMAL;
    use crate::campaign::{parse, resolve as resolve_campaign, CampaignError};

    fn load(launcher: &str) -> Result<crate::campaign::Campaign, CampaignError> {
        let text = format!("{MINIMAL}[launcher]\n{launcher}");
        let (raw, src) = parse(Path::new("c.toml"), &text)?;
        resolve_campaign(raw, &src)
    }

    #[test]
    fn default_is_local_and_each_kind_resolves() {
        let (raw, src) = parse(Path::new("c.toml"), MINIMAL).unwrap();
        assert_eq!(
            resolve_campaign(raw, &src).unwrap().launcher,
            Launcher::Local
        );
        let c = load("kind = \"ssh\"\nhost = \"gpu1\"\nuser = \"bench\"\nport = 2222\noptions = [\"-i\", \"k\"]\nforward_port = true\n").unwrap();
        let Launcher::Ssh {
            target,
            forward_port,
        } = &c.launcher
        else {
            panic!("{:?}", c.launcher)
        };
        assert!(forward_port);
        assert_eq!(
            target.argv()[7..],
            ["-p", "2222", "-i", "k", "bench@gpu1"].map(String::from)
        );
        let c = load(
            "kind = \"slurm\"\npartition = \"gpu\"\ngpus_flag = \"gres\"\ntime_margin = \"30m\"\n",
        )
        .unwrap();
        let Launcher::Slurm(s) = &c.launcher else {
            panic!()
        };
        assert_eq!(s.gpus_flag, GpusFlag::Gres);
        assert_eq!(s.time_margin, Duration::from_secs(1800));
        let c = load("kind = \"systemd\"\nproperties = [\"MemoryMax=10G\"]\n").unwrap();
        assert!(matches!(c.launcher, Launcher::Systemd { ssh: None, .. }));
    }

    #[test]
    fn wrong_keys_point_at_file_line_column() {
        // `[launcher]` follows the base campaign: `kind` is on the next line,
        // the offending key on the one after.
        let kind_line = MINIMAL.lines().count() + 2;
        let key_line = kind_line + 1;
        let e = load("kind = \"slurm\"\nhost = \"x\"\n").unwrap_err();
        assert_eq!((e.line, e.col), (key_line, 8), "{e}");
        assert!(
            e.message.contains("`host` is a key of the ssh launcher"),
            "{e}"
        );
        let e = load("kind = \"ssh\"\nhots = \"x\"\n").unwrap_err();
        assert_eq!(e.line, key_line, "{e}");
        assert!(
            e.message
                .contains("unknown key `hots`: did you mean `host`?"),
            "{e}"
        );
        let e = load("kind = \"k8s\"\n").unwrap_err();
        assert_eq!(e.line, kind_line, "{e}");
        assert!(e.message.contains("slurm"), "{e}");
        let e = load("kind = \"ssh\"\n").unwrap_err();
        assert!(e.message.contains("needs `host`"), "{e}");
        let e = load("kind = \"slurm\"\ntime_margin = \"soon\"\n").unwrap_err();
        assert_eq!(e.line, key_line, "{e}");
    }
}
