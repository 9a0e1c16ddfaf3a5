//! `tracer record`: resolve and attach the plans, run or follow the traced processes, stop on
//! the command's exit, a signal or the duration, detach everything, and write the run.
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{SignalKind, signal};

use crate::collect;
use crate::engine::{Engine, EngineOptions, Filter};
use crate::error::TracerError;
use crate::kernel::{
    self, kallsyms::Kallsyms, privileges::Privileges, symbolize::KernelSymbolizer,
};
use crate::output::DirWriter;
use crate::plan::{self, Target};
use crate::probecost;
use crate::resolve::{self, ResolveOptions, Resolved};
use crate::rundata::{self, Run, RunStatus};
use crate::symbols::UserSymbolizer;

/// Where function probes can run when this kernel refuses them.
const VM_HINT: &str =
    "\n  run the function probes inside a VM instead: cargo xtask vm --kernel 6.1 -- tracer ...";

/// Hidden subcommand that holds a command until the tracer is ready, then execs it.
pub const EXEC_HELD: &str = "__exec-held";

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
    /// Exit code the CLI should return.
    pub exit_code: i32,
}

/// Why recording stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stop {
    CommandExited,
    Signal(&'static str),
    Duration,
    TracedProcessesGone,
}

pub fn check_privileges() -> Result<(), TracerError> {
    let p = Privileges::current();
    if p.sufficient() {
        Ok(())
    } else {
        Err(TracerError::Privileges(p.missing()))
    }
}

