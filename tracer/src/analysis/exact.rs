//! The confirmation pass of a discover sweep: its exact verdicts on the functions the
//! sampled ranking named, per op (the quantity the ranking fits) and per call.

use super::fit::{Complexity, Scaling, fit_counts, fit_scaling};
use super::table::CaseTable;
use super::trips::{
    MAX_PER_TRIP_SLOPE, TripCount, counts_a_loop, flat_per_trip, per_trip_slope, shown_flat,
};
use super::verdict::Verdict;

/// The confirmation pass's verdict on a function discover ranked, by its exact time per op
/// (time per call × calls per op) when the run counted ops, else by its time per call.
#[derive(Clone, Debug, PartialEq)]
pub struct ExactVerdict {
    /// The function, a target of the confirmation pass, and that pass's run and case.
    pub function: String,
    pub run: String,
    pub case_name: String,
    pub per_op: Option<PerOp>,
    pub per_call: Verdict,
}

impl ExactVerdict {
    /// The classes the line leads with, least growth first: the per-op fit's set when there
    /// is one. Timed exactly, a fit over three sizes can still leave several: 5.10's dup_fd
    /// per fork with N = 100, 1000, 10000 open descriptors (14.6, 31.9, 536 µs) fits O(n^2)
    /// best, with O(n) and O(n log n) not excluded (the fd table's allocation zeroes pages
    /// from some size on, so the cost per descriptor changes with N).
    /// Calls per op counted like a loop's trips take that rule's class, as a loop count does.
    pub fn classes(&self) -> Vec<Complexity> {
        match &self.per_op {
            Some(PerOp {
                counted: Some(c), ..
            }) if counts_a_loop(c) => vec![c.class],
            Some(op) => op.counted.as_ref().unwrap_or(&op.timed).classes.clone(),
            None => self.per_call.classes(),
        }
    }

