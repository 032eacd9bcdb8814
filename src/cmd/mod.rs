//! One module per subcommand: each turns typed arguments into calls on the
//! library and its outcome into an exit code; the dispatch and the signal
//! handling they share live here.

pub mod bench;
pub mod bisect;
pub mod init;
pub mod logs;
pub mod memory;
pub mod plan;
pub mod report;
pub mod run;
pub mod sim;
pub mod trace;

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::cli;

/// Exit code when the run finished but some requests or cells failed.
pub const EXIT_SOME_FAILED: u8 = 3;
/// Exit code when the run could not be carried out.
pub const EXIT_ERROR: u8 = 1;
/// Exit code after an interrupt (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// An optional duration flag (`10m`, `30s`) in seconds, its error naming the flag.
pub fn seconds_flag(flag: &str, v: &Option<String>) -> anyhow::Result<Option<f64>> {
    v.as_deref()
        .map(|s| crate::util::units::parse_duration(s).map(|d| d.as_secs_f64()))
        .transpose()
        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// Run a parsed command line to completion.
pub async fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    let cancel = CancellationToken::new();
    spawn_signal_handler(cancel.clone());
    match cli.command {
        cli::Command::Init(args) => init::run(args),
        cli::Command::Plan(args) => plan::run(args),
        cli::Command::Run(args) => run::run(args, cancel).await,
        cli::Command::Bench(args) => Ok(match bench::run(*args, cancel).await? {
            bench::BenchEnd::AllOk => ExitCode::SUCCESS,
            bench::BenchEnd::SomeFailed => ExitCode::from(EXIT_SOME_FAILED),
            bench::BenchEnd::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        }),
        cli::Command::Sim(args) => sim::run(args, cancel).await,
        cli::Command::Memory(args) => memory::run(args),
        cli::Command::Logs(args) => logs::run(args),
        cli::Command::Report(args) => report::run(args),
        cli::Command::Compare(args) => report::compare(args),
        cli::Command::Bisect(args) => bisect::run(args, cancel).await,
        cli::Command::Trace(args) => trace::run(args),
    }
}

/// Turn SIGINT/SIGTERM into cancellation; a second signal exits at once.
///
/// Both handlers are registered before this returns, so a signal that
/// arrives at any later moment (say, while a server is starting) cancels
/// cleanly instead of killing the process with the default action.
fn spawn_signal_handler(cancel: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::spawn(async move {
        for _ in 0..2 {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if cancel.is_cancelled() {
                std::process::exit(EXIT_INTERRUPTED as i32);
            }
            eprintln!("interrupted: stopping (signal again to exit at once)");
            cancel.cancel();
        }
    });
}
