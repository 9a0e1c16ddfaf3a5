//! The whole analysis of one run or sweep: tables, scaling verdicts and root causes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::rundata::{RunStatus, StackFile, StackKind, TargetReport};

use super::discover::{Discovery, ProfiledRun, discover};
use super::fit::{Complexity, FlatReason, Scaling, fit_scaling};
use super::load::{Dataset, LoadError, read_stack_file};
use super::populations::{PopulationSplit, split as split_populations};
use super::rootcause::{RootCause, StacksAtN, root_cause};
use super::stacks::{Anchors, Folded};
use super::table::{CaseTable, Metric, TableOptions, WorkloadReport, tables};
use super::text::{fmt_n, ns, sig3};

#[derive(Clone, Debug, Default)]
pub struct AnalysisOptions {
    pub metric: Metric,
    pub include_unphased: bool,
    /// Give times per call minus the probe's measured cost beside the measured ones.
    pub subtract_probe_cost: bool,
}

/// Scaling verdict of one target and case.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    pub line: String,
}

impl Verdict {
    pub fn class(&self) -> Option<Complexity> {
        self.scaling.as_ref().map(|s| s.class)
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

#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub root: PathBuf,
    /// Kernel release, or the directory name when runs differ.
    pub label: String,
    pub is_sweep: bool,
    pub runs: Vec<RunInfo>,
    /// One per (run, target, case); `verdicts[i]` belongs to `tables[i]`.
    pub tables: Vec<CaseTable>,
    pub verdicts: Vec<Verdict>,
    pub root_causes: Vec<CaseRootCause>,
    /// Whole-process discoveries (`--discover` runs), one per run and case.
    pub discoveries: Vec<Discovery>,
    /// Tables whose calls are a mix of a fixed and an N-proportional population.
    pub populations: Vec<PopulationSplit>,
    #[serde(skip)]
    pub stacks: Vec<StackData>,
    /// Things a reader should know (partial runs, lost events, unreadable workload results).
    pub warnings: Vec<String>,
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
        tables: Vec::new(),
        verdicts: Vec::new(),
        root_causes: Vec::new(),
        discoveries: Vec::new(),
        populations: Vec::new(),
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
                a.warnings.push(format!(
                    "{}: the command failed at N={} ({}): that N is left out",
                    lr.label,
                    i.n,
                    match i.exit {
                        Some(c) if c > 128 => format!("killed by signal {}", c - 128),
                        Some(c) => format!("exit {c}"),
                        None => "it never ended".into(),
                    }
                ));
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
            a.warnings.push(format!(
                "{}: {bad} workload result(s) could not be read",
                lr.label
            ));
        }
        if run.status == RunStatus::Partial {
            a.warnings.push(format!(
                "{}: partial run ({})",
                lr.label,
                run.partial_reason.as_deref().unwrap_or("no reason given")
            ));
        }
        if let Some((w, _)) = &workload
            && w.status == "interrupted"
        {
            a.warnings
                .push(format!("{}: the workload was interrupted", lr.label));
        }
        for (name, v) in &run.counters {
            // Every loss counter explains itself; the others are informational.
            if *v > 0
                && let Some(meaning) = crate::rundata::counter_meaning(name)
            {
                let of = match name.as_str() {
                    "stack_errors" => stack_loss_detail(&run.counters),
                    _ => String::new(),
                };
                a.warnings.push(format!(
                    "{}: counter {name} = {v}{of} ({meaning})",
                    lr.label
                ));
            }
        }
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
                a.warnings.push(format!(
                    "{}: {} was attached ({} at {}) but saw 0 calls while the command ran: \
                     inlined at its hot call sites, or not on this workload's path? \
                     (--discover shows the functions the time goes through)",
                    lr.label,
                    t.name,
                    p.plan,
                    p.attach_points.join(", ")
                ));
            }
            if t.plan.is_none() {
                let why: Vec<String> = t
                    .rejected
                    .iter()
                    .map(|r| format!("{}: {}", r.plan, r.reason))
                    .collect();
                a.warnings.push(format!(
                    "{}: {} was not traced ({})",
                    lr.label,
                    t.name,
                    why.join("; ")
                ));
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

        // Rows that lost raw spans (ringbuf_drops, warned above) keep histogram percentiles.
        let raw = super::raw::read(&lr.dir)?;
        for t in tables(run, &lr.label, &topts, raw.as_ref()) {
            let verdict = verdict(&t);
            let target_report = run.targets.iter().find(|x| x.name == t.target);
            let anchors = Anchors::new(&t.target, target_report.and_then(|x| x.plan.as_ref()));
            let rc = case_root_cause(&a.stacks, ri, &t, &anchors);
            if let Some((kind, cause)) = rc {
                a.root_causes.push(CaseRootCause {
                    run: lr.label.clone(),
                    target: t.target.clone(),
                    case_name: t.case_name.clone(),
                    kind,
                    cause,
                });
            }
            a.populations.extend(split_populations(&t));
            a.verdicts.push(verdict);
            a.tables.push(t);
        }
        profile_runs.push(ProfiledRun {
            label: lr.label.clone(),
            kernel: run.kernel.release.clone(),
            sample_freq_hz: run.sample_freq_hz,
            phases: run.phases.clone(),
            invocations: run.invocations.clone(),
        });
    }
    a.discoveries = discover(&a.stacks, &profile_runs);
    // A discover sweep's second pass timed its top functions exactly: put those verdicts
    // beside the sampled ranking.
    for d in &mut a.discoveries {
        let confirm_run = format!("{}{}", d.run, crate::rundata::CONFIRM_SUFFIX);
        for (t, v) in a.tables.iter().zip(&a.verdicts) {
            if v.run == confirm_run
                && v.case_name == d.case_name
                && d.ranked.iter().any(|g| g.function == v.target)
            {
                let (class, line) = confirm_verdict(t, v, &d.per);
                d.exact.push((v.target.clone(), class, line));
            }
        }
    }
    Ok(a)
}

