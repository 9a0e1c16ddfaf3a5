//! The signals that stop a recording (SIGINT, SIGTERM, SIGHUP).
use tokio::signal::unix::{SignalKind, signal};

use crate::error::TracerError;

/// Signals we stop on.
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Result<Signals, TracerError> {
        let mk = |k| {
            signal(k).map_err(|e| TracerError::Other(format!("installing signal handlers: {e}")))
        };
        Ok(Signals {
            int: mk(SignalKind::interrupt())?,
            term: mk(SignalKind::terminate())?,
            hup: mk(SignalKind::hangup())?,
        })
    }

    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}
