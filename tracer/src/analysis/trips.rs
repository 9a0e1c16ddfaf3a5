//! Loop trip counts: how many times per call of one traced target another one runs inside it.
//!
//! The kernel counts, for every timed call, the innermost call of another traced target it
//! ran inside (`SpanRow::within`). Divided by that target's calls at the same (case, N),
//! this is the number of trips per call through whatever loop makes the inner calls: exact
//! counts, which no timing noise, cache or emulator effect can bend. A walk over N objects
//! is O(n) here even when its time per object rises with N.

use serde::Serialize;

use super::fit::{ADEQUATE_FIT, Complexity, Point, Scaling, fit_counts};
use super::populations::{Mix, PopulationSplit};
use super::stats::ols;
use crate::rundata::{RunRole, SpanRow};

/// Fewest inner calls per outer call, at some N, for a series to be kept.
pub const MIN_TRIPS: f64 = 0.01;

/// Steepest log-log slope of time per trip against N for a loop's count to give a growing
/// verdict its class. Below it the trips account for the growth and what is left is the cost
/// of one trip creeping up with N (a longer walk over colder memory; qemu's software TLB under
/// TCG: 5.10's do_wait, 114 µs -> 1.29 ms per call over N = 250..4000 in one run, took 0.46,
/// 0.29, 0.22, 0.25, 0.32 µs per child);
/// at 0.5 or more something inside each trip grows like a power of N itself (a loop inside
/// the loop), at -0.5 or less the trips grow much faster than the time (most of the time is
/// not in them); either way the time's own class stands.
pub const MAX_PER_TRIP_SLOPE: f64 = 0.5;

/// Least log-log slope of a count's trips per call over the whole sweep for it to be a loop
/// over what N counts: such a loop runs about N times (or N/2, or N²) per call, a fixed part
/// of a dozen trips allowed (vm_area_dup in dup_mmap: 12 -> 4011 per call over N = 1..4000,
/// slope 0.68). A count flat over most sizes that rises late (page allocations in a fork:
/// 12 per call up to N = 100, then 51, 202: slope 0.32) is a threshold, not a loop's trips.
pub const MIN_LOOP_SLOPE: f64 = 0.5;

/// A growing time verdict whose class is taken from an exact loop count inside its target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoopClass {
    /// The inner target whose calls per outer call give the class.
    pub inner: String,
    /// The run that counted them: the verdict's own, or its loop-count pass
    /// (`<run>-loops`).
    pub run: String,
    /// The count's class.
    pub class: Complexity,
    /// The count's log-log slope.
    pub slope: f64,
    /// Log-log slope of time per call / trips per call against N (under
    /// [`MAX_PER_TRIP_SLOPE`]).
    pub per_trip_slope: f64,
    /// The smallest and largest N counted, where the count missed sizes the time has (a
    /// loop-count pass cut short): the class rests on those sizes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted_only: Option<(u64, u64)>,
    /// Counted in the calls that run the loop: the tenth of the outer's calls with the most
    /// trips ([`TripPoint::longest`]), the class of one population of a mixed table's calls
    /// ([`population_loop`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub longest: bool,
}

impl LoopClass {
    /// The class of the count `t` (fitted as `s`), with its time per trip's slope: counted
    /// over all of the outer's calls, at every size the time has.
    fn of(t: &TripCount, s: &Scaling, per_trip_slope: f64) -> LoopClass {
        LoopClass {
            inner: t.inner.clone(),
            run: t.run.clone(),
            class: s.class,
            slope: s.loglog.slope,
            per_trip_slope,
            counted_only: None,
            longest: false,
        }
    }
}

/// The class `time` (one table's fit) takes from the loops counted inside it: the growing
/// count with the most growth among `trips` (the same run, outer target and case), when the
/// time per call grows too, the count follows its class closely (its model's RMS within
/// [`ADEQUATE_FIT`]: a loop's trips do; a count of something the call does now and then,
/// such as page allocations during a fork, 11, 11, 11, 62, 399 per call over N = 1..4000,
/// follows no class and is no loop's), it rises like a loop over N ([`MIN_LOOP_SLOPE`]), and
/// its time per trip neither grows nor falls like a power of N. None otherwise.
///
/// "Grows too" means the time was not shown flat: growth the noise left undecided (above the
/// baseline at the largest N only, or not by enough standard errors) still counts, because
/// the count is exact and the per-trip check below ties the time to it. 5.10's do_wait on a
/// loaded host read 1.61, 2.03, 2.26, 8.14 ms per call over N = 125..1000 (±25% at the small
/// sizes) while its walk counted 125, 248, 492, 985 children per call.
pub fn loop_class(time: &Scaling, trips: &[&TripCount]) -> Option<LoopClass> {
    if shown_flat(time) {
        return None;
    }
    trips
        .iter()
        .filter_map(|t| {
            let s = t.scaling.as_ref().filter(|s| counts_a_loop(s))?;
            let per_trip = per_trip_slope(time, t)?;
            let counted = |n: f64| t.points.iter().any(|p| p.n as f64 == n);
            let counted_only = time
                .points
                .iter()
                .any(|p| !counted(p.n))
                .then(|| (t.points[0].n, t.points[t.points.len() - 1].n));
            (per_trip.abs() < MAX_PER_TRIP_SLOPE).then(|| LoopClass {
                counted_only,
                ..LoopClass::of(t, s, per_trip)
            })
        })
        .max_by(|a, b| a.class.cmp(&b.class).then(a.slope.total_cmp(&b.slope)))
}