/// The confirmation pass's verdict on a function discover ranked: its exact time per op
/// (time per call × calls per op), the quantity the sampled ranking fits, with the per-call
/// verdict beside it. Both matter: a function can grow per op by being called more often
/// (wait_consider_task runs once per child on each wait) while each call stays flat, and
/// comparing the sampled per-op class with an exact per-call class would contradict the
/// kernel. Falls back to the per-call verdict when the run has no op counts.
fn confirm_verdict(t: &CaseTable, per_call: &Verdict, per: &str) -> (Option<Complexity>, String) {
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
    let Some(timed) = fit_scaling(&points) else {
        return (per_call.class(), per_call.line.clone());
    };
    // With each call flat, the time per op grows as the calls per op do, and those are
    // counted, not timed: their class is the answer. Fitting the product instead lets a
    // per-call drift the per-call fit judged noise (1.58 -> 1.92 µs in a 5.10 run under
    // TCG) tip the per-op class to the next one.
    let per_call_flat = per_call
        .scaling
        .as_ref()
        .is_some_and(|pc| pc.class == Complexity::Constant);
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
    let s = counted.as_ref().unwrap_or(&timed);
    let (p0, p1) = (timed.points[0], timed.points[timed.points.len() - 1]);
    let class = match s.flat_reason {
        None => format!("{}, slope {:.2}", s.class.label(), s.slope.slope),
        Some(FlatReason::NoGrowth) => "O(1)".to_string(),
        Some(FlatReason::Falls) => "no rising trend".to_string(),
        Some(_) => "O(1) within noise".to_string(),
    };
    let calls = |n: f64| {
        t.rows
            .iter()
            .find(|r| r.n as f64 == n)
            .and_then(|r| r.calls_per_op)
            .map_or("?".to_string(), sig3)
    };
    let per_call_part = match &per_call.scaling {
        Some(pc) => format!(
            "per call {} ({} -> {}), called {} -> {} times per {per}{}",
            match pc.flat_reason {
                None => pc.class.label(),
                Some(_) => "O(1)",
            },
            ns(pc.points[0].t),
            ns(pc.points[pc.points.len() - 1].t),
            calls(p0.n),
            calls(p1.n),
            if counted.is_some() {
                ": the class is the calls'"
            } else {
                ""
            }
        ),
        None => String::new(),
    };
    let mut line = format!(
        "{}: {class} per {per}, {} -> {} per {per} over N={}..{} ({per_call_part})",
        t.key(),
        ns(p0.t),
        ns(p1.t),
        fmt_n(p0.n),
        fmt_n(p1.n)
    );
    if let Some(via) = t.via() {
        line.push_str(&format!("; via {via}"));
    }
    (Some(s.class), line)
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

/// The scaling verdict of one table, with its one-line summary:
///
/// - `do_wait [waitpid-any]: O(n), slope 1.17 (R² 0.98), visible from N≈100; 6.59µs ->
///   450µs per call over N=1..4000; via syscall-bracket (wait4, waitid)`
///
/// The slope's interval stays in [`Scaling`] (JSON): with three or four sizes above the
/// baseline it is wide even when the growth is clear, and next to a class it reads as a
/// contradiction.
/// - `do_wait [waitpid-pid]: O(1), 6.85µs -> 6.82µs per call over N=1..4000 (x1.00); via …`
/// - `do_wait [waitpid-pid]: O(1) within noise, 8.70µs -> 13.1µs per call over N=1..1000
///   (x1.51: above the baseline at N=1000 only); via …`
pub fn verdict(t: &CaseTable) -> Verdict {
    let scaling = fit_scaling(&t.points());
    let head = t.key();
    let stand_in = t.stand_in();
    let mut line = match &scaling {
        None if !t.timed => format!("{head}: count-only plan, no time per call to fit"),
        None => format!("{head}: fewer than two sizes with timed calls, nothing to fit"),
        Some(s) => {
            let (p0, p1) = (s.points[0], s.points[s.points.len() - 1]);
            let range = format!(
                "{} -> {} per call over N={}..{}",
                ns(p0.t),
                ns(p1.t),
                fmt_n(p0.n),
                fmt_n(p1.n)
            );
            match s.flat_reason {
                None => {
                    let n = s.points.len();
                    let r2 = if s.slope.points <= 2 && n >= 2 {
                        // A line through two points: R² says nothing; the points do.
                        let (a, b) = (s.points[n - 2], s.points[n - 1]);
                        let excess = if s.slope_of_excess {
                            format!(
                                "; the part above N={}'s {} x{:.2}",
                                fmt_n(p0.n),
                                ns(s.baseline),
                                (b.t - s.baseline) / (a.t - s.baseline)
                            )
                        } else {
                            String::new()
                        };
                        format!(
                            "from two sizes: x{:.2} per call for x{} N, {} at N={} -> {} at N={}{excess}",
                            b.t / a.t,
                            {
                                let r = b.n / a.n;
                                if r.fract() == 0.0 { fmt_n(r) } else { sig3(r) }
                            },
                            ns(a.t),
                            fmt_n(a.n),
                            ns(b.t),
                            fmt_n(b.n)
                        )
                    } else {
                        format!(
                            "R² {}",
                            s.slope.r2.map_or("n/a".to_string(), |r| format!("{r:.2}"))
                        )
                    };
                    let few = if s.points.len() < 3 {
                        " (two sizes only: the class is a guess)"
                    } else {
                        ""
                    };
                    format!(
                        "{head}: {}{few}, slope {:.2} ({r2}), visible from N≈{}; {range}",
                        s.class.label(),
                        s.slope.slope,
                        fmt_n(s.visible_from.unwrap_or(p1.n)),
                    )
                }
                Some(FlatReason::NoGrowth) => {
                    format!("{head}: O(1), {range} (x{:.2})", s.growth_ratio)
                }
                Some(r @ FlatReason::Falls) => format!(
                    "{head}: no rising trend, {range} (x{:.2}: {})",
                    s.growth_ratio,
                    r.text(s)
                ),
                Some(r) => format!(
                    "{head}: O(1) within noise, {range} (x{:.2}: {})",
                    s.growth_ratio,
                    r.text(s)
                ),
            }
        }
    };
    if let Some(via) = t.via() {
        line.push_str(&format!("; via {via}"));
    }
    Verdict {
        run: t.run.clone(),
        kernel: t.kernel.clone(),
        target: t.target.clone(),
        case_name: t.case_name.clone(),
        metric: t.metric,
        scaling,
        stand_in,
        line,
    }
}

/// " of T stacks taken (caller c, off-CPU o, sampled s)" for the stack-loss warning: the
/// share lost, and which kind of stack it was (older runs lack the per-kind counters).
fn stack_loss_detail(counters: &BTreeMap<String, u64>) -> String {
    let get = |k: &str| counters.get(k).copied().unwrap_or(0);
    let taken = get("stacks_taken");
    if taken == 0 {
        return String::new();
    }
    format!(
        " of {taken} stacks taken (caller {}, off-CPU {}, sampled {})",
        get("stacks_lost_caller"),
        get("stacks_lost_offcpu"),
        get("stacks_lost_sampled")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::table::{TableOptions, tables};
    use crate::analysis::testdata;

    #[test]
    fn verdict_lines() {
        let ns = [1, 10, 100, 1000, 5000, 8000];
        let run = testdata::waitpid_run(&ns, |n| 1000 + 5 * n);
        let t = &tables(&run, "r", &TableOptions::default(), None)[0];
        let v = verdict(t);
        assert_eq!(v.class(), Some(Complexity::Linear));
        assert!(
            v.line.starts_with("do_wait [waitpid-pid]: O(n), slope 1.0"),
            "{}",
            v.line
        );
        assert!(
            v.line.contains("(R² 1.00), visible from N≈100; "),
            "{}",
            v.line
        );
        assert!(
            v.line
                .ends_with("; 1.00µs -> 41.0µs per call over N=1..8000; via fentry do_wait"),
            "{}",
            v.line
        );

        let run = testdata::waitpid_run(&ns, |_| 1500);
        let v = verdict(&tables(&run, "r", &TableOptions::default(), None)[0]);
        assert_eq!(v.class(), Some(Complexity::Constant));
        assert!(
            v.line.starts_with(
                "do_wait [waitpid-pid]: O(1), 1.50µs -> 1.50µs per call over N=1..8000 (x1.00)"
            ),
            "{}",
            v.line
        );

        // +50% at the largest N only: O(1) within noise, with the reason.
        let run = testdata::waitpid_run(&[1, 100, 1000], |n| if n == 1000 { 13_000 } else { 8700 });
        let v = verdict(&tables(&run, "r", &TableOptions::default(), None)[0]);
        assert_eq!(v.class(), Some(Complexity::Constant));
        assert!(
            v.line.starts_with("do_wait [waitpid-pid]: O(1) within noise, 8.70µs -> 13.0µs per call over N=1..1000 (x1.49: above the baseline at N=1000 only)"),
            "{}",
            v.line
        );
        // The repeats scatter by 10% (9, 10 and 11 µs per op): +22% is within the noise.
        let run = testdata::waitpid_run(&[1, 100, 1000], |n| if n == 1 { 1000 } else { 1220 });
        let v = verdict(&tables(&run, "r", &TableOptions::default(), None)[0]);
        assert!(
            v.line.contains("(x1.22: within the noise: needs +"),
            "{}",
            v.line
        );

        // Growth visible at the two largest sizes only: the slope runs through two points, so
        // the line shows them (and their ratio) instead of a vacuous R².
        let run = testdata::waitpid_run(&[1, 10, 100, 1000, 2000], |n| match n {
            2000 => 9400,
            1000 => 1800,
            _ => 1000,
        });
        let v = verdict(&tables(&run, "r", &TableOptions::default(), None)[0]);
        assert!(
            v.class().is_some_and(|c| c != Complexity::Constant),
            "{}",
            v.line
        );
        assert!(
            v.line.contains(
                ", slope 3.39 (from two sizes: x5.22 per call for x2 N, 1.80µs at N=1000 -> 9.40µs at N=2000; the part above N=1's 1.00µs x10.50), visible from N≈1000; "
            ),
            "{}",
            v.line
        );

        // A stand-in plan is named briefly; its attach points stay in the tables.
        let mut run = testdata::waitpid_run(&ns, |n| 1000 + n);
        let plan = run.targets[0].plan.as_mut().unwrap();
        plan.plan = "syscall-bracket".into();
        plan.attach_points = [
            "syscalls:sys_exit_wait4",
            "syscalls:sys_enter_wait4",
            "syscalls:sys_exit_waitid",
            "syscalls:sys_enter_waitid",
        ]
        .map(String::from)
        .to_vec();
        let v = verdict(&tables(&run, "r", &TableOptions::default(), None)[0]);
        assert!(
            v.line.ends_with("; via syscall-bracket (wait4, waitid)"),
            "{}",
            v.line
        );
        assert!(v.stand_in.unwrap().contains("syscalls:sys_enter_waitid"));
    }
}
