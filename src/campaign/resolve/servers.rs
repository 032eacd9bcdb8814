//! Server configurations: `[[server]]` tables and `[[matrix]]` products
//! merged with the engine-wide and default settings, their environment
//! references expanded, ids rendered from templates and checked.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::super::{
    CampaignError, OneOrMany, RawCampaign, RawMatrix, RawServer, Source, SpecEntry,
};
use super::builds::{self, Build, ServerBuild};
use super::{check_path_id, expand_env};
use crate::engine::layout::{self, Layout};
use crate::engine::{placeholders, EngineKind, ServerSpec, Speculative};

/// One server configuration: everything that needs its own server process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Id naming its results folder and log.
    pub id: String,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Data-parallel replicas (a size of 1 is not written, so configs
    /// without layouts keep their identities).
    #[serde(default = "layout::one", skip_serializing_if = "layout::is_one")]
    pub dp: u32,
    /// Attention data-parallel groups inside the TP group.
    #[serde(default = "layout::one", skip_serializing_if = "layout::is_one")]
    pub dp_attention: u32,
    /// Expert-parallel size.
    #[serde(default = "layout::one", skip_serializing_if = "layout::is_one")]
    pub ep: u32,
    /// Pipeline stages.
    #[serde(default = "layout::one", skip_serializing_if = "layout::is_one")]
    pub pp: u32,
    /// Memory fraction.
    pub mem_fraction: Option<f64>,
    /// Max running requests.
    pub max_running_requests: Option<u32>,
    /// Context length.
    pub context_length: Option<u64>,
    /// Speculative decoding.
    pub speculative: Option<Speculative>,
    /// The engine's tool-call parser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_parser: Option<String>,
    /// The engine's grammar backend for structured outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar_backend: Option<String>,
    /// Flags after the generated ones (engine-wide, defaults, then server's own).
    pub args: Vec<String>,
    /// Environment (engine-wide, defaults, then server's own).
    pub env: BTreeMap<String, String>,
    /// Failures of this config are expected and do not fail the run's exit code.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expected_failure: bool,
    /// Environment variables declared secret (`[engine] secret_env`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
    /// The `[[build]]` it runs, when the campaign declares builds (its
    /// executable and declared version enter the identity, its name not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<ServerBuild>,
}

impl ServerConfig {
    /// Its settings as they enter its cells' identities: everything but its
    /// name, its expectation and which variables are secret (a secret's
    /// value changes no number; rotating a key keeps every cell).
    pub fn settings(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self.redacted()).expect("server config serializes");
        if let Some(obj) = value.as_object_mut() {
            obj.remove("id");
            obj.remove("expected_failure");
            obj.remove("secret_env");
            if let Some(b) = obj.get_mut("build").and_then(|b| b.as_object_mut()) {
                b.remove("name");
            }
        }
        value
    }

    /// Its parallel layout.
    pub fn layout(&self) -> Layout {
        Layout {
            tp: self.tp,
            dp: self.dp,
            dp_attention: self.dp_attention,
            ep: self.ep,
            pp: self.pp,
        }
    }

    /// GPUs the server occupies, as its engine counts them: TP × DP × PP
    /// (see [`Layout::gpus`]).
    pub fn gpus(&self) -> u32 {
        self.layout().gpus()
    }

    /// A parameter's value as text for `--only key=value` filters and id templates.
    pub fn param(&self, key: &str) -> Option<String> {
        Some(match key {
            "server" | "id" => self.id.clone(),
            "tp" => self.tp.to_string(),
            "dp" => self.dp.to_string(),
            "dp_attention" => self.dp_attention.to_string(),
            "ep" => self.ep.to_string(),
            "pp" => self.pp.to_string(),
            "layout" => self.layout().label(),
            "mem_fraction" => self.mem_fraction?.to_string(),
            "max_running_requests" => self.max_running_requests?.to_string(),
            "context_length" => self.context_length?.to_string(),
            "method" => self.method_name(),
            "budget" => self.speculative.as_ref()?.num_draft_tokens?.to_string(),
            "tool_call_parser" => self.tool_call_parser.clone()?,
            "grammar_backend" => self.grammar_backend.clone()?,
            "build" => self.build.as_ref()?.name.clone(),
            _ => return None,
        })
    }

    /// This config with every secret (credential-like environment values,
    /// values of flags such as `--api-key`) replaced by a placeholder: the
    /// form that is hashed into identities and stored.
    pub fn redacted(&self) -> ServerConfig {
        use crate::util::secret;
        ServerConfig {
            args: secret::redact_argv(&self.args),
            env: secret::redact_env(&self.env, &self.secret_env),
            ..self.clone()
        }
    }

    /// The secret values this config carries (see [`ServerConfig::redacted`]).
    pub fn secret_values(&self) -> Vec<String> {
        use crate::util::secret;
        let mut out = secret::env_secrets(&self.env, &self.secret_env);
        out.extend(secret::argv_secrets(&self.args));
        out
    }

    /// The program and leading arguments that start this server: its
    /// build's, else the engine's `executable` (empty: the engine default).
    pub fn executable(&self, engine_executable: &[String]) -> Vec<String> {
        match &self.build {
            Some(b) if !b.executable.is_empty() => b.executable.clone(),
            _ => engine_executable.to_vec(),
        }
    }

    /// The build's name, or `None` when the campaign declares no builds.
    pub fn build_name(&self) -> Option<&str> {
        self.build.as_ref().map(|b| b.name.as_str())
    }

    /// The engine-level spec of this config for `engine`, listening on
    /// 127.0.0.1 with the port chosen at launch (0 until then).
    pub fn spec(
        &self,
        engine: EngineKind,
        executable: Vec<String>,
        model_path: String,
        served_model_name: String,
    ) -> ServerSpec {
        ServerSpec {
            engine,
            executable,
            model_path,
            served_model_name: Some(served_model_name),
            host: "127.0.0.1".into(),
            port: 0,
            tp: self.tp,
            dp: self.dp,
            dp_attention: self.dp_attention,
            ep: self.ep,
            pp: self.pp,
            mem_fraction: self.mem_fraction,
            max_running_requests: self.max_running_requests,
            context_length: self.context_length,
            speculative: self.speculative.clone(),
            tool_call_parser: self.tool_call_parser.clone(),
            grammar_backend: self.grammar_backend.clone(),
            extra_args: self.args.clone(),
            env: self.env.clone(),
        }
    }

    /// The speculative method's name, or `ar` for autoregressive decoding.
    pub fn method_name(&self) -> String {
        self.speculative
            .as_ref()
            .and_then(Speculative::name)
            .unwrap_or_else(|| "ar".into())
    }
}