/// The class a mixed table's verdict takes from a loop counted in the calls that run it,
/// and the population it is of. A shell's waits that walk its N children among the reaps
/// of its jobs: the count over all calls follows no class, the tenth of the calls with the
/// most trips does ([`TripCount::longest_scaling`]); the calls that run a loop are the slower
/// of the two populations the per-call histogram split (`split`), so that population's time
/// is tied to the count as [`loop_class`] ties a table's: not shown flat, its time per trip
/// neither growing nor falling like a power of N. Then the headline is that population
/// (the returned [`Mix`]). None where no series counts a loop only in its longest calls.
pub fn population_loop(split: &PopulationSplit, trips: &[&TripCount]) -> Option<(Mix, LoopClass)> {
    if !split.separated {
        return None;
    }
    let slow = if split.fixed_slower { "fixed" } else { "per-n" };
    let pop = split.populations.iter().find(|p| p.kind == slow)?;
    let time = pop.scaling.as_ref().filter(|s| !shown_flat(s))?;
    let other = split
        .populations
        .iter()
        .find(|p| p.kind != slow)
        .and_then(|p| p.scaling.clone());
    trips
        .iter()
        .filter(|t| !t.scaling.as_ref().is_some_and(counts_a_loop))
        .filter_map(|t| {
            let s = t.longest_scaling.as_ref().filter(|s| counts_a_loop(s))?;
            let longest = TripCount {
                points: longest_points(&t.points)?,
                ..(*t).clone()
            };
            let per_trip = per_trip_slope(time, &longest)?;
            (per_trip.abs() < MAX_PER_TRIP_SLOPE).then(|| LoopClass {
                counted_only: None,
                longest: true,
                ..LoopClass::of(t, s, per_trip)
            })
        })
        .max_by(|a, b| a.class.cmp(&b.class).then(a.slope.total_cmp(&b.slope)))
        .map(|lc| {
            let mix = Mix::Population {
                kind: slow.to_string(),
                fixed_per_op: split.fixed_per_op,
                per_n: split.per_n,
                scaling: Box::new(time.clone()),
                other: other.map(Box::new),
            };
            (mix, lc)
        })
}

/// Whether a count's fit is a loop's trips over what N counts: growing, following its class
/// closely ([`ADEQUATE_FIT`]), rising like a loop over N ([`MIN_LOOP_SLOPE`]), and at three
/// sizes or more: two fit every growing shape, and a count at two sizes (a pass cut short)
/// is no class.
pub fn counts_a_loop(count: &Scaling) -> bool {
    count.flat_reason.is_none()
        && count.model.nrms <= ADEQUATE_FIT
        && count.loglog.slope >= MIN_LOOP_SLOPE
        && count.points.len() >= 3
}

/// Whether a time per call is flat as one trip of a loop is: O(1), or creeping up with N less
/// steeply than a power of N ([`MAX_PER_TRIP_SLOPE`]).
pub fn flat_per_trip(time: &Scaling) -> bool {
    time.class == Complexity::Constant || time.loglog.slope.abs() < MAX_PER_TRIP_SLOPE
}

/// The time per call did not rise with N: within [`super::fit::MIN_MARGIN`] of its
/// baseline, falling, or no growing model fits. Undecided growth is not flat.
pub(crate) fn shown_flat(time: &Scaling) -> bool {
    use super::fit::FlatReason;
    match time.flat_reason {
        None => time.class == Complexity::Constant,
        Some(FlatReason::WithinNoise | FlatReason::OneSize | FlatReason::NotSignificant) => false,
        Some(FlatReason::NoGrowth | FlatReason::Falls | FlatReason::NoGrowingModel) => true,
    }
}

