//! What one run's results take from another's and from its loop counts: the loop-count
//! pass's counts join the timed run's cases, a discover sweep's confirmation pass joins its
//! discoveries, and a case whose class a count gives has its root cause read by that count.

use crate::rundata::RunRole;

use super::analyze::{CaseResult, RunInfo};
use super::discover::Discovery;
use super::entries::{KernelEntry, MIN_LOOP_GROWTH, Refuted};
use super::exact::confirm_verdict;
use super::rootcause::Description;
use super::table::CaseTable;
use super::trips::{MAX_PER_TRIP_SLOPE, TripCount, loop_class, population_loop};

/// The trip counts of `table`'s target and case (the loops counted inside it), taken out of
/// `trips`.
pub(super) fn take_trips(trips: &mut Vec<TripCount>, table: &CaseTable) -> Vec<TripCount> {
    let (mine, rest) = std::mem::take(trips)
        .into_iter()
        .partition(|x| x.outer == table.target && x.case_name == table.case_name);
    *trips = rest;
    mine
}

/// A built-in sweep's loop-count pass counted the trips of its targets' loops, once per N:
/// they join the timed run's cases of the same target and case, and a growing verdict takes
/// its class from them as from trips counted in its own run (the time per trip is the timed
/// run's time over the pass's count). The pass keeps the counts no case took.
pub(super) fn join_loop_counts(runs: &mut [RunInfo]) {
    for j in 0..runs.len() {
        let (RunRole::LoopCount, base) = RunRole::of(&runs[j].label) else {
            continue;
        };
        let base = base.to_string();
        let Some(i) = runs.iter().position(|r| r.label == base) else {
            continue;
        };
        let mut pass = std::mem::take(&mut runs[j].trips);
        for c in &mut runs[i].cases {
            let counted = take_trips(&mut pass, &c.table);
            if counted.is_empty() {
                continue;
            }
            c.trips.extend(counted);
            let trips: Vec<&TripCount> = c.trips.iter().collect();
            if let Some(time) = &c.verdict.scaling {
                c.verdict.by_loop = loop_class(time, &trips);
            }
            // A mixed table: the loop counted in the calls that run it, in their population.
            if c.verdict.by_loop.is_none()
                && let Some((mix, lc)) = c
                    .population
                    .as_ref()
                    .and_then(|p| population_loop(p, &trips))
            {
                (c.verdict.mix, c.verdict.by_loop) = (Some(mix), Some(lc));
            }
        }
        runs[j].trips = pass;
    }
}

/// A frame whose self time carries the added time, in a case whose class its loop count
/// gives, is no loop of its own when its time per call grows as the count does (their slopes
/// within [`MAX_PER_TRIP_SLOPE`], or too few sizes with stacks to tell): each trip of the
/// counted loop costs it a fixed time. 5.10's
/// sysvipc scan: `__radix_tree_lookup` (idr_find tail-calls into it, so it stands right under
/// sysvipc_find_ipc on the stack) grows with slope 1.0 while sysvipc_find_ipc's calls of
/// idr_find grow with 0.94. A frame whose time grows faster or slower than the count keeps
/// "a loop in the frame itself", as does the target's own code, where the counted loop is.
pub(super) fn count_describes_culprit(c: &mut CaseResult) {
    let (Some(lc), Some(rc)) = (&c.verdict.by_loop, &mut c.root_cause) else {
        return;
    };
    let cause = &mut rc.cause;
    let Some(Description::SelfTime(frame)) = &cause.description else {
        return;
    };
    // A slope from two sizes with stacks does not tell a frame's own loop from the machine's
    // drift against an exact count (5.10's __radix_tree_lookup read slope 1.6 over N = 100,
    // 400 on a loaded host beside idr_find's 0.94): the count's loop stands.
    let follows = cause.sizes_used.len() < 3
        || cause
            .slope
            .is_some_and(|s| (s - lc.slope).abs() < MAX_PER_TRIP_SLOPE);
    if frame == &c.table.target || !follows {
        return;
    }
    cause.description = Some(Description::PerTrip {
        frame: frame.clone(),
        outer: c.table.target.clone(),
        inner: lc.inner.clone(),
        count_slope: lc.slope,
    });
}

