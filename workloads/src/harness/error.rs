//! Why a workload stopped, and the exit status each reason maps to.

use std::io;

use super::limits::LimitError;

/// Exit status for a run that a limit refused before doing anything.
pub const EXIT_LIMIT: u8 = 3;
/// Exit status for a variant or option the running kernel lacks.
pub const EXIT_UNSUPPORTED: u8 = 4;
/// Exit status for any other failure.
pub const EXIT_FAILURE: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SIGINT/SIGTERM/SIGHUP arrived; everything was cleaned up on the way out.
    #[error("interrupted by {}", signal_name(*.0))]
    Interrupted(i32),
    #[error(transparent)]
    Limit(#[from] LimitError),
    #[error("{0}")]
    Unsupported(String),
    /// A system call failed; carries its name (and target) and the OS error.
    #[error("{call} failed: {source}")]
    Sys { call: String, source: io::Error },
    #[error("{0}")]
    Failed(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failed system call described by `call`, with the current errno.
    pub fn last_os(call: impl Into<String>) -> Self {
        Error::Sys {
            call: call.into(),
            source: io::Error::last_os_error(),
        }
    }

    pub fn sys(call: impl Into<String>, errno: nix::errno::Errno) -> Self {
        Error::Sys {
            call: call.into(),
            source: io::Error::from_raw_os_error(errno as i32),
        }
    }

    pub fn io(call: impl Into<String>, source: io::Error) -> Self {
        Error::Sys {
            call: call.into(),
            source,
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Interrupted(sig) => 128u8.saturating_add(*sig as u8),
            Error::Limit(_) => EXIT_LIMIT,
            Error::Unsupported(_) => EXIT_UNSUPPORTED,
            Error::Sys { .. } | Error::Failed(_) => EXIT_FAILURE,
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