/// Log-log slope against N of the time per trip, the flatter of two readings (a size's time
/// being the median of its runs' points):
/// - time per call over trips per call, which a fixed cost per call (a wakeup, a fork: 218
///   µs per do_wait under TCG against 0.5 µs per child) makes fall with N where the trips
///   are few;
/// - the time the calls add per trip they add, (t(N) - t(N0)) / (trips(N) - trips(N0)) from
///   the smallest size N0 both series have, at each larger size where the trips grew and the
///   time added is at least t(N0) (below that it is mostly the fixed part's scatter: 5.10's
///   waitpid(-1) added 91 µs over 18 trips at N = 10, 5 µs per trip, against 0.5 µs from
///   N = 100 on), at least two sizes: the fixed cost is not in it, but a per-trip cost that
///   creeps up with N over a longer walk shows whole (5.10's do_wait over N = 250..4000:
///   116 -> 314 ns per added child, slope 0.5, where time over trips reads -0.12).
///
/// Time that grows faster than its count by a power of N reads steep both ways.
pub(super) fn per_trip_slope(time: &Scaling, t: &TripCount) -> Option<f64> {
    let mut at: Vec<(f64, f64, f64)> = Vec::new();
    let mut ns: Vec<f64> = time.points.iter().map(|p| p.n).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    for n in ns {
        let Some(trip) = t.points.iter().find(|q| q.n as f64 == n) else {
            continue;
        };
        let ys: Vec<f64> = time
            .points
            .iter()
            .filter(|p| p.n == n)
            .map(|p| p.t)
            .collect();
        at.push((n, super::stats::median(&ys)?, trip.per_call));
    }
    let slope = |pts: Vec<(f64, f64)>| {
        let (xs, ys): (Vec<f64>, Vec<f64>) = pts.into_iter().unzip();
        (xs.len() >= 2)
            .then(|| ols(&xs, &ys).map(|f| f.slope))
            .flatten()
    };
    let ratio = slope(
        at.iter()
            .filter(|(_, _, c)| *c > 0.0)
            .map(|(n, t, c)| (n.ln(), (t / c).ln()))
            .collect(),
    );
    let &(_, t0, c0) = at.first()?;
    let added = slope(
        at[1..]
            .iter()
            .filter(|(_, t, c)| *t >= 2.0 * t0 && *c > c0)
            .map(|(n, t, c)| (n.ln(), ((t - t0) / (c - c0)).ln()))
            .collect(),
    );
    [ratio, added]
        .into_iter()
        .flatten()
        .min_by(|a, b| a.abs().total_cmp(&b.abs()))
}

/// Inner calls per outer call at one N.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TripPoint {
    pub n: u64,
    pub outer_calls: u64,
    /// Calls of the inner target made inside an outer call.
    pub inner_calls: u64,
    pub per_call: f64,
    /// The mean trips of the outer calls that made the most, the longest [`LONGEST_SHARE`]
    /// of them, where the kernel counted the outer's calls one by one (its trips histogram,
    /// `SpanRow::trips`) and nearly all of the calls closed directly inside them are this
    /// inner's ([`MIN_INNER_SHARE`]); None otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest: Option<f64>,
}

/// One (run, outer target, inner target, case) series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TripCount {
    pub run: String,
    pub outer: String,
    pub inner: String,
    pub case_name: String,
    pub points: Vec<TripPoint>,
    /// The fitted class of `per_call` against N (two sizes or more). Its exponent is the
    /// plain log-log slope (`loglog`): a count has no fixed cost to take off first, and
    /// N/2 trips per call is slope 1.
    pub scaling: Option<Scaling>,
    /// The fit of [`TripPoint::longest`] against N, where every point has it: the class of
    /// the loop in the calls that run it, when the outer's calls mix those with calls that
    /// do not (a shell's waits that walk its N children among the reaps of its jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_scaling: Option<Scaling>,
}

impl TripCount {
    /// The order of one run's series: by the function counted, its case, and the function
    /// per call of which it was counted (as the run's span rows come, by target).
    pub fn order_key(&self) -> (&str, &str, &str) {
        (&self.inner, &self.case_name, &self.outer)
    }

    /// What its run is to its sweep.
    pub fn role(&self) -> RunRole {
        RunRole::of(&self.run).0
    }

    /// The growth of the trip count from the smallest to the largest N.
    pub fn range(&self) -> (f64, f64) {
        let first = self.points.first().map_or(0.0, |p| p.per_call);
        let last = self.points.last().map_or(0.0, |p| p.per_call);
        (first, last)
    }
}

/// The fit of a series' counts per call against N. Counts carry no measurement error: each
/// point's own error is zero, and the fit's floors (its least margin of visible growth, its
/// adequate-fit RMS) still apply.
fn count_fit(points: &[TripPoint]) -> Option<Scaling> {
    let pts: Vec<Point> = points
        .iter()
        .filter(|p| p.n > 0 && p.per_call > 0.0)
        .map(|p| Point {
            n: p.n as f64,
            t: p.per_call,
            rel_se: Some(0.0),
        })
        .collect();
    fit_counts(&pts)
}

/// The fit of the points' [`TripPoint::longest`], when every point has one.
fn longest_fit(points: &[TripPoint]) -> Option<Scaling> {
    count_fit(&longest_points(points)?)
}

