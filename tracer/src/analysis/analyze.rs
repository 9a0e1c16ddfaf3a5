//! The whole analysis of one run or sweep: tables, scaling verdicts and root causes.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::rundata::{PlanUsed, Run, RunRole, RunStatus, StackKind, TargetReport};

use super::discover::{Discovery, ProfiledRun, discover};
use super::joins;
use super::load::{Dataset, LoadedRun};
use super::populations::{PopulationSplit, split as split_populations};
use super::rootcause::{FrameGrowth, RootCause, StacksAtN, root_cause};
use super::stacks::{Anchors, StackData};
use super::table::{CaseTable, Metric, TableOptions, WorkloadReport, tables};
use super::trips::{TripCount, loop_class, population_loop};
use super::verdict::{Verdict, verdict};
use super::warnings::{StackLoss, Warning};

#[derive(Clone, Debug, Default)]
pub struct AnalysisOptions {
    pub metric: Metric,
    pub include_unphased: bool,
    /// Give times per call minus the probe's measured cost beside the measured ones.
    pub subtract_probe_cost: bool,
}

/// Root cause of one target and case (the case that owns it, whose target and case `cause`
/// names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseRootCause {
    /// Which stacks were analysed (on-CPU, or off-CPU when no on-CPU stacks were taken).
    pub kind: StackKind,
    pub cause: RootCause,
    /// The same stacks attributed per op, where the calls mix a fixed and an N-proportional
    /// population and `cause` names no growing frame: the N cheap calls hold every call's
    /// time per call flat while the fixed ones walk (a shell's 100 waits among N reaps), and
    /// per op the walk's frames add time. Not shown: the loop-count pass counts its frames
    /// ([`super::countable`]), and the count says which is a loop.
    #[serde(skip)]
    pub per_op: Option<RootCause>,
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
    /// Its folded-stack files of the sizes kept (a failed N's are left out with its rows),
    /// ordered by (kind, target, case, N).
    #[serde(skip)]
    pub stacks: Vec<StackData>,
    /// What it found for each of its targets and cases, in its tables' order (none for a
    /// loop-count pass, whose times hold a probe per trip: its counts join the timed run's
    /// cases).
    #[serde(skip)]
    pub cases: Vec<CaseResult>,
    /// Its whole-process discoveries (`--discover`), one per case.
    #[serde(skip)]
    pub discoveries: Vec<Discovery>,
    /// The loop trip counts of its spans that no case took (a loop-count pass's counts of
    /// loops no timed case has: do_wait's trips while `spawn` reaps its children).
    #[serde(skip)]
    pub trips: Vec<TripCount>,
}

impl RunInfo {
    /// The plan its target `target` was probed with.
    pub fn plan_of(&self, target: &str) -> Option<&PlanUsed> {
        crate::rundata::plan_of(&self.targets, target)
    }

    /// What the run was for: measured, a discovery's confirmation or a loop-count pass.
    pub fn role(&self) -> RunRole {
        RunRole::of(&self.label).0
    }
}

/// Everything the analysis found for one target and case of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    pub table: CaseTable,
    pub verdict: Verdict,
    /// Where the growing time goes, when stacks were sampled.
    pub root_cause: Option<CaseRootCause>,
    /// The calls split into a fixed and an N-proportional population, when they mix.
    pub population: Option<PopulationSplit>,
    /// The loops counted inside its target: calls of another target per call of it, per N,
    /// in its own run or in the loop-count pass beside it.
    pub trips: Vec<TripCount>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub root: PathBuf,
    /// Kernel release, or the directory name when runs differ.
    pub label: String,
    pub is_sweep: bool,
    /// Each run with what was found in it.
    pub runs: Vec<RunInfo>,
    /// Things a reader should know (partial runs, lost events, unreadable workload results).
    pub warnings: Vec<Warning>,
}

impl Analysis {
    /// Every run's cases, in the runs' order.
    pub fn cases(&self) -> impl Iterator<Item = &CaseResult> {
        self.runs.iter().flat_map(|r| &r.cases)
    }

    /// Every run's discoveries, in the runs' order.
    pub fn discoveries(&self) -> impl Iterator<Item = &Discovery> {
        self.runs.iter().flat_map(|r| &r.discoveries)
    }

