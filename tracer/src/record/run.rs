//! One run of a session, step by step: attach the run's phase markers, run each command in
//! turn (`invocations.rs`, each by `command.rs`), wind down (detach, read the maps), then
//! build the run and write it.
use std::time::{Duration, Instant, SystemTime};

use super::command::Stop;
use super::events::EventSink;
use super::spec::RunSpec;
use super::targets::usdt_sites;
use super::workload_report::WorkloadReports;
use super::{RecordOutcome, Session};
use crate::collect::{self, RunFacts};
use crate::dir_writer::DirWriter;
use crate::engine::Snapshot;
use crate::error::TracerError;
use crate::kernel::symbolize::KernelSymbolizer;
use crate::resolve::Resolved;
use crate::rundata::{self, Run, StackFile};
use crate::symbols::UserSymbolizer;

pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Session {
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
        let rate_limit_start = crate::kernel::perf_max_sample_rate();
        self.engine.clear()?;
        let markers = self.attach_markers(spec)?;
        let target_names = self.target_names();
        let mut events_out = match self.events {
            Some(_) => Some(EventSink::create(writer.path())?),
            None => None,
        };
        // Events from calibration or an earlier run of this session are not this run's.
        if let Some(fd) = self.events.as_mut() {
            while fd.get_mut().next().is_some() {}
        }
        let mut usyms = UserSymbolizer::default();
        let ran = self
            .run_invocations(spec, &target_names, &mut events_out, &mut usyms)
            .await?;
        let (snap, ksyms, detach_time) = self.wind_down(detach, &target_names, &mut events_out)?;

        let mut session_counters = vec![("phase_marker_binaries", markers)];
        if self.usdt_sites > 0 {
            session_counters.push(("usdt_sites", self.usdt_sites));
            session_counters.push(("usdt_semaphores", self.usdt_semaphores));
        }
        if let Some(sink) = events_out {
            session_counters.push(("raw_events_written", sink.finish()?));
        }
        if self.engine_opts.sample_freq_hz > 0
            && let (Some(from), Some(to)) =
                (rate_limit_start, crate::kernel::perf_max_sample_rate())
        {
            session_counters.push((crate::rundata::SAMPLE_RATE_LIMIT_START, from));
            session_counters.push((crate::rundata::SAMPLE_RATE_LIMIT_END, to));
        }
        let command_exit = ran.command_exit(spec.external.is_some());
        let facts = RunFacts {
            started,
            started_unix,
            command: spec.command.clone(),
            command_exit,
            filter: ran.filter_desc,
            partial_reason: match &ran.stop {
                Stop::Signal(s) => Some(format!("interrupted by {s}")),
                _ => None,
            },
            sample_freq_hz: self.engine_opts.sample_freq_hz,
            targets: self.resolved.iter().map(Resolved::report).collect(),
            session_counters,
            workload: ran.workload.and_then(WorkloadReports::into_value),
            invocations: ran.invocations,
            discover: self.engine_opts.discover,
            attach_time: self.attach_time,
            verify_time: self.verify_time,
            probe_cost_time: self.probe_cost_time,
            detach_time,
            raw_tracepoints: self.engine.raw_tracepoints(),
            entries_unavailable: self.engine.entries_unavailable.clone(),
            interruptions: self.engine.interruptions.clone(),
        };
        let (run, stacks) = collect::build_run(&snap, &target_names, &ksyms, &mut usyms, facts);
        let dir = write_run(writer, &run, &stacks)?;
        if !detach {
            self.engine.clear()?;
        }

        let exit_code = match (&ran.stop, command_exit) {
            (Stop::Signal(_), _) => crate::error::exit::INTERRUPTED,
            (Stop::CommandExited, Some(c)) if c != 0 => crate::error::exit::COMMAND_FAILED,
            _ => crate::error::exit::OK,
        };
        Ok(RecordOutcome {
            dir,
            run,
            stacks,
            exit_code,
        })
    }

    /// Attach the phase markers (or USDT phase probes) of the run's binaries and its
    /// `--phase-fn`, each once per session. Returns how many binaries have markers.
    fn attach_markers(&mut self, spec: &RunSpec) -> Result<u64, TracerError> {
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
        Ok(markers)
    }

    /// After the last command: the kernel symbols for this run's stacks, every probe detached
    /// (with `detach`), the last raw events drained, and the maps read. Returns the snapshot,
    /// the symbols and how long detaching took.
    fn wind_down(
        &mut self,
        detach: bool,
        target_names: &[String],
        events_out: &mut Option<EventSink>,
    ) -> Result<(Snapshot, KernelSymbolizer, Duration), TracerError> {
        // Probe log messages queued since the last tick (short commands end between ticks).
        self.engine.flush_logs();
        self.progress.set(String::new());

        // The kernel symbol table for this run's stacks, read while every probe is attached:
        // BPF programs and fentry trampolines are listed only while loaded, and modules or
        // programs loaded during the run are listed too. It takes ~0.15 s, after the command
        // is done (with --system or --comm the probes count that much longer).
        let ksyms = match KernelSymbolizer::load() {
            Ok(k) => k,
            Err(e) => {
                self.progress.println(&format!(
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
            self.engine.detach_all();
        }
        let detach_time = detach_started.elapsed();
        if let (Some(fd), Some(sink)) = (self.events.as_mut(), events_out.as_mut()) {
            sink.drain(fd.get_mut(), target_names);
        }
        Ok((self.engine.snapshot()?, ksyms, detach_time))
    }
}

/// Check the run and write it: `run.json`, `spans.csv` and the folded stacks, then move the
/// directory into place.
fn write_run(
    writer: DirWriter,
    run: &Run,
    stacks: &[(StackFile, rundata::Folded)],
) -> Result<std::path::PathBuf, TracerError> {
    run.validate()
        .map_err(|e| TracerError::Other(format!("internal: inconsistent run data: {e}")))?;
    writer.write(rundata::RUN_FILE, run.to_json().as_bytes())?;
    writer.write(rundata::SPANS_CSV, run.spans_csv().as_bytes())?;
    for (meta, folded) in stacks {
        writer.write(&meta.path, folded.to_text().as_bytes())?;
    }
    Ok(writer.commit()?)
}