/// The points with their [`TripPoint::longest`] as the count per call, when every one has it.
fn longest_points(points: &[TripPoint]) -> Option<Vec<TripPoint>> {
    points
        .iter()
        .map(|p| {
            Some(TripPoint {
                per_call: p.longest?,
                ..p.clone()
            })
        })
        .collect()
}

/// The share of an outer target's calls, those with the most trips, whose mean trips
/// [`TripPoint::longest`] is: a loop's calls when they are a tenth of the calls or more.
pub const LONGEST_SHARE: f64 = 0.1;

/// The least share of the calls closed directly inside an outer target's calls that must be
/// one inner target's for the outer's trips histogram to count that inner's trips (the
/// others' mean per outer call is taken off: a loop-count pass that also traced a lock
/// release inside do_wait had 426 and 100 such calls beside 3235 of the walk over 213 waits
/// at N = 10, 86% the walk's).
pub const MIN_INNER_SHARE: f64 = 0.8;

/// The mean trips of the `LONGEST_SHARE` of `timed` calls with the most, from their trips
/// histogram (calls with one trip or more; the others made none). A bucket's calls count at
/// its midpoint (exact below `HIST_SUB`, within 1/32 above).
fn longest_mean(hist: &[(u32, u64)], timed: u64) -> Option<f64> {
    let want = ((timed as f64 * LONGEST_SHARE).ceil() as u64).max(1);
    let mut by_bucket: Vec<(u32, u64)> = hist.to_vec();
    by_bucket.sort_by_key(|b| std::cmp::Reverse(b.0));
    let (mut left, mut sum) = (want, 0.0);
    for (b, c) in by_bucket {
        let take = c.min(left);
        let lo = tracer_ebpf::hist_bucket_low(b) as f64;
        let hi = tracer_ebpf::hist_bucket_high(b) as f64;
        let mid = if hi - lo <= 1.0 {
            lo
        } else {
            (lo + hi - 1.0) / 2.0
        };
        sum += take as f64 * mid;
        left -= take;
        if left == 0 {
            break;
        }
    }
    (timed > 0).then(|| sum / want as f64)
}

/// [`TripPoint::longest`] of `inner` in `outer_row`'s calls, among the rows `spans` of the
/// same run.
fn longest_of(spans: &[SpanRow], outer_row: &SpanRow, inner: &str) -> Option<f64> {
    if outer_row.trips.is_empty() {
        return None;
    }
    let inside = |r: &&SpanRow| r.case == outer_row.case && r.n == outer_row.n;
    let of = |r: &SpanRow| r.within.get(&outer_row.target).copied().unwrap_or(0);
    let all: u64 = spans.iter().filter(inside).map(of).sum();
    let mine: u64 = spans
        .iter()
        .filter(inside)
        .filter(|r| r.target == inner)
        .map(of)
        .sum();
    if all == 0 || (mine as f64) < MIN_INNER_SHARE * all as f64 {
        return None;
    }
    let timed = outer_row.calls.saturating_sub(outer_row.untimed);
    // The other targets' calls inside it, spread over the outer's calls as their mean.
    let others = (all - mine) as f64 / timed.max(1) as f64;
    longest_mean(&outer_row.trips, timed).map(|m| (m - others).max(0.0))
}