/// Flags and environment of one server as written, engine-wide first, each
/// value with its place in the file so a placeholder error can point at it.
struct WrittenText<'a> {
    args: Vec<&'a Spanned<String>>,
    env: BTreeMap<&'a str, &'a Spanned<String>>,
}

/// The settings a server takes from outside its own table: its matrix's
/// flags and environment, and its build.
struct Context<'a> {
    matrix_args: &'a [Spanned<String>],
    matrix_env: &'a BTreeMap<String, Spanned<String>>,
    builds: &'a [Build],
}

/// A server's build and that build's environment as written.
type BuildAndEnv<'a> = (ServerBuild, &'a BTreeMap<String, Spanned<String>>);

/// The build `s` names (or `[defaults]` does), with its environment as written.
fn server_build<'a>(
    raw: &'a RawCampaign,
    src: &Source,
    s: &RawServer,
    builds: &[Build],
) -> Result<Option<BuildAndEnv<'a>>, CampaignError> {
    let Some(name) = s.build.as_ref().or(raw.defaults.build.as_ref()) else {
        return Ok(None);
    };
    let i = builds::find(raw, src, name)?;
    Ok(Some((builds[i].for_server(), &raw.builds[i].env)))
}

/// One server's settings over the matrix's, the defaults', the build's and
/// the engine's; its flags and environment are filled in by [`check_server`].
fn merge_server<'a>(
    raw: &'a RawCampaign,
    src: &Source,
    s: &'a RawServer,
    ctx: &Context<'a>,
) -> Result<(ServerConfig, WrittenText<'a>), CampaignError> {
    let d = &raw.defaults;
    let (build, build_env) = match server_build(raw, src, s, ctx.builds)? {
        Some((b, env)) => (Some(b), env),
        None => (None, &NO_ENV),
    };
    let args = [&raw.engine.args, &d.args, ctx.matrix_args, &s.args]
        .into_iter()
        .flatten()
        .collect();
    let env = [&raw.engine.env, build_env, &d.env, ctx.matrix_env, &s.env]
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let cfg = ServerConfig {
        id: s
            .id
            .as_ref()
            .map(|i| i.get_ref().clone())
            .unwrap_or_else(|| "default".into()),
        tp: s.tp.or(d.tp).unwrap_or(1),
        dp: s.dp.or(d.dp).unwrap_or(1),
        dp_attention: s.dp_attention.or(d.dp_attention).unwrap_or(1),
        ep: s.ep.or(d.ep).unwrap_or(1),
        pp: s.pp.or(d.pp).unwrap_or(1),
        mem_fraction: s.mem_fraction.or(d.mem_fraction),
        max_running_requests: s.max_running_requests.or(d.max_running_requests),
        context_length: s.context_length.or(d.context_length),
        speculative: s.speculative.clone().or_else(|| d.speculative.clone()),
        tool_call_parser: s
            .tool_call_parser
            .clone()
            .or_else(|| d.tool_call_parser.clone()),
        grammar_backend: s
            .grammar_backend
            .clone()
            .or_else(|| d.grammar_backend.clone()),
        args: Vec::new(),
        env: BTreeMap::new(),
        expected_failure: s.expected_failure.or(d.expected_failure).unwrap_or(false),
        secret_env: raw.engine.secret_env.clone(),
        build,
    };
    Ok((cfg, WrittenText { args, env }))
}

