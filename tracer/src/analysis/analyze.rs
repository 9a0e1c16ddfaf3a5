//! The whole analysis of one run or sweep: tables, scaling verdicts and root causes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::rundata::{PlanUsed, RunStatus, StackFile, StackKind, TargetReport};

use super::discover::{Discovery, ProfiledRun, discover};
use super::fit::{Complexity, Scaling, fit_scaling, fit_scaling_runs};
use super::load::{Dataset, LoadError, read_stack_file};
use super::populations::{Mix, PopulationSplit, split as split_populations};
use super::rootcause::{RootCause, StacksAtN, root_cause};
use super::stacks::{Anchors, Folded};
use super::table::{CaseTable, Metric, TableOptions, WorkloadReport, tables};
use super::trips::{LoopClass, MAX_PER_TRIP_SLOPE, TripCount, loop_class};
use super::warnings::{StackLoss, Warning};

#[derive(Clone, Debug, Default)]
pub struct AnalysisOptions {
    pub metric: Metric,
    pub include_unphased: bool,
    /// Give times per call minus the probe's measured cost beside the measured ones.
    pub subtract_probe_cost: bool,
}

/// Scaling verdict of one target and case; `render::verdict` says it in one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub run: String,
    pub kernel: String,
    pub target: String,
    pub case_name: String,
    pub metric: Metric,
    /// None when there was nothing to fit (count-only plan, fewer than two sizes).
    pub scaling: Option<Scaling>,
    /// The plan measured a stand-in: its name and every attach point (e.g.
    /// "syscall-bracket syscalls:sys_enter_wait4,..."); the line names it briefly.
    pub stand_in: Option<String>,
    /// The plan timed its calls (false: count-only, nothing to fit).
    pub timed: bool,
    /// The plan that measured it (the line names it briefly).
    pub plan: Option<PlanUsed>,
    /// The class an exact loop count inside the target gives the growing time (see
    /// [`super::trips::loop_class`]); None when no count does.
    pub by_loop: Option<LoopClass>,
    /// The calls are two populations ([`super::populations`]): the one the headline is, or
    /// that they could not be split.
    pub mix: Option<Mix>,
}

impl Verdict {
    /// The verdict's class: the loop count's where one gives it (a count is exact; time per
    /// call also carries the cost of each trip, which may creep up with N), else the time's.
    pub fn class(&self) -> Option<Complexity> {
        match &self.by_loop {
            Some(l) => Some(l.class),
            None => self.time_class(),
        }
    }

    /// The classes the data does not exclude, least growth first: the loop count's class (a
    /// count is exact), else the time's set ([`Scaling::classes`]). Empty with nothing fitted.
    pub fn classes(&self) -> Vec<Complexity> {
        match (&self.by_loop, self.headline()) {
            (Some(l), _) => vec![l.class],
            (None, Some(s)) => s.classes.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// The fit the headline rests on: a mixed table's growing population, else the time per
    /// call of all calls; None when nothing was fitted or when the mean of an unsplit mix
    /// did not grow (that says nothing about either population).
    pub fn headline(&self) -> Option<&Scaling> {
        match &self.mix {
            Some(Mix::Population { scaling, .. }) => Some(scaling.as_ref()),
            Some(Mix::Unsplit { .. })
                if self
                    .scaling
                    .as_ref()
                    .is_some_and(|s| s.flat_reason.is_some()) =>
            {
                None
            }
            _ => self.scaling.as_ref(),
        }
    }

    /// The class when the data names one alone (a set of one), else None.
    pub fn sole_class(&self) -> Option<Complexity> {
        let set = self.classes();
        (set.len() == 1).then(|| set[0])
    }

    /// The loop count that gives the verdict a class other than the time's own fit (what
    /// lines, tables and plots name beside the class); None when the two agree.
    pub fn count_overrides_time(&self) -> Option<&LoopClass> {
        // Also when the time names the count's class only among others: the count decides.
        let time_alone = self.headline().and_then(|s| s.sole_class());
        self.by_loop
            .as_ref()
            .filter(|l| time_alone != Some(l.class))
    }

    /// The class the time per call fitted by itself (of the headline's population).
    pub fn time_class(&self) -> Option<Complexity> {
        self.headline().map(|s| s.class)
    }
}

/// Root cause of one target and case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseRootCause {
    pub run: String,
    pub target: String,
    pub case_name: String,
    /// Which stacks were analysed (on-CPU, or off-CPU when no on-CPU stacks were taken).
    pub kind: StackKind,
    pub cause: RootCause,
}

/// A folded-stack file of the data set, loaded and checked.
#[derive(Clone, Debug)]
pub struct StackData {
    /// Index into [`Analysis::runs`].
    pub run: usize,
    pub file: StackFile,
    pub folded: Folded,
}

/// What the report says about each run besides tables.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunInfo {
    pub label: String,
    pub dir: PathBuf,
    pub kernel: String,
    pub status: RunStatus,
    pub partial_reason: Option<String>,
    pub workload: Option<String>,
    pub sample_freq_hz: u64,
    pub targets: Vec<TargetReport>,
    pub counters: BTreeMap<String, u64>,
}

