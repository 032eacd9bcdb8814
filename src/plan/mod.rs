//! The plan: every cell of a campaign with a verdict (run, cached, stale,
//! skip with a reason) and an estimated duration, grouped by server config
//! so each server is started once. Nothing is started here.

pub mod eta;
pub mod feasibility;
pub mod filter;
pub mod prior;
pub mod stale;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::campaign::resolve::Search;
use crate::campaign::{Campaign, ServerConfig, WorkloadPoint};
use crate::engine::version::EngineBuild;
use crate::engine::{self, ServerSpec};
use crate::search::{self, Outcome, SearchSpec, Step};
use crate::store::identity::cell_identity;
use crate::store::{probe_verdict, StoreIndex, StoredCell};
use crate::util::shell::shell_words;
use crate::util::table;
use crate::util::units::{fmt_eta, fmt_s};
use filter::Filter;

/// What `run` will do with a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    /// Measure it.
    Run,
    /// A result with the same identity is stored; reuse it.
    Cached,
    /// A result is stored under this name but for other settings, input
    /// files or engine build; measure again. The reason names what changed
    /// (empty when it cannot be told).
    Stale(String),
    /// Cannot run; the reason says why.
    Skip(String),
    /// Its server crashed on the last run: not launched again unless asked
    /// (`--retry-crashed`); the reason names the crash.
    CrashedBefore(String),
    /// A later repetition not needed: the earlier ones agree (`repetitions = "auto"`).
    Enough(String),
}

impl Verdict {
    /// Whether `run` measures this cell.
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Run | Verdict::Stale(_))
    }

    /// The verdict's kind, as the plan's totals count it.
    pub fn kind(&self) -> &'static str {
        match self {
            Verdict::Run => "run",
            Verdict::Cached => "cached",
            Verdict::Stale(_) => "stale",
            Verdict::Skip(_) => "skip",
            Verdict::CrashedBefore(_) => "skip (crashed before)",
            Verdict::Enough(_) => "not needed",
        }
    }

    /// A short label for tables.
    pub fn label(&self) -> String {
        match self {
            Verdict::Run => "run".into(),
            Verdict::Cached => "cached".into(),
            Verdict::Stale(r) if r.is_empty() => "stale".into(),
            Verdict::Stale(r) => format!("stale: {r}"),
            Verdict::Skip(r) => format!("skip: {r}"),
            Verdict::CrashedBefore(r) => format!("skip: {r}"),
            Verdict::Enough(r) => format!("not needed: {r}"),
        }
    }
}

/// One cell in the plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedCell {
    /// Readable name.
    pub name: String,
    /// Identity hash.
    pub identity: String,
    /// The workload point.
    pub workload: WorkloadPoint,
    /// Verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Estimated duration, s.
    pub eta_s: f64,
    /// Warnings (e.g. requests will queue for KV space).
    pub warnings: Vec<String>,
    /// Why an earlier run with `goal = "answer"` left it unmeasured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<String>,
}

/// One SLO search of one server config: what is stored and what is left.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedSearch {
    /// Index into the campaign's searches.
    pub index: usize,
    /// The search's name.
    pub name: String,
    /// Bounds, axis and grid.
    pub spec: SearchSpec,
    /// Probes already stored on the search's path, by load, with whether they passed.
    pub stored: Vec<(f64, bool)>,
    /// The next load to probe, or `None` when the search is over.
    pub next: Option<f64>,
    /// Where it ended, when the stored probes settle it.
    pub outcome: Option<Outcome>,
    /// Probes still to measure at most.
    pub probes_left_max: u64,
    /// Probes still to measure if the boundary lies mid-way through what is left.
    pub probes_left_expected: u64,
    /// Estimated time of the expected probes, s.
    pub eta_s: f64,
    /// Estimated time of measuring every grid point instead, s.
    pub grid_eta_s: f64,
    /// Grid points.
    pub grid_points: u64,
    /// Why the search cannot run on this server, if it cannot.
    pub skip: Option<String>,
    /// GPUs the server holds while it searches (0 on CPU-only campaigns).
    pub gpus: u32,
    /// The probes expected next, for the live ETA.
    #[serde(skip)]
    pub expected: Vec<WorkloadPoint>,
}

impl PlannedSearch {
    /// Whether probes remain to be measured.
    pub fn runs(&self) -> bool {
        self.next.is_some() && self.skip.is_none()
    }
}

/// All cells of one server config.
#[derive(Debug, Clone, Serialize)]
pub struct ServerGroup {
    /// The server config.
    pub server: ServerConfig,
    /// GPUs it holds, as its engine counts them (TP × DP × PP).
    pub gpus: u32,
    /// Its parallel layout in short (`tp4-dp2`).
    pub layout: String,
    /// The normalized spec (port filled at launch).
    pub spec: ServerSpec,
    /// The launch command, or why the engine cannot express this config.
    pub command: Result<Vec<String>, String>,
    /// Memory-model figures, when the model and GPU memory are known.
    pub memory: Option<feasibility::MemorySummary>,
    /// KV capacity the engine itself reported in an earlier run, tokens.
    pub reported_kv_tokens: Option<u64>,
    /// The engine build its cells are measured on, when found.
    pub engine_build: Option<EngineBuild>,
    /// Its cells.
    pub cells: Vec<PlannedCell>,
    /// Its SLO searches.
    pub searches: Vec<PlannedSearch>,
    /// Estimated start-up time, s (0 when nothing runs).
    pub startup_eta_s: f64,
    /// Where the speed prior comes from.
    pub eta_basis: String,
    /// Whether measured cells corrected the prior.
    pub calibrated: bool,
    /// Estimates servebench cannot make for this server, and what it does instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cannot_estimate: Vec<String>,
    /// Flags in its `args` that the engine's parser does not know.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_flags: Vec<String>,
}

