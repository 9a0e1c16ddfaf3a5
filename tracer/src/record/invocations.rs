//! The command runs of one run: the planned ones (each N, each repeat), cut short by
//! `--budget`, then the extra runs its scheduler asks for while a verdict could still change
//! (`extra.rs`), each inside its phase, with the calls each made.
use std::time::{Duration, Instant};

use super::Session;
use super::advice::MoreRuns;
use super::command::{OneRun, Stop};
use super::events::EventSink;
use super::extra::Scheduler;
use super::process::exit_code_of;
use super::run::unix_now;
use super::spec::{RunSpec, invocation_plan};
use super::workload_report::WorkloadReports;
use crate::collect::{self, RunFacts};
use crate::error::TracerError;
use crate::kernel::symbolize::KernelSymbolizer;
use crate::resolve::Resolved;
use crate::rundata;
use crate::symbols::UserSymbolizer;

/// What the command runs of one run came to, together.
pub(super) struct Ran {
    pub(super) invocations: Vec<rundata::Invocation>,
    /// The workload's own reports, when the command is one of ours.
    pub(super) workload: Option<WorkloadReports>,
    /// How the last command run stopped.
    pub(super) stop: Stop,
    pub(super) command_status: Option<std::process::ExitStatus>,
    pub(super) filter_desc: String,
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
            cpu_steal_s: res.cpu.steal_s,
            cpu_busy_s: res.cpu.busy_s,
            spans,
            outlived: res.outlived as u64,
        });
        self.filter_desc = res.filter_desc;
        self.command_status = res.status;
        self.stop = res.stop;
    }

    /// One command: its exit. A sweep over N: the first failure, if any run failed.
    pub(super) fn command_exit(&self, external: bool) -> Option<i32> {
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

impl Session {
    /// Run every command of the run in turn, each in its phase; a signal ends the sequence.
    pub(super) async fn run_invocations(
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
                e.advice,
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
    /// analysis leaves undecided so far ([`super::advice::Advice::undecided_sizes`]). The run
    /// so far is built from the maps as they are (nothing is cleared or detached).
    fn undecided_sizes(
        &mut self,
        spec: &RunSpec,
        ran: &Ran,
        target_names: &[String],
        usyms: &mut UserSymbolizer,
    ) -> Result<Vec<MoreRuns>, TracerError> {
        let Some(external) = &spec.external else {
            return Ok(Vec::new());
        };
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
        let wants = external
            .advice
            .undecided_sizes(&spec.label, run, &stacks)
            .map_err(|e| TracerError::Other(format!("internal: the runs so far: {e}")));
        self.progress.set(String::new());
        wants
    }
}