/// Everything the analysis found for one target and case of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseResult {
    pub table: CaseTable,
    pub verdict: Verdict,
    /// Where the growing time goes, when stacks were sampled.
    pub root_cause: Option<CaseRootCause>,
    /// The calls split into a fixed and an N-proportional population, when they mix.
    pub population: Option<PopulationSplit>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub root: PathBuf,
    /// Kernel release, or the directory name when runs differ.
    pub label: String,
    pub is_sweep: bool,
    pub runs: Vec<RunInfo>,
    /// One per (run, target, case), in the runs' order.
    pub cases: Vec<CaseResult>,
    /// Whole-process discoveries (`--discover` runs), one per run and case.
    pub discoveries: Vec<Discovery>,
    /// Calls of one target per call of another it ran inside: exact loop trip counts.
    pub trips: Vec<super::trips::TripCount>,
    #[serde(skip)]
    pub stacks: Vec<StackData>,
    /// Things a reader should know (partial runs, lost events, unreadable workload results).
    pub warnings: Vec<Warning>,
}

impl Analysis {
    pub fn verdicts(&self) -> impl Iterator<Item = &Verdict> {
        self.cases.iter().map(|c| &c.verdict)
    }

    pub fn root_causes(&self) -> impl Iterator<Item = &CaseRootCause> {
        self.cases.iter().filter_map(|c| c.root_cause.as_ref())
    }

    /// The cases whose calls are a mix of a fixed and an N-proportional population.
    pub fn populations(&self) -> impl Iterator<Item = &PopulationSplit> {
        self.cases.iter().filter_map(|c| c.population.as_ref())
    }
}

