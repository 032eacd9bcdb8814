//! `servebench bisect`: measure one cell on the builds a bisection asks
//! for, each through the campaign's own runner, so every measurement is a
//! stored cell that `run`, `report` and a later `bisect` reuse (a bisection
//! interrupted resumes where it stopped: the builds it measured are cached).

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use tokio_util::sync::CancellationToken;

use super::EXIT_INTERRUPTED;
use crate::bisect::{self, Bisection, Cells, Next, Observation, Watch};
use crate::campaign::{Campaign, ServerConfig, WorkloadPoint};
use crate::store::CellResult;
use crate::{campaign, cli, runner};

/// `servebench bisect`: the first build where the watched property changed.
pub async fn run(a: cli::BisectArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let c = campaign::load_campaign(&a.campaign)?;
    let watch: Watch = a.watch.parse()?;
    let order = build_order(&c, &a.builds)?;
    let servers = servers_by_build(&c, a.server.as_deref(), &order)?;
    let points = watched_points(&c, a.cell.as_deref())?;
    let good = a.good.clone().unwrap_or_else(|| order[0].clone());
    let bad = a
        .bad
        .clone()
        .unwrap_or_else(|| order[order.len() - 1].clone());
    let mut b = Bisection::new(order, &good, &bad)?;
    let _lock = matches!(c.launcher, campaign::launcher::Launcher::Local)
        .then(|| runner::lock::acquire(&c.results_dir))
        .transpose()?;
    let events = runner::events::Events::terminal();
    println!(
        "bisect: {} builds from `{good}` (good) to `{bad}` (bad), watching {watch} at {} of the config `{}` runs on each",
        b.names.len(),
        points[0].cell_name(),
        servers[0].id,
    );
    let mut m = Measured {
        c: &c,
        servers: &servers,
        points: &points,
        events: &events,
        cells: BTreeMap::new(),
    };
    let (g, h) = b.ends();
    for i in [g, h] {
        if let Err(e) = m.ensure(i, &cancel).await {
            return if cancel.is_cancelled() {
                Ok(interrupted())
            } else {
                Err(e)
            };
        }
    }
    let (gv, hv) = (m.view(g), m.view(h));
    let (gc, hc) = (m.cells(g, &gv), m.cells(h, &hv));
    let first = bisect::check_ends(&watch, (&gc, &hc), a.threshold).map_err(|e| {
        anyhow!(
            "{e}\n  good `{}`: {}\n  bad `{}`: {}",
            b.names[g],
            bisect::good_text(&watch, &gc, a.threshold),
            b.names[h],
            describe(&watch, &gc, &hc, a.threshold)
        )
    })?;
    b.record(
        g,
        Observation::Good(bisect::good_text(&watch, &gc, a.threshold)),
    );
    b.record(h, first);
    say(&b, g, &servers);
    say(&b, h, &servers);
    let end = loop {
        let i = match b.next() {
            Next::Measure(i) => i,
            end => break end,
        };
        if let Err(e) = m.ensure(i, &cancel).await {
            if cancel.is_cancelled() {
                return Ok(interrupted());
            }
            return Err(e);
        }
        let (gv, hv, iv) = (m.view(g), m.view(h), m.view(i));
        let o = bisect::observe(
            &watch,
            (&m.cells(g, &gv), &m.cells(h, &hv)),
            &m.cells(i, &iv),
            a.threshold,
        );
        b.record(i, o);
        say(&b, i, &servers);
    };
    print!("{}", conclusion(&b, &end, &watch, &servers));
    Ok(ExitCode::SUCCESS)
}

/// Says that the bisection stopped and how it resumes.
fn interrupted() -> ExitCode {
    eprintln!("interrupted: the builds measured are stored; run bisect again to resume");
    ExitCode::from(EXIT_INTERRUPTED)
}

/// The cells measured so far, by the position of their build.
struct Measured<'a> {
    c: &'a Campaign,
    servers: &'a [ServerConfig],
    points: &'a [WorkloadPoint],
    events: &'a runner::events::Events,
    cells: BTreeMap<usize, Vec<CellResult>>,
}

