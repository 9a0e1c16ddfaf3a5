//! The recording session shared by `record` and `sweep`: probes loaded, resolved, measured and
//! attached once, then reused for every run (`Session::run`, in `run.rs`).
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::progress::Progress;
use super::signals::Signals;
use super::targets::distinct_notes;
use crate::cost_at_attach;
use crate::engine::{Engine, EngineOptions};
use crate::error::TracerError;
use crate::kernel::kallsyms::Kallsyms;
use crate::plan::Target;
use crate::resolve::{self, ResolveOptions, Resolved};

/// Where function probes can run when this kernel refuses them.
const VM_HINT: &str =
    "\n  run the function probes inside a VM instead: cargo xtask vm --kernel 6.1 -- tracer ...";

/// The ring buffer of raw per-call events, polled as they arrive.
pub(super) type EventRing = tokio::io::unix::AsyncFd<aya::maps::RingBuf<aya::maps::MapData>>;

/// Loaded and attached probes, reusable for several runs (a sweep traces each workload in
/// turn with one resolution).
pub struct Session {
    pub(super) engine: Engine,
    pub(super) resolved: Vec<Resolved>,
    pub(super) signals: Signals,
    pub(super) progress: Progress,
    pub(super) markers_attached: Vec<PathBuf>,
    /// USDT sites attached so far (counted in every run of the session).
    pub(super) usdt_sites: u64,
    pub(super) usdt_semaphores: u64,
    pub(super) phase_fn_attached: bool,
    pub(super) engine_opts: EngineOptions,
    /// Raw per-call events (with --raw-events).
    pub(super) events: Option<EventRing>,
    /// Set once a run was stopped by a signal: the session must not start another.
    pub interrupted: Option<&'static str>,
    /// What `tracer sweep --budget` cut from this session's runs, one line each.
    pub budget_cuts: Vec<String>,
    pub(super) attach_time: Duration,
    pub(super) verify_time: Duration,
    pub(super) probe_cost_time: Duration,
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
        for n in distinct_notes(&resolved).iter().filter(|_| !ropts.quiet) {
            progress.println(&format!("tracer: {n}"));
        }
        refuse_unusable(&resolved, ropts, engine_opts.discover)?;
        for r in &resolved {
            if r.active.is_none() && !ropts.quiet {
                progress.println(&format!(
                    "tracer: {} cannot be measured here (see `tracer probes`)",
                    r.target.name
                ));
            }
        }
        progress.set("measuring the probes' own cost".to_string());
        let probe_cost_time = cost_at_attach::measure_all(&mut engine, &ksyms, &mut resolved)?;
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
            budget_cuts: Vec::new(),
            attach_time: attach_started.elapsed(),
            verify_time,
            probe_cost_time,
        })
    }

    pub fn resolved(&self) -> &[Resolved] {
        &self.resolved
    }

    /// The tracefs directory the engine uses.
    pub fn tracefs_root(&self) -> std::path::PathBuf {
        self.engine.tracefs_root().to_path_buf()
    }

    pub fn println(&self, msg: &str) {
        self.progress.println(msg);
    }

    /// Names of the kernel target ids this session measures (index = id).
    pub(super) fn target_names(&self) -> Vec<String> {
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

    pub fn finish(self) {
        self.progress.finish();
    }
}

/// Resolutions a session cannot run with: a function the user asked for that is too hot to
/// probe, a forced plan this kernel refuses, or no target measurable at all (outside discover
/// mode, which samples without any probe).
fn refuse_unusable(
    resolved: &[Resolved],
    ropts: &ResolveOptions,
    discover: bool,
) -> Result<(), TracerError> {
    // Running without a hot function would not answer the question, and with it would slow
    // the machine.
    let hot: Vec<String> = resolved
        .iter()
        .filter(|r| r.hot_refused)
        .filter_map(|r| r.rejected.last().map(|rej| rej.reason.clone()))
        .collect();
    if !hot.is_empty() {
        return Err(TracerError::Unsupported(hot.join("\n")));
    }
    for r in resolved {
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
    if !resolved.is_empty() && resolved.iter().all(|r| r.active.is_none()) && !discover {
        let mut msg = String::from("no target can be measured on this kernel:");
        for r in resolved {
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
    Ok(())
}
