//! One run of a session, step by step: attach the run's phase markers, run each command in
//! turn (`command.rs`), wind down (detach, read the maps), then build the run and write it.
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use super::command::{OneRun, Stop};
use super::events::EventSink;
use super::extra::Scheduler;
use super::process::exit_code_of;
use super::spec::{RunSpec, invocation_plan};
use super::targets::usdt_sites;
use super::workload_report::WorkloadReports;
use super::{RecordOutcome, Session};
use crate::analysis::entries::MoreRuns;
use crate::analysis::{self, AnalysisOptions, Dataset, LoadedRun};
use crate::collect::{self, RunFacts};
use crate::dir_writer::DirWriter;
use crate::engine::Snapshot;
use crate::error::TracerError;
use crate::kernel::symbolize::KernelSymbolizer;
use crate::resolve::Resolved;
use crate::rundata::{self, Run, StackFile};
use crate::symbols::UserSymbolizer;

/// What the command runs of one run came to, together.
struct Ran {
    invocations: Vec<rundata::Invocation>,
    /// The workload's own reports, when the command is one of ours.
    workload: Option<WorkloadReports>,
    /// How the last command run stopped.
    stop: Stop,
    command_status: Option<std::process::ExitStatus>,
    filter_desc: String,
}

impl Ran {
    /// Nothing run yet of `spec`.
    fn new(spec: &RunSpec) -> Ran {
        Ran {
            invocations: Vec::new(),
            workload: spec
                .attach_json
                .clone()
                .map(|p| WorkloadReports::new(p, spec.external.is_some())),
            stop: Stop::CommandExited,
            command_status: None,
            filter_desc: String::new(),
        }
    }

    /// Files a finished run of `inv`, with the calls it made (`spans`); the last run's
    /// filter, status and stop are the whole recording's.
    fn add(
        &mut self,
        inv: &super::spec::Invocation,
        res: OneRun,
        spans: Vec<rundata::InvocationSpan>,
    ) {
        self.invocations.push(rundata::Invocation {
            n: inv.n,
            command: inv.command.clone(),
            exit: res.status.map(exit_code_of),
            wall_s: res.wall.as_secs_f64(),
            user_s: res.user_s,
            sys_s: res.sys_s,
            spans,
            outlived: res.outlived as u64,
        });
        self.filter_desc = res.filter_desc;
        self.command_status = res.status;
        self.stop = res.stop;
    }

    /// One command: its exit. A sweep over N: the first failure, if any run failed.
    fn command_exit(&self, external: bool) -> Option<i32> {
        if external {
            self.invocations
                .iter()
                .map(|i| i.exit.unwrap_or(128))
                .find(|&c| c != 0)
                .or(Some(0))
                .filter(|_| !self.invocations.is_empty())
        } else {
            self.command_status.map(exit_code_of)
        }
    }
}