    /// Every loop trip count, each once (the cases' and the ones no case took), ordered by
    /// the run that counted it, then as [`super::trips::trip_counts`] orders a run's.
    pub fn trip_counts(&self) -> Vec<&TripCount> {
        let mut all: Vec<&TripCount> = self
            .runs
            .iter()
            .flat_map(|r| r.cases.iter().flat_map(|c| &c.trips).chain(&r.trips))
            .collect();
        self.sort_trips(&mut all);
        all
    }

    /// Put trip counts in the order [`Self::trip_counts`] gives them.
    pub fn sort_trips(&self, trips: &mut [&TripCount]) {
        let at = |t: &TripCount| self.runs.iter().position(|r| r.label == t.run);
        trips.sort_by(|x, y| {
            at(x)
                .cmp(&at(y))
                .then_with(|| x.order_key().cmp(&y.order_key()))
        });
    }

    pub fn root_causes(&self) -> impl Iterator<Item = &CaseRootCause> {
        self.cases().filter_map(|c| c.root_cause.as_ref())
    }

    /// The cases whose calls are a mix of a fixed and an N-proportional population.
    pub fn populations(&self) -> impl Iterator<Item = &PopulationSplit> {
        self.cases().filter_map(|c| c.population.as_ref())
    }
}

/// Analyse a loaded data set (it reads nothing: everything it needs was loaded).
pub fn analyze(ds: &Dataset, opts: &AnalysisOptions) -> Analysis {
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
        warnings: ds.notes.clone(),
    };
    let mut profile_runs = Vec::new();
    for lr in &ds.runs {
        let (run, failed) = without_failed_sizes(lr);
        let run = run.as_ref();
        a.warnings.extend(failed);
        let workload = run.workload.as_ref().map(WorkloadReport::from_value);
        let unreadable = workload.as_ref().map_or(0, |(_, bad)| *bad);
        let interrupted = workload
            .as_ref()
            .is_some_and(|(w, _)| w.status == "interrupted");
        a.warnings
            .extend(run_warnings(ds, &lr.label, run, unreadable, interrupted));
        // The stack files of the sizes kept (a failed N's are left out with its rows).
        let stacks = lr
            .stacks
            .iter()
            .filter(|(f, _)| run.stack_files.contains(f))
            .map(|(f, folded)| StackData {
                file: f.clone(),
                folded: folded.clone(),
            })
            .collect();
        let mut info = RunInfo {
            label: lr.label.clone(),
            dir: lr.dir.clone(),
            kernel: run.kernel.release.clone(),
            status: run.status,
            partial_reason: run.partial_reason.clone(),
            workload: workload.map(|(w, _)| w.workload).filter(|w| !w.is_empty()),
            sample_freq_hz: run.sample_freq_hz,
            targets: run.targets.clone(),
            counters: run.counters.clone(),
            stacks,
            cases: Vec::new(),
            discoveries: Vec::new(),
            trips: Vec::new(),
        };
        let mut trips = super::trips::trip_counts(&lr.label, &run.spans);
        // A loop-count pass's times hold a probe per trip: only its counts are used (below).
        if counts_only(ds, &lr.label) {
            info.trips = trips;
            a.runs.push(info);
            continue;
        }
        // Rows that lost raw spans (ringbuf_drops, warned above) keep histogram percentiles.
        for t in tables(run, &lr.label, &topts, lr.raw.as_ref()) {
            let own = joins::take_trips(&mut trips, &t);
            let case = case_result(&info, own, t);
            info.cases.push(case);
        }
        info.trips = trips;
        a.runs.push(info);
        profile_runs.push(ProfiledRun {
            label: lr.label.clone(),
            kernel: run.kernel.release.clone(),
            sample_freq_hz: run.sample_freq_hz,
            phases: run.phases.clone(),
            invocations: run.invocations.clone(),
            entries: run.entries.clone(),
            entries_unavailable: run.entries_unavailable.clone(),
            interruptions: run.interruptions.clone(),
        });
    }
    joins::join_loop_counts(&mut a.runs);
    for c in a.runs.iter_mut().flat_map(|r| &mut r.cases) {
        joins::count_describes_culprit(c);
    }
    // Each profiled run beside its own stacks (the runs counted only are not profiled).
    let profiled: Vec<(&ProfiledRun, &[StackData])> = profile_runs
        .iter()
        .filter_map(|p| {
            let run = a.runs.iter().find(|r| r.label == p.label)?;
            Some((p, run.stacks.as_slice()))
        })
        .collect();
    for d in discover(&profiled) {
        if let Some(run) = a.runs.iter_mut().find(|r| r.label == d.run) {
            run.discoveries.push(d);
        }
    }
    joins::join_confirm_passes(&mut a.runs);
    a
}