/// A discover sweep's second pass timed its top functions exactly: put those verdicts, and
/// the loops that pass counted, beside the sampled ranking. The discovery keeps its own copy
/// of those counts: its evidence, shown with it, while the pass's cases keep theirs.
pub(super) fn join_confirm_passes(runs: &mut [RunInfo]) {
    for i in 0..runs.len() {
        let confirm_run = RunRole::Confirm.dir_name(&runs[i].label);
        let Some(k) = runs.iter().position(|r| r.label == confirm_run) else {
            continue;
        };
        let mut found = std::mem::take(&mut runs[i].discoveries);
        for d in &mut found {
            join_confirm_pass(d, &runs[k]);
            refute_flat_loops(d);
        }
        runs[i].discoveries = found;
    }
}

/// The confirmation pass `pass`'s verdicts and counts of what discovery `d` ranked.
fn join_confirm_pass(d: &mut Discovery, pass: &RunInfo) {
    // What the discovery names: its ranked functions, its loops' frames and what repeats
    // inside each (the confirmation counts that per call of the frame).
    let named = |f: &str| {
        d.ranked.iter().any(|g| g.function == f)
            || d.entries
                .loops
                .iter()
                .any(|l| l.frame() == Some(f) || l.cause.as_ref().is_some_and(|c| c.function == f))
    };
    for CaseResult {
        table: t,
        verdict: v,
        ..
    } in &pass.cases
    {
        if t.case_name == d.case_name && named(&t.target) {
            d.exact.push(confirm_verdict(t, v, &d.per));
        }
    }
    let cause = d.cause.as_ref().map(|c| c.function.as_str());
    // And what was counted inside a loop's frame: the function repeating there (idr_find in
    // 5.10's sysvipc_find_ipc, when the samples put the scan's self time in the frame).
    let in_loop = |f: &str| d.entries.loops.iter().any(|l| l.frame() == Some(f));
    let mut counted: Vec<TripCount> = pass
        .cases
        .iter()
        .flat_map(|c| &c.trips)
        .chain(&pass.trips)
        .filter(|t| {
            t.case_name == d.case_name
                && (named(&t.inner) || cause == Some(t.inner.as_str()) || in_loop(&t.outer))
        })
        .cloned()
        .collect();
    counted.sort_by(|x, y| x.order_key().cmp(&y.order_key()));
    d.trips.extend(counted);
    d.counted = d
        .exact
        .iter()
        .filter_map(|e| {
            let c = super::exact::counted_loop(&d.exact, &d.trips, &e.function)?;
            Some((e.function.clone(), c))
        })
        .collect();
}

/// How many times per entry call a refuted loop's frame may run (a path lookup's retry).
const ENTRY_CALLS_SLACK: f64 = 1.1;

/// The loops whose frame the confirmation timed exactly and found flat per call of the
/// entry ([`Entries::refuted`]): the frame's exact time per op over the entry's calls per op,
/// at the smallest and the largest N both measured, does not reach [`MIN_LOOP_GROWTH`] times.
/// A frame the loop calls once per call of the entry (a path lookup) has its growth there; one
/// it calls N times (the walk of the children) has it in its calls per op, which the exact
/// time per op holds too.
fn refute_flat_loops(d: &mut Discovery) {
    let refuted: Vec<Refuted> = d
        .entries
        .loops
        .iter()
        .filter_map(|l| refutation(d, l))
        .collect();
    d.entries.refute(refuted);
}