impl ServerGroup {
    /// Estimated time for this group's runnable cells, start-up included, s.
    pub fn eta_s(&self) -> f64 {
        let cells: f64 = self
            .cells
            .iter()
            .filter(|c| c.verdict.runs())
            .map(|c| c.eta_s)
            .sum::<f64>()
            + self
                .searches
                .iter()
                .filter(|s| s.runs())
                .map(|s| s.eta_s)
                .sum::<f64>();
        if cells > 0.0 {
            cells + self.startup_eta_s
        } else {
            0.0
        }
    }

    /// Whether any cell needs the server.
    pub fn needs_launch(&self) -> bool {
        self.cells.iter().any(|c| c.verdict.runs()) || self.searches.iter().any(|s| s.runs())
    }
}

/// The whole plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Campaign name.
    pub campaign: String,
    /// Server groups in declaration order.
    pub groups: Vec<ServerGroup>,
    /// Cells left out by `--only`.
    pub filtered_out: usize,
    /// Stored files that could not be read.
    pub unreadable: Vec<String>,
    /// This machine's CPU speed, where the ETAs of CPU servers use it.
    pub cpu: Option<eta::CpuSpeed>,
    /// The engine build found before planning.
    pub engine_build: Option<EngineBuild>,
    /// What to say about the engine build: how it was found, why it was
    /// not, or how it disagrees with the declared version.
    pub engine_notes: Vec<String>,
    /// What runs and how long it takes.
    pub totals: PlanTotals,
    /// The estimator behind the ETAs, for refining them while the campaign runs.
    #[serde(skip)]
    pub estimator: eta::Estimator,
}

/// What asking one build of the engine for its version found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildCheck {
    /// The build it reported.
    pub build: Option<EngineBuild>,
    /// Why no build could be found, when none could.
    pub error: Option<String>,
    /// Why it cannot start here (its own executable is missing or fails
    /// before saying its version): every cell of its servers that would run
    /// is skipped with this reason instead of launching a server that dies.
    pub unusable: Option<String>,
}

/// Nothing asked: a build whose servers do not run here.
static NOT_ASKED: BuildCheck = BuildCheck {
    build: None,
    error: None,
    unusable: None,
};

impl PlanOptions {
    /// What was found for the build `server` runs.
    pub fn check_for(&self, server: &ServerConfig) -> &BuildCheck {
        match server.build_name() {
            Some(name) => self.builds.get(name).unwrap_or(&NOT_ASKED),
            None => &self.engine,
        }
    }
}

/// Options that change verdicts.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// `--only` filters.
    pub only: Vec<Filter>,
    /// `--force`: measure everything again.
    pub force: bool,
    /// `--rerun-failed`: measure stored failures again.
    pub rerun_failed: bool,
    /// `--retry-crashed`: launch again a server that crashed on the last run.
    pub retry_crashed: bool,
    /// What asking `[engine]` for its build found (see `engine::version`),
    /// for the servers that name no `[[build]]`.
    pub engine: BuildCheck,
    /// The same for each `[[build]]` by name.
    pub builds: BTreeMap<String, BuildCheck>,
    /// `--reuse-across-versions`: keep cells measured on another engine build.
    pub reuse_across_versions: bool,
    /// Results of earlier campaigns (same model and engine) the ETAs learn from.
    pub prior_results: Vec<PathBuf>,
    /// This machine's CPU speed, when probed ([`eta::CpuSpeed`]); `None`:
    /// the CPU priors' own machine is assumed.
    pub cpu: Option<eta::CpuSpeed>,
    /// Server configs run side by side (`run --parallel N`; 0 counts as 1).
    pub parallel: usize,
    /// Cells an earlier run with `goal = "answer"` left, with why.
    pub not_measured: Vec<crate::goal::Lost>,
}

/// The plan's totals: what runs and how long it takes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlanTotals {
    /// Servers that will be launched.
    pub servers_to_launch: usize,
    /// Cells by verdict (`run`, `cached`, `stale`, `skip`, …).
    pub cells: BTreeMap<String, usize>,
    /// Search probes expected beyond those stored.
    pub probes_expected: u64,
    /// Every group one after another, s.
    pub sequential_eta_s: f64,
    /// Server configs run side by side.
    pub parallel: usize,
    /// The groups at `parallel`, each on its own GPUs from the pool, s:
    /// the wall time the campaign is expected to take.
    pub eta_s: f64,
}

