//! The `servebench` binary: parse, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;
use servebench::launcher::supervise;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(supervise::SUBCOMMAND) {
        // The supervisor is single-threaded on purpose: no runtime here.
        return ExitCode::from(supervise::main(&args[2..]) as u8);
    }
    if let Ok(exe) = std::env::current_exe() {
        supervise::enable(exe);
    }
    if let Some(msg) = servebench::cmd::bench::vllm_dialect::refused_flag(&args) {
        eprintln!("error: {msg}");
        return ExitCode::from(2);
    }
    let cli = servebench::cli::Cli::parse();
    if !matches!(cli.command, servebench::cli::Command::Sim(_)) {
        // A reader that stops reading (`plan | head`) ends the output the
        // way it ends any Unix tool's, quietly, instead of a panic in the
        // first print after it. Servers started by `run` die with it as
        // with any signal; the simulator is a server and keeps the default
        // of ignoring it.
        // SAFETY: setting a signal's disposition before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(servebench::EXIT_ERROR);
        }
    };
    match runtime.block_on(servebench::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::from(servebench::EXIT_ERROR)
        }
    }
}