/// Analyse a loaded data set: reads every stack file it lists.
pub fn analyze(ds: &Dataset, opts: &AnalysisOptions) -> Result<Analysis, LoadError> {
    let topts = TableOptions {
        metric: opts.metric,
        include_unphased: opts.include_unphased,
        subtract_probe_cost: opts.subtract_probe_cost,
    };
    let mut a = Analysis {
        root: ds.root.clone(),
        label: ds.label(),
        is_sweep: ds.is_sweep,
        runs: Vec::new(),
        cases: Vec::new(),
        discoveries: Vec::new(),
        trips: Vec::new(),
        stacks: Vec::new(),
        warnings: ds.notes.clone(),
    };
    let mut profile_runs = Vec::new();
    for (ri, lr) in ds.runs.iter().enumerate() {
        // An external sweep's N where the command failed is left out of every table and fit.
        let failed: Vec<&crate::rundata::Invocation> = lr
            .run
            .invocations
            .iter()
            .filter(|i| i.n > 0 && i.failed())
            .collect();
        let kept;
        let run = if failed.is_empty() {
            &lr.run
        } else {
            for i in &failed {
                a.warnings.push(Warning::CommandFailed {
                    run: lr.label.clone(),
                    n: i.n,
                    exit: i.exit,
                });
            }
            let bad = |n: u64| failed.iter().any(|i| i.n == n);
            let mut r = lr.run.clone();
            r.spans.retain(|x| !bad(x.n));
            r.phases.retain(|x| !bad(x.n));
            r.stack_files.retain(|x| !bad(x.n));
            kept = r;
            &kept
        };
        let workload = run.workload.as_ref().map(WorkloadReport::from_value);
        if let Some((_, bad)) = &workload
            && *bad > 0
        {
            a.warnings.push(Warning::UnreadableResults {
                run: lr.label.clone(),
                count: *bad,
            });
        }
        if run.status == RunStatus::Partial {
            a.warnings.push(Warning::PartialRun {
                run: lr.label.clone(),
                reason: run.partial_reason.clone(),
            });
        }
        if let Some((w, _)) = &workload
            && w.status == "interrupted"
        {
            a.warnings.push(Warning::Interrupted {
                run: lr.label.clone(),
            });
        }
        for (name, v) in &run.counters {
            // Every loss counter explains itself; the others are informational
            // (`rundata::INFORMATIONAL_COUNTERS`).
            if *v > 0
                && let Some(meaning) = crate::rundata::counter_meaning(name)
            {
                a.warnings.push(Warning::LossCounter {
                    run: lr.label.clone(),
                    name: name.clone(),
                    value: *v,
                    stacks: match name.as_str() {
                        "stack_errors" => stack_loss(&run.counters),
                        _ => None,
                    },
                    meaning,
                });
            }
        }
        a.warnings.extend(super::warnings::sample_rate_lowered(
            &lr.label,
            &run.counters,
            run.sample_freq_hz,
        ));
        for t in &run.targets {
            let calls: u64 = run
                .spans
                .iter()
                .filter(|r| r.target == t.name)
                .map(|r| r.calls)
                .sum();
            // A function the user named (not a built-in target, whose plans are calibrated)
            // that was attached but never fired.
            if let Some(p) = &t.plan
                && calls == 0
                && run.status == RunStatus::Complete
                && crate::plan::target_by_name(&t.name).is_none()
            {
                a.warnings.push(Warning::NeverFired {
                    run: lr.label.clone(),
                    target: t.name.clone(),
                    plan: p.plan.clone(),
                    attach_points: p.attach_points.clone(),
                });
            }
            if t.plan.is_none() {
                a.warnings.push(Warning::NotTraced {
                    run: lr.label.clone(),
                    target: t.name.clone(),
                    rejected: t
                        .rejected
                        .iter()
                        .map(|r| (r.plan.clone(), r.reason.clone()))
                        .collect(),
                });
            }
        }
        a.runs.push(RunInfo {
            label: lr.label.clone(),
            dir: lr.dir.clone(),
            kernel: run.kernel.release.clone(),
            status: run.status,
            partial_reason: run.partial_reason.clone(),
            workload: workload.map(|(w, _)| w.workload).filter(|w| !w.is_empty()),
            sample_freq_hz: run.sample_freq_hz,
            targets: run.targets.clone(),
            counters: run.counters.clone(),
        });
        let mut files: Vec<&StackFile> = run.stack_files.iter().collect();
        files.sort_by(|x, y| {
            (x.kind, &x.target, x.case, x.n, &x.path)
                .cmp(&(y.kind, &y.target, y.case, y.n, &y.path))
        });
        for f in files {
            let folded = read_stack_file(&lr.dir, f)?;
            a.stacks.push(StackData {
                run: ri,
                file: f.clone(),
                folded,
            });
        }

        a.trips
            .extend(super::trips::trip_counts(&lr.label, &run.spans));
        // Rows that lost raw spans (ringbuf_drops, warned above) keep histogram percentiles.
        let raw = super::raw::read(&lr.dir)?;
        for t in tables(run, &lr.label, &topts, raw.as_ref()) {
            let mut verdict = verdict(&t);
            if let Some(time) = &verdict.scaling {
                let inside: Vec<&TripCount> = a
                    .trips
                    .iter()
                    .filter(|x| {
                        x.run == lr.label && x.outer == t.target && x.case_name == t.case_name
                    })
                    .collect();
                verdict.by_loop = loop_class(time, &inside);
            }
            let target_report = run.targets.iter().find(|x| x.name == t.target);
            let anchors = Anchors::new(&t.target, target_report.and_then(|x| x.plan.as_ref()));
            let root_cause =
                case_root_cause(&a.stacks, ri, &t, &anchors).map(|(kind, cause)| CaseRootCause {
                    run: lr.label.clone(),
                    target: t.target.clone(),
                    case_name: t.case_name.clone(),
                    kind,
                    cause,
                });
            let population = split_populations(&t);
            verdict.mix = population.as_ref().map(PopulationSplit::mix);
            a.cases.push(CaseResult {
                table: t,
                verdict,
                root_cause,
                population,
            });
        }
        profile_runs.push(ProfiledRun {
            label: lr.label.clone(),
            kernel: run.kernel.release.clone(),
            sample_freq_hz: run.sample_freq_hz,
            phases: run.phases.clone(),
            invocations: run.invocations.clone(),
            entries: run.entries.clone(),
            entries_unavailable: run.entries_unavailable.clone(),
        });
    }
    a.discoveries = discover(&a.stacks, &profile_runs);
    // A discover sweep's second pass timed its top functions exactly: put those verdicts
    // beside the sampled ranking.
    for d in &mut a.discoveries {
        let confirm_run = format!("{}{}", d.run, crate::rundata::CONFIRM_SUFFIX);
        for CaseResult {
            table: t,
            verdict: v,
            ..
        } in &a.cases
        {
            if v.run == confirm_run
                && v.case_name == d.case_name
                && (d.ranked.iter().any(|g| g.function == v.target)
                    || d.entries.loops.iter().any(|l| l.frame() == Some(&v.target)))
            {
                d.exact.push(confirm_verdict(t, v, &d.per));
            }
        }
        let cause = d.cause.as_ref().map(|c| c.function.clone());
        for t in &a.trips {
            if t.run == confirm_run
                && t.case_name == d.case_name
                && (d.ranked.iter().any(|g| g.function == t.inner)
                    || d.entries.loops.iter().any(|l| l.frame() == Some(&t.inner))
                    || cause.as_ref() == Some(&t.inner))
            {
                d.trips.push(t.clone());
            }
        }
    }
    Ok(a)
}