/// Refuse placeholders servebench does not know, at the value that holds
/// them, before any server is expanded.
fn check_placeholder_names(raw: &RawCampaign, src: &Source) -> Result<(), CampaignError> {
    let servers = raw.servers.iter().chain(std::iter::once(&raw.defaults));
    let args = raw
        .engine
        .args
        .iter()
        .chain(servers.clone().flat_map(|s| &s.args))
        .chain(raw.matrix.iter().flat_map(|m| &m.args));
    let env = raw
        .engine
        .env
        .values()
        .chain(raw.builds.iter().flat_map(|b| b.env.values()))
        .chain(servers.flat_map(|s| s.env.values()))
        .chain(raw.matrix.iter().flat_map(|m| m.env.values()));
    for text in args.chain(env) {
        if let Some(f) = placeholders::find(text.get_ref())
            .into_iter()
            .find(|f| !placeholders::is_known(f.name))
        {
            return Err(src.error_at(
                text.span().start,
                format!(
                    "unknown placeholder `{{{}}}` in `{}`; known: {}",
                    f.name,
                    text.get_ref(),
                    placeholders::known_list()
                ),
            ));
        }
    }
    Ok(())
}

/// Fill a server's own placeholders into one written value; a placeholder
/// the server has no value for is an error at that value.
fn fill_server(
    src: &Source,
    cfg: &ServerConfig,
    text: &Spanned<String>,
) -> Result<String, CampaignError> {
    for f in placeholders::find(text.get_ref()) {
        if placeholders::SERVER.contains(&f.name) && cfg.param(f.name).is_none() {
            return Err(src.error_at(
                text.span().start,
                format!(
                    "server `{}` has no `{}` for the placeholder `{{{}}}` in `{}`{}",
                    cfg.id,
                    f.name,
                    f.name,
                    text.get_ref(),
                    if f.name == "budget" {
                        " (an autoregressive server has no budget: put the flag in the speculative matrix's args)"
                    } else {
                        " (set it in [defaults], the matrix or the server)"
                    }
                ),
            ));
        }
    }
    expand_env(
        src,
        text.span().start,
        &placeholders::fill(text.get_ref(), |n| {
            placeholders::SERVER
                .contains(&n)
                .then(|| cfg.param(n))
                .flatten()
        }),
    )
}

/// Fills in and validates a merged server; `at` is where errors without a
/// value of their own point.
fn check_server(
    src: &Source,
    engine: EngineKind,
    at: usize,
    s: &mut ServerConfig,
    written: &WrittenText,
) -> Result<(), CampaignError> {
    s.args = written
        .args
        .iter()
        .map(|a| fill_server(src, s, a))
        .collect::<Result<_, _>>()?;
    s.env = written
        .env
        .iter()
        .map(|(k, v)| Ok((k.to_string(), fill_server(src, s, v)?)))
        .collect::<Result<_, CampaignError>>()?;
    expand_draft_model_env(src, at, s)?;
    if let Some(r) = crate::engine::repeated_flags(&flag_check_spec(engine, s)).first() {
        return Err(src.error_at(
            written.args[r.index].span().start,
            format!("server `{}`: {r}", s.id),
        ));
    }
    if let Err(rule) = check_path_id(&s.id) {
        return Err(src.error_at(at, format!("server id `{}` {rule}", s.id)));
    }
    if let Err(e) = s.layout().check(engine) {
        return Err(src.error_at(at, format!("server `{}`: {e}", s.id)));
    }
    if let Some(f) = s.mem_fraction {
        if !(f > 0.0 && f <= 1.0) {
            return Err(src.error_at(
                at,
                format!("server `{}`: mem_fraction must be in (0, 1], got {f}", s.id),
            ));
        }
    }
    if let Some(sp) = &s.speculative {
        if sp.method.is_none() && sp.algorithm.is_none() {
            return Err(src.error_at(at, format!(
                "server `{}`: speculative needs `method` (eagle, eagle3, mtp, dflash, ddtree, draft-model, ngram) or `algorithm` (a name the engine knows, passed as written)",
                s.id
            )));
        }
        if let Some(p) = sp.acceptance {
            if !(0.0..=1.0).contains(&p) {
                return Err(src.error_at(
                    at,
                    format!("server `{}`: acceptance must be within [0, 1]", s.id),
                ));
            }
        }
    }
    Ok(())
}

/// What the adapter needs to say which flags it generates for `s`; the
/// model and address do not change which flags those are.
fn flag_check_spec(engine: EngineKind, s: &ServerConfig) -> ServerSpec {
    s.spec(engine, Vec::new(), "model".into(), "model".into())
}

