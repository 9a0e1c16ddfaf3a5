//! The one-line scaling verdicts: of a target and case, of a discovered function's
//! confirmation pass, and why a fit came out O(1); plus the JSON forms that carry them.

use serde::{Serialize, Serializer};

use super::fmt::{fmt_n, ns, sig3, via};
use crate::analysis::exact::{ExactVerdict, PerOp};
use crate::analysis::fit::{FlatReason, Scaling};
use crate::analysis::populations::Mix;
use crate::analysis::{CaseResult, Verdict};

/// The verdict of one table in one line:
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
pub fn line(c: &CaseResult) -> String {
    said(
        &c.table.target,
        &c.table.case_name,
        &c.table.run,
        &c.verdict,
    )
}

/// The verdict `v` of target `target` and case `case_name` measured in run `run`, in one line.
fn said(target: &str, case_name: &str, run: &str, v: &Verdict) -> String {
    let head = format!("{target} [{case_name}]");
    let mut line = match &v.scaling {
        None if !v.timed => format!("{head}: count-only plan, no time per call to fit"),
        None => format!("{head}: fewer than two sizes with timed calls, nothing to fit"),
        Some(s) => {
            let time = match &v.mix {
                Some(mix) => mixed(mix, s),
                None => fitted(s),
            };
            match v.count_overrides_time() {
                // The count decides; the time's own fit is kept beside it.
                Some(l) => format!(
                    "{head}: {} by its loop count ({} per call{}, slope {:.2}, counted in the \
                     kernel{}{}); time per call alone: {time}",
                    l.class.label(),
                    l.inner,
                    if l.longest {
                        format!(" {}", super::fmt::longest_calls())
                    } else {
                        String::new()
                    },
                    l.slope,
                    if l.run == run {
                        String::new()
                    } else {
                        format!(" by {}", l.run)
                    },
                    super::fmt::counted_only(l.counted_only),
                ),
                None => format!("{head}: {time}"),
            }
        }
    };
    if let Some(via) = via(v.plan.as_ref()) {
        line.push_str(&format!("; via {via}"));
    }
    line
}

/// A verdict whose calls are two populations: the headline's population first, with the
/// other and the mean of all calls after it ([`Mix`]).
///
/// - `the 100 calls per op: O(n), slope 1.02 (R² 1.00), visible from N≈1,000; 75µs ->
///   1.3ms per call over N=10..3000; the ≈1.00·N others: O(1), 11µs -> 12µs per call; all
///   calls together: O(1) within noise, 75.9µs -> 58.3µs per call`
fn mixed(mix: &Mix, all: &Scaling) -> String {
    let ends = |s: &Scaling| {
        let (p0, p1) = (s.points[0], s.points[s.points.len() - 1]);
        format!("{} -> {} per call", ns(p0.t), ns(p1.t))
    };
    let together = format!("{}, {}", super::fmt::class_text(Some(all), true), ends(all));
    let calls = |per_n: bool, fixed: f64, n: f64| {
        if per_n {
            format!("the ≈{}·N", sig3(n))
        } else {
            format!("the {}", sig3(fixed))
        }
    };
    match mix {
        Mix::Population {
            kind,
            fixed_per_op,
            per_n,
            scaling,
            other,
        } => {
            let head_per_n = kind == "per-n";
            let mut out = format!(
                "{} calls per op: {}",
                calls(head_per_n, *fixed_per_op, *per_n),
                fitted(scaling)
            );
            if let Some(o) = other {
                out.push_str(&format!(
                    "; {} others: {}, {}",
                    calls(!head_per_n, *fixed_per_op, *per_n),
                    super::fmt::class_text(Some(o), true),
                    ends(o)
                ));
            }
            out.push_str(&format!("; all calls together: {together}"));
            out
        }
        Mix::Unsplit {
            fixed_per_op,
            per_n,
        } => {
            let what = format!(
                "the mean mixes {} + {}·N calls per op whose times overlap",
                sig3(*fixed_per_op),
                sig3(*per_n)
            );
            match all.flat_reason {
                // A flat mean of two populations hides either one growing.
                Some(_) => format!("no class: {what} ({together})"),
                None => format!("{}; {what}", fitted(all)),
            }
        }
    }
}