/// Wall time of groups of (GPUs, seconds) run in order, at most `width` at
/// once and, with a pool of `pool_gpus` GPUs (0: no GPUs to share), only
/// while their GPUs are free: a group waits for the earliest to finish.
pub fn parallel_wall_s(groups: &[(u32, f64)], width: usize, pool_gpus: u32) -> f64 {
    let width = width.max(1);
    // (end time, GPUs held) of the groups running.
    let mut running: Vec<(f64, u32)> = Vec::new();
    let (mut now, mut end) = (0.0f64, 0.0f64);
    for &(gpus, secs) in groups.iter().filter(|g| g.1 > 0.0) {
        let gpus = if pool_gpus == 0 {
            0
        } else {
            gpus.min(pool_gpus)
        };
        loop {
            let held: u32 = running.iter().map(|r| r.1).sum();
            if running.len() < width && held + gpus <= pool_gpus {
                break;
            }
            // Wait for the earliest to finish.
            let (i, _) = running
                .iter()
                .enumerate()
                .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
                .expect("a group is running when the slots are full");
            now = now.max(running.remove(i).0);
        }
        running.push((now + secs, gpus));
        end = end.max(now + secs);
    }
    end
}

impl Plan {
    /// What runs and how long it takes, sequentially and at `parallel`.
    fn compute_totals(&self, parallel: usize, pool_gpus: u32) -> PlanTotals {
        let mut cells: BTreeMap<String, usize> = BTreeMap::new();
        for c in self.groups.iter().flat_map(|g| &g.cells) {
            *cells.entry(c.verdict.kind().to_string()).or_default() += 1;
        }
        let groups: Vec<(u32, f64)> = self
            .groups
            .iter()
            .map(|g| (g.server.gpus(), g.eta_s()))
            .collect();
        let parallel = parallel.max(1);
        PlanTotals {
            servers_to_launch: self.groups.iter().filter(|g| g.needs_launch()).count(),
            cells,
            probes_expected: self
                .groups
                .iter()
                .flat_map(|g| &g.searches)
                .filter(|s| s.runs())
                .map(|s| s.probes_left_expected)
                .sum(),
            sequential_eta_s: groups.iter().map(|g| g.1).sum(),
            parallel,
            eta_s: parallel_wall_s(&groups, parallel, pool_gpus),
        }
    }
}

/// The spec of a server config (port 0 until launch).
pub fn server_spec(c: &Campaign, s: &ServerConfig) -> ServerSpec {
    s.spec(
        c.engine.kind,
        s.executable(&c.engine.executable),
        c.model.path.clone(),
        c.model.served_name.clone(),
    )
}

/// Build the plan against what is stored.
pub fn build(c: &Campaign, index: &StoreIndex, opts: &PlanOptions, self_exe: &str) -> Plan {
    let model_info = feasibility::load_model(c);
    let est = estimator(c, index, opts, model_info.as_ref());
    let mut groups = Vec::new();
    let mut filtered_out = 0;
    for s in &c.servers {
        let spec = server_spec(c, s);
        let command = engine::command_line(&spec, self_exe).map_err(|e| e.to_string());
        let memory = feasibility::memory(c, s, model_info.as_ref());
        let cx = PlanContext {
            index,
            opts,
            est: &est,
            command: &command,
            memory: memory.as_ref(),
            model_info: model_info.as_ref(),
        };
        let mut cells = plan_cells(c, s, &cx, &mut filtered_out);
        // A server that crashed on the last run would crash again where it
        // did: its cells still to measure are skipped, saying so, unless asked.
        if !(opts.retry_crashed || opts.force || opts.rerun_failed) {
            if let Some(why) = crashed_before(index, &cells, &s.id) {
                for cell in cells.iter_mut().filter(|c| c.verdict.runs()) {
                    cell.verdict = Verdict::CrashedBefore(why.clone());
                }
            }
        }
        let check = opts.check_for(s);
        if let Some(why) = &check.unusable {
            for cell in cells.iter_mut().filter(|c| c.verdict.runs()) {
                cell.verdict = Verdict::Skip(why.clone());
            }
        }
        let mut searches = Vec::new();
        for (i, search) in c.searches.iter().enumerate() {
            if !opts.only.iter().all(|f| f.matches(s, &search.base)) {
                filtered_out += 1;
                continue;
            }
            searches.push(plan_search(c, s, i, search, &cx));
        }
        if let Some(why) = &check.unusable {
            for search in searches.iter_mut().filter(|s| s.runs()) {
                search.skip = Some(why.clone());
            }
        }
        if cells.is_empty() && searches.is_empty() {
            continue;
        }
        // In run order, so a simulated crash ends the estimate where it ends the server.
        let runs: Vec<&WorkloadPoint> = cells
            .iter()
            .filter(|c| c.verdict.runs())
            .map(|c| &c.workload)
            .collect();
        let mut etas = est.cells_s(&s.id, &runs).into_iter();
        for cell in cells.iter_mut() {
            cell.eta_s = if cell.verdict.runs() {
                etas.next().unwrap_or(0.0)
            } else {
                est.cell_s(&s.id, &cell.workload)
            };
        }
        let reported_kv_tokens = index
            .by_identity
            .values()
            .filter(|c| c.server_id == s.id)
            .filter_map(|c| c.telemetry.as_ref()?.log.as_ref())
            .find_map(|l| l.max_total_num_tokens.or(l.kv_cache_tokens));
        groups.push(ServerGroup {
            gpus: s.gpus(),
            layout: s.layout().label(),
            reported_kv_tokens,
            engine_build: check.build.clone(),
            startup_eta_s: est.startup_s(&s.id),
            eta_basis: est
                .speeds
                .get(&s.id)
                .map(|sp| sp.basis.clone())
                .unwrap_or_default(),
            calibrated: !est.calibration.is_empty(),
            cannot_estimate: feasibility::unknowns(s),
            unknown_flags: engine::unknown_flags(&spec),
            server: s.clone(),
            spec,
            command,
            memory,
            cells,
            searches,
        });
    }
    let mut plan = Plan {
        campaign: c.name.clone(),
        groups,
        filtered_out,
        unreadable: index
            .unreadable
            .iter()
            .map(|(p, e)| format!("{}: {e}", p.display()))
            .collect(),
        cpu: opts.cpu,
        engine_build: opts.engine.build.clone(),
        engine_notes: engine_notes(c, opts),
        totals: PlanTotals::default(),
        estimator: est,
    };
    plan.totals = plan.compute_totals(opts.parallel, c.hardware.gpus.len() as u32);
    plan
}