/// The confirmation pass's verdict on a function discover ranked, by its exact time per op
/// (time per call × calls per op) when the run counted ops, else by its time per call.
#[derive(Clone, Debug, PartialEq)]
pub struct ExactVerdict {
    pub function: String,
    pub per_op: Option<PerOp>,
    pub per_call: Verdict,
}

impl ExactVerdict {
    /// The class the line leads with: the per-op one when there is one.
    pub fn class(&self) -> Option<Complexity> {
        match &self.per_op {
            Some(op) => Some(op.counted.as_ref().unwrap_or(&op.timed).class),
            None => self.per_call.class(),
        }
    }
}

/// Fits of a function's time per op.
#[derive(Clone, Debug, PartialEq)]
pub struct PerOp {
    /// What one op is (discover's `per`).
    pub per: String,
    /// The fit of the time per op.
    pub timed: Scaling,
    /// The fit of the calls per op, made when each call is flat: its class is the answer.
    pub counted: Option<Scaling>,
    /// Calls per op at the smallest and the largest N of `timed`.
    pub calls_per_op: [Option<f64>; 2],
}

/// The confirmation pass's verdict on a function discover ranked: its exact time per op
/// (time per call × calls per op), the quantity the sampled ranking fits, with the per-call
/// verdict beside it. Both matter: a function can grow per op by being called more often
/// (wait_consider_task runs once per child on each wait) while each call stays flat, and
/// comparing the sampled per-op class with an exact per-call class would contradict the
/// kernel. Falls back to the per-call verdict when the run has no op counts.
fn confirm_verdict(t: &CaseTable, per_call: &Verdict, per: &str) -> ExactVerdict {
    let points: Vec<super::fit::Point> = t
        .rows
        .iter()
        .filter_map(|r| {
            let total = r.time_per_call_ns? * r.calls_per_op?;
            (r.n > 0 && total > 0.0).then(|| super::fit::Point {
                n: r.n as f64,
                t: total,
                rel_se: r.rel_se(),
            })
        })
        .collect();
    let per_op = fit_scaling(&points).map(|timed| {
        // With each call flat, the time per op grows as the calls per op do, and those are
        // counted, not timed: their class is the answer. Fitting the product instead lets a
        // per-call drift the per-call fit judged noise (1.58 -> 1.92 µs in a 5.10 run under
        // TCG) tip the per-op class to the next one. A call whose time creeps up with N
        // less steeply than a power of N (the loop counts' rule, [`MAX_PER_TRIP_SLOPE`]) is
        // flat in that sense: a longer walk over colder memory, or qemu's software TLB
        // (wait_consider_task on 5.10 under TCG, 950 ns -> 1.37 µs per call over
        // N = 100..2000, fitted O(log n), tipped its per-op time to O(n log n)).
        let per_call_flat = per_call.scaling.as_ref().is_some_and(|pc| {
            pc.class == Complexity::Constant || pc.loglog.slope.abs() < MAX_PER_TRIP_SLOPE
        });
        let counted = if per_call_flat {
            fit_scaling(
                &t.rows
                    .iter()
                    .filter_map(|r| {
                        let c = r.calls_per_op?;
                        (r.n > 0 && c > 0.0).then_some(super::fit::Point {
                            n: r.n as f64,
                            t: c,
                            rel_se: None,
                        })
                    })
                    .collect::<Vec<_>>(),
            )
        } else {
            None
        };
        let calls = |n: f64| {
            t.rows
                .iter()
                .find(|r| r.n as f64 == n)
                .and_then(|r| r.calls_per_op)
        };
        let (p0, p1) = (timed.points[0], timed.points[timed.points.len() - 1]);
        PerOp {
            per: per.to_string(),
            calls_per_op: [calls(p0.n), calls(p1.n)],
            timed,
            counted,
        }
    });
    ExactVerdict {
        function: per_call.target.clone(),
        per_op,
        per_call: per_call.clone(),
    }
}