/// A fitted verdict after its `target [case]: `.
fn fitted(s: &Scaling) -> String {
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
            let classes = if s.points.len() < 3 && s.classes.len() > 1 {
                // Every growing shape passes through two points.
                "grows (two sizes only: the class needs three)".to_string()
            } else {
                s.classes_label()
            };
            // The size that would tell the set's classes apart, where it holds several.
            let parting = super::fmt::parting(s).map_or(String::new(), |p| format!("; {p}"));
            format!(
                "{classes}, slope {:.2} ({r2}), visible from N≈{}; {range}{parting}",
                s.slope.slope,
                fmt_n(s.visible_from.unwrap_or(p1.n)),
            )
        }
        Some(FlatReason::NoGrowth) => format!("O(1), {range} (x{:.2})", s.growth_ratio),
        Some(r @ FlatReason::Falls) => format!(
            "no rising trend, {range} (x{:.2}: {})",
            s.growth_ratio,
            flat_reason(r, s)
        ),
        Some(r) => format!(
            "O(1) within noise, {range} (x{:.2}: {})",
            s.growth_ratio,
            flat_reason(r, s)
        ),
    }
}

/// Why `s` came out O(1), in a few words for verdict lines.
pub fn flat_reason(r: FlatReason, s: &Scaling) -> String {
    match r {
        FlatReason::NoGrowth => "no growth".to_string(),
        FlatReason::WithinNoise => format!("within the noise: needs +{:.0}%", s.margin * 100.0),
        FlatReason::OneSize => format!(
            "above the baseline at N={} only",
            fmt_n(s.points[s.points.len() - 1].n)
        ),
        FlatReason::NotSignificant => match &s.growth_model {
            Some(m) => format!(
                "no significant trend: the {} growth term's 95% CI includes 0 and the sizes scatter by {:.0}%",
                m.class.label(),
                m.nrms * 100.0
            ),
            None => "no significant trend".to_string(),
        },
        FlatReason::NoGrowingModel => "no growing model fits".to_string(),
        FlatReason::Falls => {
            let from = s.visible_from.unwrap_or(s.points[0].n);
            let last = s.points[s.points.len() - 1];
            let peak = s
                .points
                .iter()
                .filter(|p| p.n >= from)
                .map(|p| p.t)
                .fold(0.0, f64::max);
            if last.t < peak {
                format!(
                    "up from N≈{}, then down again at N={}",
                    fmt_n(from),
                    fmt_n(last.n)
                )
            } else {
                format!("up from N≈{}, then no further rise", fmt_n(from))
            }
        }
    }
}

/// The confirmation pass's line for a function discover ranked: its exact time per op with
/// the per-call verdict beside it, or the per-call verdict alone when the run has no op counts.
pub fn exact_line(e: &ExactVerdict) -> String {
    match &e.per_op {
        Some(op) => per_op_line(e, op),
        None => said(&e.function, &e.case_name, &e.run, &e.per_call),
    }
}

fn per_op_line(e: &ExactVerdict, op: &PerOp) -> String {
    let per_call = &e.per_call;
    let per = &op.per;
    let s = op.counted.as_ref().unwrap_or(&op.timed);
    let (p0, p1) = (
        op.timed.points[0],
        op.timed.points[op.timed.points.len() - 1],
    );
    let class = match s.flat_reason {
        None => format!(
            "{}, slope {:.2}",
            super::fmt::exact_classes(e),
            s.slope.slope
        ),
        Some(FlatReason::NoGrowth) => "O(1)".to_string(),
        Some(FlatReason::Falls) => "no rising trend".to_string(),
        Some(_) => "O(1) within noise".to_string(),
    };
    let calls = |c: Option<f64>| c.map_or("?".to_string(), sig3);
    let per_call_part = match &per_call.scaling {
        Some(pc) => format!(
            "per call {} ({} -> {}), called {} -> {} times per {per}{}",
            match pc.flat_reason {
                None => pc.classes_label(),
                Some(_) => "O(1)".to_string(),
            },
            ns(pc.points[0].t),
            ns(pc.points[pc.points.len() - 1].t),
            calls(op.calls_per_op[0]),
            calls(op.calls_per_op[1]),
            if op.counted.is_some() {
                ": the class is the calls'"
            } else {
                ""
            }
        ),
        None => String::new(),
    };
    let mut line = format!(
        "{} [{}]: {class} per {per}, {} -> {} per {per} over N={}..{} ({per_call_part})",
        e.function,
        e.case_name,
        ns(p0.t),
        ns(p1.t),
        fmt_n(p0.n),
        fmt_n(p1.n)
    );
    if let Some(via) = via(per_call.plan.as_ref()) {
        line.push_str(&format!("; via {via}"));
    }
    line
}