/// The cells of server `s`, each with its verdict (skip, run, or keep what
/// is stored); the workloads `--only` leaves out are counted in
/// `filtered_out`.
fn plan_cells(
    c: &Campaign,
    s: &ServerConfig,
    cx: &PlanContext<'_>,
    filtered_out: &mut usize,
) -> Vec<PlannedCell> {
    let mut cells = Vec::new();
    for w in &c.workloads {
        if !cx.opts.only.iter().all(|f| f.matches(s, w)) {
            *filtered_out += 1;
            continue;
        }
        let identity = cell_identity(c, s, w);
        let name = w.cell_name();
        let (skip, mut warnings) =
            feasibility::check(c, s, w, cx.command, cx.memory, cx.model_info);
        warnings.extend(cx.est.prompt_build.advice(w));
        let verdict = match skip {
            Some(reason) => Verdict::Skip(reason),
            None => match stored_verdict(c, cx.index, (&identity, s, w), &name, cx.opts) {
                v @ (Verdict::Run | Verdict::Stale(_)) if !cx.opts.force => {
                    match enough_repetitions(c, w, |p| {
                        let id = cell_identity(c, s, p);
                        let stored = cx.index.by_identity.get(&id)?;
                        stored
                            .status
                            .is_usable()
                            .then(|| stored.summary.as_ref().map(|m| m.output_throughput_tok_s))
                            .flatten()
                    }) {
                        Some(why) => Verdict::Enough(why),
                        None => v,
                    }
                }
                v => v,
            },
        };
        let left = cx
            .opts
            .not_measured
            .iter()
            .find(|l| l.server == s.id && l.point == name)
            .filter(|_| verdict.runs())
            .map(|l| l.reason());
        cells.push(PlannedCell {
            eta_s: 0.0,
            name,
            identity,
            workload: w.clone(),
            verdict,
            warnings,
            left,
        });
    }
    cells
}

/// The plan's lines about the engine build, or each `[[build]]`'s.
fn engine_notes(c: &Campaign, opts: &PlanOptions) -> Vec<String> {
    let mut out = Vec::new();
    if c.servers.iter().any(|s| s.build.is_none()) {
        build_notes(
            &mut out,
            ("engine build", "[engine] version", "the engine"),
            c.engine.version.as_deref(),
            &opts.engine,
        );
        if opts.engine.unusable.is_some() {
            out.push(format!(
                "the engine cannot start here, so no cell runs: {}",
                c.engine.kind.install_hint()
            ));
        }
    }
    for b in &c.builds {
        let Some(check) = opts.builds.get(&b.name) else {
            continue;
        };
        let label = format!("build `{}`", b.name);
        build_notes(
            &mut out,
            (&label, &format!("{label}'s version"), "it"),
            b.version.as_deref(),
            check,
        );
        if check.unusable.is_some() {
            out.push(format!(
                "{label} cannot start here, so none of its cells runs: {}",
                c.engine.kind.install_hint()
            ));
        }
    }
    out
}

/// The lines for one build: what it reported, or why nothing, and whether
/// that contradicts the version declared for it. `words` are how the build,
/// its declaration and the build itself are named in the lines.
fn build_notes(
    out: &mut Vec<String>,
    (label, declaration, it): (&str, &str, &str),
    declared: Option<&str>,
    check: &BuildCheck,
) {
    match (&check.build, &check.error) {
        (Some(b), _) => {
            out.push(format!("{label}: {} (from `{}`)", b.version, b.source));
            if let Some(declared) = declared {
                if !b.version.contains(declared) {
                    out.push(format!(
                        "warning: {declaration} says {declared} but {it} reports {}",
                        b.version
                    ));
                }
            }
        }
        (None, Some(e)) => out.push(format!("{label}: version unknown: {e}")),
        (None, None) => {}
    }
}

