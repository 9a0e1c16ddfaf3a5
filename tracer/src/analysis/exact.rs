//! The confirmation pass of a discover sweep: its exact verdicts on the functions the
//! sampled ranking named, per op (the quantity the ranking fits) and per call.

use super::fit::{Complexity, Scaling, fit_scaling};
use super::table::CaseTable;
use super::trips::MAX_PER_TRIP_SLOPE;
use super::verdict::Verdict;

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
pub(super) fn confirm_verdict(t: &CaseTable, per_call: &Verdict, per: &str) -> ExactVerdict {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::table::{Metric, Row};
    use crate::analysis::verdict::verdict;

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