/// The JSON form of a case's verdict: its facts and its line (`summary.json` puts the names
/// of its run, kernel, target and case beside them; a table's JSON has them in the table).
#[derive(Serialize)]
pub struct VerdictJson<'a> {
    metric: crate::analysis::table::Metric,
    /// The verdict's class ([`Verdict::class`]: the loop count's where it gives one), present
    /// only when the evidence names it alone (`classes` has one member).
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'static str>,
    /// The classes the data does not exclude ([`Verdict::classes`]), least growth first.
    classes: Vec<&'static str>,
    scaling: &'a Option<Scaling>,
    by_loop: &'a Option<crate::analysis::trips::LoopClass>,
    /// The population the class is of, when the calls are two ([`Mix`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    mix: &'a Option<Mix>,
    stand_in: &'a Option<String>,
    line: String,
}

impl<'a> VerdictJson<'a> {
    pub fn of(c: &'a CaseResult) -> Self {
        let v = &c.verdict;
        VerdictJson {
            metric: v.metric,
            class: v.sole_class().map(|c| c.label()),
            classes: v.classes().iter().map(|c| c.label()).collect(),
            scaling: &v.scaling,
            by_loop: &v.by_loop,
            mix: &v.mix,
            stand_in: &v.stand_in,
            line: line(c),
        }
    }
}

