//! The analysis as a sweep's extra runs consult it between runs ([`Advice`]): the verdicts
//! of the runs so far, fitted as the report fits them, now and at the cap of runs per size;
//! and a discover sweep's frames that more runs of one size would decide.
//!
//! Each size's centre is the median of its runs' centres (the tables' fitted centre of each
//! run's calls), its error their spread over √runs, each run its own point in the class
//! evidence; at the cap, each size's runs are repeated to it and its error shrunk as √runs
//! (what more runs like these would show).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::fit::{Complexity, FlatReason, Point, Scaling, classes_label, fit_scaling_runs};
use super::table::{rel_se_of_runs, run_centre};
use super::{AnalysisOptions, Dataset, LoadedRun};
use crate::record::advice::{Advice, Decision, MoreRuns, Open};
use crate::rundata::{Folded, Invocation, Run, StackFile};

/// The analysis, answering a sweep's extra runs.
#[derive(Debug)]
pub struct Analyst;

impl Advice for Analyst {
    fn verdicts(&self, invocations: &[Invocation], max_runs: u32, counted: &[String]) -> Vec<Open> {
        verdicts(invocations, max_runs, counted)
    }

    /// The run so far analysed as the report will be: 0.2 s on a host, 3 to 22 s in a qemu
    /// TCG guest (a 6.1 shell sweep's many stacks), against sweeps of minutes there.
    fn undecided_sizes(
        &self,
        label: &str,
        run: Run,
        stacks: &[(StackFile, Folded)],
    ) -> Result<Vec<MoreRuns>, String> {
        let loaded = LoadedRun::recorded(label.to_string(), PathBuf::new(), run, stacks.to_vec());
        let ds = Dataset {
            root: PathBuf::new(),
            is_sweep: false,
            runs: vec![loaded],
            notes: Vec::new(),
        };
        let a = super::analyze(&ds, &AnalysisOptions::default());
        Ok(a.discoveries()
            .flat_map(|d| d.entries.more_runs())
            .collect())
    }
}

/// A fit as far as more runs could change it: flat, or growing within its class set.
fn decision_of(s: Option<Scaling>) -> Decision {
    match s {
        Some(s) if s.class != Complexity::Constant => Decision::Grows {
            classes: s.classes.len(),
            label: classes_label(&s.classes),
        },
        _ => Decision::Flat,
    }
}

/// Each successful run's centre per N and (target, case) (the tables' fitted centre of its
/// calls).
type Centres<'a> = BTreeMap<(&'a str, u32), BTreeMap<u64, Vec<f64>>>;

