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
    let cli = servebench::cli::Cli::parse();
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