/// Expand environment references in a server's draft model path.
fn expand_draft_model_env(
    src: &Source,
    at: usize,
    s: &mut ServerConfig,
) -> Result<(), CampaignError> {
    let Some(sp) = s.speculative.as_mut() else {
        return Ok(());
    };
    if let Some(d) = sp.draft_model.as_mut() {
        *d = expand_env(src, at, d)?;
    }
    if let Some(d) = sp.draft_config.as_mut() {
        *d = super::relative(&super::base_dir(src), &expand_env(src, at, d)?)
            .display()
            .to_string();
    }
    if let Some(size) = &sp.draft_size {
        crate::memory::parse_bytes(size)
            .map_err(|e| src.error_at(at, format!("speculative draft_size: {e}")))?;
    }
    Ok(())
}

/// No environment of a matrix, for servers outside one.
static NO_ENV: BTreeMap<String, Spanned<String>> = BTreeMap::new();

/// Every server config of the campaign, in declaration order, ids unique.
pub(super) fn expand_servers(
    raw: &RawCampaign,
    src: &Source,
    builds: &[Build],
) -> Result<Vec<ServerConfig>, CampaignError> {
    check_placeholder_names(raw, src)?;
    let plain = Context {
        matrix_args: &[],
        matrix_env: &NO_ENV,
        builds,
    };
    let mut out: Vec<(ServerConfig, usize)> = Vec::new();
    for s in &raw.servers {
        let at = s.id.as_ref().map(|i| i.span().start).unwrap_or(0);
        if s.id.is_none() {
            return Err(src.error_at(0, "every [[server]] needs an `id`"));
        }
        let (mut cfg, written) = merge_server(raw, src, s, &plain)?;
        check_server(src, raw.engine.kind, at, &mut cfg, &written)?;
        out.push((cfg, at));
    }
    for m in &raw.matrix {
        expand_matrix(raw, src, m, builds, &mut out)?;
    }
    if out.is_empty() {
        let only = RawServer {
            id: Some(Spanned::new(0..0, "default".into())),
            ..raw.defaults.clone()
        };
        let (mut cfg, written) = merge_server(raw, src, &only, &plain)?;
        check_server(src, raw.engine.kind, 0, &mut cfg, &written)?;
        out.push((cfg, 0));
    }
    let mut seen = BTreeSet::new();
    for (cfg, at) in &out {
        if !seen.insert(cfg.id.clone()) {
            return Err(src.error_at(*at, format!("server id `{}` is used twice; ids name result folders and must be unique (add a placeholder such as {{tp}}, {{budget}} or {{build}} to the matrix id)", cfg.id)));
        }
    }
    Ok(out.into_iter().map(|(c, _)| c).collect())
}

/// The servers of one `[[matrix]]`: the product of its axes, earlier axes
/// outermost, each speculative variant once per budget.
fn expand_matrix(
    raw: &RawCampaign,
    src: &Source,
    m: &RawMatrix,
    builds: &[Build],
    out: &mut Vec<(ServerConfig, usize)>,
) -> Result<(), CampaignError> {
    let at = m.id.span().start;
    let len = |v: &Option<OneOrMany<u32>>| v.as_ref().map(|v| v.to_vec().len());
    let axes = [
        ("tp", len(&m.tp)),
        ("dp", len(&m.dp)),
        ("dp_attention", len(&m.dp_attention)),
        ("ep", len(&m.ep)),
        ("pp", len(&m.pp)),
        (
            "mem_fraction",
            m.mem_fraction.as_ref().map(|v| v.to_vec().len()),
        ),
        ("max_running_requests", len(&m.max_running_requests)),
        (
            "context_length",
            m.context_length.as_ref().map(|v| v.to_vec().len()),
        ),
        ("budget", len(&m.budget)),
        (
            "grammar_backend",
            m.grammar_backend.as_ref().map(|v| v.to_vec().len()),
        ),
        (
            "speculative",
            m.speculative.as_ref().map(|v| v.get_ref().len()),
        ),
        (
            "build",
            m.build.as_ref().map(|v| v.get_ref().to_vec().len()),
        ),
    ];
    if let Some((axis, _)) = axes.iter().find(|(_, n)| *n == Some(0)) {
        return Err(src.error_at(
            at,
            format!(
                "`{axis} = []` in matrix `{}` leaves no server to run: give at least one value, or drop the key for the default",
                m.id.get_ref()
            ),
        ));
    }
    let mut servers = vec![RawServer::default()];
    multiply(&mut servers, &m.tp, |s, v| s.tp = Some(v));
    multiply(&mut servers, &m.dp, |s, v| s.dp = Some(v));
    multiply(&mut servers, &m.dp_attention, |s, v| {
        s.dp_attention = Some(v)
    });
    multiply(&mut servers, &m.ep, |s, v| s.ep = Some(v));
    multiply(&mut servers, &m.pp, |s, v| s.pp = Some(v));
    multiply(&mut servers, &m.mem_fraction, |s, v| {
        s.mem_fraction = Some(v)
    });
    multiply(&mut servers, &m.max_running_requests, |s, v| {
        s.max_running_requests = Some(v)
    });
    multiply(&mut servers, &m.context_length, |s, v| {
        s.context_length = Some(v)
    });
    multiply(&mut servers, &m.grammar_backend, |s, v| {
        s.grammar_backend = Some(v)
    });
    let variants = OneOrMany::Many(speculative_variants(src, m)?);
    multiply(&mut servers, &Some(variants), |s, v| s.speculative = v);
    // Builds innermost: each config's builds side by side, so the plan and
    // the reports read build against build.
    if let Some(axis) = &m.build {
        let names = OneOrMany::Many(
            axis.get_ref()
                .to_vec()
                .into_iter()
                .map(|n| Spanned::new(axis.span(), n))
                .collect(),
        );
        multiply(&mut servers, &Some(names), |s, v| s.build = Some(v));
    }
    let ctx = Context {
        matrix_args: &m.args,
        matrix_env: &m.env,
        builds,
    };
    for raw_server in servers {
        let (mut cfg, written) = merge_server(raw, src, &raw_server, &ctx)?;
        // The matrix decides speculation: without the axis its servers decode
        // autoregressively, whatever [defaults] say.
        cfg.speculative = raw_server.speculative.clone();
        cfg.id = render_id(m.id.get_ref(), &cfg).map_err(|e| src.error(&m.id, e))?;
        check_server(src, raw.engine.kind, at, &mut cfg, &written)?;
        out.push((cfg, at));
    }
    Ok(())
}