/// A server group's heading and the lines about it before its command:
/// layout, memory, what cannot be estimated, the ETA's basis, the KV capacity
/// its engine reported.
fn render_group_head(g: &ServerGroup, out: &mut String) {
    let eta = g.eta_s();
    let searches = match g.searches.len() {
        0 => String::new(),
        1 => ", 1 search".to_string(),
        n => format!(", {n} searches"),
    };
    let layout = g.server.layout();
    let layout = if layout.is_tp_only() {
        format!("tp={}", layout.tp)
    } else {
        format!("{}, {} GPUs", layout.label(), layout.gpus())
    };
    out.push_str(&format!(
        "server {} ({layout}, {}): {} cells{searches}, ETA {}\n",
        g.server.id,
        g.server.method_name(),
        g.cells.len(),
        fmt_s(eta)
    ));
    if let Some(m) = &g.memory {
        out.push_str(&format!("  memory: {}\n", m.line()));
    }
    for what in &g.cannot_estimate {
        out.push_str(&format!("  cannot estimate {what}\n"));
    }
    for flag in &g.unknown_flags {
        out.push_str(&format!("  warning: {flag}\n"));
    }
    if g.needs_launch() {
        out.push_str(&format!(
            "  ETA basis: start-up {}; {}{}\n",
            fmt_eta(g.startup_eta_s),
            g.eta_basis,
            if g.calibrated {
                ", corrected by measured cells"
            } else {
                ""
            }
        ));
    }
    if let Some(rep) = g.reported_kv_tokens {
        let vs = match g.memory.as_ref().filter(|m| m.kv_capacity_tokens > 0) {
            Some(m) => format!(
                " (estimate {} tokens, {:+.1}%)",
                m.kv_capacity_tokens,
                (m.kv_capacity_tokens as f64 / rep as f64 - 1.0) * 100.0
            ),
            None => String::new(),
        };
        out.push_str(&format!(
            "  engine reported KV capacity: {rep} tokens{vs}\n"
        ));
    }
}

/// The plan's lines for one search.
fn render_search(ps: &PlannedSearch) -> String {
    let spec = &ps.spec;
    let bounds: Vec<String> = spec.bounds.iter().map(|b| b.to_string()).collect();
    let mut out = format!(
        "  search {} over {} {}..{} step {} ({}): ",
        ps.name,
        spec.axis,
        spec.min,
        spec.max,
        spec.step,
        bounds.join(", ")
    );
    let stored: Vec<String> = ps
        .stored
        .iter()
        .map(|(l, p)| format!("{l} {}", if *p { "pass" } else { "fail" }))
        .collect();
    if !stored.is_empty() {
        out.push_str(&format!("stored {}; ", stored.join(", ")));
    }
    if let Some(reason) = &ps.skip {
        out.push_str(&format!("skip: {reason}\n"));
        return out;
    }
    match (&ps.outcome, ps.next) {
        (Some(o), _) => out.push_str(&format!("done: {}\n", describe_outcome(spec, o))),
        (None, Some(next)) => {
            let saved = (ps.grid_eta_s - ps.eta_s).max(0.0);
            let gpu_hours = if ps.gpus > 0 {
                format!(
                    " ({:.2} GPU-hours at {} GPUs)",
                    saved * f64::from(ps.gpus) / 3600.0,
                    ps.gpus
                )
            } else {
                String::new()
            };
            out.push_str(&format!(
                "next {next}; ~{} more probes expected (at most {}), ETA {}; the full grid is {} cells, ETA {}: the search saves ~{}{gpu_hours}\n",
                ps.probes_left_expected,
                ps.probes_left_max,
                fmt_eta(ps.eta_s),
                ps.grid_points,
                fmt_s(ps.grid_eta_s),
                fmt_s(saved),
            ));
        }
        (None, None) => out.push('\n'),
    }
    out
}

/// A search outcome in words.
pub fn describe_outcome(spec: &SearchSpec, o: &Outcome) -> String {
    match o {
        Outcome::Boundary { pass, fail } => {
            format!("boundary {} {pass} (passes; {fail} fails)", spec.axis)
        }
        Outcome::AboveMax { pass } => {
            format!("every bound holds up to the maximum, {} {pass}", spec.axis)
        }
        Outcome::BelowMin { fail } => {
            format!("already the minimum, {} {fail}, misses a bound", spec.axis)
        }
    }
}

/// Whether repetition `w.repetition` of a point is not needed: under
/// `repetitions = "auto"`, once the earlier repetitions (their output
/// throughput from `throughput_of`) agree within the target.
pub fn enough_repetitions(
    c: &Campaign,
    w: &WorkloadPoint,
    mut throughput_of: impl FnMut(&WorkloadPoint) -> Option<f64>,
) -> Option<String> {
    let a = c.run.adaptive?;
    if w.repetition < a.min {
        return None;
    }
    // The repetitions measured so far: an earlier one found not needed is
    // missing, and what came before it decided that.
    let values: Vec<f64> = (0..w.repetition)
        .map_while(|j| throughput_of(&w.with_repetition(j)))
        .collect();
    if values.len() < a.min as usize {
        return None;
    }
    crate::metrics::bootstrap::repetitions_agree(&values, a.target)
}

/// What planning a search needs besides the search and its server.
struct PlanContext<'a> {
    index: &'a StoreIndex,
    opts: &'a PlanOptions,
    est: &'a eta::Estimator,
    command: &'a Result<Vec<String>, String>,
    memory: Option<&'a feasibility::MemorySummary>,
    model_info: Option<&'a Result<crate::memory::ModelInfo, String>>,
}

