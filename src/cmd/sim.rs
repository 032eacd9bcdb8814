//! `servebench sim`: the built-in simulated server.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::{cli, sim, util};

/// `servebench sim`: serve the simulator until cancelled.
pub async fn run(args: cli::SimArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    if args.print_version {
        let version = args
            .build_version
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
        println!("servebench-sim {version}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut config = args.config;
    config.validate().map_err(|e| anyhow::anyhow!(e))?;
    config.log = true;
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", args.host, args.port))?;
    if let Some(p) = &args.port_file {
        let port = listener.local_addr()?.port();
        util::fsx::write_atomic(p, port.to_string().as_bytes())?;
    }
    match sim::serve(listener, config, cancel).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(sim::SimError::Crashed(_)) => Ok(ExitCode::from(134)),
        Err(e) => Err(e.into()),
    }
}