impl Measured<'_> {
    /// Measure the build at `i`, unless it is measured already.
    async fn ensure(&mut self, i: usize, cancel: &CancellationToken) -> anyhow::Result<()> {
        if !self.cells.contains_key(&i) {
            let cells =
                measure_one(self.c, &self.servers[i], self.points, self.events, cancel).await?;
            self.cells.insert(i, cells);
        }
        Ok(())
    }

    /// The build's cells, borrowed.
    fn view(&self, i: usize) -> Vec<&CellResult> {
        self.cells
            .get(&i)
            .map(|v| v.iter().collect())
            .unwrap_or_default()
    }

    /// The build's cells with its server, for judging.
    fn cells<'v>(&'v self, i: usize, view: &'v [&'v CellResult]) -> Cells<'v> {
        Cells {
            server: &self.servers[i].id,
            cells: view,
        }
    }
}

/// What the watched property is in `of`, against the good build's cells.
fn describe(watch: &Watch, good: &Cells, of: &Cells, threshold: f64) -> String {
    match bisect::observe(watch, (good, of), of, threshold) {
        Observation::Good(t) | Observation::Bad(t) | Observation::Untestable(t) => t,
    }
}

/// One line for what the build at `i` showed.
fn say(b: &Bisection, i: usize, servers: &[ServerConfig]) {
    let (verdict, text) = match &b.seen[&i] {
        Observation::Good(t) => ("good", t),
        Observation::Bad(t) => ("bad", t),
        Observation::Untestable(t) => ("untestable, skipped", t),
    };
    println!("  `{}` ({}): {verdict}: {text}", b.names[i], servers[i].id);
}

/// The closing lines: the build where the property changed, with both
/// measurements, and how many builds it took.
fn conclusion(b: &Bisection, end: &Next, watch: &Watch, servers: &[ServerConfig]) -> String {
    let evidence = |i: usize| match &b.seen[&i] {
        Observation::Good(t) | Observation::Bad(t) | Observation::Untestable(t) => t.clone(),
    };
    let tally = format!("{} of {} builds measured", b.measured(), b.names.len());
    match end {
        Next::Found {
            last_good,
            first_bad,
        } => format!(
            "first build where {watch} changed: `{}` (server {}); {tally}\n  last good `{}`: {}\n  first bad `{}`: {}\n",
            b.names[*first_bad],
            servers[*first_bad].id,
            b.names[*last_good],
            evidence(*last_good),
            b.names[*first_bad],
            evidence(*first_bad)
        ),
        Next::Between {
            last_good,
            first_bad,
            untestable,
        } => {
            let skipped: Vec<String> = untestable
                .iter()
                .map(|i| format!("`{}` ({})", b.names[*i], evidence(*i)))
                .collect();
            format!(
                "{watch} changed after `{}` and by `{}`, but the builds between cannot be tested: {}; {tally}\n  last good `{}`: {}\n  first bad found `{}`: {}\n",
                b.names[*last_good],
                b.names[*first_bad],
                skipped.join("; "),
                b.names[*last_good],
                evidence(*last_good),
                b.names[*first_bad],
                evidence(*first_bad)
            )
        }
        Next::Measure(_) => String::new(),
    }
}