/// Replay one search over the stored probes and estimate what is left.
fn plan_search(
    c: &Campaign,
    s: &ServerConfig,
    index: usize,
    search: &Search,
    cx: &PlanContext<'_>,
) -> PlannedSearch {
    let spec = &search.spec;
    let (probed, step) = search::replay(spec, |k| {
        let w = search.probe(k);
        let identity = cell_identity(c, s, &w);
        if stored_verdict(c, cx.index, (&identity, s, &w), &w.cell_name(), cx.opts)
            != Verdict::Cached
        {
            return None;
        }
        let stored = cx.index.by_identity.get(&identity)?;
        let facts = stored.summary.clone();
        Some(probe_verdict(spec, stored.status, facts.as_ref(), stored.failure.as_ref()).passed())
    });
    // Feasibility is the same at every load of a point (context, memory per
    // request), so the first probe stands for all.
    let (skip, _) = feasibility::check(c, s, &search.base, cx.command, cx.memory, cx.model_info);
    let probe_s = |k: u64| cx.est.cell_s(&s.id, &search.probe(k));
    let (next, outcome) = match step {
        Step::Probe(k) => (Some(k), None),
        Step::Done(o) => (None, Some(o)),
    };
    let (expected, max_left) = match next {
        None => (Vec::new(), 0),
        Some(_) => (
            search::expected_path(spec, &probed),
            spec.max_probes().saturating_sub(probed.len() as u64).max(1),
        ),
    };
    let points = spec.last_index() + 1;
    PlannedSearch {
        index,
        name: search.name(),
        spec: spec.clone(),
        stored: probed.iter().map(|(&k, &p)| (spec.level(k), p)).collect(),
        next: next.map(|k| spec.level(k)),
        outcome,
        probes_left_max: max_left,
        probes_left_expected: expected.len() as u64,
        eta_s: expected.iter().map(|&k| probe_s(k)).sum(),
        grid_eta_s: (0..points).map(probe_s).sum(),
        grid_points: points,
        skip,
        gpus: if c.hardware.gpus.is_empty() {
            0
        } else {
            s.gpus()
        },
        expected: expected.iter().map(|&k| search.probe(k)).collect(),
    }
}

/// Why `server` is not launched again: one of its current cells is stored
/// as crashed (not a cell it never reached).
fn crashed_before(index: &StoreIndex, cells: &[PlannedCell], server: &str) -> Option<String> {
    cells.iter().find_map(|cell| {
        let stored = index.by_identity.get(&cell.identity)?;
        let f = stored.failure.as_ref()?;
        (stored.server_id == server
            && stored.status == crate::store::CellStatus::Failed
            && f.class == crate::failure::FailureClass::Crashed)
            .then(|| {
                format!(
                    "the server crashed during cell {} on the last run ({}); --retry-crashed launches it again",
                    cell.name,
                    crate::failure::truncate(&f.detail, 120)
                )
            })
    })
}

fn stored_verdict(
    c: &Campaign,
    index: &StoreIndex,
    (identity, server, workload): (&str, &ServerConfig, &WorkloadPoint),
    name: &str,
    opts: &PlanOptions,
) -> Verdict {
    if let Some(stored) = index.by_identity.get(identity) {
        let measured = stored.status.is_measured();
        let rerun = opts.force || (opts.rerun_failed && stored.status.is_failure());
        // Numbers of another engine build are not this build's.
        if let (Some(then), Some(now)) = (&stored.engine_build, &opts.check_for(server).build) {
            if measured && !then.same_build(now) && !opts.reuse_across_versions {
                return Verdict::Stale(format!(
                    "engine version {} → {}; --reuse-across-versions keeps it",
                    then.version, now.version
                ));
            }
        }
        if measured && !rerun {
            return Verdict::Cached;
        }
        return Verdict::Run;
    }
    match index
        .by_location
        .get(&(server.id.clone(), name.to_string()))
        .and_then(|id| index.by_identity.get(id))
    {
        Some(stored) => Verdict::Stale(stale::reason(stored, c, server, workload)),
        None => Verdict::Run,
    }
}

/// The estimator for a campaign: priors per server config, corrected by
/// the stored cells of this campaign and of the `--prior-results` given.
///
/// `model_info` is the model's `config.json` as [`feasibility::load_model`]
/// read it: the caller reads it once for the feasibility checks and this.
pub fn estimator(
    c: &Campaign,
    index: &StoreIndex,
    opts: &PlanOptions,
    model_info: Option<&Result<crate::memory::ModelInfo, String>>,
) -> eta::Estimator {
    let cpu = opts.cpu.unwrap_or(eta::CpuSpeed::REFERENCE);
    let mut e = eta::Estimator {
        speeds: BTreeMap::new(),
        startup_priors: BTreeMap::new(),
        keys: BTreeMap::new(),
        shapes: BTreeMap::new(),
        stop_s: eta::stop_prior_s(c.engine.kind),
        calibration: eta::Calibration::default(),
        scenarios: c.scenarios.clone(),
        prompt_build: eta::PromptBuild {
            counter: match c.model.tokenizer {
                Some(_) => eta::PromptCounter::LocalTokenizer,
                None => eta::PromptCounter::ServerTokenize(c.engine.kind),
            },
            cpu_factor: cpu.factor,
        },
    };
    for s in &c.servers {
        let (speed, startup) = prior_for(c, s, model_info, cpu);
        e.speeds.insert(s.id.clone(), speed);
        e.startup_priors.insert(s.id.clone(), startup);
        e.keys.insert(s.id.clone(), eta::server_key(s));
        e.shapes.insert(s.id.clone(), eta::shape_key(s));
    }
    let by_key: BTreeMap<(String, String), &StoredCell> = index
        .by_identity
        .values()
        .map(|c| ((c.server_id.clone(), c.cell_name.clone()), c))
        .collect();
    for s in &c.servers {
        let mut startup_seen = false;
        for w in &c.workloads {
            let Some(cell) = by_key.get(&(s.id.clone(), w.cell_name())) else {
                continue;
            };
            if !startup_seen {
                if let Some(m) = cell.server_run.as_ref().and_then(|r| r.ready_s()) {
                    startup_seen = true;
                    e.calibration.observe_startup(eta::StartupObservation {
                        server: eta::server_key(s),
                        predicted_s: e.startup_priors[&s.id],
                        measured_s: m,
                    });
                }
            }
            if let (Some(sum), true) = (&cell.summary, cell.status.is_timed()) {
                e.calibration.observe(observation(&e, s, w, sum.duration_s));
            }
        }
    }
    for dir in &opts.prior_results {
        for p in prior::load(dir, c) {
            let (speed, startup) = prior_for(c, &p.server, model_info, cpu);
            let mut w = p.workload;
            w.warmup = 0;
            let key = eta::server_key(&p.server);
            e.calibration.observe(eta::Observation {
                server: key.clone(),
                shape: eta::shape_key(&p.server),
                level: eta::level_key(&w),
                predicted_s: speed.load_s(&w, &c.scenarios),
                measured_s: p.duration_s,
            });
            if let Some(m) = p.startup_s {
                e.calibration.observe_startup(eta::StartupObservation {
                    server: key,
                    predicted_s: startup,
                    measured_s: m,
                });
            }
        }
    }
    e
}

