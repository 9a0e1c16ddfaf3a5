//! What one run's results take from another's and from its loop counts: the loop-count
//! pass's counts join the timed run's cases, a discover sweep's confirmation pass joins its
//! discoveries, and a case whose class a count gives has its root cause read by that count.

use crate::rundata::RunRole;

use super::analyze::{CaseResult, RunInfo};
use super::discover::Discovery;
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
/// within [`MAX_PER_TRIP_SLOPE`]): each trip of the counted loop costs it a fixed time. 5.10's
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
    let follows = cause
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
    let mut counted: Vec<TripCount> = pass
        .cases
        .iter()
        .flat_map(|c| &c.trips)
        .chain(&pass.trips)
        .filter(|t| {
            t.case_name == d.case_name && (named(&t.inner) || cause == Some(t.inner.as_str()))
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
}
