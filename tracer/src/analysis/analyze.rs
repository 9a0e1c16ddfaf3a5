//! The whole analysis of one run or sweep: tables, scaling verdicts and root causes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::rundata::{RunStatus, StackFile, StackKind, TargetReport};

use super::fit::{Complexity, Scaling, fit_scaling};
use super::load::{Dataset, LoadError, read_stack_file};
use super::rootcause::{RootCause, StacksAtN, root_cause};
use super::stacks::{Anchors, Folded};
use super::table::{CaseTable, Metric, TableOptions, WorkloadReport, tables};

#[derive(Clone, Debug, Default)]
pub struct AnalysisOptions {
    pub metric: Metric,
    pub include_unphased: bool,
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
    /// The plan measured a stand-in (e.g. "syscall-bracket syscalls:sys_enter_wait4,...").
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
    #[serde(skip)]
    pub stacks: Vec<StackData>,
    /// Things a reader should know (partial runs, lost events, unreadable workload results).
    pub warnings: Vec<String>,
}

/// Counter names that mean data was lost or mismeasured when non-zero.
const LOSS_WORDS: [&str; 6] = ["drop", "full", "error", "unpaired", "overflow", "abandoned"];

/// Analyse a loaded data set: reads every stack file it lists.
pub fn analyze(ds: &Dataset, opts: &AnalysisOptions) -> Result<Analysis, LoadError> {
    let topts = TableOptions {
        metric: opts.metric,
        include_unphased: opts.include_unphased,
    };
    let mut a = Analysis {
        root: ds.root.clone(),
        label: ds.label(),
        is_sweep: ds.is_sweep,
        runs: Vec::new(),
        tables: Vec::new(),
        verdicts: Vec::new(),
        root_causes: Vec::new(),
        stacks: Vec::new(),
        warnings: ds.notes.clone(),
    };
    for (ri, lr) in ds.runs.iter().enumerate() {
        let run = &lr.run;
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
            if *v > 0 && LOSS_WORDS.iter().any(|w| name.contains(w)) {
                a.warnings
                    .push(format!("{}: counter {name} = {v}", lr.label));
            }
        }
        for t in &run.targets {
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

        for t in tables(run, &lr.label, &topts) {
            let verdict = verdict(&t);
            let target_report = run.targets.iter().find(|x| x.name == t.target);
            let anchors = Anchors::new(&t.target, target_report.and_then(|x| x.plan.as_ref()));
            let rc = [StackKind::Oncpu, StackKind::Offcpu]
                .into_iter()
                .find_map(|kind| {
                    let samples: Vec<StacksAtN> = a
                        .stacks
                        .iter()
                        .filter(|s| {
                            s.run == ri
                                && s.file.kind == kind
                                && s.file.target == t.target
                                && s.file.case == t.case
                        })
                        .map(|s| StacksAtN {
                            n: s.file.n,
                            stacks: s.folded.clone(),
                            calls: t.rows.iter().find(|r| r.n == s.file.n).map(|r| r.calls),
                        })
                        .collect();
                    root_cause(&t.target, &anchors, &samples).map(|cause| (kind, cause))
                });
            if let Some((kind, cause)) = rc {
                a.root_causes.push(CaseRootCause {
                    run: lr.label.clone(),
                    target: t.target.clone(),
                    case_name: t.case_name.clone(),
                    kind,
                    cause,
                });
            }
            a.verdicts.push(verdict);
            a.tables.push(t);
        }
    }
    Ok(a)
}

/// Integer-looking N for text.
pub fn fmt_n(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The scaling verdict of one table, with its one-line summary.
pub fn verdict(t: &CaseTable) -> Verdict {
    let scaling = fit_scaling(&t.points());
    let head = t.key();
    let stand_in = t.stand_in();
    let mut line = match &scaling {
        None if !t.timed => format!("{head}: count-only plan, no time per call to fit"),
        None => format!("{head}: fewer than two sizes with timed calls, nothing to fit"),
        Some(s) => {
            let ci = s
                .slope
                .slope_ci95
                .map_or(String::new(), |(lo, hi)| format!(" [{lo:.2}, {hi:.2}]"));
            let r2 = s.slope.r2.map_or("n/a".to_string(), |r| format!("{r:.2}"));
            let (n0, n1) = (s.points[0].n, s.points[s.points.len() - 1].n);
            let tail = match s.visible_from {
                Some(v) if s.class != Complexity::Constant => {
                    format!("visible from N≈{}", fmt_n(v))
                }
                _ => format!(
                    "no growth visible up to N={} (x{:.2} from N={})",
                    fmt_n(n1),
                    s.growth_ratio,
                    fmt_n(n0)
                ),
            };
            format!(
                "{head}: {}, slope {:.2}{ci} (R² {r2}), {tail}",
                s.class.label(),
                s.slope.slope
            )
        }
    };
    if let Some(si) = &stand_in {
        line.push_str(&format!(" (measured via {si})"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::table::{TableOptions, tables};
    use crate::analysis::testdata;

    #[test]
    fn verdict_lines() {
        let ns = [1, 10, 100, 1000, 5000, 8000];
        let run = testdata::waitpid_run(&ns, |n| 1000 + 5 * n);
        let t = &tables(&run, "r", &TableOptions::default())[0];
        let v = verdict(t);
        assert_eq!(v.class(), Some(Complexity::Linear));
        assert!(
            v.line.starts_with("do_wait [waitpid-pid]: O(n), slope 1.0"),
            "{}",
            v.line
        );
        assert!(v.line.ends_with("visible from N≈100"), "{}", v.line);
        assert!(v.line.contains("(R² 1.00)"), "{}", v.line);

        let run = testdata::waitpid_run(&ns, |_| 1500);
        let v = verdict(&tables(&run, "r", &TableOptions::default())[0]);
        assert_eq!(v.class(), Some(Complexity::Constant));
        assert!(
            v.line.contains("O(1)") && v.line.contains("no growth visible up to N=8000"),
            "{}",
            v.line
        );

        let mut run = testdata::waitpid_run(&ns, |n| 1000 + n);
        run.targets[0].plan.as_mut().unwrap().attach_points =
            vec!["syscalls:sys_enter_wait4".into()];
        let v = verdict(&tables(&run, "r", &TableOptions::default())[0]);
        assert!(
            v.line
                .contains("measured via fentry syscalls:sys_enter_wait4"),
            "{}",
            v.line
        );
    }
}