/// What a measured cell teaches: its load time against the prior's (warm-up
/// is not part of the measured window).
pub fn observation(
    e: &eta::Estimator,
    s: &ServerConfig,
    w: &WorkloadPoint,
    measured_s: f64,
) -> eta::Observation {
    let mut bare = w.clone();
    bare.warmup = 0;
    eta::Observation {
        server: eta::server_key(s),
        shape: eta::shape_key(s),
        level: eta::level_key(w),
        predicted_s: e.prior_load_s(&s.id, &bare).unwrap_or(measured_s),
        measured_s,
    }
}

/// The prior speed and start-up time of one server config.
fn prior_for(
    c: &Campaign,
    s: &ServerConfig,
    model_info: Option<&Result<crate::memory::ModelInfo, String>>,
    cpu: eta::CpuSpeed,
) -> (eta::Speed, f64) {
    let command = engine::command_line(&server_spec(c, s), "servebench").ok();
    let memory = feasibility::memory(c, s, model_info);
    let facts = eta::Facts {
        weights_bytes_per_gpu: memory
            .as_ref()
            .filter(|m| m.weights_bytes_per_gpu > 0)
            .map(|m| m.weights_bytes_per_gpu as f64),
        kv_bytes_per_token_per_gpu: memory.as_ref().map(|m| m.kv_bytes_per_token_per_gpu as f64),
        layers: model_info
            .and_then(|m| m.as_ref().ok())
            .map(|m| m.num_layers),
        gpu: c.hardware.gpu_figures(),
        max_running: memory
            .as_ref()
            .map(|m| m.max_running_requests)
            .filter(|&n| n > 0),
    };
    let speed = eta::prior_speed(c, s, command.as_deref(), &facts, cpu);
    let startup = if c.run.startup_given {
        c.run.startup_estimate.as_secs_f64()
    } else {
        let total = facts
            .weights_bytes_per_gpu
            .map(|w| w * f64::from(s.gpus()))
            .or_else(|| eta::model_file_bytes(std::path::Path::new(&c.model.path)));
        let eager = command.as_deref().is_some_and(|argv| {
            argv.iter()
                .any(|a| a == "--enforce-eager" || a == "--disable-cuda-graph")
        });
        let on_cpu = eta::runs_on_cpu(c).then_some(cpu);
        eta::startup_prior_s(c.engine.kind, total, s.gpus(), eager, on_cpu)
    };
    (speed, startup)
}

