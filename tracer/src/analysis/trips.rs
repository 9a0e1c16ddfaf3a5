//! Loop trip counts: how many times per call of one traced target another one runs inside it.
//!
//! The kernel counts, for every timed call, the innermost call of another traced target it
//! ran inside (`SpanRow::within`). Divided by that target's calls at the same (case, N),
//! this is the number of trips per call through whatever loop makes the inner calls: exact
//! counts, which no timing noise, cache or emulator effect can bend. A walk over N objects
//! is O(n) here even when its time per object rises with N.

use serde::Serialize;

use super::fit::{Point, Scaling, fit_scaling};
use crate::rundata::SpanRow;

/// Fewest inner calls per outer call, at some N, for a series to be kept.
pub const MIN_TRIPS: f64 = 0.01;

/// Inner calls per outer call at one N.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TripPoint {
    pub n: u64,
    pub outer_calls: u64,
    /// Calls of the inner target made inside an outer call.
    pub inner_calls: u64,
    pub per_call: f64,
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
}

impl TripCount {
    /// The growth of the trip count from the smallest to the largest N.
    pub fn range(&self) -> (f64, f64) {
        let first = self.points.first().map_or(0.0, |p| p.per_call);
        let last = self.points.last().map_or(0.0, |p| p.per_call);
        (first, last)
    }
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
                }),
            }
        }
    }
    // A call that ran inside another only now and then (a context switch inside a wait) is
    // no loop of it: under one call per hundred at every N, the series is dropped.
    out.retain(|t| t.points.iter().any(|p| p.per_call >= MIN_TRIPS));
    for t in &mut out {
        t.points.sort_by_key(|p| p.n);
        // Counts carry no measurement error: each point's own error is zero, and the fit's
        // floors (its least margin of visible growth, its adequate-fit RMS) still apply.
        let pts: Vec<Point> = t
            .points
            .iter()
            .filter(|p| p.n > 0 && p.per_call > 0.0)
            .map(|p| Point {
                n: p.n as f64,
                t: p.per_call,
                rel_se: Some(0.0),
            })
            .collect();
        t.scaling = fit_scaling(&pts);
    }
    out.sort_by(|a, b| {
        (&a.run, &a.outer, &a.inner, &a.case_name).cmp(&(&b.run, &b.outer, &b.inner, &b.case_name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::Complexity;
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
}