/// Every trip-count series of one run's spans, by (outer, inner, case) and N.
pub fn trip_counts(run: &str, spans: &[SpanRow]) -> Vec<TripCount> {
    let mut out: Vec<TripCount> = Vec::new();
    for inner in spans {
        for (outer, &inner_calls) in &inner.within {
            let Some(outer_row) = spans
                .iter()
                .find(|r| &r.target == outer && r.case == inner.case && r.n == inner.n)
            else {
                continue;
            };
            if outer_row.calls == 0 {
                continue;
            }
            let point = TripPoint {
                n: inner.n,
                outer_calls: outer_row.calls,
                inner_calls,
                per_call: inner_calls as f64 / outer_row.calls as f64,
                longest: longest_of(spans, outer_row, &inner.target),
            };
            match out.iter_mut().find(|t| {
                &t.outer == outer && t.inner == inner.target && t.case_name == inner.case_name
            }) {
                Some(t) => t.points.push(point),
                None => out.push(TripCount {
                    run: run.to_string(),
                    outer: outer.clone(),
                    inner: inner.target.clone(),
                    case_name: inner.case_name.clone(),
                    points: vec![point],
                    scaling: None,
                    longest_scaling: None,
                }),
            }
        }
    }
    // A call that ran inside another only now and then (a context switch inside a wait) is
    // no loop of it: under one call per hundred at every N, the series is dropped.
    out.retain(|t| t.points.iter().any(|p| p.per_call >= MIN_TRIPS));
    for t in &mut out {
        t.points.sort_by_key(|p| p.n);
        t.scaling = count_fit(&t.points);
        t.longest_scaling = longest_fit(&t.points);
    }
    out.sort_by(|x, y| x.order_key().cmp(&y.order_key()));
    out.sort_by(|a, b| {
        (&a.run, &a.outer, &a.inner, &a.case_name).cmp(&(&b.run, &b.outer, &b.inner, &b.case_name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::{Complexity, fit_scaling};
    use crate::rundata::Dist;
    use std::collections::BTreeMap;

    fn row(target: &str, n: u64, calls: u64, within: &[(&str, u64)]) -> SpanRow {
        SpanRow {
            target: target.into(),
            case: 100,
            case_name: "command".into(),
            n,
            calls,
            untimed: 0,
            wall: Dist::default(),
            oncpu: Dist::default(),
            within: within
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>(),
            trips: Vec::new(),
        }
    }

    #[test]
    fn a_scan_over_n_ids_counts_linear_and_a_single_lookup_flat() {
        // 5.10's sysvipc_find_ipc: each call scans the ids below its position (N/2 on
        // average); 6.1's does one idr_get_next per call.
        let mut spans = Vec::new();
        for n in [100u64, 200, 400, 800] {
            let calls = n + 2;
            spans.push(row("sysvipc_find_ipc", n, calls, &[]));
            spans.push(row(
                "idr_find",
                n,
                calls * n / 2,
                &[("sysvipc_find_ipc", calls * n / 2)],
            ));
            spans.push(row(
                "idr_get_next",
                n,
                calls,
                &[("sysvipc_find_ipc", calls)],
            ));
        }
        let t = trip_counts("r", &spans);
        assert_eq!(t.len(), 2);
        let find = t.iter().find(|t| t.inner == "idr_find").unwrap();
        assert_eq!(find.outer, "sysvipc_find_ipc");
        assert_eq!(find.range(), (50.0, 400.0));
        let s = find.scaling.as_ref().unwrap();
        assert_eq!(s.class, Complexity::Linear);
        assert!((s.loglog.slope - 1.0).abs() < 0.01, "{}", s.loglog.slope);
        let next = t.iter().find(|t| t.inner == "idr_get_next").unwrap();
        assert_eq!(next.range(), (1.0, 1.0));
        assert_eq!(next.scaling.as_ref().unwrap().class, Complexity::Constant);
    }

    fn time(pts: &[(f64, f64)]) -> Scaling {
        let pts: Vec<Point> = pts
            .iter()
            .map(|&(n, t)| Point {
                n,
                t,
                rel_se: Some(0.02),
            })
            .collect();
        fit_scaling(&pts).unwrap()
    }

    /// The series of `calls` calls of `outer` per N, each making `per` calls of `inner`.
    fn counted(outer: &str, inner: &str, calls: u64, per: &[(u64, f64)]) -> Vec<TripCount> {
        let mut spans = Vec::new();
        for &(n, per) in per {
            spans.push(row(outer, n, calls, &[]));
            let within = (calls as f64 * per) as u64;
            spans.push(row(inner, n, within, &[(outer, within)]));
        }
        trip_counts("r", &spans)
    }

    /// 5.10's do_wait over N children under TCG: its time per call fits O(n^2) alone.
    fn walk_under_tcg() -> Scaling {
        time(&[
            (250.0, 114e3),
            (500.0, 143e3),
            (1000.0, 215e3),
            (2000.0, 506e3),
            (4000.0, 1.29e6),
        ])
    }

    fn waits(per_call: impl Fn(u64) -> u64) -> Vec<TripCount> {
        let mut spans = Vec::new();
        for n in [250u64, 500, 1000, 2000, 4000] {
            spans.push(row("do_wait", n, 100, &[]));
            spans.push(row(
                "wait_consider_task",
                n,
                100 * per_call(n),
                &[("do_wait", 100 * per_call(n))],
            ));
        }
        trip_counts("r", &spans)
    }

    /// A loop-count pass cut short counts some sizes only: at two it names no class (two
    /// sizes fit every growing shape) and gives the verdict none; at three of five it does,
    /// and says at which sizes.
    #[test]
    fn a_loop_counted_at_some_sizes_only_gives_a_class_only_where_they_name_one() {
        let t = walk_under_tcg();
        let at = |ns: &[u64]| -> Vec<TripCount> {
            waits(|n| n + 1)
                .into_iter()
                .map(|mut c| {
                    c.points.retain(|p| ns.contains(&p.n));
                    c.scaling = count_fit(&c.points);
                    c
                })
                .collect()
        };
        let two = at(&[2000, 4000]);
        assert_eq!(two[0].scaling.as_ref().unwrap().points.len(), 2);
        assert_eq!(loop_class(&t, &two.iter().collect::<Vec<_>>()), None);
        let three = at(&[1000, 2000, 4000]);
        let l = loop_class(&t, &three.iter().collect::<Vec<_>>()).expect("three sizes name O(n)");
        assert_eq!(l.class, Complexity::Linear);
        assert_eq!(l.counted_only, Some((1000, 4000)));
        let all = waits(|n| n + 1);
        let l = loop_class(&t, &all.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(l.counted_only, None);
    }

    #[test]
    fn a_linear_walk_whose_time_per_child_creeps_up_is_o_n_by_its_count() {
        // 5.10's do_wait over N children under TCG: fitted O(n^2) by time alone.
        let t = walk_under_tcg();
        assert!(t.class > Complexity::Linear, "{:?}", t.class);
        let trips = waits(|n| n + 1);
        let refs: Vec<&TripCount> = trips.iter().collect();
        let l = loop_class(&t, &refs).expect("the count gives the class");
        assert_eq!(l.inner, "wait_consider_task");
        assert_eq!(l.class, Complexity::Linear);
        assert!(
            l.per_trip_slope < MAX_PER_TRIP_SLOPE,
            "{}",
            l.per_trip_slope
        );
    }

    /// A sweep from N = 1: each do_wait costs 218 µs before it walks (a fork, a wakeup, under
    /// TCG) and walks the N + 1 children twice (before and after it sleeps), 0.47 µs each.
    /// Time over trips falls like N^-0.6 where the walk is short; the time added per trip
    /// added does not fall, and the count gives the class.
    #[test]
    fn a_fixed_cost_per_call_does_not_hide_the_loop_from_its_count() {
        let ns = [1u64, 100, 1000, 3000];
        let trips_at = |n: u64| 2 * (n + 1);
        // 100 do_wait calls per N, each walking the N + 1 children twice.
        let walks = |ns: &[u64]| {
            let per: Vec<(u64, f64)> = ns.iter().map(|&n| (n, trips_at(n) as f64)).collect();
            counted("do_wait", "wait_consider_task", 100, &per)
        };
        let trips = walks(&ns);
        let refs: Vec<&TripCount> = trips.iter().collect();
        let t = time(&ns.map(|n| {
            (
                n as f64,
                218e3 + 470.0 * trips_at(n) as f64 * (1.0 + 0.1 * (n % 3) as f64),
            )
        }));
        let ratio = {
            let (xs, ys): (Vec<f64>, Vec<f64>) = ns
                .iter()
                .zip(&t.points)
                .map(|(&n, p)| ((n as f64).ln(), (p.t / trips_at(n) as f64).ln()))
                .unzip();
            ols(&xs, &ys).unwrap().slope
        };
        assert!(ratio < -MAX_PER_TRIP_SLOPE, "{ratio}");
        let l = loop_class(&t, &refs).expect("the count gives the class");
        assert_eq!(l.class, Complexity::Linear);
        assert!(l.per_trip_slope.abs() < 0.1, "{}", l.per_trip_slope);

        // 5.10's waitpid(-1) in `cargo xtask run`: at N = 10 the time rose by 91 µs over 18
        // more trips, the fixed part's scatter; from N = 100 each added child cost ~0.5 µs.
        let ns = [1u64, 10, 100, 1000, 2000, 4000, 6000];
        let times = [
            153870.0, 245031.0, 361178.0, 1180244.0, 2398872.0, 4479283.0, 5933425.0,
        ];
        let trips = walks(&ns);
        let refs: Vec<&TripCount> = trips.iter().collect();
        let pts: Vec<(f64, f64)> = ns.iter().map(|&n| n as f64).zip(times).collect();
        let l = loop_class(&time(&pts), &refs).expect("the count gives the class");
        assert_eq!(l.class, Complexity::Linear);
        assert!(l.per_trip_slope.abs() < 0.3, "{}", l.per_trip_slope);
    }

    /// 5.10's do_wait, timed with its walk on a loaded host: the time rose ×5 over N =
    /// 125..1000 but the small sizes' spread left it undecided; the count is exact.
    #[test]
    fn time_whose_growth_the_noise_left_undecided_takes_the_counts_class() {
        let pts: Vec<Point> = [
            (125.0, 1.607e6, 0.25),
            (250.0, 2.031e6, 0.27),
            (500.0, 2.259e6, 0.22),
            (1000.0, 8.144e6, 0.09),
        ]
        .iter()
        .map(|&(n, t, se)| Point {
            n,
            t,
            rel_se: Some(se),
        })
        .collect();
        let t = fit_scaling(&pts).unwrap();
        assert_eq!(t.class, Complexity::Constant);
        assert!(
            t.flat_reason.is_some() && !shown_flat(&t),
            "{:?}",
            t.flat_reason
        );
        let per = [(125, 124.64), (250, 247.61), (500, 491.98), (1000, 984.98)];
        let trips = counted("do_wait", "wait_consider_task", 1000, &per);
        let l = loop_class(&t, &trips.iter().collect::<Vec<_>>()).expect("the count's class");
        assert_eq!(l.class, Complexity::Linear);
    }

    #[test]
    fn a_count_gives_no_class_to_flat_time_nor_to_time_growing_faster_than_it() {
        let trips = waits(|n| n);
        let refs: Vec<&TripCount> = trips.iter().collect();
        // Flat time: the loop's cost is not what is measured.
        let flat = time(&[(250.0, 10e3), (1000.0, 10.1e3), (4000.0, 10.2e3)]);
        assert!(loop_class(&flat, &refs).is_none());
        // Time quadratic over a linear count: each trip itself grows with N.
        let sq = time(&[
            (250.0, 62.5e3),
            (500.0, 250e3),
            (1000.0, 1e6),
            (2000.0, 4e6),
            (4000.0, 16e6),
        ]);
        assert_eq!(sq.class, Complexity::Quadratic);
        assert!(loop_class(&sq, &refs).is_none());
        // A count that follows no class (a fixed part, then a rise: page allocations in a
        // fork) gives no class to time of the same shape.
        let mut spans = Vec::new();
        for (n, per) in [(1u64, 11u64), (10, 11), (100, 11), (1000, 62), (4000, 399)] {
            spans.push(row("dup_mmap", n, 10, &[]));
            spans.push(row(
                "get_task_policy",
                n,
                10 * per,
                &[("dup_mmap", 10 * per)],
            ));
        }
        let pages = trip_counts("r", &spans);
        assert_eq!(pages.len(), 1);
        let fork = time(&[
            (1.0, 922e3),
            (10.0, 930e3),
            (100.0, 940e3),
            (1000.0, 5.3e6),
            (4000.0, 34.6e6),
        ]);
        assert_ne!(fork.class, Complexity::Constant);
        assert!(loop_class(&fork, &pages.iter().collect::<Vec<_>>()).is_none());
        // Nor one flat at first that rises late, though it fits its class closely.
        let per = [
            (1, 12.0),
            (10, 12.0),
            (100, 12.0),
            (1000, 50.73),
            (4000, 202.13),
        ];
        let late = counted("dup_mmap", "get_task_policy", 100, &per);
        assert!(late[0].scaling.as_ref().unwrap().loglog.slope < MIN_LOOP_SLOPE);
        assert!(loop_class(&fork, &late.iter().collect::<Vec<_>>()).is_none());
        // A count that does not grow gives no class either.
        let one = waits(|_| 1);
        let refs: Vec<&TripCount> = one.iter().collect();
        assert!(loop_class(&sq, &refs).is_none());
    }

    #[test]
    fn calls_outside_the_outer_target_or_without_its_row_make_no_series() {
        let spans = vec![
            row("do_wait", 10, 5, &[]),
            row("wait_consider_task", 10, 50, &[]),
            // An enclosing target with no row at this (case, N): nothing to divide by.
            row("wait_task_zombie", 10, 5, &[("do_wait_thread", 5)]),
        ];
        assert!(trip_counts("r", &spans).is_empty());
        // Two calls inside 500,000: a context switch inside a wait, not a loop.
        let spans = vec![
            row("wait_consider_task", 500, 500_000, &[]),
            row(
                "finish_task_switch",
                500,
                2400,
                &[("wait_consider_task", 2)],
            ),
        ];
        assert!(trip_counts("r", &spans).is_empty());
        // One size: a count, no fit.
        let spans = vec![
            row("do_wait", 10, 5, &[]),
            row("wait_consider_task", 10, 50, &[("do_wait", 50)]),
        ];
        let t = trip_counts("r", &spans);
        assert_eq!(t[0].range(), (10.0, 10.0));
        assert!(t[0].scaling.is_none());
    }

    /// A shell's waits among its jobs' reaps: 300 waits walk the N + 1 children, N reaps
    /// find one each. Over all the calls the count is a mix whose weights move with N; the
    /// longest tenth of the calls are the walks, N + 1 each. The histogram counts only for
    /// the inner that makes most (80%) of the calls inside the outer.
    #[test]
    fn the_longest_calls_count_the_loop_in_a_mix() {
        use tracer_ebpf::hist_bucket;
        let mut spans = Vec::new();
        for n in [10u64, 100, 500] {
            let (walks, reaps) = (300u64, n);
            let mut outer = row("do_wait", n, walks + reaps, &[]);
            let mut hist: BTreeMap<u32, u64> = BTreeMap::new();
            *hist.entry(hist_bucket(n + 1)).or_default() += walks;
            *hist.entry(hist_bucket(1)).or_default() += reaps;
            outer.trips = hist.into_iter().collect();
            spans.push(outer);
            spans.push(row(
                "wait_consider_task",
                n,
                walks * (n + 1) + reaps,
                &[("do_wait", walks * (n + 1) + reaps)],
            ));
        }
        let t = trip_counts("confirm", &spans);
        assert_eq!(t.len(), 1, "{t:?}");
        let longest: Vec<f64> = t[0].points.iter().map(|p| p.longest.unwrap()).collect();
        // Bucket midpoints: exact to 15, within 1/32 above.
        for (got, n) in longest.iter().zip([10.0, 100.0, 500.0]) {
            assert!((got / (n + 1.0) - 1.0).abs() < 1.0 / 32.0, "{longest:?}");
        }
        let s = t[0]
            .longest_scaling
            .as_ref()
            .expect("a fit of the longest calls");
        assert!(counts_a_loop(s), "{s:?}");
        assert_eq!(s.class, Complexity::Linear);
        let all = t[0].scaling.as_ref().unwrap();
        assert!(
            all.loglog.slope < s.loglog.slope - 0.2,
            "over all calls the count rises less: {} against {}",
            all.loglog.slope,
            s.loglog.slope
        );

        // Another target's calls inside do_wait too (a third of them): the histogram is
        // theirs as much as the walk's, and counts nothing.
        for sp in spans
            .clone()
            .iter()
            .filter(|r| r.target == "wait_consider_task")
        {
            let k = sp.within["do_wait"] / 2;
            spans.push(row("release_task", sp.n, k, &[("do_wait", k)]));
        }
        let t = trip_counts("confirm", &spans);
        let walk = t.iter().find(|t| t.inner == "wait_consider_task").unwrap();
        assert!(walk.points.iter().all(|p| p.longest.is_none()), "{walk:?}");
        assert!(walk.longest_scaling.is_none());
    }

    #[test]
    fn the_longest_tenth_takes_the_top_buckets_first() {
        use tracer_ebpf::hist_bucket;
        // 100 timed calls: 90 with none, 5 with 3 trips, 5 with 7: the top ten average 5.
        let hist = vec![(hist_bucket(3), 5), (hist_bucket(7), 5)];
        assert_eq!(longest_mean(&hist, 100), Some(5.0));
        // 20 calls: the top two, both with 7.
        assert_eq!(longest_mean(&hist, 20), Some(7.0));
        assert_eq!(longest_mean(&[], 0), None);
    }

    /// busybox sh's waits among its jobs' reaps, `-t do_wait`: the slower population (the
    /// 200 waits per op) takes its class from the walk counted in the calls with the most;
    /// not where that population's time is flat, nor where it grows like N² against the
    /// count's N.
    #[test]
    fn a_mixed_tables_loop_is_counted_in_its_slower_population() {
        use crate::analysis::fit::fit_scaling;
        use crate::analysis::populations::{Mix, Population, PopulationSplit};
        let ns = [10.0, 50.0, 130.0, 400.0];
        let pop = |kind: &str, t: &dyn Fn(f64) -> f64| {
            let points: Vec<Point> = ns
                .iter()
                .map(|&n| Point {
                    n,
                    t: t(n),
                    rel_se: Some(0.05),
                })
                .collect();
            Population {
                kind: kind.into(),
                scaling: fit_scaling(&points),
                points,
            }
        };
        let split = |slow: &dyn Fn(f64) -> f64| PopulationSplit {
            run: "bbjobs.sh".into(),
            target: "do_wait".into(),
            case_name: "command".into(),
            fixed_per_op: 200.0,
            per_n: 1.0,
            calls_per_op: (210.0, 600.0),
            separated: true,
            fixed_slower: true,
            populations: vec![pop("fixed", slow), pop("per-n", &|_| 5000.0)],
        };
        let points: Vec<TripPoint> = ns
            .iter()
            .map(|&n| {
                let n = n as u64;
                let calls = 200 + n;
                let inner = 200 * (2 * n + 2) + n;
                TripPoint {
                    n,
                    outer_calls: calls,
                    inner_calls: inner,
                    per_call: inner as f64 / calls as f64,
                    longest: Some(2.0 * n as f64 + 2.0),
                }
            })
            .collect();
        let mut walk = TripCount {
            run: "bbjobs.sh-loops".into(),
            outer: "do_wait".into(),
            inner: "wait_consider_task".into(),
            case_name: "command".into(),
            scaling: count_fit(&points),
            longest_scaling: longest_fit(&points),
            points,
        };
        let linear = split(&|n| 3000.0 + 400.0 * n);
        let (mix, lc) = population_loop(&linear, &[&walk]).expect("a class from the walk");
        assert_eq!((lc.class, lc.longest), (Complexity::Linear, true), "{lc:?}");
        assert!(matches!(mix, Mix::Population { ref kind, .. } if kind == "fixed"));
        // The slow population's time flat: no loop of it.
        assert!(population_loop(&split(&|_| 9000.0), &[&walk]).is_none());
        // Growing like N² against a count like N: the time's own class stands.
        assert!(population_loop(&split(&|n| 3000.0 + 40.0 * n * n), &[&walk]).is_none());
        // A count over all calls that is a loop already: loop_class's, not this.
        walk.scaling = walk.longest_scaling.clone();
        assert!(population_loop(&linear, &[&walk]).is_none());
    }
}