/// Every successful run's centre, and the sizes where a run failed.
fn centres(invocations: &[Invocation]) -> (Centres<'_>, Vec<u64>) {
    // On-CPU where the target's probes measured it in any run, as the tables choose.
    let oncpu: std::collections::BTreeSet<&str> = invocations
        .iter()
        .flat_map(|i| &i.spans)
        .filter(|s| s.oncpu.sum_ns > 0)
        .map(|s| s.target.as_str())
        .collect();
    // A built-in workload's case decides on the target it exists for; what else it traced is
    // incidental and runs no size again.
    let decides = |s: &&crate::rundata::InvocationSpan| {
        workloads::cases::is_thread_target(&workloads::cases::case_name(s.case), &s.target)
    };
    let mut by_key = Centres::new();
    let mut failed = Vec::new();
    for inv in invocations.iter().filter(|i| i.n > 0) {
        if inv.failed() {
            failed.push(inv.n);
            continue;
        }
        for s in inv.spans.iter().filter(decides) {
            if let Some(c) = run_centre(s, oncpu.contains(s.target.as_str())) {
                by_key
                    .entry((s.target.as_str(), s.case))
                    .or_default()
                    .entry(inv.n)
                    .or_default()
                    .push(c);
            }
        }
    }
    (by_key, failed)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The verdict of one target's sizes, each size's runs repeated to `runs_each` (None: as
/// they are): the sizes' centres (the median of their runs, error the runs' spread over
/// √runs) and every run as its own point, as the report fits them; with where its class
/// set would part ([`Scaling::parts_at`]).
fn decision(sizes: &BTreeMap<u64, Vec<f64>>, runs_each: Option<usize>) -> (Decision, Option<u64>) {
    let fit = fit_of(sizes, runs_each);
    let parts_at = fit.as_ref().and_then(Scaling::parts_at);
    (decision_of(fit), parts_at)
}

/// The fit [`decision`] reads.
fn fit_of(sizes: &BTreeMap<u64, Vec<f64>>, runs_each: Option<usize>) -> Option<Scaling> {
    let mut points = Vec::new();
    let mut run_points = Vec::new();
    for (&n, runs) in sizes {
        let k = runs_each.unwrap_or(runs.len()).max(runs.len());
        let rel_se = rel_se_of_runs(runs).map(|se| se * (runs.len() as f64 / k as f64).sqrt());
        points.push(Point {
            n: n as f64,
            t: median(runs),
            rel_se,
        });
        run_points.extend(runs.iter().cycle().take(k).map(|&t| Point {
            n: n as f64,
            t,
            rel_se: None,
        }));
    }
    fit_scaling_runs(&points, &run_points)
}

/// How many standard errors a size's centre may move before a reading that rests on it is
/// open: about a 95% interval.
const SHIFT_SE: f64 = 2.0;

/// The least a size's centre is scaled by when moved down (a large error would take it to
/// zero or below).
const MIN_SHIFT: f64 = 0.1;

/// For a "no rising trend" reading ([`FlatReason::Falls`]), the size (the one with the
/// largest error, if several) whose centre, moved [`SHIFT_SE`] of its errors either way with
/// its runs, reads growth instead, and that reading. Every other reading weighs each size's
/// error, and the projection to the cap sees what more runs would settle; this one is the
/// shape of the centres alone (up, then down or level), and a centre is the median of a few
/// runs, which can be slow together on a busy host: a 5.10 guest's waitpid(pid) read 116 µs,
/// 170 µs, 2.59 ms, 1.63 ms over N = 1..3000 with two of three runs at N = 1000 near 3 ms and
/// the third at 0.85, and the projection keeps that centre where it is. More runs of the
/// size decide it.
fn shaky(sizes: &BTreeMap<u64, Vec<f64>>) -> Option<(Decision, u64)> {
    if fit_of(sizes, None)?.flat_reason != Some(FlatReason::Falls) {
        return None;
    }
    sizes
        .iter()
        .filter_map(|(&n, runs)| {
            let se = rel_se_of_runs(runs)?;
            [1.0 - SHIFT_SE * se, 1.0 + SHIFT_SE * se]
                .into_iter()
                .find_map(|f| {
                    let mut moved = sizes.clone();
                    for t in moved.get_mut(&n)? {
                        *t *= f.max(MIN_SHIFT);
                    }
                    let (d, _) = decision(&moved, None);
                    matches!(d, Decision::Grows { .. }).then_some(d)
                })
                .map(|d| (d, n, se))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(d, n, _)| (d, n))
}

/// [`Advice::verdicts`]: each size run at least twice, since the spread between runs is what
/// the cap's projection shrinks.
pub fn verdicts(invocations: &[Invocation], max_runs: u32, counted: &[String]) -> Vec<Open> {
    let (by_key, failed) = centres(invocations);
    let ran = |n: u64| invocations.iter().filter(|i| i.n == n).count();
    let mut out = Vec::new();
    for ((t, case), mut sizes) in by_key {
        sizes.retain(|n, _| !failed.contains(n));
        if sizes.len() < 2 || sizes.values().any(|r| r.len() < 2) {
            continue;
        }
        let ((mut now, parts_at), (mut at_cap, _)) = (
            decision(&sizes, None),
            decision(&sizes, Some(max_runs as usize)),
        );
        if counted.iter().any(|c| c == t) {
            (now, at_cap) = (now.growth_only(), at_cap.growth_only());
        }
        let mut shaky = shaky(&sizes);
        if counted.iter().any(|c| c == t) {
            shaky = shaky.map(|(d, n)| (d.growth_only(), n));
        }
        let under_cap = |n: &u64| ran(*n) < max_runs as usize;
        let with_error = |(&n, r): (&u64, &Vec<f64>)| Some((n, r.len(), rel_se_of_runs(r)?));
        let next = shaky
            .as_ref()
            .map(|(_, n)| *n)
            .filter(under_cap)
            .and_then(|n| with_error((&n, &sizes[&n])))
            .or_else(|| {
                sizes
                    .iter()
                    .filter(|(n, _)| under_cap(n))
                    .filter_map(with_error)
                    .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)))
            });
        out.push(Open {
            target: if case == workloads::cases::CASE_COMMAND {
                t.to_string()
            } else {
                format!("{t} [{}]", workloads::cases::case_name(case))
            },
            now,
            at_cap,
            shaky,
            next,
            parts_at,
        });
    }
    out
}