    /// The class, when the data names one alone.
    pub fn class(&self) -> Option<Complexity> {
        match self.classes().as_slice() {
            [one] => Some(*one),
            _ => None,
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
        let per_call_flat = per_call.scaling.as_ref().is_some_and(flat_per_trip);
        // The calls are counted, not sampled: fitted as counts (no error of their own), as
        // a loop's trips are. Fitted as times, the 5% floor of a time's error left O(n log n)
        // beside O(n) for calls per op of exactly 2N + 4.
        let counted = if per_call_flat {
            fit_counts(
                &t.rows
                    .iter()
                    .filter_map(|r| {
                        let c = r.calls_per_op?;
                        (r.n > 0 && c > 0.0).then_some(super::fit::Point {
                            n: r.n as f64,
                            t: c,
                            rel_se: Some(0.0),
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
        function: t.target.clone(),
        run: t.run.clone(),
        case_name: t.case_name.clone(),
        per_op,
        per_call: per_call.clone(),
    }
}

/// A discovered loop's class read from the confirmation pass's counts, not its times.
#[derive(Clone, Debug, PartialEq)]
pub struct CountedLoop {
    pub class: Complexity,
    /// The function counted, and the function per call of which it was counted.
    pub inner: String,
    pub outer: String,
    /// (N, calls per call) at the smallest and the largest N counted.
    pub from: (u64, f64),
    pub to: (u64, f64),
    /// The count is per call of the longest tenth of the outer's calls (by their trips,
    /// [`super::trips::TripPoint::longest`]): its calls mix those that run the loop with
    /// others, and over all of them the count follows no class.
    pub longest: bool,
}

/// The class of the loop in `frame` by loop count, when the confirmation pass counted it:
/// - a loop inside the frame: the frame's exact per-call verdict took its class from a count
///   inside it ([`super::trips::loop_class`]: pipe_poll, N per do_sys_poll call), and the
///   frame itself runs a fixed number of times per call of its caller (counted beside it), or
///   a number that does not rise with N (5.10's sysvipc_find_ipc, 4.3 -> 6.9 times per
///   seq_read_iter call over N = 10..400, as many as a read's buffer holds, none more from
///   N = 100 on), so its loop's class is the loop's per call of the entry too;
/// - the frame is the loop's per-trip function: its calls per call of its caller rise like a
///   loop over N (the same rules as `loop_class`) while its own time per call stays flat
///   (wait_consider_task, N per do_wait call);
/// - a loop inside the frame whose per-trip function the pass timed flat, the frame run a
///   fixed number of times as in the first case: the per-trip function's count gives the
///   class where the frame's time follows no class (a shell's waits on 6.1, where the samples
///   put the growth in do_wait and the calls that walk are a share of its calls: its time
///   read slope 0.6, O(n) or O(n log n), while the tenth of its calls with the most
///   wait_consider_task trips walked N of them).
///
/// None when neither was counted: the class then rests on time.
pub fn counted_loop(
    exact: &[ExactVerdict],
    trips: &[TripCount],
    frame: &str,
) -> Option<CountedLoop> {
    let e = exact.iter().find(|e| e.function == frame)?;
    let into_frame = trips
        .iter()
        .find(|t| t.inner == frame && !t.points.is_empty());
    // The frame per call of its caller: fixed within 5% from the smallest N to the largest,
    // or shown not to rise (the count's fit: no growth, or none beyond a step) and within a
    // factor of two over the sweep (a count that falls as N grows would offset the loop
    // inside: its product with it is what an entry call runs).
    let fixed = into_frame.is_some_and(|t| {
        let (a, b) = t.range();
        a > 0.0
            && ((b / a - 1.0).abs() <= 0.05
                || ((0.5..=2.0).contains(&(b / a)) && t.scaling.as_ref().is_some_and(shown_flat)))
    });
    let inside = |inner: &str| {
        trips
            .iter()
            .find(|t| t.outer == frame && t.inner == inner && !t.points.is_empty())
    };
    if let Some(lc) = &e.per_call.by_loop
        && fixed
        && let Some(t) = inside(&lc.inner)
    {
        return Some(CountedLoop::of(t, lc.class));
    }
    if let Some(c) = into_frame.and_then(|t| per_trip_count(e, t)) {
        return Some(c);
    }
    if !fixed {
        return None;
    }
    // The frame's time per call over that count's trips per call neither grows nor falls
    // like a power of N: the counted loop is what the frame's time grows by.
    let time = e.per_call.scaling.as_ref()?;
    trips
        .iter()
        .filter(|t| t.outer == frame && !t.points.is_empty())
        .filter(|t| per_trip_slope(time, t).is_some_and(|s| s.abs() < MAX_PER_TRIP_SLOPE))
        .filter_map(|t| per_trip_count(exact.iter().find(|e| e.function == t.inner)?, t))
        .max_by(|a, b| a.class.cmp(&b.class))
}

/// The class of count `t` (calls of its inner per call of its outer) as a loop's, when `e`,
/// the inner's exact verdict, shows each call flat: over all the outer's calls, or over the
/// calls that run the loop where all of them follow no class.
fn per_trip_count(e: &ExactVerdict, t: &TripCount) -> Option<CountedLoop> {
    if !e.per_call.scaling.as_ref().is_some_and(flat_per_trip) {
        return None;
    }
    if let Some(s) = t.scaling.as_ref().filter(|s| counts_a_loop(s)) {
        return Some(CountedLoop::of(t, s.class));
    }
    // Over all the outer's calls the count follows no class: the calls that run the loop,
    // counted one by one, may.
    let s = t.longest_scaling.as_ref().filter(|s| counts_a_loop(s))?;
    let longest = |p: &super::trips::TripPoint| (p.n, p.longest.unwrap_or(p.per_call));
    Some(CountedLoop {
        from: longest(&t.points[0]),
        to: longest(&t.points[t.points.len() - 1]),
        longest: true,
        ..CountedLoop::of(t, s.class)
    })
}

impl CountedLoop {
    /// Count `t` (not empty) read as a loop of `class`, over all the outer's calls.
    fn of(t: &TripCount, class: Complexity) -> CountedLoop {
        let (p0, p1) = (&t.points[0], &t.points[t.points.len() - 1]);
        CountedLoop {
            class,
            inner: t.inner.clone(),
            outer: t.outer.clone(),
            from: (p0.n, p0.per_call),
            to: (p1.n, p1.per_call),
            longest: false,
        }
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

    /// 5.10's dup_fd per fork with N open descriptors, timed exactly over three sizes (each
    /// size's spread between its two runs as measured in the guest): the fit leans O(n^2),
    /// the data excludes neither O(n) nor O(n log n), and the verdict names none alone.
    #[test]
    fn an_exact_fit_that_leaves_several_classes_names_none_alone() {
        let mut t = table(&[
            (100, 14_582.0, 300.0),
            (1000, 31_923.0, 300.0),
            (10_000, 536_425.0, 300.0),
        ]);
        for (r, sd) in t.rows.iter_mut().zip([0.246, 0.102, 0.024]) {
            r.repeat_rel_sd = Some(sd);
            r.run_times_ns = vec![0.0, 0.0];
        }
        let e = confirm_verdict(&t, &verdict(&t), "run");
        let classes = e.classes();
        assert!(classes.len() > 1, "{e:?}");
        assert!(classes.contains(&Complexity::Linear), "{e:?}");
        assert_eq!(e.class(), None, "{e:?}");
        let line = crate::render::verdict::exact_line(&e);
        assert!(
            line.contains(&format!(
                "{}, slope",
                crate::analysis::fit::classes_label(&classes)
            )),
            "{line}"
        );
    }

    /// Calls of `inner` per call of `outer` at each N, fitted as the trips module fits them.
    fn trips(outer: &str, inner: &str, per_call: impl Fn(u64) -> f64) -> TripCount {
        use crate::analysis::fit::{Point, fit_scaling};
        use crate::analysis::trips::TripPoint;
        let ns = [100, 500, 1000, 2000];
        TripCount {
            run: "confirm".into(),
            outer: outer.into(),
            inner: inner.into(),
            case_name: "command".into(),
            points: ns
                .iter()
                .map(|&n| TripPoint {
                    n,
                    outer_calls: 1000,
                    inner_calls: (per_call(n) * 1000.0) as u64,
                    per_call: per_call(n),
                    longest: None,
                })
                .collect(),
            longest_scaling: None,
            scaling: fit_scaling(
                &ns.iter()
                    .map(|&n| Point {
                        n: n as f64,
                        t: per_call(n),
                        rel_se: None,
                    })
                    .collect::<Vec<_>>(),
            ),
        }
    }

    fn exact(function: &str, per_call_ns: impl Fn(u64) -> f64) -> ExactVerdict {
        let mut t = table(&[100, 500, 1000, 2000].map(|n| (n, per_call_ns(n), 1.0)));
        t.target = function.into();
        let v = verdict(&t);
        ExactVerdict {
            function: function.into(),
            run: t.run.clone(),
            case_name: t.case_name.clone(),
            per_op: None,
            per_call: v,
        }
    }

    /// The frame is the walk's per-trip function: its calls per call of its caller give the
    /// class while each call stays flat; a call that itself grows like N keeps the time's.
    #[test]
    fn a_frame_counted_like_a_loop_per_call_of_its_caller_gives_the_class() {
        let walk = [trips("do_wait", "wait_consider_task", |n| n as f64 + 2.0)];
        let flat = [exact("wait_consider_task", |_| 1000.0)];
        let c = counted_loop(&flat, &walk, "wait_consider_task").unwrap();
        assert_eq!(c.class, Complexity::Linear);
        assert_eq!(
            (c.inner.as_str(), c.outer.as_str()),
            ("wait_consider_task", "do_wait")
        );
        assert_eq!((c.from, c.to), ((100, 102.0), (2000, 2002.0)));
        let nested = [exact("wait_consider_task", |n| 10.0 * n as f64)];
        assert_eq!(counted_loop(&nested, &walk, "wait_consider_task"), None);
        // Counted flat: no loop in the count.
        let once = [trips("do_wait", "wait_consider_task", |_| 2.0)];
        assert_eq!(counted_loop(&flat, &once, "wait_consider_task"), None);

        // A mix over all of do_wait's calls (300 walks of N + 1 among N reaps of one), whose
        // count follows no class: the calls that walk, counted one by one, give it.
        let mix = |n: u64| (300.0 * (n as f64 + 1.0) + n as f64) / (300.0 + n as f64);
        let mut mixed = trips("do_wait", "wait_consider_task", mix);
        assert!(!counts_a_loop(mixed.scaling.as_ref().unwrap()), "a mix");
        assert_eq!(
            counted_loop(&flat, &[mixed.clone()], "wait_consider_task"),
            None
        );
        for p in &mut mixed.points {
            p.longest = Some(p.n as f64 + 1.0);
        }
        mixed.longest_scaling = trips("do_wait", "wait_consider_task", |n| n as f64 + 1.0).scaling;
        let c = counted_loop(&flat, &[mixed.clone()], "wait_consider_task").unwrap();
        assert_eq!((c.class, c.longest), (Complexity::Linear, true));
        assert_eq!((c.from, c.to), ((100, 101.0), (2000, 2001.0)));
        assert_eq!(counted_loop(&nested, &[mixed], "wait_consider_task"), None);
    }

    /// A frame whose time follows no class, over calls that mix those that walk with those
    /// that do not (a shell's do_wait on 6.1): the walk counted inside it, whose per-trip
    /// function was timed flat, gives the class, from the calls that walk; not when the frame
    /// runs more times per call of its caller as N grows, when the per-trip function's own
    /// time grows, or when the frame's time grows faster than the count.
    #[test]
    fn a_walk_counted_inside_a_mixed_frame_gives_its_class() {
        let mix = |n: u64| (1000.0 * (n as f64 + 1.0) + n as f64) / (1000.0 + n as f64);
        let mut walk = trips("do_wait", "wait_consider_task", mix);
        for p in &mut walk.points {
            p.longest = Some(p.n as f64 + 1.0);
        }
        walk.longest_scaling = trips("do_wait", "wait_consider_task", |n| n as f64 + 1.0).scaling;
        let once = trips("kernel_wait4", "do_wait", |_| 1.0);
        let do_wait = exact("do_wait", |n| 2_000.0 + 500.0 * mix(n));
        let flat = exact("wait_consider_task", |_| 500.0);
        let e = [do_wait.clone(), flat.clone()];
        let c = counted_loop(&e, &[once.clone(), walk.clone()], "do_wait").unwrap();
        assert_eq!((c.class, c.longest), (Complexity::Linear, true));
        assert_eq!(
            (c.inner.as_str(), c.outer.as_str()),
            ("wait_consider_task", "do_wait")
        );
        assert_eq!((c.from, c.to), ((100, 101.0), (2000, 2001.0)));

        let more = trips("kernel_wait4", "do_wait", |n| n as f64 / 10.0);
        assert_eq!(counted_loop(&e, &[more, walk.clone()], "do_wait"), None);
        let nested = [do_wait, exact("wait_consider_task", |n| 10.0 * n as f64)];
        assert_eq!(
            counted_loop(&nested, &[once.clone(), walk.clone()], "do_wait"),
            None
        );
        let steep = [exact("do_wait", |n| 50.0 * (n * n) as f64), flat];
        assert_eq!(counted_loop(&steep, &[once, walk], "do_wait"), None);
    }

    /// A loop inside the frame: its class by the count inside, when the frame runs a fixed
    /// number of times per call of its caller; not when the frame's own calls grow too (the
    /// count inside one call is then not the loop per call of the entry).
    #[test]
    fn a_loop_counted_inside_a_frame_called_a_fixed_number_of_times_gives_the_class() {
        let mut e = exact("do_sys_poll", |n| 500.0 * n as f64);
        e.per_call.by_loop = Some(crate::analysis::trips::LoopClass {
            inner: "pipe_poll".into(),
            run: "confirm".into(),
            class: Complexity::Linear,
            slope: 1.0,
            per_trip_slope: 0.0,
            counted_only: None,
            longest: false,
        });
        let inside = trips("do_sys_poll", "pipe_poll", |n| n as f64);
        let fixed = trips("__x64_sys_poll", "do_sys_poll", |_| 1.0);
        let e = [e];
        let c = counted_loop(&e, &[fixed, inside.clone()], "do_sys_poll").unwrap();
        assert_eq!(c.class, Complexity::Linear);
        assert_eq!(
            (c.inner.as_str(), c.outer.as_str()),
            ("pipe_poll", "do_sys_poll")
        );
        let more = trips("__x64_sys_poll", "do_sys_poll", |n| n as f64 / 10.0);
        assert_eq!(
            counted_loop(&e, &[more, inside.clone()], "do_sys_poll"),
            None
        );
        // Called as many times as a buffer holds: more at the smallest N, then no rise.
        let bounded = trips("seq_read_iter", "do_sys_poll", |n| {
            if n < 500 { 4.3 } else { 6.9 }
        });
        let c = counted_loop(&e, &[bounded, inside.clone()], "do_sys_poll").unwrap();
        assert_eq!(c.class, Complexity::Linear);
        // Falling as N grows, or still rising at the largest N: not bounded.
        let falling = trips("seq_read_iter", "do_sys_poll", |n| 1000.0 / n as f64);
        assert_eq!(
            counted_loop(&e, &[falling, inside.clone()], "do_sys_poll"),
            None
        );
        let rising = trips("seq_read_iter", "do_sys_poll", |n| 3.0 + (n as f64).ln());
        assert_eq!(counted_loop(&e, &[rising, inside], "do_sys_poll"), None);
    }
}
