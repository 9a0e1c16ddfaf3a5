//! Top-level errors and the exit codes they map to (documented in `tracer --help`).
use crate::dir_writer::OutputError;
use crate::engine::EngineError;
use crate::resolve::ResolveError;

/// Process exit codes. Stable: scripts depend on them.
pub mod exit {
    pub const OK: i32 = 0;
    /// Unexpected failure (a bug or an unclassified system error).
    pub const FAILURE: i32 = 1;
    /// Bad command line (clap's own code).
    pub const USAGE: i32 = 2;
    /// Not enough privilege to load eBPF / open perf events.
    pub const PRIVILEGES: i32 = 3;
    /// The kernel cannot measure what was asked (no usable plan, no tracefs, no BTF ...), or
    /// a named function is too hot to probe without `--force-hot`.
    pub const UNSUPPORTED: i32 = 4;
    /// The output could not be written (exists, another tracer is writing it, unwritable,
    /// disk full).
    pub const OUTPUT: i32 = 5;
    /// An input run directory is missing, corrupt or of another format.
    pub const INPUT: i32 = 6;
    /// Interrupted (SIGINT/SIGTERM/SIGHUP): partial data was written and marked partial.
    pub const INTERRUPTED: i32 = 7;
    /// The traced command failed (non-zero exit or killed); the run data is complete.
    pub const COMMAND_FAILED: i32 = 8;
    /// A gate failed (everything was written as usual): `compare --fail-on` matched a
    /// verdict's outcome, or a fitted class set excludes the class `--expect` named.
    pub const GATE_FAILED: i32 = 9;
    /// A gate could not judge: the compare has no verdict to gate on (no traced target on
    /// either side, as in `--discover` sweeps), or `--expect` names a target or case the data
    /// does not have, or one with no fitted class.
    pub const GATE_UNJUDGED: i32 = 10;
}

pub const EXIT_CODES_HELP: &str = "\
Exit status:
  0  success
  1  unexpected failure
  2  bad command line
  3  insufficient privileges (run with sudo, or grant CAP_BPF and CAP_PERFMON)
  4  the kernel cannot measure what was asked (see `tracer probes`), or a
     named function is called too often to probe without --force-hot
  5  output could not be written (exists, another tracer is writing it,
     unwritable, disk full)
  6  input run directory missing, corrupt or of another format
  7  interrupted by a signal; partial data written and marked partial
  8  the traced command failed; the run data is complete
  9  a gate failed: compare --fail-on matched a verdict's outcome, or a fitted
     class set excludes the class sweep/report --expect named (all output is
     written first)
 10  a gate cannot judge: the compare has no verdict to gate on (no traced
     target, e.g. --discover sweeps), or --expect names a target or case not
     in the data, or one with no fitted class
A sweep's own 7 or 8 takes precedence over 9 and 10; 10 over 9.

If the tracer is killed (SIGKILL) or crashes, the kernel detaches its probes and the command
it started gets SIGKILL too (PR_SET_PDEATHSIG), so it does not run on untraced. Its temporary
.NAME.partial-PID directory stays until the next tracer writes to the same directory.";

#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    #[error(
        "insufficient privileges: {0}\n  run with sudo, or grant CAP_BPF and CAP_PERFMON (kernel 5.8+)"
    )]
    Privileges(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Usage(String),
    /// Stopped by a signal before anything was recorded.
    #[error("{0}")]
    Interrupted(String),
    #[error(transparent)]
    Engine(EngineError),
    #[error(transparent)]
    Resolve(ResolveError),
    #[error("{0}")]
    Other(String),
}

impl From<crate::render::ReportError> for TracerError {
    fn from(e: crate::render::ReportError) -> Self {
        use crate::render::ReportError;
        match e {
            ReportError::Load(_) | ReportError::Unexportable { .. } => {
                TracerError::Input(e.to_string())
            }
            ReportError::Write { path, source } | ReportError::Flamegraph { path, source } => {
                TracerError::Output(OutputError::Write { path, source })
            }
            ReportError::Interrupted(_) => TracerError::Interrupted(e.to_string()),
            _ => TracerError::Other(e.to_string()),
        }
    }
}

impl From<EngineError> for TracerError {
    fn from(e: EngineError) -> Self {
        classify_engine(e)
    }
}

impl From<ResolveError> for TracerError {
    fn from(e: ResolveError) -> Self {
        match e {
            ResolveError::Engine(e) => classify_engine(e),
            ResolveError::UnknownPlan { .. } => TracerError::Usage(e.to_string()),
            other => TracerError::Resolve(other),
        }
    }
}

/// EPERM while loading is a privilege problem (or lockdown), not a bug: say so.
fn classify_engine(e: EngineError) -> TracerError {
    let text = crate::engine::error_chain(&e);
    // Under kernel lockdown the verifier refuses helpers that read kernel memory (or the
    // load is denied outright): say that, not "invalid argument".
    if let Some(mode) = crate::kernel::privileges::lockdown().filter(|m| m != "none")
        && matches!(
            e,
            EngineError::Program { .. } | EngineError::Load(_) | EngineError::Tracefs(_)
        )
    {
        return TracerError::Unsupported(format!(
            "kernel lockdown is {mode:?}: it forbids the tracing the probes need (tracefs, \
                 reading kernel memory from BPF, kprobes); boot without lockdown (no lockdown= \
                 parameter, or with Secure Boot's lockdown lifted) to trace\n  ({text})"
        ));
    }
    if e.is_refusal() {
        return TracerError::Privileges(text);
    }
    if matches!(e, EngineError::Tracefs(_)) {
        return TracerError::Unsupported(text);
    }
    TracerError::Engine(e)
}

impl TracerError {
    pub fn exit_code(&self) -> i32 {
        match self {
            TracerError::Privileges(_) => exit::PRIVILEGES,
            TracerError::Unsupported(_) => exit::UNSUPPORTED,
            TracerError::Output(_) => exit::OUTPUT,
            TracerError::Input(_) => exit::INPUT,
            TracerError::Usage(_) => exit::USAGE,
            TracerError::Interrupted(_) => exit::INTERRUPTED,
            TracerError::Engine(_) | TracerError::Resolve(_) | TracerError::Other(_) => {
                exit::FAILURE
            }
        }
    }
}
