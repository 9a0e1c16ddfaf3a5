//! One command run within a run: start the command held, watch it (raw events, the status
//! line, signals, the duration) until it stops, and wind it down when it has not exited.
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use super::Session;
use super::events::EventSink;
use super::process::{children_rusage, descendants, spawn_held};
use super::progress::status_line;
use super::spec::{FilterSpec, Invocation, RunSpec};
use crate::engine::Filter;
use crate::error::TracerError;
use crate::symbols::UserSymbolizer;

/// Why recording stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    CommandExited,
    Signal(&'static str),
    Duration,
    TracedProcessesGone,
}

/// What one command run came to.
pub(super) struct OneRun {
    pub(super) stop: Stop,
    pub(super) status: Option<std::process::ExitStatus>,
    pub(super) wall: Duration,
    pub(super) user_s: f64,
    pub(super) sys_s: f64,
    /// The machine's CPU time over the run, for the steal it holds.
    pub(super) cpu: crate::kernel::cpustat::CpuTimes,
    pub(super) filter_desc: String,
    /// Processes of the command's tree still running when it exited.
    pub(super) outlived: usize,
}

impl Session {
    /// Run one command (or follow the given processes) until it exits, a signal arrives or
    /// the duration ends.
    pub(super) async fn run_one(
        &mut self,
        spec: &RunSpec,
        inv: &Invocation,
        label: &str,
        target_names: &[String],
        events_out: &mut Option<EventSink>,
        usyms: &mut UserSymbolizer,
    ) -> Result<OneRun, TracerError> {
        let rusage_before = children_rusage();
        let cpu_before = crate::kernel::cpustat::CpuTimes::now();
        // Processes an earlier run left running: not this run's.
        let followed_before: std::collections::HashSet<u32> =
            self.engine.followed().into_iter().collect();
        let started = Instant::now();
        let (mut child, filter) = self.start_command(spec, inv)?;
        let child_pid = child.as_ref().and_then(|c| c.id());

        let deadline = spec.duration.map(|d| tokio::time::Instant::now() + d);
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut command_status: Option<std::process::ExitStatus> = None;
        let engine = &mut self.engine;
        let signals = &mut self.signals;
        let progress = &self.progress;
        let resolved = &self.resolved;
        let events = &mut self.events;
        let stop = loop {
            tokio::select! {
                guard = async { events.as_mut().expect("guarded").readable_mut().await }, if events.is_some() => {
                    if let (Ok(mut g), Some(sink)) = (guard, events_out.as_mut()) {
                        sink.drain(g.get_inner_mut(), target_names);
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
                    for pid in engine.followed_here().into_iter().take(256) {
                        usyms.remember(pid);
                    }
                    if let Some(p) = child_pid {
                        usyms.remember(p);
                    }
                    progress.set(status_line(engine, resolved, spec, label, child_pid));
                    if child.is_none() && matches!(filter, Filter::Follow(_)) && engine.nothing_followed() {
                        break Stop::TracedProcessesGone;
                    }
                }
            }
        };
        if let (Some(c), None) = (child.as_mut(), command_status) {
            command_status = self.stop_command(c, &stop).await;
        }
        let wall = started.elapsed();
        let after = children_rusage();
        let cpu = match (crate::kernel::cpustat::CpuTimes::now(), cpu_before) {
            (Some(a), Some(b)) => a.since(b),
            _ => Default::default(),
        };
        // Descendants the command left running: still followed, so their work from now on
        // lands in whatever runs next. Counted by their /proc entries (the probes forget a
        // process when it exits).
        let outlived = if child_pid.is_some() && matches!(filter, Filter::Follow(_)) {
            engine_outlived(&self.engine, child_pid, &followed_before)
        } else {
            0
        };
        Ok(OneRun {
            outlived,
            stop,
            status: command_status,
            wall,
            user_s: (after.0 - rusage_before.0).max(0.0),
            sys_s: (after.1 - rusage_before.1).max(0.0),
            cpu,
            filter_desc: filter.describe(),
        })
    }

    /// Start the command held before exec, point the filter at what this run traces, then
    /// let the command exec. Returns the command's process (none when following processes)
    /// and the filter.
    fn start_command(
        &mut self,
        spec: &RunSpec,
        inv: &Invocation,
    ) -> Result<(Option<tokio::process::Child>, Filter), TracerError> {
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
        self.engine.set_filter(&filter)?;
        if let Some(w) = release.take() {
            // Let the command exec now that everything is attached.
            let _ = nix::unistd::write(&w, b"g");
        }
        Ok((child, filter))
    }

    /// Wind the command down when we stop for another reason than its exit: pass the signal
    /// on (SIGTERM otherwise), wait up to 5 s, then kill it. Returns its wait status.
    async fn stop_command(
        &mut self,
        c: &mut tokio::process::Child,
        stop: &Stop,
    ) -> Option<std::process::ExitStatus> {
        let sig = match stop {
            Stop::Signal("SIGTERM") => nix::sys::signal::Signal::SIGTERM,
            Stop::Signal("SIGHUP") => nix::sys::signal::Signal::SIGHUP,
            Stop::Signal(_) => nix::sys::signal::Signal::SIGINT,
            _ => nix::sys::signal::Signal::SIGTERM,
        };
        if let Some(pid) = c.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
        }
        self.progress
            .set("waiting for the command to exit (up to 5 s; Ctrl-C again to stop now)".into());
        let grace = tokio::time::sleep(Duration::from_secs(5));
        tokio::pin!(grace);
        let mut status = None;
        tokio::select! {
            st = c.wait() => status = st.ok(),
            _ = &mut grace => {}
            _ = self.signals.recv() => {}
        }
        if status.is_none() {
            let _ = c.start_kill();
            status = c.wait().await.ok();
        }
        status
    }
}

/// How many followed processes other than `root` and those of `before` are still alive (0
/// inside a PID namespace, where the probes know the tree by kernel pids this process
/// cannot see).
fn engine_outlived(
    engine: &crate::engine::Engine,
    root: Option<u32>,
    before: &std::collections::HashSet<u32>,
) -> usize {
    if engine.in_pid_namespace() {
        return 0;
    }
    engine
        .followed()
        .into_iter()
        .filter(|p| Some(*p) != root && !before.contains(p))
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .count()
}