/// Measure (or reuse) the cells of `server` at `points` through the
/// campaign's runner, as `run --only` would.
async fn measure_one(
    c: &Campaign,
    server: &ServerConfig,
    points: &[WorkloadPoint],
    events: &runner::events::Events,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<CellResult>> {
    let mut one = c.clone();
    one.servers = vec![server.clone()];
    one.workloads = points.to_vec();
    one.searches.clear();
    let select = cli::SelectArgs {
        only: Vec::new(),
        force: false,
        rerun_failed: false,
        retry_crashed: false,
        reuse_across_versions: false,
        prior_results: Vec::new(),
    };
    let mut plan = super::plan::plan_options(&select, &one, false)?;
    plan.parallel = 1;
    super::plan::detect_engine(&one, &mut plan, false);
    let opts = runner::RunOptions {
        plan,
        fail_fast: false,
        dry_run: false,
        parallel: 1,
        local: false,
        job_args: Vec::new(),
        goal: campaign::Goal::Grid,
    };
    let outcome = runner::run_campaign(&one, &opts, events, cancel.clone()).await?;
    if outcome.interrupted {
        bail!("interrupted while measuring `{}`", server.id);
    }
    Ok(outcome.cells)
}

/// The builds in the order bisected: `--builds` as given (each one the
/// campaign declares), else the `[[build]]` order.
fn build_order(c: &Campaign, given: &[String]) -> anyhow::Result<Vec<String>> {
    let declared: Vec<String> = c.builds.iter().map(|b| b.name.clone()).collect();
    if declared.is_empty() {
        bail!("the campaign declares no [[build]] to bisect");
    }
    if given.is_empty() {
        return Ok(declared);
    }
    for g in given {
        if !declared.contains(g) {
            bail!(
                "--builds: `{g}` is not a [[build]] of the campaign ({})",
                declared.join(", ")
            );
        }
    }
    Ok(given.to_vec())
}

/// A server's settings without its build: the config it shares with the
/// same config on other builds (the build's own environment left out).
fn config_of(c: &Campaign, s: &ServerConfig) -> serde_json::Value {
    let mut v = s.settings();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("build");
        let build = s
            .build_name()
            .and_then(|n| c.builds.iter().find(|b| b.name == n));
        if let (Some(b), Some(env)) = (build, obj.get_mut("env").and_then(|e| e.as_object_mut())) {
            for (k, value) in &b.env {
                if env.get(k).and_then(|x| x.as_str()) == Some(value.as_str()) {
                    env.remove(k);
                }
            }
        }
    }
    v
}

/// For each build in `order`, the server running the bisected config on it.
fn servers_by_build(
    c: &Campaign,
    server: Option<&str>,
    order: &[String],
) -> anyhow::Result<Vec<ServerConfig>> {
    let reference = match server {
        Some(id) => c
            .servers
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| anyhow!("--server: no server `{id}` in the campaign"))?,
        None => only_config_on_builds(c)?,
    };
    let config = config_of(c, reference);
    order
        .iter()
        .map(|name| {
            c.servers
                .iter()
                .find(|s| s.build_name() == Some(name.as_str()) && config_of(c, s) == config)
                .cloned()
                .ok_or_else(|| {
                    anyhow!(
                        "build `{name}` runs no server like `{}`: add it to that config's `build` axis",
                        reference.id
                    )
                })
        })
        .collect()
}

/// The one config the campaign runs on more than one build.
fn only_config_on_builds(c: &Campaign) -> anyhow::Result<&ServerConfig> {
    let mut configs: Vec<(serde_json::Value, &ServerConfig, usize)> = Vec::new();
    for s in c.servers.iter().filter(|s| s.build.is_some()) {
        let v = config_of(c, s);
        match configs.iter_mut().find(|(x, _, _)| *x == v) {
            Some((_, _, n)) => *n += 1,
            None => configs.push((v, s, 1)),
        }
    }
    let several: Vec<&ServerConfig> = configs
        .iter()
        .filter(|(_, _, n)| *n > 1)
        .map(|(_, s, _)| *s)
        .collect();
    match several.as_slice() {
        [one] => Ok(one),
        [] => bail!(
            "no server config of the campaign runs on two builds or more: give one a `build` axis"
        ),
        many => bail!(
            "several configs run on several builds; name one with --server: {}",
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The repetitions of the watched cell.
fn watched_points(c: &Campaign, cell: Option<&str>) -> anyhow::Result<Vec<WorkloadPoint>> {
    let base = |w: &WorkloadPoint| {
        let mut w = w.clone();
        w.repetition = 0;
        w.cell_name()
    };
    let mut names: Vec<String> = Vec::new();
    for n in c.workloads.iter().map(base) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let listed = names
        .iter()
        .take(12)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let name = match cell {
        Some(n) => n.to_string(),
        None if names.len() == 1 => names[0].clone(),
        None => bail!(
            "the campaign has {} cells; name the one to watch with --cell: {listed}",
            names.len()
        ),
    };
    let points: Vec<WorkloadPoint> = c
        .workloads
        .iter()
        .filter(|w| base(w) == name)
        .cloned()
        .collect();
    if points.is_empty() {
        bail!("--cell: no cell `{name}` in the campaign; its cells: {listed}");
    }
    Ok(points)
}