/// Render the plan as a terminal table, optionally with launch commands.
pub fn render(plan: &Plan, show_commands: bool) -> String {
    let mut out = String::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    if let Some(cpu) = plan.cpu {
        out.push_str(&cpu.describe());
        out.push_str("\n\n");
    }
    for n in &plan.engine_notes {
        out.push_str(n);
        out.push('\n');
    }
    if !plan.engine_notes.is_empty() {
        out.push('\n');
    }
    for g in &plan.groups {
        render_group_head(g, &mut out);
        match &g.command {
            Ok(argv) if show_commands => {
                // The port is picked at launch time.
                let shown = shell_words(argv).replace("--port 0", "--port <free port>");
                out.push_str(&format!("  command: {shown}\n"));
            }
            Err(e) => out.push_str(&format!("  cannot launch: {e}\n")),
            _ => {}
        }
        let first_skip = g.cells.first().and_then(|c| match &c.verdict {
            Verdict::Skip(r) => Some(r.clone()),
            _ => None,
        });
        if let Some(reason) = first_skip.filter(|r| {
            g.cells
                .iter()
                .all(|c| c.verdict == Verdict::Skip(r.clone()))
        }) {
            *counts.entry("skip").or_default() += g.cells.len();
            out.push_str(&format!(
                "  all {} cells skipped: {reason}\n\n",
                g.cells.len()
            ));
            continue;
        }
        let rows: Vec<Vec<String>> = g
            .cells
            .iter()
            .map(|c| {
                *counts.entry(c.verdict.kind()).or_default() += 1;
                let mut verdict = c.verdict.label();
                if let Some(why) = &c.left {
                    verdict.push_str(&format!(" (left by goal = \"answer\": {why})"));
                }
                if !c.warnings.is_empty() {
                    verdict.push_str(&format!(" (warning: {})", c.warnings.join("; ")));
                }
                vec![
                    format!("  {}", c.name),
                    if c.verdict.runs() {
                        fmt_eta(c.eta_s)
                    } else {
                        "-".into()
                    },
                    verdict,
                ]
            })
            .collect();
        if !rows.is_empty() {
            out.push_str(&table::render(&["  cell", "ETA", "verdict"], &rows));
        }
        for ps in &g.searches {
            if ps.runs() {
                *counts.entry("probes expected").or_default() += ps.probes_left_expected as usize;
            }
            out.push_str(&render_search(ps));
        }
        out.push('\n');
    }
    let mut summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    if summary.is_empty() {
        summary.push("nothing to measure".into());
    }
    let t = &plan.totals;
    out.push_str(&format!(
        "total: {} servers to launch, {}; ETA {}",
        t.servers_to_launch,
        summary.join(", "),
        fmt_s(t.eta_s)
    ));
    if t.parallel > 1 {
        out.push_str(&format!(
            " with --parallel {} ({} one after another)",
            t.parallel,
            fmt_s(t.sequential_eta_s)
        ));
    }
    if plan.filtered_out > 0 {
        out.push_str(&format!(
            " ({} cells left out by --only)",
            plan.filtered_out
        ));
    }
    out.push('\n');
    if let Some(line) = gpu_time(plan) {
        out.push_str(&line);
    }
    for u in &plan.unreadable {
        out.push_str(&format!("warning: unreadable stored result {u}\n"));
    }
    out
}

/// The GPU time of what is left, the grid's beside answer first's: each
/// server's start-up and cells times the GPUs it holds. Answer first costs
/// at least every start-up, the likely leader's cells and a probe of every
/// other server's points, and at most the grid (plus those probes); where
/// between depends on how close the configs are.
fn gpu_time(plan: &Plan) -> Option<String> {
    let groups: Vec<&ServerGroup> = plan.groups.iter().filter(|g| g.needs_launch()).collect();
    if groups.is_empty() {
        return None;
    }
    let gpus = |g: &ServerGroup| f64::from(g.server.gpus().max(1));
    let cells_s = |g: &ServerGroup| g.eta_s() - g.startup_eta_s;
    let grid: f64 = groups.iter().map(|g| g.eta_s() * gpus(g)).sum();
    // With stored cells to gate against, even the first server probes.
    let stored = plan
        .groups
        .iter()
        .any(|g| g.cells.iter().any(|c| c.verdict == Verdict::Cached));
    let leader = groups
        .iter()
        .min_by(|a, b| (cells_s(a) * gpus(a)).total_cmp(&(cells_s(b) * gpus(b))))
        .filter(|_| !stored);
    let probes: f64 = groups
        .iter()
        .filter(|g| leader.is_none_or(|l| g.server.id != l.server.id))
        .flat_map(|g| {
            g.cells
                .iter()
                .filter(|c| c.verdict.runs())
                .map(move |c| (g, c))
        })
        .filter_map(|(g, c)| {
            let p = crate::goal::probe_point(&c.workload)?;
            Some(plan.estimator.cell_s(&g.server.id, &p) * gpus(g))
        })
        .sum();
    let startups: f64 = groups.iter().map(|g| g.startup_eta_s * gpus(g)).sum();
    let floor = startups + leader.map_or(0.0, |l| cells_s(l) * gpus(l)) + probes;
    Some(format!(
        "GPU time: {} for the grid (start-ups and cells, times the GPUs each server holds); with goal = \"answer\" at least {} (every start-up, the first server's cells unless stored cells lead, a probe of every other point: {:.0} % of the grid), at most the grid's and its probes\n",
        fmt_s(grid),
        fmt_s(floor),
        100.0 * floor / grid.max(f64::MIN_POSITIVE)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_run_side_by_side_as_slots_and_gpus_allow() {
        let groups = [(4, 100.0), (4, 100.0), (2, 50.0), (1, 0.0)];
        // One after another.
        assert_eq!(parallel_wall_s(&groups, 1, 8), 250.0);
        // Two at once on 8 GPUs: the TP2 group starts when the first ends.
        assert_eq!(parallel_wall_s(&groups, 2, 8), 150.0);
        // Three slots, but the TP2 group waits for GPUs.
        assert_eq!(parallel_wall_s(&groups, 3, 8), 150.0);
        assert_eq!(parallel_wall_s(&groups, 3, 10), 100.0);
        // No GPU pool (CPU servers): slots alone limit.
        assert_eq!(parallel_wall_s(&groups, 3, 0), 100.0);
        // A group wider than the pool runs alone on all of it.
        assert_eq!(parallel_wall_s(&[(8, 10.0), (8, 10.0)], 2, 4), 20.0);
        assert_eq!(parallel_wall_s(&[], 4, 8), 0.0);
    }
}