/// Loop `l`'s refutation by the exact timing of its frame, when that timing shows it flat.
fn refutation(d: &Discovery, l: &KernelEntry) -> Option<Refuted> {
    let g = l.top()?;
    let op = d
        .exact
        .iter()
        .find(|e| e.function == g.function)?
        .per_op
        .as_ref()?;
    // Each size both measured: the exact and the sampled time per call of the entry.
    let both: Vec<(u64, f64, f64)> = op
        .timed
        .points
        .iter()
        .filter_map(|p| {
            let n = p.n as u64;
            let calls = l.points.iter().find(|q| q.n == n)?.calls_per_op;
            let sampled = g.points.iter().find(|q| q.n == n)?.incl_ns;
            (calls > 0.0 && p.t > 0.0).then_some((n, p.t / calls, sampled))
        })
        .collect();
    let (first, last) = (both.first()?, both.last()?);
    if first.0 == last.0 || last.1 >= MIN_LOOP_GROWTH * first.1 {
        return None;
    }
    // Only a frame called no more often than its entry, at both ends: its exact time is then
    // the entry's. A function called from other syscalls too (`__vma_adjust` under mmap and
    // brk as well as mprotect) times them all, and refutes nothing of this one.
    let (p0, p1) = (op.timed.points.first()?, op.timed.points.last()?);
    let entry_calls = |n: u64| l.points.iter().find(|q| q.n == n).map(|q| q.calls_per_op);
    let within = |frame: Option<f64>, n: f64| {
        let n = n as u64;
        frame
            .zip(entry_calls(n))
            .is_some_and(|(f, e)| f <= ENTRY_CALLS_SLACK * e)
    };
    if (p0.n as u64, p1.n as u64) != (first.0, last.0)
        || !within(op.calls_per_op[0], p0.n)
        || !within(op.calls_per_op[1], p1.n)
    {
        return None;
    }
    Some(Refuted {
        entry: l.entry.clone(),
        frame: g.function.clone(),
        n_range: (first.0, last.0),
        exact_ns: (first.1, last.1),
        sampled_ns: (first.2, last.2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;

    /// A frame right under the target whose self time grows as the loop counted inside the
    /// target does is that loop's per-trip work (5.10's sysvipc scan: idr_find tail-calls
    /// into `__radix_tree_lookup`, which the stacks put under sysvipc_find_ipc), not a loop
    /// of its own; without the count, the stacks alone call it one.
    #[test]
    fn a_self_frame_that_grows_as_the_counted_loop_is_its_per_trip_work() {
        use crate::analysis::testdata;
        let ns = [10, 100, 1000, 4000];
        let stacks = |n: u64| {
            vec![
                ("do_wait;lookup", 20 * n),
                ("do_wait;lookup;node", 50),
                ("do_wait", 1000),
            ]
        };
        let run = || testdata::waitpid_run(&ns, |n| 1000 + 20 * n);
        let description = |a: &Analysis| {
            let c = a.cases().find(|c| c.table.target == "do_wait").unwrap();
            c.root_cause.as_ref().unwrap().cause.description.clone()
        };
        let alone = testdata::analysis_with_stacks(run(), stacks);
        assert_eq!(
            description(&alone),
            Some(Description::SelfTime("lookup".into()))
        );
        let mut counted = run();
        for &n in &ns {
            let mut inner = counted.spans.iter().find(|r| r.n == n).unwrap().clone();
            let calls = inner.calls * (n / 2 + 1);
            inner.target = "idr_find".into();
            inner.calls = calls;
            inner.within = [("do_wait".to_string(), calls)].into();
            counted.spans.push(inner);
        }
        let a = testdata::analysis_with_stacks(counted, stacks);
        let Some(Description::PerTrip {
            frame,
            outer,
            inner,
            count_slope,
        }) = description(&a)
        else {
            panic!("{:?}", description(&a));
        };
        assert_eq!((frame.as_str(), outer.as_str()), ("lookup", "do_wait"));
        assert_eq!(inner, "idr_find");
        assert!((0.8..1.0).contains(&count_slope), "{count_slope}");
    }

    /// What the confirmation counted inside a loop's frame is the discovery's evidence, even
    /// where the function counted is neither ranked nor the cause (idr_find under 5.10's
    /// sysvipc_find_ipc, whose self time carried the scan); a count elsewhere is not.
    #[test]
    fn a_count_inside_a_loops_frame_joins_the_discovery() {
        use crate::analysis::entries::tests::{discovered, shell};
        use crate::analysis::trips::TripPoint;
        let mut d = discovered(shell);
        let frame = d.entries.loops[0].loop_frame().to_string();
        let count = |outer: &str, inner: &str| TripCount {
            run: "sh-confirm".into(),
            outer: outer.into(),
            inner: inner.into(),
            case_name: d.case_name.clone(),
            points: vec![TripPoint {
                n: 10,
                outer_calls: 10,
                inner_calls: 110,
                per_call: 11.0,
                longest: None,
            }],
            scaling: None,
            longest_scaling: None,
        };
        let mut pass = crate::analysis::testdata::analysis_of_discoveries("sh", vec![d.clone()])
            .runs
            .remove(0);
        pass.discoveries.clear();
        pass.trips = vec![count(&frame, "lookup"), count("elsewhere", "lookup")];
        join_confirm_pass(&mut d, &pass);
        let joined: Vec<(&str, &str)> = d
            .trips
            .iter()
            .map(|t| (t.outer.as_str(), t.inner.as_str()))
            .collect();
        assert_eq!(joined, [(frame.as_str(), "lookup")]);
    }

    /// The shell's discovery with `frame` timed exactly by a confirmation pass at `per_call`
    /// ns per call of wait4 (its time per op: that times wait4's calls per op).
    fn confirmed(per_call: impl Fn(u64) -> f64) -> Discovery {
        use crate::analysis::entries::tests::{discovered, shell};
        use crate::analysis::exact::{ExactVerdict, PerOp};
        use crate::analysis::fit::{Point, fit_scaling};
        let mut d = discovered(shell);
        let wait4 = d.entries.loops.iter().find(|l| l.entry == "wait4").unwrap();
        let frame = wait4.frame().unwrap().to_string();
        let points: Vec<Point> = wait4
            .points
            .iter()
            .map(|p| Point {
                n: p.n as f64,
                t: per_call(p.n) * p.calls_per_op,
                rel_se: Some(0.02),
            })
            .collect();
        d.exact.push(ExactVerdict {
            function: frame,
            run: "sh-confirm".into(),
            case_name: "command".into(),
            per_op: Some(PerOp {
                per: "run".into(),
                timed: fit_scaling(&points).unwrap(),
                counted: None,
                calls_per_op: [
                    Some(points[0].t / per_call(10)),
                    Some(points[3].t / per_call(3000)),
                ],
            }),
            per_call: super::super::verdict::Verdict {
                metric: crate::analysis::table::Metric::OncpuMean,
                scaling: None,
                stand_in: None,
                timed: true,
                plan: None,
                by_loop: None,
                mix: None,
            },
        });
        d
    }

    /// A loop of the samples whose frame, timed exactly, takes no longer per call of its
    /// entry at the largest N is refuted: out of the loops, said, and its entry among the more
    /// calls (its calls grow); one whose exact time grows as the samples said stays.
    #[test]
    fn a_loop_timed_flat_exactly_is_refuted() {
        let mut d = confirmed(|n| 50_000.0 + 5.0 * n as f64);
        refute_flat_loops(&mut d);
        assert!(
            d.entries.loops.iter().all(|l| l.entry != "wait4"),
            "{:#?}",
            d.entries
        );
        let r = &d.entries.refuted;
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].entry.as_str(), r[0].n_range), ("wait4", (10, 3000)));
        assert!(r[0].exact_ns.1 < 2.0 * r[0].exact_ns.0, "{r:?}");
        assert!(d.entries.more_calls.iter().any(|m| m.entry == "wait4"));

        // A function called from other entries too times them all: it refutes nothing.
        let mut d = confirmed(|n| 50_000.0 + 5.0 * n as f64);
        let op = d.exact.last_mut().unwrap().per_op.as_mut().unwrap();
        op.calls_per_op = op.calls_per_op.map(|c| c.map(|c| 3.0 * c));
        refute_flat_loops(&mut d);
        assert!(d.entries.refuted.is_empty(), "{:?}", d.entries.refuted);

        let mut d = confirmed(|n| 2_000.0 * n as f64);
        refute_flat_loops(&mut d);
        assert!(d.entries.refuted.is_empty(), "{:?}", d.entries.refuted);
        assert_eq!(d.entries.loops[0].entry, "wait4");
    }
}