fn unix_now() -> f64 {
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

    /// Run every command of the run in turn, each in its phase; a signal ends the sequence.
    async fn run_invocations(
        &mut self,
        spec: &RunSpec,
        target_names: &[String],
        events_out: &mut Option<EventSink>,
        usyms: &mut UserSymbolizer,
    ) -> Result<Ran, TracerError> {
        let plan = invocation_plan(spec);
        let mut ran = Ran::new(spec);
        // An external sweep keeps each run's calls apart: the span aggregates are read before
        // and after every run (a few map reads between runs, none while the command runs).
        let mut spans_before = match &spec.external {
            Some(_) => Some(self.engine.span_snapshot()?),
            None => None,
        };
        // After the planned runs, sizes run again while a verdict could still change (extra.rs).
        let mut extra = spec.external.as_ref().map(|e| {
            Scheduler::new(
                e.extra.clone(),
                &plan,
                &spec.label,
                self.engine_opts.discover,
            )
        });
        // Planned runs end here: the plan's length, or the round `--budget` did not start.
        let mut planned_end = plan.len();
        let round_len = spec.external.as_ref().map_or(0, |e| e.n_values.len());
        let mut round_started = Instant::now();
        for i in 0.. {
            if i < planned_end
                && let Some(cut) = self.budget_cut(spec, i, round_len, &mut round_started)
            {
                self.progress.println(&format!("tracer: {cut}"));
                self.budget_cuts.push(cut);
                planned_end = i;
            }
            let (inv, label) = match (plan.get(i).filter(|_| i < planned_end), extra.as_mut()) {
                (Some(inv), _) => {
                    let label = match inv.n {
                        0 => spec.label.clone(),
                        n => format!("{} N={n} [{}/{}]", spec.label, i + 1, plan.len()),
                    };
                    (inv.clone(), label)
                }
                (None, Some(s)) => match self.next_extra(s, spec, &ran, target_names, usyms) {
                    Some(next) => next,
                    None => break,
                },
                (None, None) => break,
            };
            let inv = &inv;
            let res = self
                .run_in_phase(spec, inv, &label, target_names, events_out, usyms)
                .await?;
            let exit = res.status.map(exit_code_of);
            // (An extra run's line was printed as it began.)
            if inv.n > 0 && i < planned_end {
                self.progress
                    .log(&format!("tracer: {label}: {:.1} s", res.wall.as_secs_f64()));
            }
            self.say_command_failed(inv.n, exit, &res);
            // The run's own calls, from the aggregates before and after it.
            let spans = match spans_before.as_mut() {
                Some(before) => {
                    let after = self.engine.span_snapshot()?;
                    let spans = collect::invocation_spans(before, &after, inv.n, target_names);
                    *before = after;
                    spans
                }
                None => Vec::new(),
            };
            if let Some(w) = ran.workload.as_mut() {
                w.take_run();
            }
            // Each run starts its processes afresh, each filing its caller stacks under keys
            // of its own: once they have ended, their aggregates leave the kernel's map, which
            // then holds one run's at a time (and the kernel-only ones too when the run left
            // nothing of its tree running to add to them).
            if plan.len() > 1 || extra.is_some() {
                self.engine.drain_ended_stacks(res.outlived == 0)?;
            }
            self.say_outlived(inv.n, res.outlived);
            ran.add(inv, res, spans);
            if let Stop::Signal(s) = ran.stop {
                self.interrupted = Some(s);
                return Ok(ran);
            }
        }
        if let Some(line) = extra.and_then(|s| s.summary(&ran.invocations)) {
            self.progress
                .println(&format!("tracer: {}: {line}", spec.label));
        }
        Ok(ran)
    }

    /// The next extra run the scheduler wants after the planned ones, with its label: when it
    /// has none left of the kind it plans without analysis, the runs so far are analysed for
    /// loops that more runs of a size would decide (runs for samples). None when it is done.
    fn next_extra(
        &mut self,
        s: &mut Scheduler<'_>,
        spec: &RunSpec,
        ran: &Ran,
        target_names: &[String],
        usyms: &mut UserSymbolizer,
    ) -> Option<(super::spec::Invocation, String)> {
        let mut next = s.next(&ran.invocations);
        if next.is_none() && s.wants_analysis() {
            let read = Instant::now();
            // Runs for samples are a refinement: a run so far that cannot be read costs
            // them, not the sweep.
            let wants = self
                .undecided_sizes(spec, ran, target_names, usyms)
                .unwrap_or_else(|e| {
                    self.progress.println(&format!(
                        "tracer: {}: the runs so far could not be read ({e}); no runs for \
                         samples",
                        spec.label
                    ));
                    Vec::new()
                });
            self.progress.log(&format!(
                "tracer: {}: the runs so far analysed in {:.1} s: {}",
                spec.label,
                read.elapsed().as_secs_f64(),
                if wants.is_empty() {
                    "no undecided loop that more runs of a size would decide".into()
                } else {
                    wants
                        .iter()
                        .map(|w| {
                            format!(
                                "{} in {} undecided, {} samples at N={}",
                                w.function, w.entry, w.samples, w.n
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            ));
            s.plan_samples(wants, &ran.invocations);
            next = s.next(&ran.invocations);
        }
        let (inv, label) = next?;
        // Said on a line of its own: the status line is a terminal's only.
        self.progress.println(&format!("tracer: {label}"));
        Some((inv, label))
    }

    /// Runs `inv` inside its phase (the workload case and N its spans are filed under) and,
    /// with `--phase-fn`, counts the function's calls as that phase's ops.
    async fn run_in_phase(
        &mut self,
        spec: &RunSpec,
        inv: &super::spec::Invocation,
        label: &str,
        target_names: &[String],
        events_out: &mut Option<EventSink>,
        usyms: &mut UserSymbolizer,
    ) -> Result<OneRun, TracerError> {
        // Operations per run of one N, when the user knows them (`--ops`).
        let ops_at = |n: u64| {
            spec.external
                .as_ref()
                .and_then(|e| e.ops.as_ref())
                .map(|o| o.eval(n))
        };
        // With --phase-fn, a recording without N is phase (command, N=1) inside the
        // function.
        let phase = match (inv.phase(), &spec.phase_fn) {
            (None, Some(_)) => Some((workloads::cases::CASE_COMMAND, 1)),
            (p, _) => p,
        };
        if let Some((case, n)) = phase {
            self.engine.set_default_phase(case, n)?;
        }
        if spec.phase_fn.is_some() {
            let ops = phase.and_then(|(_, n)| ops_at(n)).unwrap_or(1);
            self.engine.set_phase_fn_ops(ops)?;
        }
        let res = self
            .run_one(spec, inv, label, target_names, events_out, usyms)
            .await?;
        if phase.is_some() {
            self.engine.clear_default_phase()?;
        }
        // Without --phase-fn a run of size N is one op of its phase; with it, the return
        // probe counted each call of the function as one.
        if let (Some((case, n)), Some(0), None) =
            (inv.phase(), res.status.map(exit_code_of), &spec.phase_fn)
        {
            let ops = ops_at(n).unwrap_or(1);
            self.engine
                .add_phase_stats(case, n, ops, res.wall.as_nanos() as u64)?;
        }
        Ok(res)
    }

    /// The line for a run of size `n` whose command failed (not for one a signal stopped).
    fn say_command_failed(&self, n: u64, exit: Option<i32>, res: &OneRun) {
        if n > 0 && !matches!(exit, Some(0)) && !matches!(res.stop, Stop::Signal(_)) {
            self.progress.println(&format!(
                "tracer: the command failed at N={n} ({}); continuing with the other N",
                match exit {
                    Some(c) => format!("exit {c}"),
                    None => "no exit status".into(),
                }
            ));
        }
    }

    /// The line for processes of a run's tree still running when its command exited.
    fn say_outlived(&self, n: u64, outlived: usize) {
        if outlived > 0 {
            self.progress.println(&format!(
                "tracer: {}{} process{} of the command's tree still running when it exited: \
                 still traced, so what they do from now on counts toward what runs next (wait \
                 for them in the command, or stop them)",
                match n {
                    0 => String::new(),
                    n => format!("N={n}: "),
                },
                outlived,
                if outlived == 1 { "" } else { "es" },
            ));
        }
    }

    /// At the start of planned run `i`: when it begins a round after the first (rounds of
    /// `round_len` runs) and that round, as long as the last, would end after the run's
    /// `--budget` share, the line that says the remaining rounds are cut. `round_started`
    /// is when the current round began.
    fn budget_cut(
        &self,
        spec: &RunSpec,
        i: usize,
        round_len: usize,
        round_started: &mut Instant,
    ) -> Option<String> {
        let ext = spec.external.as_ref()?;
        if round_len == 0
            || i == 0
            || !i.is_multiple_of(round_len)
            || i >= round_len * ext.repeat as usize
        {
            return None;
        }
        let last_round = round_started.elapsed();
        *round_started = Instant::now();
        let deadline = ext.extra.deadline?;
        let left = deadline.saturating_duration_since(Instant::now());
        (last_round > left).then(|| {
            let done = i / round_len;
            format!(
                "{}: --budget: rounds {} to {} cut, {done} of {} run (a round took {:.1} s, \
                 {:.0} s of this sweep's share left)",
                spec.label,
                done + 1,
                ext.repeat,
                ext.repeat,
                last_round.as_secs_f64(),
                left.as_secs_f64()
            )
        })
    }

    /// A discover sweep between runs: the sizes whose runs would decide a frame the
    /// analysis leaves undecided so far (`Entries::more_runs`). The run so far is built from
    /// the maps as they are (nothing is cleared or detached) and analysed as the report
    /// will be: 0.2 s on a host, 3 to 22 s in a qemu TCG guest (a 6.1 shell sweep's many
    /// stacks), against sweeps of minutes there.
    fn undecided_sizes(
        &mut self,
        spec: &RunSpec,
        ran: &Ran,
        target_names: &[String],
        usyms: &mut UserSymbolizer,
    ) -> Result<Vec<MoreRuns>, TracerError> {
        self.progress.set(format!(
            "{}: reading the runs so far for sizes that more runs would decide",
            spec.label
        ));
        let snap = self.engine.snapshot()?;
        let ksyms = KernelSymbolizer::load().unwrap_or_default();
        let facts = RunFacts {
            started: Instant::now(),
            started_unix: unix_now(),
            command: spec.command.clone(),
            command_exit: None,
            filter: ran.filter_desc.clone(),
            partial_reason: None,
            sample_freq_hz: self.engine_opts.sample_freq_hz,
            targets: self.resolved.iter().map(Resolved::report).collect(),
            session_counters: Vec::new(),
            workload: None,
            invocations: ran.invocations.clone(),
            discover: true,
            attach_time: Duration::ZERO,
            verify_time: Duration::ZERO,
            probe_cost_time: Duration::ZERO,
            detach_time: Duration::ZERO,
            raw_tracepoints: self.engine.raw_tracepoints(),
            entries_unavailable: self.engine.entries_unavailable.clone(),
            interruptions: self.engine.interruptions.clone(),
        };
        let (run, stacks) = collect::build_run(&snap, target_names, &ksyms, usyms, facts);
        let loaded = LoadedRun::recorded(spec.label.clone(), PathBuf::new(), run, &stacks)
            .map_err(|e| TracerError::Other(format!("internal: the runs so far: {e}")))?;
        let ds = Dataset {
            root: PathBuf::new(),
            is_sweep: false,
            runs: vec![loaded],
            notes: Vec::new(),
        };
        let a = analysis::analyze(&ds, &AnalysisOptions::default());
        self.progress.set(String::new());
        Ok(a.discoveries
            .iter()
            .flat_map(|d| d.entries.more_runs())
            .collect())
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
    stacks: &[(StackFile, String)],
) -> Result<std::path::PathBuf, TracerError> {
    run.validate()
        .map_err(|e| TracerError::Other(format!("internal: inconsistent run data: {e}")))?;
    writer.write(rundata::RUN_FILE, run.to_json().as_bytes())?;
    writer.write(rundata::SPANS_CSV, run.spans_csv().as_bytes())?;
    for (meta, content) in stacks {
        writer.write(&meta.path, content.as_bytes())?;
    }
    Ok(writer.commit()?)
}