/// The root cause of one table. When the fitted time is on-CPU time, from on-CPU stacks only
/// (off-CPU stacks explain time blocked, which that verdict is not about), saying so when they
/// are too few. When it is wall time: from on-CPU stacks when two sizes have enough samples,
/// else from off-CPU stacks when they do, else the "too few samples" answer of whichever kind
/// has stacks (on-CPU first).
fn case_root_cause(
    stacks: &[StackData],
    run: usize,
    t: &CaseTable,
    anchors: &Anchors,
) -> Option<(StackKind, RootCause)> {
    let kinds: &[StackKind] = match t.metric {
        Metric::OncpuMean => &[StackKind::Oncpu],
        _ => &[StackKind::Oncpu, StackKind::Offcpu],
    };
    let per_kind: Vec<(StackKind, RootCause)> = kinds
        .iter()
        .copied()
        .filter_map(|kind| {
            let samples: Vec<StacksAtN> = t
                .rows
                .iter()
                .map(|r| {
                    let file = stacks.iter().find(|s| {
                        s.run == run
                            && s.file.kind == kind
                            && s.file.target == t.target
                            && s.file.case == t.case
                            && s.file.n == r.n
                    });
                    StacksAtN {
                        n: r.n,
                        stacks: file.map(|f| f.folded.clone()).unwrap_or_default(),
                        calls: Some(r.calls),
                        samples: Some(file.map_or(0, |f| f.file.count)),
                        ns_per_call: match kind {
                            StackKind::Offcpu => r.offcpu_mean_ns,
                            _ => r.oncpu_mean_ns.or(r.wall_mean_ns),
                        },
                    }
                })
                .collect();
            let mut cause = root_cause(&t.target, &t.case_name, anchors, &samples)?;
            cause.off_cpu = kind == StackKind::Offcpu;
            Some((kind, cause))
        })
        .collect();
    let enough = |rc: &RootCause| rc.sizes_used.len() >= 2;
    match per_kind.iter().position(|(_, rc)| enough(rc)) {
        Some(i) => per_kind.into_iter().nth(i),
        None => per_kind.into_iter().next(),
    }
}