/// A run without the sizes where an external sweep's command failed (left out of every
/// table and fit), and a warning for each.
fn without_failed_sizes(lr: &LoadedRun) -> (Cow<'_, Run>, Vec<Warning>) {
    let failed: Vec<&crate::rundata::Invocation> = lr
        .run
        .invocations
        .iter()
        .filter(|i| i.n > 0 && i.failed())
        .collect();
    if failed.is_empty() {
        return (Cow::Borrowed(&lr.run), Vec::new());
    }
    let warnings = failed
        .iter()
        .map(|i| Warning::CommandFailed {
            run: lr.label.clone(),
            n: i.n,
            exit: i.exit,
        })
        .collect();
    let bad = |n: u64| failed.iter().any(|i| i.n == n);
    let mut r = lr.run.clone();
    r.spans.retain(|x| !bad(x.n));
    r.phases.retain(|x| !bad(x.n));
    r.stack_files.retain(|x| !bad(x.n));
    (Cow::Owned(r), warnings)
}

/// What a reader should know about one run: unreadable workload results, a partial or
/// interrupted run, loss counters, a lowered sample rate, a named function that never fired
/// or could not be traced.
fn run_warnings(
    ds: &Dataset,
    label: &str,
    run: &Run,
    unreadable: usize,
    interrupted: bool,
) -> Vec<Warning> {
    let mut w = Vec::new();
    if unreadable > 0 {
        w.push(Warning::UnreadableResults {
            run: label.to_string(),
            count: unreadable,
        });
    }
    if run.status == RunStatus::Partial {
        w.push(Warning::PartialRun {
            run: label.to_string(),
            reason: run.partial_reason.clone(),
        });
    }
    if interrupted {
        w.push(Warning::Interrupted {
            run: label.to_string(),
        });
    }
    for (name, v) in &run.counters {
        // Every loss counter explains itself; the others are informational
        // (`rundata::INFORMATIONAL_COUNTERS`).
        if *v > 0
            && let Some(meaning) = crate::rundata::counter_meaning(name)
        {
            w.push(Warning::LossCounter {
                run: label.to_string(),
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
    w.extend(super::warnings::sample_rate_lowered(
        label,
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
            w.push(Warning::NeverFired {
                run: label.to_string(),
                target: t.name.clone(),
                plan: p.plan.clone(),
                attach_points: p.attach_points.clone(),
            });
        }
        // A loop-count pass attaches what it can; the sweep said which loop went uncounted.
        if t.plan.is_none() && !counts_only(ds, label) {
            w.push(Warning::NotTraced {
                run: label.to_string(),
                target: t.name.clone(),
                rejected: t
                    .rejected
                    .iter()
                    .map(|r| (r.plan.clone(), r.reason.clone()))
                    .collect(),
            });
        }
    }
    w
}

/// One table's verdict, with the class its loop counts in the same run give it, its
/// populations and its root cause (from the run's stacks; per op as well where the
/// calls mix populations and no frame grows per call).
fn case_result(info: &RunInfo, trips: Vec<TripCount>, t: CaseTable) -> CaseResult {
    let mut verdict = verdict(&t);
    if let Some(time) = &verdict.scaling {
        verdict.by_loop = loop_class(time, &trips.iter().collect::<Vec<_>>());
    }
    let anchors = Anchors::new(&t.target, info.plan_of(&t.target));
    let population = split_populations(&t);
    let root_cause = case_root_cause(&info.stacks, &t, &anchors, Per::Call).map(|(kind, cause)| {
        let mixed = population.as_ref().is_some_and(|p| p.separated);
        let per_op = (mixed && !cause.culprit.as_ref().is_some_and(FrameGrowth::grows))
            .then(|| case_root_cause(&info.stacks, &t, &anchors, Per::Op))
            .flatten()
            .map(|(_, c)| c);
        CaseRootCause {
            kind,
            cause,
            per_op,
        }
    });
    verdict.mix = population.as_ref().map(PopulationSplit::mix);
    if verdict.by_loop.is_none()
        && let Some((mix, lc)) = population
            .as_ref()
            .and_then(|p| population_loop(p, &trips.iter().collect::<Vec<_>>()))
    {
        (verdict.mix, verdict.by_loop) = (Some(mix), Some(lc));
    }
    CaseResult {
        table: t,
        verdict,
        root_cause,
        population,
        trips,
    }
}

/// Is `label` the loop-count pass of another run of the data set (`<run>-loops` beside
/// `<run>`, `sweep::loops`)?
fn counts_only(ds: &Dataset, label: &str) -> bool {
    match RunRole::of(label) {
        (RunRole::LoopCount, base) => ds.runs.iter().any(|r| r.label == base),
        _ => false,
    }
}

/// What a root cause attributes: the target's time per call (the verdict's), or its time per
/// op (the mean per call times the calls per op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Per {
    Call,
    Op,
}

/// The root cause of one table. When the fitted time is on-CPU time, from on-CPU stacks only
/// (off-CPU stacks explain time blocked, which that verdict is not about), saying so when they
/// are too few. When it is wall time: from on-CPU stacks when two sizes have enough samples,
/// else from off-CPU stacks when they do, else the "too few samples" answer of whichever kind
/// has stacks (on-CPU first). The time per call the on-CPU stacks split is the fitted robust
/// centre where the fitted metric is on-CPU time, so verdict and root cause agree on whether
/// the time grows.
fn case_root_cause(
    stacks: &[StackData],
    t: &CaseTable,
    anchors: &Anchors,
    per: Per,
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
                        s.file.kind == kind
                            && s.file.target == t.target
                            && s.file.case == t.case
                            && s.file.n == r.n
                    });
                    StacksAtN {
                        n: r.n,
                        stacks: file.map(|f| f.folded.clone()).unwrap_or_default(),
                        calls: Some(r.calls),
                        samples: Some(file.map_or(0, |f| f.file.count)),
                        ns_per_call: match per {
                            Per::Op => {
                                let mean = match kind {
                                    StackKind::Offcpu => r.offcpu_mean_ns,
                                    _ => r.oncpu_mean_ns.or(r.wall_mean_ns),
                                };
                                mean.zip(r.calls_per_op).map(|(m, k)| m * k)
                            }
                            Per::Call => match (kind, t.metric, r.oncpu_mean_ns) {
                                (StackKind::Offcpu, _, _) => r.offcpu_mean_ns,
                                // On-CPU stacks split the verdict's own value when it is on-CPU
                                // time (the calls' robust centre), so the root cause attributes
                                // the growth the verdict sees: the plain mean, which one slow call
                                // moves, could have it blame a frame for time added beside an
                                // O(1) verdict.
                                (_, Metric::OncpuMean, Some(mean)) => {
                                    r.time_per_call_ns.or(Some(mean))
                                }
                                _ => r.oncpu_mean_ns.or(r.wall_mean_ns),
                            },
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
        aggregates_full: get("stack_aggregates_full"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::Complexity;
    use crate::analysis::table::Row;
    use crate::rundata::Folded;
    use crate::rundata::StackFile;

    /// Ten sampled stacks per size: `slow` of them in `finish_task_switch`, the rest in the
    /// walk below do_wait.
    fn stacks_at(n: u64, slow: u64) -> StackData {
        let mut folded = Folded::new();
        let path = |leaf: &str| vec!["do_wait".to_string(), leaf.to_string()];
        folded.add(path("finish_task_switch"), slow * 1000);
        folded.add(path("wait_consider_task"), (10 - slow) * 1000);
        StackData {
            file: StackFile {
                kind: StackKind::Oncpu,
                target: "do_wait".into(),
                case: 0,
                case_name: "waitpid-pid".into(),
                n,
                path: String::new(),
                total_ns: 10_000,
                count: 10,
            },
            folded,
        }
    }

    fn row(n: u64, mean: f64, centre: f64) -> Row {
        Row {
            n,
            calls: 100,
            timed_calls: 100,
            oncpu_mean_ns: Some(mean),
            wall_mean_ns: Some(mean),
            time_per_call_ns: Some(centre),
            ..Row::default()
        }
    }

    /// A sweep's loop-count pass (`waitpid-loops`) counted wait_consider_task inside do_wait:
    /// its counts give the timed run's verdict its class (the time per child creeps up with N,
    /// so the time alone reads faster than linear), its own times (with a probe per trip) are
    /// not fitted, and without the pass the same timed run keeps its time's class.
    #[test]
    fn a_loop_count_pass_gives_the_timed_runs_verdict_its_class() {
        use crate::analysis::load::{Dataset, LoadedRun};
        use crate::analysis::testdata;
        let ns = [100, 1000, 2000, 4000];
        // 50 ns per child at N = 100, 100 ns at 4000: N^1.2 over the sweep.
        let per_child = |n: u64| 50.0 * (n as f64 / 100.0).powf(0.19);
        let timed = testdata::waitpid_run(&ns, |n| 2000 + (n as f64 * per_child(n)) as u64);
        let mut pass = testdata::waitpid_run(&ns, |n| 2000 + n * 1500);
        pass.targets
            .extend(testdata::empty_run("5.10.0-test", &["wait_consider_task"]).targets);
        for &n in &ns {
            let outer = pass.spans.iter_mut().find(|r| r.n == n).unwrap();
            outer.within.clear();
            let inner_calls = 200 * (n + 1);
            let mut inner = outer.clone();
            inner.target = "wait_consider_task".into();
            inner.calls = inner_calls;
            inner.wall = Default::default();
            inner.oncpu = Default::default();
            inner.within = [("do_wait".to_string(), inner_calls)].into();
            pass.spans.push(inner);
        }
        let load = |label: &str, run: &crate::rundata::Run| {
            LoadedRun::read(label.into(), "/nonexistent".into(), run.clone()).unwrap()
        };
        let with = |runs: Vec<LoadedRun>| {
            analyze(
                &Dataset {
                    root: "/x".into(),
                    is_sweep: true,
                    runs,
                    notes: vec![],
                },
                &AnalysisOptions::default(),
            )
        };
        let a = with(vec![load("waitpid", &timed), load("waitpid-loops", &pass)]);
        let cases: Vec<(&str, &str)> = a
            .cases()
            .map(|c| (c.table.run.as_str(), c.table.target.as_str()))
            .collect();
        assert_eq!(
            cases,
            [("waitpid", "do_wait")],
            "the pass's times are not fitted"
        );
        let v = &a.runs[0].cases[0].verdict;
        assert!(
            v.time_class().is_some_and(|c| c > Complexity::Linear),
            "{:?}",
            v.scaling
        );
        let by_loop = v.by_loop.as_ref().expect("a class from the pass's count");
        assert_eq!(
            (by_loop.inner.as_str(), by_loop.run.as_str(), by_loop.class),
            ("wait_consider_task", "waitpid-loops", Complexity::Linear)
        );
        assert_eq!(v.class(), Some(Complexity::Linear));
        assert_eq!(a.runs[0].cases[0].trips.len(), 1);
        // The timed run alone: the time's own class.
        let alone = with(vec![load("waitpid", &timed)]);
        assert!(alone.runs[0].cases[0].verdict.by_loop.is_none());
        assert_eq!(alone.runs[0].cases[0].verdict.class(), v.time_class());
    }

    /// One call preempted for long at the largest size lifts the plain on-CPU mean by half
    /// and puts half the samples in the scheduler, while the robust centre the verdict fits
    /// stays flat (O(1)). The root cause must agree with the verdict: no added time to give
    /// the scheduler frame, whose share grew from 0 to 50%.
    #[test]
    fn root_cause_attributes_the_growth_the_verdict_fits() {
        let table = |metric| CaseTable {
            run: "r".into(),
            kernel: "6.1".into(),
            target: "do_wait".into(),
            case: 0,
            case_name: "waitpid-pid".into(),
            plan: None,
            timed: true,
            metric,
            rows: vec![
                row(10, 300_000.0, 300_000.0),
                row(100, 310_000.0, 301_000.0),
                row(1000, 450_000.0, 298_000.0),
            ],
            probe_cost: None,
        };
        let stacks = [stacks_at(10, 0), stacks_at(100, 0), stacks_at(1000, 5)];
        let anchors = Anchors::new("do_wait", None);

        let (_, flat) =
            case_root_cause(&stacks, &table(Metric::OncpuMean), &anchors, Per::Call).unwrap();
        assert_eq!(flat.target_ns, Some((300_000.0, 298_000.0)));
        assert!(!flat.attributes());
        assert!(flat.culprit.is_none(), "{:?}", flat.culprit);

        // Fitting wall time, the on-CPU stacks still split the on-CPU mean, which grew.
        let (_, by_mean) =
            case_root_cause(&stacks, &table(Metric::WallMean), &anchors, Per::Call).unwrap();
        assert_eq!(by_mean.target_ns, Some((300_000.0, 450_000.0)));
        assert!(by_mean.attributes());
        assert_eq!(
            by_mean.culprit.as_ref().map(|c| c.frame()),
            Some("finish_task_switch")
        );
    }
}