/// Pick targets by name, with their kernel-side ids (dense, in the order named, so the
/// kernel maps hold just these). No names: the built-in default targets, or none in discover
/// mode (sampling alone needs no probe). A name that is not a built-in target is any kernel
/// function, resolved by the generic plan ladder (`plan::arbitrary_target`).
pub fn select_targets(
    names: &[String],
    discover: bool,
) -> Result<Vec<(u32, &'static Target)>, TracerError> {
    let chosen: Vec<&'static Target> = if names.is_empty() {
        if discover {
            Vec::new()
        } else {
            plan::TARGETS.iter().filter(|t| t.default).collect()
        }
    } else {
        let mut out: Vec<&'static Target> = Vec::new();
        for n in names {
            if out.iter().any(|t| t.name == n) {
                continue;
            }
            match plan::target_by_name(n) {
                Some((_, t)) => out.push(t),
                None if plan::valid_function_name(n) => {
                    check_function_exists(n)?;
                    // Refused on any kernel, so before anything loads: a bad request (exit 2).
                    if let Some(why) = crate::guard::recursion(n) {
                        return Err(TracerError::Usage(format!("cannot trace {why}")));
                    }
                    out.push(plan::arbitrary_target(n))
                }
                None => {
                    return Err(TracerError::Usage(format!(
                        "unknown target {n:?}: not a kernel function name (letters, digits, _ \
                         and .; built-in targets: {})",
                        plan::TARGETS
                            .iter()
                            .map(|t| t.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
        out
    };
    if chosen.len() > tracer_ebpf::MAX_TARGETS {
        return Err(TracerError::Usage(format!(
            "{} targets named: at most {} per run",
            chosen.len(),
            tracer_ebpf::MAX_TARGETS
        )));
    }
    Ok(chosen
        .into_iter()
        .enumerate()
        .map(|(i, t)| (i as u32, t))
        .collect())
}

/// A function the user named must exist in this kernel (as itself or a compiler clone)
/// before anything is attached or run. Names are readable without privileges.
fn check_function_exists(name: &str) -> Result<(), TracerError> {
    static KSYMS: std::sync::OnceLock<Option<Kallsyms>> = std::sync::OnceLock::new();
    let Some(ksyms) = KSYMS.get_or_init(|| Kallsyms::load().ok()) else {
        // No kallsyms to check against: the plan ladder reports what it finds.
        return Ok(());
    };
    if ksyms.contains(name) || !ksyms.clones(name).is_empty() {
        return Ok(());
    }
    Err(TracerError::Usage(format!(
        "unknown target {name:?}: no such function in /proc/kallsyms (not built into this \
         kernel, or inlined into every caller, which can then be traced instead); \
         `tracer sweep --discover -- CMD {{n}}` shows the functions a workload's kernel time \
         goes through"
    )))
}

/// The resolution notes, each once: a fact about the machine (an unreadable list) is noted
/// for every named function but said once.
fn distinct_notes(resolved: &[Resolved]) -> Vec<&String> {
    let mut out: Vec<&String> = Vec::new();
    for n in resolved.iter().flat_map(|r| r.notes.iter()) {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The USDT phase sites of a binary: none when it is not an ELF file or has no
/// `tracer:phase_*` probes; a malformed note, or more sites than the probes have room for,
/// is a usage error (exit 2) before anything loads.
pub fn usdt_sites(binary: &Path) -> Result<Vec<crate::usdt::PhaseSite>, TracerError> {
    use crate::usdt::UsdtError;
    let Ok(data) = std::fs::read(binary) else {
        return Ok(Vec::new());
    };
    match crate::usdt::phase_sites(&data) {
        Ok(sites) if sites.len() > tracer_ebpf::USDT_SLOTS => Err(TracerError::Usage(format!(
            "{}: {} USDT phase probe sites (tracer:phase_begin/phase_end), more than the {} \
             the tracer's probes have room for: fire them from fewer places (e.g. one \
             non-inlined function per probe)",
            binary.display(),
            sites.len(),
            tracer_ebpf::USDT_SLOTS
        ))),
        Ok(sites) => Ok(sites),
        Err(UsdtError::NotElf(_) | UsdtError::Architecture(_)) => Ok(Vec::new()),
        Err(e) => Err(TracerError::Usage(format!("{}: {e}", binary.display()))),
    }
}

/// Check the USDT notes of the binaries whose markers a run attaches.
pub fn check_usdt<'a>(binaries: impl Iterator<Item = &'a PathBuf>) -> Result<(), TracerError> {
    let mut total = 0;
    for b in binaries {
        total += usdt_sites(b)?.len();
    }
    if total > tracer_ebpf::USDT_SLOTS {
        return Err(TracerError::Usage(format!(
            "{total} USDT phase probe sites in the traced binaries, more than the {} the \
             tracer's probes have room for",
            tracer_ebpf::USDT_SLOTS
        )));
    }
    Ok(())
}

/// `--phase-fn`, resolved (a usage error when the binary or function cannot be found).
pub fn resolve_phase_fn(
    arg: Option<&str>,
) -> Result<Option<crate::phase_fn::PhaseFn>, TracerError> {
    arg.map(crate::phase_fn::resolve)
        .transpose()
        .map_err(|e| TracerError::Usage(e.to_string()))
}

/// Find an executable the way execvp would.
pub fn find_executable(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        p.is_file()
            && p.metadata()
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_exec(&p).then(|| p.canonicalize().unwrap_or(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_exec(p))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Status line shown while recording.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(enabled: bool) -> Progress {
        // indicatif draws nothing, and drops what is printed through it, on a terminal it
        // cannot drive (TERM=dumb, as on a VM's serial console): plain lines there.
        if !enabled
            || !std::io::stderr().is_terminal()
            || indicatif::ProgressDrawTarget::stderr().is_hidden()
        {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    fn set(&self, msg: String) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
        }
    }

    fn println(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
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

/// What one traced run consists of (one command, or one set of processes).
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub command: Vec<String>,
    /// The command's executable, resolved through PATH.
    pub exe: Option<PathBuf>,
    pub filter: FilterSpec,
    pub duration: Option<Duration>,
    pub attach_json: Option<PathBuf>,
    pub marker_binaries: Vec<PathBuf>,
    /// Label for progress messages (e.g. the workload name).
    pub label: String,
    /// The N values the command will sweep, when known (for the progress display).
    pub n_values: Vec<u64>,
    /// An external sweep: run `command` once per N (and repeat), `{n}` replaced.
    pub external: Option<ExternalSweep>,
    /// Only calls inside this function are in a phase (`--phase-fn`).
    pub phase_fn: Option<crate::phase_fn::PhaseFn>,
}

/// How an external sweep runs the user's command.
#[derive(Clone, Debug)]
pub struct ExternalSweep {
    pub n_values: Vec<u64>,
    pub repeat: u32,
    /// Operations per run, when the user knows them (`--ops`).
    pub ops: Option<crate::cli::OpsExpr>,
}

#[derive(Clone, Debug)]
pub enum FilterSpec {
    /// The command's process tree plus these pids' trees.
    Follow(Vec<u32>),
    Comm(String),
    Cgroup(PathBuf, u64),
    System,
}

/// Validate the user's choice of what to trace and build the run spec.
pub fn run_spec(opts: &RecordOptions) -> Result<RunSpec, TracerError> {
    let filter_count = usize::from(!opts.pids.is_empty())
        + usize::from(opts.comm.is_some())
        + usize::from(opts.cgroup.is_some())
        + usize::from(opts.system);
    if filter_count > 1 {
        return Err(TracerError::Usage(
            "choose one of --pid, --comm, --cgroup and --system".into(),
        ));
    }
    if opts.command.is_empty() && filter_count == 0 {
        return Err(TracerError::Usage(
            "say what to trace: -- COMMAND..., --pid PID, --comm NAME, --cgroup PATH or --system"
                .into(),
        ));
    }
    let exe = match opts.command.first() {
        Some(c) => Some(find_executable(c).ok_or_else(|| {
            TracerError::Usage(format!("command not found or not executable: {c}"))
        })?),
        None => None,
    };
    for m in &opts.marker_binaries {
        if !m.is_file() {
            return Err(TracerError::Usage(format!(
                "--markers {}: no such file",
                m.display()
            )));
        }
    }
    check_usdt(opts.marker_binaries.iter().chain(exe.iter()))?;
    let phase_fn = resolve_phase_fn(opts.phase_fn.as_deref())?;
    for pid in &opts.pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Err(TracerError::Usage(format!("no process with pid {pid}")));
        }
    }
    let filter = if opts.system {
        FilterSpec::System
    } else if let Some(c) = &opts.comm {
        if c.is_empty() || c.len() > 15 {
            return Err(TracerError::Usage(format!(
                "--comm {c:?}: a task name is 1 to 15 bytes (the kernel truncates longer names)"
            )));
        }
        FilterSpec::Comm(c.clone())
    } else if let Some(p) = &opts.cgroup {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(p)
            .map_err(|e| TracerError::Usage(format!("cgroup {}: {e}", p.display())))?;
        if !md.is_dir() {
            return Err(TracerError::Usage(format!(
                "cgroup {}: not a directory",
                p.display()
            )));
        }
        FilterSpec::Cgroup(p.clone(), md.ino())
    } else {
        FilterSpec::Follow(opts.pids.clone())
    };
    Ok(RunSpec {
        command: opts.command.clone(),
        exe,
        filter,
        duration: opts.duration,
        attach_json: opts.attach_json.clone(),
        marker_binaries: opts.marker_binaries.clone(),
        phase_fn,
        label: String::new(),
        n_values: Vec::new(),
        external: None,
    })
}

/// Every `--plan TARGET=PLAN` must name a known target and one of its plans.
pub fn check_forced(forced: &BTreeMap<String, String>) -> Result<(), TracerError> {
    for (t, p) in forced {
        let target = match plan::target_by_name(t) {
            Some((_, target)) => target,
            None if plan::valid_function_name(t) => {
                check_function_exists(t).map_err(|e| match e {
                    TracerError::Usage(m) => TracerError::Usage(format!("--plan {t}={p}: {m}")),
                    other => other,
                })?;
                plan::arbitrary_target(t)
            }
            None => {
                return Err(TracerError::Usage(format!(
                    "--plan {t}={p}: unknown target {t:?}: not a kernel function name (built-in targets: {})",
                    plan::TARGETS
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        if !target.plans.iter().any(|x| x.name == p) {
            return Err(TracerError::Usage(format!(
                "--plan {t}={p}: unknown plan {p:?} for {t} (its plans: {})",
                target
                    .plans
                    .iter()
                    .map(|x| x.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
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

/// Loaded and attached probes, reusable for several runs (a sweep traces each workload in
/// turn with one resolution).
pub struct Session {
    engine: Engine,
    resolved: Vec<Resolved>,
    signals: Signals,
    progress: Progress,
    markers_attached: Vec<PathBuf>,
    /// USDT sites attached so far (counted in every run of the session).
    usdt_sites: u64,
    usdt_semaphores: u64,
    phase_fn_attached: bool,
    engine_opts: EngineOptions,
    /// Raw per-call events (with --raw-events), polled as they arrive.
    events: Option<tokio::io::unix::AsyncFd<aya::maps::RingBuf<aya::maps::MapData>>>,
    /// Set once a run was stopped by a signal: the session must not start another.
    pub interrupted: Option<&'static str>,
    attach_time: Duration,
    verify_time: Duration,
    probe_cost_time: Duration,
}

impl Session {
    pub async fn attach(
        engine_opts: EngineOptions,
        targets: &[(u32, &'static Target)],
        ropts: &ResolveOptions,
        show_progress: bool,
    ) -> Result<Session, TracerError> {
        // Signals are caught from here on, so a Ctrl-C during attach still ends in an orderly
        // detach (the engine's Drop) instead of killing us with probes half-attached.
        let attach_started = Instant::now();
        let mut signals = Signals::install()?;
        let progress = Progress::new(show_progress);
        // The aggregate maps hold as many targets per phase as this run measures.
        let mut engine_opts = engine_opts;
        engine_opts.targets = targets.iter().map(|t| t.0 + 1).max().unwrap_or(1);
        // Reading and indexing /proc/kallsyms takes about as long as loading the probes: do
        // both at once (on an error below the reader finishes on its own and is dropped).
        let ksyms_job = std::thread::spawn(Kallsyms::load);
        let mut engine = Engine::load(engine_opts.clone())?;
        if engine.mounted_tracefs {
            progress.println("tracer: tracefs was not mounted; mounted it at /sys/kernel/tracing");
        }
        let ksyms = ksyms_job
            .join()
            .map_err(|_| TracerError::Other("/proc/kallsyms: the reader panicked".into()))?
            .map_err(|e| TracerError::Other(format!("/proc/kallsyms: {e}")))?;
        let (mut resolved, verify_time) =
            resolve::resolve(&mut engine, &ksyms, targets, ropts, |m| {
                progress.set(m.to_string())
            })?;
        for n in distinct_notes(&resolved) {
            progress.println(&format!("tracer: {n}"));
        }
        // A function the user asked for that is too hot to probe ends the run: running
        // without it would not answer the question, and with it would slow the machine.
        let hot: Vec<String> = resolved
            .iter()
            .filter(|r| r.hot_refused)
            .filter_map(|r| r.rejected.last().map(|rej| rej.reason.clone()))
            .collect();
        if !hot.is_empty() {
            return Err(TracerError::Unsupported(hot.join("\n")));
        }
        for r in &resolved {
            if let (None, Some(p)) = (&r.active, ropts.forced.get(r.target.name)) {
                let mut msg = format!(
                    "{}: the forced plan {p} cannot be used on this kernel:",
                    r.target.name
                );
                for rej in &r.rejected {
                    msg.push_str(&format!("\n    {}: {}", rej.plan, rej.reason));
                }
                // A function refused as dangerous is refused in a VM too.
                if !r.guarded {
                    msg.push_str(VM_HINT);
                }
                return Err(TracerError::Unsupported(msg));
            }
        }
        // Discover mode samples without any probe: unmeasurable targets are only warned about.
        if !resolved.is_empty()
            && resolved.iter().all(|r| r.active.is_none())
            && !engine_opts.discover
        {
            let mut msg = String::from("no target can be measured on this kernel:");
            for r in &resolved {
                msg.push_str(&format!("\n  {}:", r.target.name));
                for rej in &r.rejected {
                    msg.push_str(&format!("\n    {}: {}", rej.plan, rej.reason));
                }
            }
            if !resolved.iter().all(|r| r.guarded) {
                msg.push_str(VM_HINT);
            }
            return Err(TracerError::Unsupported(msg));
        }
        for r in &resolved {
            if r.active.is_none() {
                progress.println(&format!(
                    "tracer: {} cannot be measured here (see `tracer probes`)",
                    r.target.name
                ));
            }
        }
        progress.set("measuring the probes' own cost".to_string());
        let probe_cost_time = probecost::measure_all(&mut engine, &ksyms, &mut resolved)?;
        engine.clear()?;
        let events = match engine.take_events() {
            // SAFETY: the ring buffer owns its fd for as long as the AsyncFd lives; nothing
            // else closes it.
            Some(rb) => Some(
                unsafe { tokio::io::unix::AsyncFd::register(rb) }.map_err(|e| {
                    TracerError::Other(format!(
                        "polling the event ring buffer: {}",
                        e.into_parts().1
                    ))
                })?,
            ),
            None => None,
        };
        // Let the runtime's signal driver run: attaching was synchronous, so a signal that
        // arrived meanwhile has not reached `signals` yet (a plain poll would miss it).
        let sig = tokio::select! {
            biased;
            s = signals.recv() => Some(s),
            _ = tokio::time::sleep(Duration::from_millis(1)) => None,
        };
        if let Some(sig) = sig {
            return Err(TracerError::Interrupted(format!(
                "interrupted by {sig} while attaching; nothing recorded"
            )));
        }
        Ok(Session {
            engine,
            resolved,
            signals,
            progress,
            markers_attached: Vec::new(),
            usdt_sites: 0,
            usdt_semaphores: 0,
            phase_fn_attached: false,
            engine_opts,
            events,
            interrupted: None,
            attach_time: attach_started.elapsed(),
            verify_time,
            probe_cost_time,
        })
    }

    pub fn resolved(&self) -> &[Resolved] {
        &self.resolved
    }

    pub fn println(&self, msg: &str) {
        self.progress.println(msg);
    }

    /// Trace one run and write it with `writer`. With `detach`, every probe is detached before
    /// the maps are read (the end of a one-run session); otherwise the probes stay attached
    /// for the next run and the maps are cleared after reading. An external sweep's run
    /// (`spec.external`) runs the command once per N (and repeat), each run one phase.
    pub async fn run(
        &mut self,
        spec: &RunSpec,
        writer: DirWriter,
        detach: bool,
    ) -> Result<RecordOutcome, TracerError> {
        let started = Instant::now();
        let started_unix = unix_now();
        self.engine.clear()?;

        let mut markers = 0u64;
        for b in spec.marker_binaries.iter().chain(spec.exe.iter()) {
            if self.markers_attached.contains(b) {
                markers += 1;
                continue;
            }
            if self.engine.attach_phase_markers(b)? {
                self.markers_attached.push(b.clone());
                markers += 1;
                continue;
            }
            let sites = usdt_sites(b)?;
            if !sites.is_empty() {
                let a = self.engine.attach_usdt(b, &sites)?;
                if let Some(n) = &a.note {
                    self.progress.println(&format!("tracer: {n}"));
                }
                self.usdt_sites += a.sites as u64;
                self.usdt_semaphores += a.semaphores as u64;
                self.markers_attached.push(b.clone());
                markers += 1;
            }
        }
        if let Some(pf) = &spec.phase_fn
            && !self.phase_fn_attached
        {
            self.engine.attach_phase_fn(&pf.binary, pf.file_offset)?;
            self.phase_fn_attached = true;
            if !pf.aliases.is_empty() {
                self.progress.println(&format!(
                    "tracer: note: --phase-fn {}: {} share its address (identical code folded \
                     into one body): their calls are in the phase too",
                    pf.what,
                    pf.aliases.join(", ")
                ));
            }
        }
        let target_names = self.target_names();
        let mut events_out = match self.events {
            Some(_) => {
                let path = writer.path().join(rundata::EVENTS_CSV);
                let f = std::fs::File::create(&path).map_err(|source| {
                    crate::output::OutputError::Write {
                        path: path.clone(),
                        source,
                    }
                })?;
                let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
                use std::io::Write;
                w.write_all(collect::EVENTS_HEADER.as_bytes())
                    .map_err(|source| crate::output::OutputError::Write {
                        path: path.clone(),
                        source,
                    })?;
                Some(EventSink {
                    w,
                    path,
                    rows: 0,
                    error: None,
                })
            }
            None => None,
        };
        // Events from calibration or an earlier run of this session are not this run's.
        if let Some(fd) = self.events.as_mut() {
            while fd.get_mut().next().is_some() {}
        }
        let mut usyms = UserSymbolizer::default();

        let plan = invocation_plan(spec);
        let mut invocations: Vec<rundata::Invocation> = Vec::new();
        let mut stop = Stop::CommandExited;
        let mut command_status = None;
        let mut filter_desc = String::new();
        for (i, inv) in plan.iter().enumerate() {
            // With --phase-fn, a recording without N is phase (command, N=1) inside the
            // function.
            let phase = match (inv.phase, &spec.phase_fn) {
                (None, Some(_)) => Some((workloads::cases::CASE_COMMAND, 1)),
                (p, _) => p,
            };
            if let Some((case, n)) = phase {
                self.engine.set_default_phase(case, n)?;
            }
            if spec.phase_fn.is_some() {
                let ops = spec
                    .external
                    .as_ref()
                    .and_then(|e| e.ops.as_ref())
                    .zip(phase)
                    .map(|(o, (_, n))| o.eval(n))
                    .unwrap_or(1);
                self.engine.set_phase_fn_ops(ops)?;
            }
            let label = match inv.phase {
                Some((_, n)) => format!("{} N={n} [{}/{}]", spec.label, i + 1, plan.len()),
                None => spec.label.clone(),
            };
            let res = self
                .run_one(
                    spec,
                    inv,
                    &label,
                    &target_names,
                    &mut events_out,
                    &mut usyms,
                )
                .await?;
            if phase.is_some() {
                self.engine.clear_default_phase()?;
            }
            filter_desc = res.filter_desc;
            stop = res.stop.clone();
            command_status = res.status;
            let exit = res.status.map(exit_code_of);
            // With --phase-fn the return probe counted each call of the function as a phase.
            if let (Some((case, n)), Some(0), None) = (inv.phase, exit, &spec.phase_fn) {
                let ops = spec
                    .external
                    .as_ref()
                    .and_then(|e| e.ops.as_ref())
                    .map(|o| o.eval(n))
                    .unwrap_or(1);
                self.engine
                    .add_phase_stats(case, n, ops, res.wall.as_nanos() as u64)?;
            }
            if let Some((_, n)) = inv.phase
                && !matches!(exit, Some(0))
                && !matches!(res.stop, Stop::Signal(_))
            {
                self.progress.println(&format!(
                    "tracer: the command failed at N={n} ({}); continuing with the other N",
                    match exit {
                        Some(c) => format!("exit {c}"),
                        None => "no exit status".into(),
                    }
                ));
            }
            invocations.push(rundata::Invocation {
                n: inv.phase.map_or(0, |p| p.1),
                command: inv.command.clone(),
                exit,
                wall_s: res.wall.as_secs_f64(),
                user_s: res.user_s,
                sys_s: res.sys_s,
            });
            if let Stop::Signal(s) = res.stop {
                self.interrupted = Some(s);
                break;
            }
        }
        let engine = &mut self.engine;
        let progress = &self.progress;
        let resolved = &self.resolved;
        let events = &mut self.events;
        // Probe log messages queued since the last tick (short commands end between ticks).
        engine.flush_logs();
        progress.set(String::new());

        // The kernel symbol table for this run's stacks, read while every probe is attached:
        // BPF programs and fentry trampolines are listed only while loaded, and modules or
        // programs loaded during the run are listed too. It takes ~0.15 s, after the command
        // is done (with --system or --comm the probes count that much longer).
        let ksyms = match KernelSymbolizer::load() {
            Ok(k) => k,
            Err(e) => {
                progress.println(&format!(
                    "tracer: /proc/kallsyms: {e}; kernel frames are shown as [unknown]"
                ));
                KernelSymbolizer::default()
            }
        };

        // Detach before reading so the numbers are final and nothing stays attached whatever
        // happens while writing. In a multi-run session the traced tree is gone by now (or
        // was filtered by name/cgroup and keeps adding a few events, which only blurs the
        // edges of this run).
        let detach_started = Instant::now();
        if detach {
            engine.detach_all();
        }
        let detach_time = detach_started.elapsed();
        if let (Some(fd), Some(sink)) = (events.as_mut(), events_out.as_mut()) {
            drain_events(fd.get_mut(), sink, &target_names);
        }
        let snap = engine.snapshot()?;
        for (k, _) in &snap.stacks {
            if k.tgid != 0 {
                usyms.remember(k.tgid);
            }
        }

        let reports: Vec<_> = resolved.iter().map(Resolved::report).collect();
        let spans = collect::span_rows(&snap, &target_names);
        let phases = collect::phase_rows(&snap);
        let stacks = collect::stack_files(&snap, &target_names, &ksyms, &mut usyms);
        let mut cases: BTreeMap<u32, String> = BTreeMap::new();
        for r in &spans {
            cases.insert(r.case, r.case_name.clone());
        }
        for p in &phases {
            cases.insert(p.case, p.case_name.clone());
        }
        // One command: its exit. A sweep over N: the first failure, if any run failed.
        let command_exit = if spec.external.is_some() {
            invocations
                .iter()
                .map(|i| i.exit.unwrap_or(128))
                .find(|&c| c != 0)
                .or(Some(0))
                .filter(|_| !invocations.is_empty())
        } else {
            command_status.map(exit_code_of)
        };
        let workload = spec.attach_json.as_ref().and_then(|p| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
        });
        let (status, partial_reason) = match &stop {
            Stop::Signal(s) => (RunStatus::Partial, Some(format!("interrupted by {s}"))),
            _ => (RunStatus::Complete, None),
        };
        let mut counters = collect::counters(&snap);
        counters.insert("phase_marker_binaries".into(), markers);
        if self.usdt_sites > 0 {
            counters.insert("usdt_sites".into(), self.usdt_sites);
            counters.insert("usdt_semaphores".into(), self.usdt_semaphores);
        }
        if let Some(mut sink) = events_out.take() {
            use std::io::Write;
            if sink.error.is_none()
                && let Err(e) = sink.w.flush()
            {
                sink.error = Some(e);
            }
            if let Some(source) = sink.error {
                return Err(crate::output::OutputError::Write {
                    path: sink.path,
                    source,
                }
                .into());
            }
            counters.insert("raw_events_written".into(), sink.rows);
        }
        let run = Run {
            format: rundata::FORMAT.into(),
            status,
            partial_reason,
            tracer_version: env!("CARGO_PKG_VERSION").into(),
            kernel: kernel::kernel_info(),
            hostname: kernel::hostname(),
            started_unix,
            duration_s: started.elapsed().as_secs_f64(),
            command: spec.command.clone(),
            command_exit,
            filter: filter_desc,
            sample_freq_hz: self.engine_opts.sample_freq_hz,
            targets: reports,
            counters,
            cases,
            spans,
            phases,
            stack_files: stacks.iter().map(|(m, _)| m.clone()).collect(),
            workload,
            resources: Some(rundata::Resources {
                attach_ms: self.attach_time.as_secs_f64() * 1e3,
                verify_ms: self.verify_time.as_secs_f64() * 1e3,
                probe_cost_ms: self.probe_cost_time.as_secs_f64() * 1e3,
                detach_ms: detach_time.as_secs_f64() * 1e3,
                peak_rss_kib: kernel::peak_rss_kib(),
                map_memlock_bytes: kernel::bpf_map_memlock_bytes(),
            }),
            invocations,
            discover: self.engine_opts.discover,
        };
        run.validate()
            .map_err(|e| TracerError::Other(format!("internal: inconsistent run data: {e}")))?;
        writer.write(rundata::RUN_FILE, run.to_json().as_bytes())?;
        writer.write(rundata::SPANS_CSV, run.spans_csv().as_bytes())?;
        for (meta, content) in &stacks {
            writer.write(&meta.path, content.as_bytes())?;
        }
        let dir = writer.commit()?;
        if !detach {
            self.engine.clear()?;
        }

        let exit_code = match (&stop, command_exit) {
            (Stop::Signal(_), _) => crate::error::exit::INTERRUPTED,
            (Stop::CommandExited, Some(c)) if c != 0 => crate::error::exit::COMMAND_FAILED,
            _ => crate::error::exit::OK,
        };
        Ok(RecordOutcome {
            dir,
            run,
            exit_code,
        })
    }

    /// Names of the kernel target ids this session measures (index = id).
    fn target_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for r in &self.resolved {
            let i = r.index as usize;
            if names.len() <= i {
                names.resize(i + 1, String::new());
            }
            names[i] = r.target.name.to_string();
        }
        names
    }

    /// Run one command (or follow the given processes) until it exits, a signal arrives or
    /// the duration ends.
    async fn run_one(
        &mut self,
        spec: &RunSpec,
        inv: &Invocation,
        label: &str,
        target_names: &[String],
        events_out: &mut Option<EventSink>,
        usyms: &mut UserSymbolizer,
    ) -> Result<OneRun, TracerError> {
        let rusage_before = children_rusage();
        let started = Instant::now();
        let engine = &mut self.engine;
        let mut child = None;
        let mut release: Option<OwnedFd> = None;
        if !inv.command.is_empty() {
            let (c, w) = spawn_held(&inv.command, &inv.env)?;
            child = Some(c);
            release = Some(w);
        }
        let child_pid = child.as_ref().and_then(|c| c.id());
        let filter = match &spec.filter {
            FilterSpec::System => Filter::System,
            FilterSpec::Comm(c) => Filter::Comm(c.clone()),
            FilterSpec::Cgroup(path, id) => Filter::Cgroup {
                path: path.clone(),
                id: *id,
            },
            FilterSpec::Follow(pids) => {
                let mut all = pids.clone();
                all.extend(pids.iter().flat_map(|p| descendants(*p)));
                all.extend(child_pid);
                Filter::Follow(all)
            }
        };
        engine.set_filter(&filter)?;
        if let Some(w) = release.take() {
            // Let the command exec now that everything is attached.
            let _ = nix::unistd::write(&w, b"g");
        }

        let deadline = spec.duration.map(|d| tokio::time::Instant::now() + d);
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut command_status: Option<std::process::ExitStatus> = None;
        let signals = &mut self.signals;
        let progress = &self.progress;
        let resolved = &self.resolved;
        let events = &mut self.events;
        let stop = loop {
            tokio::select! {
                guard = async { events.as_mut().expect("guarded").readable_mut().await }, if events.is_some() => {
                    if let (Ok(mut g), Some(sink)) = (guard, events_out.as_mut()) {
                        drain_events(g.get_inner_mut(), sink, target_names);
                        g.clear_ready();
                    }
                }
                st = async { child.as_mut().expect("guarded").wait().await }, if child.is_some() && command_status.is_none() => {
                    command_status = st.ok();
                    break Stop::CommandExited;
                }
                sig = signals.recv() => break Stop::Signal(sig),
                _ = async { tokio::time::sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => break Stop::Duration,
                _ = tick.tick() => {
                    engine.flush_logs();
                    // Bounded: a workload may follow thousands of idle children.
                    for pid in engine.followed().into_iter().take(256) {
                        usyms.remember(pid);
                    }
                    if let Some(p) = child_pid {
                        usyms.remember(p);
                    }
                    progress.set(status_line(engine, resolved, spec, label, child_pid));
                    if child.is_none() && matches!(filter, Filter::Follow(_)) && engine.followed().is_empty() {
                        break Stop::TracedProcessesGone;
                    }
                }
            }
        };

        // Wind the command down when we stop for another reason than its exit.
        if let (Some(c), None) = (child.as_mut(), command_status) {
            let sig = match &stop {
                Stop::Signal("SIGTERM") => nix::sys::signal::Signal::SIGTERM,
                Stop::Signal("SIGHUP") => nix::sys::signal::Signal::SIGHUP,
                Stop::Signal(_) => nix::sys::signal::Signal::SIGINT,
                _ => nix::sys::signal::Signal::SIGTERM,
            };
            if let Some(pid) = c.id() {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
            }
            progress.set(
                "waiting for the command to exit (up to 5 s; Ctrl-C again to stop now)".into(),
            );
            let grace = tokio::time::sleep(Duration::from_secs(5));
            tokio::pin!(grace);
            tokio::select! {
                st = c.wait() => command_status = st.ok(),
                _ = &mut grace => {}
                _ = signals.recv() => {}
            }
            if command_status.is_none() {
                let _ = c.start_kill();
                command_status = c.wait().await.ok();
            }
        }
        let wall = started.elapsed();
        let after = children_rusage();
        Ok(OneRun {
            stop,
            status: command_status,
            wall,
            user_s: (after.0 - rusage_before.0).max(0.0),
            sys_s: (after.1 - rusage_before.1).max(0.0),
            filter_desc: filter.describe(),
        })
    }

    pub fn finish(self) {
        self.progress.finish();
    }
}

/// One command run within a run: what to run, with what environment, in which phase.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    /// (case, N) for every process of this run that announces no phase itself.
    pub phase: Option<(u32, u64)>,
}

/// What one command run came to.
struct OneRun {
    stop: Stop,
    status: Option<std::process::ExitStatus>,
    wall: Duration,
    user_s: f64,
    sys_s: f64,
    filter_desc: String,
}

/// The command runs a run consists of: one, or for an external sweep one per N and repeat.
fn invocation_plan(spec: &RunSpec) -> Vec<Invocation> {
    match &spec.external {
        None => vec![Invocation {
            command: spec.command.clone(),
            env: Vec::new(),
            phase: None,
        }],
        Some(ext) => {
            let mut out = Vec::new();
            for &n in &ext.n_values {
                for _ in 0..ext.repeat.max(1) {
                    out.push(Invocation {
                        command: substitute_n(&spec.command, n),
                        env: vec![("TRACER_N".into(), n.to_string())],
                        phase: Some((workloads::cases::CASE_COMMAND, n)),
                    });
                }
            }
            out
        }
    }
}

/// The command line for one N: every `{n}` (or `{N}`) replaced by N. clap turns `{n}` in
/// help text into a line break, so the help spells it `{N}`; both work.
pub fn substitute_n(template: &[String], n: u64) -> Vec<String> {
    template
        .iter()
        .map(|a| {
            a.replace("{n}", &n.to_string())
                .replace("{N}", &n.to_string())
        })
        .collect()
}

/// Does an argument hold the N placeholder?
pub fn has_n_placeholder(arg: &str) -> bool {
    arg.contains("{n}") || arg.contains("{N}")
}

/// A wait status as one exit code: the code, or 128 + the signal.
fn exit_code_of(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// (user, system) CPU seconds of the reaped children of this process so far: the difference
/// around one command run is that command's tree (its descendants count once reaped).
fn children_rusage() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

struct EventSink {
    w: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    rows: u64,
    /// The first write error; reported when the run is written.
    error: Option<std::io::Error>,
}

fn drain_events(
    rb: &mut aya::maps::RingBuf<aya::maps::MapData>,
    sink: &mut EventSink,
    target_names: &[String],
) {
    use std::io::Write;
    while let Some(item) = rb.next() {
        if sink.error.is_some() {
            continue; // keep draining so the kernel side does not count drops for our failure
        }
        if let Some(row) = collect::event_row(&item, target_names) {
            match sink.w.write_all(row.as_bytes()) {
                Ok(()) => sink.rows += 1,
                Err(e) => sink.error = Some(e),
            }
        }
    }
}

/// "waitpid: waitpid-pid N=1000 [3/6]  do_wait 1234  dup_mmap 56"
fn status_line(
    engine: &Engine,
    resolved: &[Resolved],
    spec: &RunSpec,
    label: &str,
    root: Option<u32>,
) -> String {
    let mut parts = Vec::new();
    if !label.is_empty() {
        parts.push(format!("{label}:"));
    }
    if let Some(p) = root.and_then(|pid| engine.current_phase(pid)) {
        let pos = spec.n_values.iter().position(|&n| n == p.n);
        let of = match pos {
            Some(i) => format!(" [{}/{}]", i + 1, spec.n_values.len()),
            None => String::new(),
        };
        parts.push(format!(
            "{} N={}{of}",
            workloads::cases::case_name(p.case),
            p.n
        ));
    }
    if let Ok(calls) = engine.calls_per_target() {
        for r in resolved.iter().filter(|r| r.active.is_some()) {
            parts.push(format!("{} {}", r.target.name, calls[r.index as usize]));
        }
    }
    parts.join("  ")
}

/// Start `command` held before exec: the child is this binary waiting on a pipe; writing a
/// byte to the returned fd lets it exec the command (same pid, so it is already followed).
/// If the tracer dies first, the pipe closes and the command never runs untraced; if it dies
/// later (SIGKILL, a crash), the command gets SIGKILL, so it never runs on untraced either.
fn spawn_held(
    command: &[String],
    env: &[(String, String)],
) -> Result<(tokio::process::Child, OwnedFd), TracerError> {
    let (r, w) = nix::unistd::pipe().map_err(|e| TracerError::Other(format!("pipe: {e}")))?;
    // Only the read end may be inherited.
    nix::fcntl::fcntl(
        &w,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| TracerError::Other(format!("fcntl: {e}")))?;
    let me = std::env::current_exe().map_err(|e| TracerError::Other(e.to_string()))?;
    let mut cmd = tokio::process::Command::new(me);
    cmd.arg(EXEC_HELD)
        .arg(r.as_raw_fd().to_string())
        .arg("--")
        .args(command)
        .envs(env.iter().map(|(k, v)| (k, v)));
    let parent = nix::unistd::getpid().as_raw();
    // The parent-death signal goes with the command through both execs (the held child's and
    // the command's), except into a set-user-ID or file-capability program, whose exec clears
    // it. It fires when the *thread* that forked dies: this runs on the thread that drives the
    // runtime (the main thread, for record and sweep), which lives as long as the process.
    // SAFETY: between fork and exec the child only makes async-signal-safe calls (prctl,
    // getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The tracer died before prctl took effect: the signal will never come.
            if libc::getppid() != parent {
                libc::_exit(125);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| TracerError::Other(format!("starting {}: {e}", command[0])))?;
    drop(r);
    Ok((child, w))
}

/// Child side of `spawn_held`. Never returns on success.
pub fn exec_held_main(args: &[String]) -> i32 {
    use std::os::unix::process::CommandExt;
    let (Some(fd), Some(sep)) = (args.first(), args.get(1)) else {
        return 125;
    };
    if sep != "--" || args.len() < 3 {
        return 125;
    }
    let Ok(fd) = fd.parse::<i32>() else {
        return 125;
    };
    let mut byte = [0u8; 1];
    // SAFETY: the fd was inherited for exactly this purpose.
    let n = unsafe { libc::read(fd, byte.as_mut_ptr().cast(), 1) };
    unsafe { libc::close(fd) };
    if n != 1 {
        // The tracer went away before releasing us: do not run untraced.
        return 125;
    }
    let err = std::process::Command::new(&args[2]).args(&args[3..]).exec();
    eprintln!("tracer: cannot run {}: {err}", args[2]);
    127
}

/// All descendants of `pid` now (children of children ...), from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
                // The comm field may contain spaces and parens: parse after the last ')'.
                if let Some(rest) = stat.rsplit_once(')').map(|x| x.1)
                    && let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok())
                {
                    parent_of.push((p, ppid));
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_selection() {
        let all = select_targets(&[], false).unwrap();
        assert_eq!(all.len(), 4, "the four mission targets by default");
        assert!(all.iter().all(|(_, t)| t.name != "getpid"));
        assert!(
            select_targets(&[], true).unwrap().is_empty(),
            "discover needs no probe"
        );
        assert_eq!(select_targets(&["getpid".into()], false).unwrap()[0].0, 0);
        let t = select_targets(&["dup_mmap".into(), "dup_mmap".into()], false).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, 0);
        let t = select_targets(&["do_wait".into(), "copy_process".into()], false).unwrap();
        assert_eq!((t[1].0, t[1].1.name), (1, "copy_process"));
        assert_eq!(t[1].1.calibration, plan::Calibration::None);
        assert!(
            select_targets(&["no/pe".into()], false)
                .unwrap_err()
                .to_string()
                .contains("not a kernel function name")
        );
        assert!(
            select_targets(&["no_such_function_xyz".into()], false)
                .unwrap_err()
                .to_string()
                .contains("no such function in /proc/kallsyms")
        );
        let many: Vec<String> = [
            "do_wait",
            "dup_mmap",
            "sysvipc_find_ipc",
            "get_task_policy",
            "getpid",
            "schedule",
            "do_exit",
            "kernel_clone",
            "vfs_read",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(select_targets(&many, false).is_err());
    }

    #[test]
    fn both_spellings_of_the_n_placeholder_are_replaced() {
        let t: Vec<String> = ["./bench", "{n}", "--size={N}", "x{n}y"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(substitute_n(&t, 42), ["./bench", "42", "--size=42", "x42y"]);
        assert!(has_n_placeholder("{N}") && !has_n_placeholder("n"));
    }

    #[test]
    fn finds_executables_like_execvp() {
        assert!(find_executable("sh").is_some());
        assert!(find_executable("/definitely/not/here").is_none());
        assert!(find_executable("no-such-command-xyz").is_none());
    }

    #[test]
    fn descendants_include_our_children() {
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let d = descendants(std::process::id());
        let _ = c.kill();
        let _ = c.wait();
        assert!(d.contains(&c.id()), "{d:?}");
    }
}