/// The scaling verdict of one table (`render::verdict::line` gives its one-line summary).
pub fn verdict(t: &CaseTable) -> Verdict {
    Verdict {
        run: t.run.clone(),
        kernel: t.kernel.clone(),
        target: t.target.clone(),
        case_name: t.case_name.clone(),
        metric: t.metric,
        scaling: fit_scaling_runs(&t.points(), &t.run_points()),
        stand_in: t.stand_in(),
        timed: t.timed,
        plan: t.plan.clone(),
        by_loop: None,
        mix: None,
    }
}

/// The stacks taken and lost per kind, for the stack-loss warning: the share lost, and which
/// kind of stack it was. None when the run does not count the stacks taken (older runs).
fn stack_loss(counters: &BTreeMap<String, u64>) -> Option<StackLoss> {
    let get = |k: &str| counters.get(k).copied().unwrap_or(0);
    let taken = get("stacks_taken");
    (taken > 0).then(|| StackLoss {
        taken,
        caller: get("stacks_lost_caller"),
        offcpu: get("stacks_lost_offcpu"),
        sampled: get("stacks_lost_sampled"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::table::Row;

    fn table(rows: &[(u64, f64, f64)]) -> CaseTable {
        CaseTable {
            run: "confirm".into(),
            kernel: "5.10".into(),
            target: "wait_consider_task".into(),
            case: workloads::cases::CASE_COMMAND,
            case_name: "command".into(),
            plan: None,
            timed: true,
            metric: Metric::OncpuMean,
            rows: rows
                .iter()
                .map(|&(n, t, c)| Row {
                    n,
                    time_per_call_ns: Some(t),
                    calls_per_op: Some(c),
                    ..Row::default()
                })
                .collect(),
            probe_cost: None,
        }
    }

    /// A walk counted once per child per wait: its calls per op are exactly linear. When each
    /// call's time creeps up with N (5.10 under TCG), the class is still the count's; when
    /// each call grows like a power of N itself, the time's class stands.
    #[test]
    fn a_creeping_call_leaves_the_class_to_the_calls_per_op() {
        let calls = |n: u64| 2.0 * n as f64 + 4.0;
        let creep = table(&[
            (100, 950.0, calls(100)),
            (500, 1100.0, calls(500)),
            (1000, 1250.0, calls(1000)),
            (2000, 1370.0, calls(2000)),
        ]);
        let e = confirm_verdict(&creep, &verdict(&creep), "op");
        let op = e.per_op.as_ref().unwrap();
        assert!(op.counted.is_some(), "{e:?}");
        assert_eq!(e.class(), Some(Complexity::Linear), "{e:?}");

        let nested = table(&[
            (100, 950.0, calls(100)),
            (500, 4750.0, calls(500)),
            (1000, 9500.0, calls(1000)),
            (2000, 19_000.0, calls(2000)),
        ]);
        let e = confirm_verdict(&nested, &verdict(&nested), "op");
        assert!(e.per_op.as_ref().unwrap().counted.is_none(), "{e:?}");
        assert_eq!(e.class(), Some(Complexity::Quadratic), "{e:?}");
    }
}
