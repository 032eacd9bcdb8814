//! Launchers start and stop server processes. `local` runs a child in its
//! own process group; every launched server sits in a guard that stops the
//! whole group on every exit path, panics included.

pub mod local;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::Endpoint;
use crate::failure::{Failure, FailureClass};

/// Poll `path` on `endpoint` until it answers 200, the process dies
/// (`exited` returns its status), the timeout passes, or `cancel` fires.
pub async fn wait_healthy(
    endpoint: &Endpoint,
    path: &str,
    timeout: Duration,
    cancel: &CancellationToken,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<Duration, Failure> {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(status) = exited() {
            return Err(Failure::new(
                FailureClass::StartFailed,
                format!("server exited before becoming healthy ({status})"),
            ));
        }
        let last = match endpoint.get(path, Duration::from_secs(5)).await {
            Ok((200, _)) => return Ok(start.elapsed()),
            Ok((status, body)) => {
                format!("HTTP {status}: {}", String::from_utf8_lossy(&body).trim())
            }
            Err(f) => f.detail,
        };
        if start.elapsed() >= timeout {
            return Err(Failure::new(
                FailureClass::HealthTimeout,
                format!(
                    "not healthy after {:.0} s; last answer: {last}",
                    timeout.as_secs_f64()
                ),
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = cancel.cancelled() => {
                return Err(Failure::new(FailureClass::StartFailed, "interrupted while waiting for health"));
            }
        }
    }
}
