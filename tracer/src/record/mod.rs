//! `tracer record`: resolve and attach the plans, run or follow the traced processes, stop on
//! the command's exit, a signal or the duration, detach everything, and write the run.
//!
//! Layout: `session` (probes loaded and attached once, shared with `sweep`), `run` (one run
//! of a session, step by step), `command` (one command run within it), `spec` (what a run
//! traces), `advice` (what the extra runs ask of the analysis), `extra` (more runs where a sweep's verdicts could still change), `targets` (target
//! selection and the checks made before anything loads), `process` (held commands, /proc), `events` (`events.csv` while recording), `signals` and
//! `progress`.
use std::path::PathBuf;
use std::time::Duration;

use crate::dir_writer::DirWriter;
use crate::engine::{Engine, EngineOptions};
use crate::error::TracerError;
use crate::kernel::{kallsyms::Kallsyms, privileges::Privileges};
use crate::resolve::{self, ResolveOptions, Resolved};
use crate::rundata::Run;

pub mod advice;
mod command;
mod events;
mod extra;
mod invocations;
mod process;
mod progress;
mod run;
mod session;
mod signals;
mod spec;
mod targets;
mod workload_report;

pub use extra::ExtraRuns;
pub use process::{EXEC_HELD, descendants, exec_held_main};
pub use session::Session;
pub use signals::Signals;
pub use spec::{
    ExternalSweep, FilterSpec, Invocation, RunSpec, has_n_placeholder, run_spec, substitute_n,
};
pub use targets::{check_forced, check_usdt, resolve_phase_fn, select_targets, usdt_sites};

use progress::Progress;
use targets::distinct_notes;

#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub command: Vec<String>,
    pub pids: Vec<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<PathBuf>,
    pub system: bool,
    pub duration: Option<Duration>,
    pub out: PathBuf,
    pub force: bool,
    /// Target names; empty = all built-in targets.
    pub targets: Vec<String>,
    pub resolve: ResolveOptions,
    pub engine: EngineOptions,
    /// Show a live status line on stderr (when it is a terminal).
    pub progress: bool,
    /// A JSON file the command writes (its own report), embedded in run.json when it exists.
    pub attach_json: Option<PathBuf>,
    /// Extra binaries whose phase markers to attach (besides the command's own binary).
    pub marker_binaries: Vec<PathBuf>,
    /// `--phase-fn BINARY:SYMBOL|0xADDR`: count only calls made inside this function.
    pub phase_fn: Option<String>,
}

#[derive(Debug)]
pub struct RecordOutcome {
    pub dir: PathBuf,
    pub run: Run,
    /// The stack files as written (metadata, stacks): what a caller analysing the run
    /// at once takes instead of reading it back.
    pub stacks: Vec<(crate::rundata::StackFile, crate::rundata::Folded)>,
    /// Exit code the CLI should return.
    pub exit_code: i32,
}

/// Can this process trace here at all: enough privilege, and the kernel's view of process
/// ids. Checked before anything loads.
pub fn check_privileges() -> Result<(), TracerError> {
    let p = Privileges::current();
    if !p.sufficient() {
        return Err(TracerError::Privileges(p.missing()));
    }
    // Inside a PID namespace the probes find the processes they follow by their pids there
    // (the engine's namespace seeds), but everything read from /proc must be the namespace's
    // view too: a /proc of another namespace would name other processes by the same numbers.
    if let Some(ns) = crate::kernel::privileges::pid_namespace()
        && !crate::kernel::privileges::proc_matches_pid_namespace()
    {
        return Err(TracerError::Unsupported(format!(
            "the tracer runs inside a PID namespace (pid:[{}]) whose /proc is another \
             namespace's (/proc/self is not pid {}), so it would read other processes' files \
             for its own\n  mount a /proc for the namespace (unshare -p -f --mount-proc, as \
             containers do), or run the tracer outside it",
            ns.ino,
            std::process::id()
        )));
    }
    Ok(())
}

/// Load, resolve and report how each target would be measured (for `tracer probes`).
pub fn resolve_only(
    targets: &[String],
    ropts: &ResolveOptions,
    verbose: bool,
) -> Result<(Vec<Resolved>, Engine), TracerError> {
    check_privileges()?;
    let targets = select_targets(targets, false)?;
    check_forced(&ropts.forced)?;
    let engine_opts = EngineOptions {
        sample_freq_hz: 0,
        caller_stacks: false,
        offcpu_stacks: false,
        raw_events_bytes: 0,
        bpf_log: verbose,
        scheduler: true,
        ..EngineOptions::default()
    };
    let mut engine = Engine::load(engine_opts)?;
    let ksyms = Kallsyms::load().map_err(|e| TracerError::Other(format!("/proc/kallsyms: {e}")))?;
    let progress = Progress::new(true);
    let (resolved, _) = resolve::resolve(&mut engine, &ksyms, &targets, ropts, |m| {
        progress.set(m.to_string())
    })?;
    progress.finish();
    for n in distinct_notes(&resolved) {
        progress.println(&format!("tracer: {n}"));
    }
    Ok((resolved, engine))
}

pub fn record(opts: RecordOptions) -> Result<RecordOutcome, TracerError> {
    let spec = run_spec(&opts)?;
    let targets = select_targets(&opts.targets, opts.engine.discover)?;
    check_forced(&opts.resolve.forced)?;
    check_privileges()?;
    // Fail on an unusable output before attaching anything or running a long benchmark.
    let writer = DirWriter::prepare(&opts.out, opts.force)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| TracerError::Other(format!("starting the runtime: {e}")))?;
    runtime.block_on(async {
        let mut session =
            Session::attach(opts.engine.clone(), &targets, &opts.resolve, opts.progress).await?;
        session.run(&spec, writer, true).await
    })
}