/// A discovery's exact verdict is stored as `[function, class, line, classes]`: the class
/// only when the data names it alone (else null), the set it leaves least growth first.
impl Serialize for ExactVerdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let classes: Vec<&str> = self.classes().iter().map(|c| c.label()).collect();
        (
            &self.function,
            self.class().map(|c| c.label()),
            exact_line(self),
            classes,
        )
            .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::Complexity;
    use crate::analysis::table::CaseTable;
    use crate::analysis::table::{TableOptions, tables};
    use crate::analysis::testdata;
    use crate::analysis::verdict::verdict;

    /// The line of verdict `v` of table `t`, as its case would read.
    fn line_of(t: &CaseTable, v: &Verdict) -> String {
        line(&case(t, v))
    }

    fn json_of(t: &CaseTable, v: &Verdict) -> serde_json::Value {
        serde_json::to_value(VerdictJson::of(&case(t, v))).unwrap()
    }

    fn case(t: &CaseTable, v: &Verdict) -> CaseResult {
        CaseResult {
            table: t.clone(),
            verdict: v.clone(),
            root_cause: None,
            population: None,
            trips: Vec::new(),
        }
    }

    #[test]
    fn a_class_from_the_loop_count_leads_and_the_time_fit_follows() {
        let ns = [100, 1000, 2000, 4000];
        let run = testdata::waitpid_run(&ns, |n| 1000 + n * n / 100);
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let mut v = verdict(&t);
        assert_eq!(v.time_class(), Some(Complexity::Quadratic));
        v.by_loop = Some(crate::analysis::trips::LoopClass {
            inner: "wait_consider_task".into(),
            run: "r".into(),
            class: Complexity::Linear,
            slope: 1.0,
            per_trip_slope: 0.3,
            counted_only: None,
            longest: false,
        });
        assert_eq!(v.class(), Some(Complexity::Linear));
        let l = line_of(&t, &v);
        assert!(
            l.starts_with(
                "do_wait [waitpid-pid]: O(n) by its loop count (wait_consider_task per call, \
                 slope 1.00, counted in the kernel); time per call alone: O(n^2), slope"
            ),
            "{l}"
        );
        let json = json_of(&t, &v);
        assert_eq!(json["class"], "O(n)");
        assert_eq!(json["scaling"]["class"], "O(n^2)");
        assert_eq!(json["by_loop"]["inner"], "wait_consider_task");
        assert!(json["by_loop"].get("counted_only").is_none());
        // A pass that counted some sizes only says which.
        v.by_loop.as_mut().unwrap().counted_only = Some((1000, 4000));
        let l = line_of(&t, &v);
        assert!(
            l.contains("slope 1.00, counted in the kernel at N=1000..4000 only); time"),
            "{l}"
        );
        let json = json_of(&t, &v);
        assert_eq!(
            json["by_loop"]["counted_only"],
            serde_json::json!([1000, 4000])
        );
    }

    #[test]
    fn verdict_lines() {
        let ns = [1, 10, 100, 1000, 5000, 8000];
        let run = testdata::waitpid_run(&ns, |n| 1000 + 5 * n);
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let v = verdict(&t);
        let l = line_of(&t, &v);
        assert_eq!(v.class(), Some(Complexity::Linear));
        assert!(
            l.starts_with("do_wait [waitpid-pid]: O(n), slope 1.0"),
            "{}",
            l
        );
        assert!(l.contains("(R² 1.00), visible from N≈100; "), "{}", l);
        assert!(
            l.ends_with("; 1.00µs -> 41.0µs per call over N=1..8000; via fentry do_wait"),
            "{}",
            l
        );

        let run = testdata::waitpid_run(&ns, |_| 1500);
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let v = verdict(&t);
        let l = line_of(&t, &v);
        assert_eq!(v.class(), Some(Complexity::Constant));
        assert!(
            l.starts_with(
                "do_wait [waitpid-pid]: O(1), 1.50µs -> 1.50µs per call over N=1..8000 (x1.00)"
            ),
            "{}",
            l
        );

        // +50% at the largest N only: O(1) within noise, with the reason.
        let run = testdata::waitpid_run(&[1, 100, 1000], |n| if n == 1000 { 13_000 } else { 8700 });
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let v = verdict(&t);
        let l = line_of(&t, &v);
        assert_eq!(v.class(), Some(Complexity::Constant));
        assert!(
            l.starts_with("do_wait [waitpid-pid]: O(1) within noise, 8.70µs -> 13.0µs per call over N=1..1000 (x1.49: above the baseline at N=1000 only)"),
            "{}",
            l
        );
        // The repeats scatter by 10% (9, 10 and 11 µs per op): +22% is within the noise.
        let run = testdata::waitpid_run(&[1, 100, 1000], |n| if n == 1 { 1000 } else { 1220 });
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let v = verdict(&t);
        let l = line_of(&t, &v);
        assert!(l.contains("(x1.22: within the noise: needs +"), "{}", l);

        // Growth visible at the two largest sizes only: the slope runs through two points, so
        // the line shows them (and their ratio) instead of a vacuous R².
        let run = testdata::waitpid_run(&[1, 10, 100, 1000, 2000], |n| match n {
            2000 => 9400,
            1000 => 1800,
            _ => 1000,
        });
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let v = verdict(&t);
        let l = line_of(&t, &v);
        assert!(
            v.class().is_some_and(|c| c != Complexity::Constant),
            "{}",
            l
        );
        assert!(
            l.contains(
                ", slope 3.39 (from two sizes: x5.22 per call for x2 N, 1.80µs at N=1000 -> 9.40µs at N=2000; the part above N=1's 1.00µs x10.50), visible from N≈1000; "
            ),
            "{}",
            l
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
        let t = tables(&run, "r", &TableOptions::default(), None).remove(0);
        let v = verdict(&t);
        let l = line_of(&t, &v);
        assert!(
            l.ends_with("; via syscall-bracket (wait4, waitid)"),
            "{}",
            l
        );
        assert!(v.stand_in.unwrap().contains("syscalls:sys_enter_waitid"));
    }

    #[test]
    fn a_mixed_target_leads_with_its_growing_population() {
        use crate::analysis::populations::{split, testdata as mixed};
        let t = mixed::timed_waits_and_reaps();
        let mut v = verdict(&t);
        // All calls together fall: 100 walks drowned by 3000 reaps.
        assert!(v.scaling.as_ref().unwrap().flat_reason.is_some(), "{v:?}");
        v.mix = split(&t).map(|s| s.mix());
        let classes = v.classes();
        assert!(
            classes.contains(&Complexity::Linear) && !classes.contains(&Complexity::Constant),
            "{classes:?}"
        );
        let l = line_of(&t, &v);
        assert!(
            l.starts_with("do_wait [command]: the 100 calls per op: O(n)"),
            "{l}"
        );
        assert!(l.contains("; the ≈1.00·N others: O(1), "), "{l}");
        assert!(l.contains("; all calls together: "), "{l}");

        // Times that overlap cannot be split: no class rather than the mix's O(1).
        let t = mixed::table(
            [10u64, 300, 1000, 3000]
                .map(|n| mixed::row(n, &vec![1000; 300 + n as usize]))
                .to_vec(),
        );
        let mut v = verdict(&t);
        v.mix = split(&t).map(|s| s.mix());
        assert!(v.classes().is_empty() && v.class().is_none(), "{v:?}");
        let l = line_of(&t, &v);
        assert!(
            l.starts_with(
                "do_wait [command]: no class: the mean mixes 300 + 1.00·N calls per op whose times \
                 overlap (O(1), "
            ),
            "{l}"
        );
    }
}