/// Every server of `servers` once per value of an axis, when the matrix has it.
fn multiply<T: Clone>(
    servers: &mut Vec<RawServer>,
    axis: &Option<OneOrMany<T>>,
    set: impl Fn(&mut RawServer, T),
) {
    let Some(values) = axis.as_ref().map(OneOrMany::to_vec) else {
        return;
    };
    *servers = servers
        .iter()
        .flat_map(|s| {
            values.iter().map(|v| {
                let mut s = s.clone();
                set(&mut s, v.clone());
                s
            })
        })
        .collect();
}

/// A matrix's speculative variants, each budget applied to each table
/// (`"none"` is autoregressive and takes no budget).
fn speculative_variants(
    src: &Source,
    m: &RawMatrix,
) -> Result<Vec<Option<Speculative>>, CampaignError> {
    let Some(list) = &m.speculative else {
        return Ok(vec![None]);
    };
    let budgets: Vec<Option<u32>> = m
        .budget
        .as_ref()
        .map(|v| v.to_vec().into_iter().map(Some).collect())
        .unwrap_or_else(|| vec![None]);
    let mut out = Vec::new();
    for e in list.get_ref() {
        match e {
            SpecEntry::Name(n) if n == "none" => out.push(None),
            SpecEntry::Name(n) => {
                return Err(src.error(list, format!("speculative entry `{n}` is not a table; use \"none\" or {{ method = \"eagle\", ... }}")))
            }
            SpecEntry::Settings(s) => out.extend(budgets.iter().map(|b| {
                let mut s = s.clone();
                if let Some(b) = b {
                    s.num_draft_tokens = Some(*b);
                }
                Some(s)
            })),
        }
    }
    Ok(out)
}

/// A matrix id template such as `{method}-tp{tp}` filled in for one config.
fn render_id(template: &str, cfg: &ServerConfig) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("unclosed `{{` in id template `{template}`"))?
            + open;
        let key = &rest[open + 1..close];
        let value = match key {
            "budget" => cfg
                .speculative
                .as_ref()
                .and_then(|s| s.num_draft_tokens)
                .map(|b| b.to_string())
                .unwrap_or_else(|| "none".into()),
            "method" => cfg.method_name(),
            "tp" | "dp" | "dp_attention" | "ep" | "pp" | "layout" | "mem_fraction"
            | "max_running_requests" | "context_length" | "build" | "grammar_backend"
            | "tool_call_parser" => {
                cfg.param(key).unwrap_or_else(|| "default".into())
            }
            other => {
                return Err(format!(
                    "unknown placeholder `{{{other}}}` in id template; allowed: {{tp}}, {{dp}}, {{dp_attention}}, {{ep}}, {{pp}}, {{layout}}, {{method}}, {{budget}}, {{mem_fraction}}, {{max_running_requests}}, {{context_length}}, {{build}}, {{grammar_backend}}, {{tool_call_parser}}"
                ))
            }
        };
        out.push_str(&value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Each server that repeats an earlier server's settings exactly, with its
/// place among them (1 for the first repeat): a twin's cells are its own.
/// Servers without a twin before them are left out, so their identities
/// are those of a campaign without twins.
pub fn twin_ordinals(servers: &[ServerConfig]) -> BTreeMap<String, u32> {
    let settings: Vec<serde_json::Value> = servers.iter().map(ServerConfig::settings).collect();
    let mut out = BTreeMap::new();
    for (i, s) in servers.iter().enumerate() {
        let earlier = settings[..i].iter().filter(|v| **v == settings[i]).count() as u32;
        if earlier > 0 {
            out.insert(s.id.clone(), earlier);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{campaign, HEAD, WL};
    use std::path::PathBuf;

    #[test]
    fn layout_axes_expand_with_their_placeholders_and_count_gpus_as_the_engine_does() {
        let text = format!(
            "{HEAD}[[matrix]]\nid = \"{{layout}}\"\ntp = [4, 2]\ndp = [1, 2]\nargs = [\"--dist-timeout={{dp}}\"]\n\
             [[server]]\nid = \"moe\"\ntp = 8\ndp_attention = 8\nep = 8\n\
             [[server]]\nid = \"pp\"\ntp = 4\npp = 2\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let got: Vec<(&str, u32)> = c
            .servers
            .iter()
            .map(|s| (s.id.as_str(), s.gpus()))
            .collect();
        assert_eq!(
            got,
            [
                ("moe", 8),
                ("pp", 8),
                ("tp4", 4),
                ("tp4-dp2", 8),
                ("tp2", 2),
                ("tp2-dp2", 4)
            ]
        );
        assert_eq!(c.servers[3].args.last().unwrap(), "--dist-timeout=2");
        assert_eq!(c.servers[0].param("ep").as_deref(), Some("8"));
        // A size of 1 is left out of the identity, so configs without
        // layouts keep the cells they measured; a size beyond 1 enters it.
        let tp_only = c.servers[2].settings();
        assert!(tp_only.get("dp").is_none(), "{tp_only}");
        assert_eq!(c.servers[3].settings()["dp"], 2);
    }

    #[test]
    fn grammar_backends_are_a_matrix_axis_and_enter_the_identity_only_when_set() {
        let text = format!(
            "{HEAD}[defaults]\ntool_call_parser = \"hermes\"\n\
             [[matrix]]\nid = \"g-{{grammar_backend}}\"\ngrammar_backend = [\"xgrammar\", \"llguidance\"]\n\
             [[server]]\nid = \"plain\"\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let ids: Vec<&str> = c.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["plain", "g-xgrammar", "g-llguidance"]);
        assert_eq!(c.servers[1].settings()["grammar_backend"], "xgrammar");
        assert_eq!(c.servers[2].settings()["tool_call_parser"], "hermes");
        let mut none = c.servers[0].clone();
        none.tool_call_parser = None;
        assert!(none.settings().get("grammar_backend").is_none());
        assert!(none.settings().get("tool_call_parser").is_none());
        // The same flag in args is refused, naming the setting.
        let e = campaign(&format!(
            "{HEAD}[[server]]\nid = \"x\"\ngrammar_backend = \"xgrammar\"\nargs = [\"--grammar-backend\", \"outlines\"]\n{WL}"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("set grammar_backend instead"), "{e}");
    }

    #[test]
    fn layouts_an_engine_cannot_start_and_sizes_in_args_are_refused_at_their_line() {
        let err = |server: &str| {
            campaign(&format!("{HEAD}[[server]]\nid = \"x\"\n{server}\n{WL}"))
                .unwrap_err()
                .to_string()
        };
        let e = err("tp = 4\nep = 3");
        assert!(
            e.contains("c.toml:9:") && e.contains("ep in 1, 2, 4"),
            "{e}"
        );
        let e = err("tp = 2\nargs = [\"--data-parallel-size\", \"4\"]");
        assert!(
            e.contains("sets a parallel size") && e.contains("set dp instead"),
            "{e}"
        );
        let e = err("tp = 8\nargs = [\"--enable-dp-attention\"]");
        assert!(e.contains("dp_attention"), "{e}");
        let e = err("dp = 0");
        assert!(e.contains("dp must be at least 1"), "{e}");
    }

    #[test]
    fn matrix_expands_the_product_and_budgets_skip_autoregressive() {
        let text = format!(
            "{HEAD}[defaults]\nmem_fraction = 0.8\n[[matrix]]\nid = \"{{method}}-tp{{tp}}-b{{budget}}\"\ntp = [1, 4]\nspeculative = [\"none\", {{ method = \"eagle\", topk = 8, num_steps = 4 }}]\nbudget = [8, 16, 64]\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let ids: Vec<&str> = c.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ar-tp1-bnone",
                "eagle-tp1-b8",
                "eagle-tp1-b16",
                "eagle-tp1-b64",
                "ar-tp4-bnone",
                "eagle-tp4-b8",
                "eagle-tp4-b16",
                "eagle-tp4-b64"
            ]
        );
        let s = &c.servers[3];
        assert_eq!((s.tp, s.mem_fraction), (1, Some(0.8)));
        assert_eq!(s.speculative.as_ref().unwrap().num_draft_tokens, Some(64));
        assert_eq!(s.args, vec!["--trust-remote-code"]);
        // 2 concurrency × 2 output lengths.
        assert_eq!(c.workloads.len(), 4);
        assert_eq!(c.results_dir, PathBuf::from("dir/results/t"));
    }

    #[test]
    fn duplicate_ids_unknown_placeholders_and_bad_baseline_point_at_the_value() {
        let text = format!("{HEAD}[[matrix]]\nid = \"same\"\ntp = [1, 2]\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(e.message.contains("used twice"), "{}", e.message);
        assert_eq!(e.line, 9);
        let text = format!("{HEAD}[[matrix]]\nid = \"x-{{gpu}}\"\n{WL}");
        assert!(campaign(&text)
            .unwrap_err()
            .message
            .contains("unknown placeholder"));
        let text = format!("{HEAD}[[server]]\nid = \"a\"\n[run]\nbaseline = \"b\"\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(e.message.contains("ids: a"), "{}", e.message);
        assert_eq!(e.line, 11);
    }

    #[test]
    fn placeholders_in_args_and_env_take_each_servers_values_at_every_level() {
        // HEAD's [engine] args hold --trust-remote-code; add placeholders at
        // the engine (env), defaults, matrix and server level.
        let text = format!(
            "{HEAD}env = {{ RUN = \"{{id}}\" }}\n[defaults]\nargs = [\"--log-prefix\", \"tp{{tp}}\"]\n\
             [[matrix]]\nid = \"dd-tp{{tp}}-b{{budget}}\"\ntp = [1, 4]\n\
             speculative = [{{ method = \"eagle\", topk = 8, num_steps = 4, draft_model = \"d\" }}]\n\
             budget = [8, 64]\nargs = [\"--x-budget\", \"{{budget}}\", \"--cfg\", '{{\"port\": {{port}}}}']\n\
             env = {{ B = \"b{{budget}}-{{method}}\" }}\n\
             [[server]]\nid = \"ar\"\nmax_running_requests = 5\nargs = [\"--n\", \"{{max_running_requests}}\"]\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let s = c.servers.iter().find(|s| s.id == "dd-tp4-b64").unwrap();
        assert_eq!(
            s.args,
            [
                "--trust-remote-code",
                "--log-prefix",
                "tp4",
                "--x-budget",
                "64",
                "--cfg",
                // JSON braces stay; the port is filled at launch.
                r#"{"port": {port}}"#
            ]
        );
        assert_eq!(s.env["RUN"], "dd-tp4-b64");
        assert_eq!(s.env["B"], "b64-eagle");
        let ar = c.servers.iter().find(|s| s.id == "ar").unwrap();
        assert_eq!(ar.args[1..], ["--log-prefix", "tp1", "--n", "5"]);
        assert_eq!(ar.env["RUN"], "ar");
    }

    #[test]
    fn an_unknown_or_valueless_placeholder_is_refused_at_its_value() {
        let text = format!("{HEAD}[[server]]\nid = \"a\"\nargs = [\"--gpus\", \"{{gpu}}\"]\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message.contains("unknown placeholder `{gpu}`"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("{budget}"),
            "lists the known ones: {}",
            e.message
        );
        assert_eq!((e.line, e.col), (10, 19));
        let text = format!("{HEAD}[[server]]\nid = \"a\"\nenv = {{ X = \"{{budget}}\" }}\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message.contains("server `a` has no `budget`"),
            "{}",
            e.message
        );
        assert_eq!(e.line, 10);
    }

    #[test]
    fn ddtree_and_pass_through_algorithms_expand_over_the_budget_axis() {
        let text = format!(
            "{HEAD}[[matrix]]\nid = \"{{method}}-b{{budget}}\"\n\
             speculative = [\"none\", {{ method = \"ddtree\", draft_model = \"/d\" }}, \
             {{ algorithm = \"JETSPEC\", budget_flag = \"--speculative-jetspec-budget\" }}]\n\
             budget = [8, 64]\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let ids: Vec<&str> = c.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ar-bnone",
                "ddtree-b8",
                "ddtree-b64",
                "jetspec-b8",
                "jetspec-b64"
            ]
        );
        assert_eq!(c.servers[4].param("budget").as_deref(), Some("64"));
        assert_eq!(c.servers[4].param("method").as_deref(), Some("jetspec"));
        // A mistake inside an entry is named, not "did not match any variant".
        let text = format!(
            "{HEAD}[[matrix]]\nid = \"x{{budget}}\"\nspeculative = [{{ method = \"ddtre\" }}]\nbudget = [8]\n{WL}"
        );
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message.contains("unknown speculative method `ddtre`"),
            "{}",
            e.message
        );
        assert_eq!(e.line, 10);
    }

    #[test]
    fn a_flag_the_adapter_generates_is_refused_in_args_under_any_spelling() {
        // The issue's case: SGLang keeps the last --context-length, the plan
        // would check 131072 while the server runs 32768.
        let text = format!(
            "{HEAD}[defaults]\ncontext_length = 131072\n[[server]]\nid = \"a\"\nargs = [\"--context-length\", \"32768\"]\n{WL}"
        );
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message.contains("server `a`: `--context-length` in args repeats `--context-length 131072`, which servebench generates from context_length"),
            "{}",
            e.message
        );
        assert_eq!((e.line, e.col), (12, 9));
        for (args, setting) in [
            ("\"--tensor-parallel-size=2\"", "from tp"),
            ("\"--mem-fraction-static\", \"0.7\"", "from mem_fraction"),
            ("\"--port\", \"1\"", "the address"),
        ] {
            let text = format!(
                "{HEAD}[defaults]\nmem_fraction = 0.8\n[[server]]\nid = \"a\"\nargs = [{args}]\n{WL}"
            );
            let e = campaign(&text).unwrap_err();
            assert!(e.message.contains(setting), "{args}: {}", e.message);
        }
        // A flag generated only for another server, or one the adapter never
        // writes, is fine.
        let text = format!(
            "{HEAD}[[server]]\nid = \"a\"\nargs = [\"--context-length\", \"32768\", \"--page-size\", \"16\"]\n{WL}"
        );
        assert!(campaign(&text).is_ok());
        let text = format!(
            "{HEAD}[[server]]\nid = \"d\"\nspeculative = {{ method = \"ddtree\", draft_model = \"/d\", num_draft_tokens = 8 }}\nargs = [\"--page-size\", \"16\"]\n{WL}"
        );
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message
                .contains("repeats `--page-size 1`, which servebench generates from speculative"),
            "{}",
            e.message
        );
    }

    /// Two builds of one engine and the servers that run them.
    const BUILDS: &str = "[[build]]\nname = \"b1\"\nexecutable = [\"/opt/b1/serve\"]\nversion = \"1\"\nenv = { LD_LIBRARY_PATH = \"/opt/b1/lib\" }\n\
                          [[build]]\nname = \"b2\"\nversion_command = [\"cat\", \"/opt/b2/VERSION\"]\n";

    #[test]
    fn the_build_axis_runs_each_config_once_per_build_with_its_executable_and_environment() {
        let text = format!(
            "{HEAD}{BUILDS}[[matrix]]\nid = \"tp{{tp}}-{{build}}\"\ntp = [1, 2]\nbuild = [\"b1\", \"b2\"]\n\
             env = {{ TAG = \"{{build}}\" }}\n[[server]]\nid = \"pinned\"\nbuild = \"b2\"\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let ids: Vec<&str> = c.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["pinned", "tp1-b1", "tp1-b2", "tp2-b1", "tp2-b2"]);
        let b1 = &c.servers[1];
        assert_eq!(b1.build_name(), Some("b1"));
        assert_eq!(b1.executable(&["engine".into()]), ["/opt/b1/serve"]);
        assert_eq!(b1.env["LD_LIBRARY_PATH"], "/opt/b1/lib");
        assert_eq!(b1.env["TAG"], "b1");
        let b2 = &c.servers[2];
        assert_eq!(b2.executable(&["engine".into()]), ["engine"]);
        assert!(!b2.env.contains_key("LD_LIBRARY_PATH"));
        assert_eq!(c.builds.len(), 2);
        assert_eq!(
            c.builds[1].version_command.as_deref(),
            Some(&["cat".to_string(), "/opt/b2/VERSION".into()][..])
        );
        // The build's name is not among the settings, its executable and version are.
        let settings = b1.settings();
        assert_eq!(settings["build"]["executable"][0], "/opt/b1/serve");
        assert_eq!(settings["build"]["version"], "1");
        assert!(settings["build"].get("name").is_none(), "{settings}");
        // A campaign without builds keeps its settings as they were.
        let plain = campaign(&format!("{HEAD}[[server]]\nid = \"a\"\n{WL}")).unwrap();
        assert!(plain.servers[0].settings().get("build").is_none());
    }

    #[test]
    fn an_unknown_duplicate_or_unsafe_build_is_refused_at_its_name() {
        let text = format!("{HEAD}{BUILDS}[[server]]\nid = \"a\"\nbuild = \"b3\"\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message
                .contains("unknown build `b3`; declared: `b1`, `b2`"),
            "{}",
            e.message
        );
        assert_eq!((e.line, e.col), (18, 9));
        let text = format!("{HEAD}[[matrix]]\nid = \"m-{{build}}\"\nbuild = [\"x\"]\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message.contains("the campaign declares no [[build]]"),
            "{}",
            e.message
        );
        let twice = BUILDS.replace("\"b2\"", "\"b1\"");
        let e = campaign(&format!("{HEAD}{twice}{WL}")).unwrap_err();
        assert!(
            e.message.contains("build `b1` is declared twice"),
            "{}",
            e.message
        );
        let unsafe_name = BUILDS.replace("\"b2\"", "\"../b2\"");
        let e = campaign(&format!("{HEAD}{unsafe_name}{WL}")).unwrap_err();
        assert!(e.message.contains("build name `../b2`"), "{}", e.message);
        // Builds without the placeholder in the matrix id collide, saying how to fix it.
        let text = format!("{HEAD}{BUILDS}[[matrix]]\nid = \"m\"\nbuild = [\"b1\", \"b2\"]\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(e.message.contains("{build}"), "{}", e.message);
    }
}
