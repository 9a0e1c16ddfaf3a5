//! Comparing two analyses (e.g. two kernels) per target, case and N, in the style of mmtests'
//! compare-kernels: a mean per side, the % difference, and a significance mark.
//!
//! Three quantities are compared for each (target, case, N) present on both sides:
//!
//! * **time per call** (the table's fitted value: its robust centre). Significance comes
//!   from the within-run spread of calls: Welch's t-test on the two per-call means, with the
//!   per-call standard deviations estimated from the histograms and n = timed calls, at 95%.
//!   Because that spread ignores run-to-run drift (and with thousands of calls almost any
//!   difference passes the test), the difference must also be at least [`MIN_CALL_DIFF_PCT`],
//!   and the workload's repeats must differ significantly in the same direction (without
//!   repeats on both sides: "?"). An external sweep's runs of the command are those repeats:
//!   with two or more per side, Welch's test over the runs' times per call decides.
//! * **workload time per op** (arithmetic mean over the workload's repeats), and
//! * **workload ops/s** (harmonic mean over repeats, the right mean for rates). Both are marked
//!   by Welch's t-test over the per-repeat values at 95%: this spread is the run-to-run one, as
//!   in mmtests. Fewer than two repeats on a side gives the mark "?" (cannot tell).
//!
//! The % difference is (B − A) / A: positive means B is larger (slower for times, faster for
//! rates).
//!
//! Per target and case, **did the growth change?** ([`GrowthChange`]) decides on data, not on
//! class labels: the growth of each side is `ln(t(N_hi) / t(N_lo))` over the largest N both
//! sides measured and the smaller common N that gives the change the least error per decade
//! of N (`best_pair`: chosen on the points' errors, never their values; the fitted robust
//! centres), and the change is the
//! difference of the two, B − A. Its 95% interval combines the four points' relative errors:
//! each the histogram's and the repeats' spread, never under [`MIN_POINT_ERROR`] where two
//! runs or more of the size measured the run-to-run scatter and never under
//! [`UNMEASURED_POINT_ERROR`] where one run did, nor under the scatter of its side's sizes
//! about that side's fitted model (drift that moves a whole size). The change is `grew`
//! or `shrank` only when the whole interval lies beyond ±[`MIN_GROWTH_CHANGE`] (a twofold
//! change in growth) *and* the time added from N_lo to N_hi changed by more than the margin
//! the same way (a syscall whose fixed cost halved doubles its growth ratio while its loop
//! stays as it was: 5.10 → 6.1 waitpid(-1), x90 → x38, adds 8.0 → 5.7 ms); `same` when the
//! change is shown within the margin by two one-sided tests at 5% (its 90% interval lies
//! within ±[`MIN_GROWTH_CHANGE`], the usual test of equivalence), and `inconclusive`
//! otherwise, or when the sides share fewer than two sizes. Where the time leaves it
//! `inconclusive`, an exact loop count counted on both sides can decide it
//! (`count_change`: grew, shrank, or the same loop). The classes of each side stay
//! beside it; they never decide it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::analyze::{Analysis, CaseResult};
use super::comparerows::compare_rows;
pub use super::comparerows::{
    CompareRow, MIN_CALL_DIFF_PCT, Quantity, Significance, per_call_significance,
    repeat_significance,
};
pub use super::countchange::CountChange;
use super::countchange::count_change;
use super::entries::KernelEntry;
use super::fit::{Complexity, ModelFit, Scaling};
use super::frameshift::{FrameShift, frame_shifts};
use super::loopchange::{LoopSides, Unmatched, loop_changes};
use super::table::{CaseTable, Row};
use super::verdict::Verdict;

/// Least change in growth, as a log ratio, that `grew` or `shrank` may claim: the growth over
/// the common sizes at least doubled or halved.
pub const MIN_GROWTH_CHANGE: f64 = std::f64::consts::LN_2;
/// The normal quantiles of the change's intervals: 97.5% (a two-sided 95% interval, for
/// `grew` and `shrank`) and 95% (each of equivalence's two one-sided tests, for `same`).
const Z_95_TWO_SIDED: f64 = 1.96;
const Z_95_ONE_SIDED: f64 = 1.645;
/// Least relative error of one point (a size's fitted time per call) in the change's interval:
/// runs of one size differ by more than the calls within a run suggest.
pub const MIN_POINT_ERROR: f64 = 0.10;
/// Least sizes for a side's scatter about its log-log line to stand in for its scatter about
/// its model ([`scatter`]).
const MIN_LINE_SIZES: usize = 4;
/// The relative error of a point whose spread nothing measured (no repeats, no histogram):
/// about the run-to-run scatter of kernel times in one run per size under qemu.
pub const UNMEASURED_POINT_ERROR: f64 = 0.25;

/// The outcome of a compare for one target and case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// B's time per call grows with N by more than A's, beyond the margin.
    Grew,
    /// B's grows by less than A's, beyond the margin.
    Shrank,
    /// The growth is the same within the margin.
    Same,
    /// The data cannot tell (the interval straddles the margin, or too little in common).
    Inconclusive,
}

impl Change {
    pub fn label(self) -> &'static str {
        match self {
            Change::Grew => "grew",
            Change::Shrank => "shrank",
            Change::Same => "same",
            Change::Inconclusive => "inconclusive",
        }
    }

    /// A change the compare flags (the others are not highlighted).
    pub fn flagged(self) -> bool {
        matches!(self, Change::Grew | Change::Shrank)
    }
}

/// Whether the growth with N of one target and case changed from A to B (module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GrowthChange {
    pub change: Change,
    /// The smallest and the largest N both sides measured (None: fewer than two in common).
    pub n_range: Option<(u64, u64)>,
    /// Each side's time per call at the largest over the smallest common N.
    pub growth_a: Option<f64>,
    pub growth_b: Option<f64>,
    /// Each side's time per call added from the smallest to the largest common N, ns.
    pub added_a: Option<f64>,
    pub added_b: Option<f64>,
    /// ln(growth_b / growth_a) and its 95% interval (what `grew` and `shrank` need beyond
    /// the margin).
    pub log_change: Option<f64>,
    pub interval: Option<(f64, f64)>,
    /// Its 90% interval: what `same` needs within the margin (two one-sided tests at 5%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_interval: Option<(f64, f64)>,
    /// Why it is inconclusive without an interval (no common sizes, a side absent or partial),
    /// or what its interval had to assume (one run per size: no spread between runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The exact loop count that decided a change the time's interval left open
    /// (`count_change`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_count: Option<CountChange>,
}

/// What a compared row joins on one side of the compare.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Side<'a> {
    /// A traced target's case.
    Case(&'a CaseResult),
    /// A discovered kernel loop: its entry, where that side's discovery found the loop.
    Loop(&'a KernelEntry),
}

impl<'a> Side<'a> {
    /// A discovered loop's frame on this side (its entry when no frame carries it).
    pub fn loop_frame(self) -> Option<&'a str> {
        match self {
            Side::Loop(k) => Some(k.loop_frame()),
            Side::Case(_) => None,
        }
    }
}

/// The scaling classes of one target and case on both sides (None: not fitted, or absent).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassChange<'a> {
    /// What it joins on each side (None: that side has no such case, or no such loop).
    pub side_a: Option<Side<'a>>,
    pub side_b: Option<Side<'a>>,
    pub target: String,
    pub case_name: String,
    /// Each side's class set ([`Verdict::classes`]).
    pub classes_a: Vec<Complexity>,
    pub classes_b: Vec<Complexity>,
    /// The side has the target and case at all.
    pub in_a: bool,
    pub in_b: bool,
    /// The decision on the growth.
    pub growth: GrowthChange,
    /// A discovered kernel loop's (target `<frame> in <entry>`): where it is a loop on each
    /// side ([`super::loopchange`]). None for a traced target.
    pub discovered: Option<LoopSides>,
}

impl<'a> ClassChange<'a> {
    /// A discovered loop's frame on each side (None: no loop there, or a traced case).
    pub fn loop_frames(&self) -> (Option<&'a str>, Option<&'a str>) {
        (
            self.side_a.and_then(Side::loop_frame),
            self.side_b.and_then(Side::loop_frame),
        )
    }

    /// Each side's class when its data names one alone.
    pub fn sole_classes(&self) -> (Option<Complexity>, Option<Complexity>) {
        let sole = |set: &[Complexity]| (set.len() == 1).then(|| set[0]);
        (sole(&self.classes_a), sole(&self.classes_b))
    }
}

/// The join of two analyses: it borrows from both. Its JSON form (`compare.json`) is written
/// by `render::compare`.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison<'a> {
    pub label_a: String,
    pub label_b: String,
    pub rows: Vec<CompareRow>,
    pub classes: Vec<ClassChange<'a>>,
    /// Frames whose share of the added time changed most, per target and case.
    pub frame_shifts: Vec<FrameShift>,
    /// Both sides discovered, in different programs: nothing of theirs was compared.
    pub unmatched: Option<Unmatched>,
}

type Key = (String, String);

fn by_key(a: &Analysis) -> BTreeMap<Key, &CaseResult> {
    let mut m = BTreeMap::new();
    for c in a.cases() {
        m.entry((c.table.target.clone(), c.table.case_name.clone()))
            .or_insert(c);
    }
    m
}

/// Distinct labels for the two sides (suffixed when equal).
pub fn side_labels(a: &Analysis, b: &Analysis) -> (String, String) {
    if a.label == b.label {
        (format!("{} (A)", a.label), format!("{} (B)", b.label))
    } else {
        (a.label.clone(), b.label.clone())
    }
}

/// Compare `a` (the baseline) with `b`.
pub fn compare<'a>(a: &'a Analysis, b: &'a Analysis) -> Comparison<'a> {
    let (label_a, label_b) = side_labels(a, b);
    let (ma, mb) = (by_key(a), by_key(b));
    let mut rows = Vec::new();
    let mut classes = Vec::new();
    let keys: std::collections::BTreeSet<&Key> = ma.keys().chain(mb.keys()).collect();
    let partial = |an: &Analysis, run: &str| {
        an.runs
            .iter()
            .any(|r| r.label == run && r.status == crate::rundata::RunStatus::Partial)
    };
    for key in keys {
        let (ta, tb) = (ma.get(key).copied(), mb.get(key).copied());
        let growth = match (ta, tb) {
            (Some(ca), Some(cb)) => {
                let (ta, tb) = (&ca.table, &cb.table);
                let (sa, sb) = (scatter(&ca.verdict), scatter(&cb.verdict));
                let mut g = growth_change((ta, sa), (tb, sb));
                let flat = |c: &CaseResult| c.verdict.sole_class() == Some(Complexity::Constant);
                if g.change == Change::Same
                    && flat(ca)
                    && flat(cb)
                    && let Err(why) = flat_level_same(ta, tb, sa, sb)
                {
                    g.change = Change::Inconclusive;
                    g.reason = Some(why);
                }
                if g.change == Change::Inconclusive
                    && let Some((change, by)) = count_change(ca, cb, &g)
                {
                    g.change = change;
                    g.by_count = Some(by);
                }
                if g.change != Change::Same
                    && let Some(side) = [(a, ta, "A"), (b, tb, "B")]
                        .iter()
                        .find(|(an, t, _)| partial(an, &t.run))
                        .map(|x| x.2)
                {
                    // A cut-short run may lack its largest sizes' calls: no claim of a change.
                    g.change = Change::Inconclusive;
                    g.reason = Some(format!("side {side} is a partial run"));
                }
                g
            }
            _ => GrowthChange::inconclusive(if ta.is_none() {
                "absent from A"
            } else {
                "absent from B"
            }),
        };
        classes.push(ClassChange {
            side_a: ta.map(Side::Case),
            side_b: tb.map(Side::Case),
            target: key.0.clone(),
            case_name: key.1.clone(),
            classes_a: ta.map(|c| c.verdict.classes()).unwrap_or_default(),
            classes_b: tb.map(|c| c.verdict.classes()).unwrap_or_default(),
            in_a: ta.is_some(),
            in_b: tb.is_some(),
            growth,
            discovered: None,
        });
        let (Some(ta), Some(tb)) = (ta.map(|c| &c.table), tb.map(|c| &c.table)) else {
            continue;
        };
        for ra in &ta.rows {
            let Some(rb) = tb.rows.iter().find(|r| r.n == ra.n) else {
                continue;
            };
            rows.extend(compare_rows(&key.0, &key.1, ra, rb));
        }
    }
    let (loops, unmatched) = loop_changes(a, b);
    classes.extend(loops);
    Comparison {
        label_a,
        label_b,
        rows,
        classes,
        frame_shifts: frame_shifts(a, b),
        unmatched,
    }
}

impl GrowthChange {
    pub(crate) fn inconclusive(reason: &str) -> GrowthChange {
        GrowthChange {
            change: Change::Inconclusive,
            n_range: None,
            growth_a: None,
            growth_b: None,
            added_a: None,
            added_b: None,
            log_change: None,
            interval: None,
            same_interval: None,
            reason: Some(reason.to_string()),
            by_count: None,
        }
    }
}

/// The relative error of one point in the change's interval (module docs), and whether the
/// spread between runs measured it. `scatter` is its side's scatter about its fit.
fn point_error(r: &Row, scatter: f64) -> (f64, bool) {
    // Calls within one run, and a workload's repeats within one process, vary less than
    // separate runs do: only two runs or more of the size measure the run-to-run scatter.
    let measured = r.run_times_ns.len() >= 2;
    let floor = if measured {
        MIN_POINT_ERROR
    } else {
        UNMEASURED_POINT_ERROR
    };
    (r.rel_se().unwrap_or(0.0).max(floor).max(scatter), measured)
}

/// How far a side's sizes scatter about its fitted model, as a relative error per point
/// (the residuals' RMS, corrected for the parameters fitted): a floor under each point's
/// error. It catches what the spread between runs misses, and all of it with one run per
/// size: drift that moves a whole size (under qemu, 5.10's waitpid(-1) read 2.69 and 2.71 ms
/// at N = 2000 and 4000 in one sweep, 6.37 and 9.36 ms at N = 4000 in two others).
///
/// The fit is the verdict's class's: where a loop count gives the class, the time's model of
/// that class, not the mean the noise left the time at (5.10's do_wait, counted O(n), read
/// 1.61 -> 8.14 ms per call and "O(1) within noise": 80% about the mean, 28% about a line).
///
/// A deviation from that model that a power law of N explains is no scatter: the growth
/// compared is ln(t(N_hi) / t(N_lo)), which a smooth trend moves without noise. A time per
/// call that falls steadily with N (get_task_policy under qemu, x0.73 over N = 1..4000 while
/// "O(1)") scattered 35% about its mean and 3% about the line, and two kernels' x0.73 and
/// x0.62 read `inconclusive` on an interval ±1.15 wide. So the floor is the lesser of the
/// two scatters.
fn scatter(v: &Verdict) -> f64 {
    let Some(s) = &v.scaling else { return 0.0 };
    let model = match v.class() {
        Some(c) if c != s.class => s
            .candidates
            .iter()
            .find(|m| m.class == c)
            .unwrap_or(&s.model),
        _ => &s.model,
    };
    model_scatter(s, model).min(loglog_scatter(s))
}

/// The scatter of `s`'s sizes about its log-log line (a power law of N), per point: the
/// residuals' RMS in ln t, corrected for the two parameters fitted. Infinite (no floor it
/// could lower) under [`MIN_LINE_SIZES`] sizes: three sizes leave the line one degree of
/// freedom, and an off-target count of 15 page allocations per size, 9 µs in one sweep and
/// 150 µs in another at the same N, sat on a line in both.
fn loglog_scatter(s: &Scaling) -> f64 {
    let logs: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter(|p| p.n > 0.0 && p.t > 0.0)
        .map(|p| (p.n.ln(), p.t.ln()))
        .collect();
    let k = logs.len();
    if k < MIN_LINE_SIZES {
        return f64::INFINITY;
    }
    let line = &s.loglog;
    let rss: f64 = logs
        .iter()
        .map(|(x, y)| (y - line.intercept - line.slope * x).powi(2))
        .sum();
    (rss / (k - 2) as f64).sqrt()
}

/// The scatter of `s`'s sizes about `model`, per point: its residuals' RMS, corrected for
/// the parameters fitted (0 with no degree of freedom left).
pub fn model_scatter(s: &Scaling, model: &ModelFit) -> f64 {
    let k = s.points.len();
    let params = if model.class == Complexity::Constant {
        1
    } else {
        2
    };
    if k <= params {
        return 0.0;
    }
    model.nrms * (k as f64 / (k - params) as f64).sqrt()
}

/// One size of one side of a growth change: its time per call, the relative error it
/// carries into the interval, and whether two runs or more of the size measured it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SidePoint {
    pub n: u64,
    pub t: f64,
    pub err: f64,
    pub measured: bool,
}

/// The decision on the growth of one table from A to B (module docs).
/// Each side is its table and its scatter about its fit (`scatter`; 0 when unknown).
pub fn growth_change((ta, sa): (&CaseTable, f64), (tb, sb): (&CaseTable, f64)) -> GrowthChange {
    let (pa, pb) = best_pair(&side_points(ta, sa), &side_points(tb, sb));
    growth_change_of(&pa, &pb)
}

/// The two common sizes the change is judged over: the largest, and the smaller one that
/// gives the change in growth per decade of N the least error. A sampled entry's smallest
/// size often has a handful of samples (±30% and more) where a size above it has hundreds,
/// and a workload's smallest N few calls (get_task_policy at N = 1 under qemu: 39 calls,
/// ±73% between runs, where N = 10 had ±8%);
/// the choice rests on the points' errors alone, never on their values.
pub(crate) fn best_pair(pa: &[SidePoint], pb: &[SidePoint]) -> (Vec<SidePoint>, Vec<SidePoint>) {
    let at = |p: &[SidePoint], n: u64| p.iter().find(|q| q.n == n).copied();
    let common: Vec<(SidePoint, SidePoint)> =
        pa.iter().filter_map(|a| Some((*a, at(pb, a.n)?))).collect();
    let Some(&(ha, hb)) = common.iter().max_by_key(|(a, _)| a.n) else {
        return (Vec::new(), Vec::new());
    };
    let score = |(a, b): &(SidePoint, SidePoint)| {
        let v = a.err.powi(2) + b.err.powi(2) + ha.err.powi(2) + hb.err.powi(2);
        v.sqrt() / (ha.n as f64 / a.n as f64).ln()
    };
    let lo = common
        .iter()
        .filter(|(a, _)| a.n < ha.n)
        .min_by(|x, y| score(x).total_cmp(&score(y)));
    match lo {
        Some(&(la, lb)) => (vec![la, ha], vec![lb, hb]),
        None => (vec![ha], vec![hb]),
    }
}

/// A table's sizes with a time per call, each with its error (`point_error`, `scatter` its
/// side's scatter about its fit).
fn side_points(t: &CaseTable, scatter: f64) -> Vec<SidePoint> {
    t.rows
        .iter()
        .filter(|r| r.n > 0)
        .filter_map(|r| {
            let t = r.time_per_call_ns.filter(|x| *x > 0.0)?;
            let (err, measured) = point_error(r, scatter);
            Some(SidePoint {
                n: r.n,
                t,
                err,
                measured,
            })
        })
        .collect()
}

/// Two rows whose time per call is shown flat on both sides are the same only if the time
/// itself agrees too: at the largest size both measured, the 90% interval of the log ratio
/// B / A lies within the margin, as growth's does. Err: why not, with the ratio.
fn flat_level_same(ta: &CaseTable, tb: &CaseTable, sa: f64, sb: f64) -> Result<(), String> {
    let (pa, pb) = (side_points(ta, sa), side_points(tb, sb));
    let Some((a, b)) = pa
        .iter()
        .rev()
        .find_map(|a| Some((a, pb.iter().find(|b| b.n == a.n)?)))
    else {
        return Err("no size in common".into());
    };
    let d = (b.t / a.t).ln();
    let h = Z_95_ONE_SIDED * (a.err * a.err + b.err * b.err).sqrt();
    if d - h >= -MIN_GROWTH_CHANGE && d + h <= MIN_GROWTH_CHANGE {
        Ok(())
    } else {
        Err(format!(
            "both flat, but the time per call at N={} went x{:.2} (90% interval x{:.2}..x{:.2})",
            a.n,
            d.exp(),
            (d - h).exp(),
            (d + h).exp()
        ))
    }
}

/// The decision on the growth of one quantity from A to B, from each side's sizes (module
/// docs): a table's times per call, or a discovered entry's sampled ones.
pub fn growth_change_of(pa: &[SidePoint], pb: &[SidePoint]) -> GrowthChange {
    let at = |p: &[SidePoint], n: u64| p.iter().find(|q| q.n == n).copied();
    let common: Vec<u64> = pa
        .iter()
        .map(|q| q.n)
        .filter(|&n| at(pb, n).is_some())
        .collect();
    let (Some(&lo), Some(&hi)) = (common.iter().min(), common.iter().max()) else {
        return GrowthChange::inconclusive("no size with timed calls on both sides");
    };
    if lo == hi {
        return GrowthChange::inconclusive(&format!(
            "one size in common (N={lo}): no growth to compare"
        ));
    }
    let mut unmeasured = Vec::new();
    let mut side = |p: &[SidePoint], label: &str| {
        let (l, h) = (at(p, lo).unwrap(), at(p, hi).unwrap());
        if !(l.measured && h.measured) {
            unmeasured.push(label.to_string());
        }
        (h.t / l.t, h.t - l.t, l.err * l.err + h.err * h.err)
    };
    let (ga, add_a, va) = side(pa, "A");
    let (gb, add_b, vb) = side(pb, "B");
    let d = (gb / ga).ln();
    let se = (va + vb).sqrt();
    let h = Z_95_TWO_SIDED * se;
    let (lo_ci, hi_ci) = (d - h, d + h);
    // Equivalence is two one-sided tests, each at 5%: the change is above -margin, and it is
    // below +margin. Together they are the 90% interval inside the margin (as in TOST), not
    // the 95% one, which would test each side at 2.5%.
    let (lo_same, hi_same) = (d - Z_95_ONE_SIDED * se, d + Z_95_ONE_SIDED * se);
    // The change of the added time, as a log ratio; a side that adds nothing is infinitely
    // below one that does.
    let added = match (add_a > 0.0, add_b > 0.0) {
        (true, true) => (add_b / add_a).ln(),
        (true, false) => f64::NEG_INFINITY,
        (false, true) => f64::INFINITY,
        (false, false) => 0.0,
    };
    let change = if lo_ci > MIN_GROWTH_CHANGE && added > MIN_GROWTH_CHANGE {
        Change::Grew
    } else if hi_ci < -MIN_GROWTH_CHANGE && added < -MIN_GROWTH_CHANGE {
        Change::Shrank
    } else if lo_same >= -MIN_GROWTH_CHANGE && hi_same <= MIN_GROWTH_CHANGE {
        Change::Same
    } else {
        Change::Inconclusive
    };
    GrowthChange {
        change,
        n_range: Some((lo, hi)),
        growth_a: Some(ga),
        growth_b: Some(gb),
        added_a: Some(add_a),
        added_b: Some(add_b),
        log_change: Some(d),
        interval: Some((lo_ci, hi_ci)),
        same_interval: Some((lo_same, hi_same)),
        // One run per size: what the interval rests on is assumed, and the line says so.
        reason: (!unmeasured.is_empty()).then(|| {
            format!(
                "one run per size on {}: each point's error taken as at least {:.0}%",
                unmeasured.join(" and "),
                UNMEASURED_POINT_ERROR * 100.0
            )
        }),
        by_count: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::comparerows::within_run_significance;
    use crate::analysis::testdata;
    use crate::rundata::Run;

    use crate::analysis::testdata::analysis_of as analysis;

    #[test]
    fn compares_per_n_with_marks() {
        let ns = [10, 100, 1000, 8000];
        let old = testdata::waitpid_run(&ns, |n| 1000 + 5 * n);
        let mut new = testdata::waitpid_run(&ns, |_| 1010);
        new.kernel.release = "6.1.0-test".into();
        // Make the new kernel's per-op times clearly faster with spread in both.
        let w = new.workload.as_mut().unwrap();
        for r in w["results"].as_array_mut().unwrap() {
            let t = r["time_ns_per_op"].as_f64().unwrap();
            r["time_ns_per_op"] = serde_json::json!(t / 2.0);
        }
        let (old, new) = (analysis(old), analysis(new));
        let c = compare(&old, &new);
        assert_eq!(
            (c.label_a.as_str(), c.label_b.as_str()),
            ("5.10.0-test", "6.1.0-test")
        );
        let get =
            |n: u64, q: Quantity| c.rows.iter().find(|r| r.n == n && r.quantity == q).unwrap();
        // N=10: 1050 vs 1010 ns is under the minimum difference.
        let r = get(10, Quantity::TimePerCall);
        assert!((r.diff_pct.unwrap() - (1010.0 - 1050.0) / 1050.0 * 100.0).abs() < 1e-9);
        assert_eq!(r.significance, Significance::NotSignificant);
        // N=8000: 41000 vs 1010 ns.
        let r = get(8000, Quantity::TimePerCall);
        assert!(r.diff_pct.unwrap() < -90.0);
        assert_eq!(r.significance, Significance::Significant);
        // Workload: halved times, doubled hmean rate, significant over 3 repeats each.
        let r = get(100, Quantity::OpTime);
        assert_eq!((r.a, r.b), (Some(10_000.0), Some(5_000.0)));
        assert_eq!(r.significance, Significance::Significant);
        let r = get(100, Quantity::OpRate);
        assert!((r.diff_pct.unwrap() - 100.0).abs() < 1e-9);
        let hm = 3.0 / (9000.0 / 1e9 + 10000.0 / 1e9 + 11000.0 / 1e9);
        assert!((r.a.unwrap() - hm).abs() < 1e-6);
        assert_eq!(c.classes.len(), 1);
        assert_eq!(
            c.classes[0].sole_classes(),
            (Some(Complexity::Linear), Some(Complexity::Constant))
        );
        assert_eq!(c.classes[0].growth.change, Change::Shrank);
        assert_eq!(c.classes[0].growth.n_range, Some((10, 8000)));
    }

    /// `run` with a counted loop inside do_wait: `trips(n)` wait_consider_task calls per
    /// do_wait call at each size, as fentry counts them.
    fn with_walk(mut run: Run, trips: impl Fn(u64) -> f64) -> Run {
        run.targets.push(crate::rundata::TargetReport {
            name: "wait_consider_task".into(),
            plan: Some(testdata::plan(&["wait_consider_task"])),
            rejected: vec![],
            verification: None,
            probe_cost: None,
        });
        let rows: Vec<crate::rundata::SpanRow> = run.spans.clone();
        for r in rows {
            let inner = (r.calls as f64 * trips(r.n)) as u64;
            run.spans.push(crate::rundata::SpanRow {
                target: "wait_consider_task".into(),
                calls: inner,
                within: [("do_wait".to_string(), inner)].into(),
                ..r
            });
        }
        run
    }

    /// The time of a walk whose small sizes the noise blurred leaves the change open; the
    /// walk's exact count on both sides decides it, and only in the time's direction.
    #[test]
    fn an_exact_loop_count_decides_what_the_time_left_open() {
        let ns = [125u64, 250, 500, 1000];
        // 5.10 on a loaded host: ×5 over the sweep, ±40% between the two runs of a size.
        let walk = [1.6e6, 2.0e6, 2.3e6, 8.1e6];
        let noisy = |n: u64, r: u32| {
            let i = ns.iter().position(|&x| x == n).unwrap();
            (walk[i] * if r == 0 { 0.6 } else { 1.4 }) as u64
        };
        let a = with_walk(testdata::command_run(&ns, 2, noisy), |n| n as f64 - 0.4);
        let mut b = with_walk(
            testdata::command_run(&ns, 2, |_, r| 200_000 + 9_000 * r as u64),
            |_| 1.49,
        );
        b.kernel.release = "6.1.0-test".into();
        let (a, b) = (analysis(a), analysis(b));
        let by_loop = a.runs[0].cases[0]
            .verdict
            .by_loop
            .as_ref()
            .expect("A's class from its count");
        assert_eq!(by_loop.class, Complexity::Linear);
        let c = compare(&a, &b);
        let g = &c.classes[0].growth;
        let (_, hi) = g.interval.unwrap();
        assert!(
            hi > -MIN_GROWTH_CHANGE && hi < 0.0,
            "the time alone is open: {g:?}"
        );
        assert_eq!(g.change, Change::Shrank, "{g:?}");
        let by = g.by_count.as_ref().unwrap();
        assert_eq!(by.inner, "wait_consider_task");
        assert!(
            by.growth_a > 7.0 && (by.growth_b - 1.0).abs() < 0.01,
            "{by:?}"
        );
        // The same walk on both sides, the time as noisy: the time alone cannot show the
        // growth equal, the count shows the loop is.
        let mut same = with_walk(testdata::command_run(&ns, 2, |n, r| noisy(n, 1 - r)), |n| {
            n as f64
        });
        same.kernel.release = "6.1.0-test".into();
        let g = compare(&a, &analysis(same)).classes[0].growth.clone();
        let (lo, hi) = g.same_interval.unwrap();
        assert!(
            lo < -MIN_GROWTH_CHANGE || hi > MIN_GROWTH_CHANGE,
            "the time alone is open: {g:?}"
        );
        assert_eq!(g.change, Change::Same, "{g:?}");
        let by = g.by_count.as_ref().expect("same by the count");
        assert!((by.growth_b / by.growth_a - 1.0).abs() < 0.01, "{by:?}");
    }

    /// The same loop count with a time that grew by more than the margin (each trip costs
    /// more at large N, as 6.1's maple-tree stores did in dup_mmap's loop): the count cannot
    /// say `same`, and the time, too noisy for `grew`, leaves it open.
    #[test]
    fn the_same_count_is_not_same_when_the_time_grew_beyond_the_margin() {
        let ns = [125u64, 250, 500, 1000];
        let walk = [1.6e6, 2.0e6, 2.3e6, 8.1e6];
        let noisy = |n: u64, r: u32| {
            let i = ns.iter().position(|&x| x == n).unwrap();
            walk[i] * if r == 0 { 0.6 } else { 1.4 }
        };
        let a = with_walk(
            testdata::command_run(&ns, 2, |n, r| noisy(n, r) as u64),
            |n| n as f64,
        );
        // x3.5 more growth over the sweep: a log change of 1.25.
        let slower = |n: u64, r: u32| (noisy(n, 1 - r) * (n as f64 / 125.0).powf(0.6)) as u64;
        let mut b = with_walk(testdata::command_run(&ns, 2, slower), |n| n as f64);
        b.kernel.release = "6.1.0-test".into();
        let g = compare(&analysis(a), &analysis(b)).classes[0]
            .growth
            .clone();
        let (lo, _) = g.interval.unwrap();
        assert!(lo < 0.0, "the time alone cannot say grew: {g:?}");
        assert!(g.log_change.unwrap() > MIN_GROWTH_CHANGE, "{g:?}");
        assert_eq!(g.change, Change::Inconclusive, "{g:?}");
        assert!(g.by_count.is_none(), "{g:?}");
    }

    /// `same` is a claim of equivalence: where the growth really changed by more than the
    /// margin (x2.5 here, under the A/A test's 15% run-to-run noise) it is said in at most
    /// 5% of the pairs, the error rate its two one-sided tests at 5% allow (1 in 200 here);
    /// where the growth changed by half the margin it is said for well over a third.
    #[test]
    fn same_is_rarely_said_of_a_change_beyond_the_margin() {
        use crate::analysis::testutil::Rng;
        let ns = [1, 100, 1000, 4000];
        let runs = |per_n: f64, rng: &mut Rng| {
            let k: Vec<f64> = (0..ns.len() * 3)
                .map(|_| (0.15 * rng.normal()).exp())
                .collect();
            testdata::command_run(&ns, 3, |n, r| {
                let i = ns.iter().position(|&x| x == n).unwrap();
                ((2000.0 + per_n * n as f64) * k[i * 3 + r as usize]) as u64
            })
        };
        // Growth over N = 1..4000: 2000 + 5N is x11; x2.5 that (x27.5) is 2000 + 13.25N;
        // x1.41 (half the margin, in log terms) is 2000 + 7.26N.
        let (mut same_beyond, mut same_within) = (0, 0);
        for seed in 0..200 {
            let mut rng = Rng::new(1000 + seed);
            let a = analysis(runs(5.0, &mut rng));
            let beyond = compare(&a, &analysis(runs(13.25, &mut rng))).classes[0]
                .growth
                .change;
            same_beyond += usize::from(beyond == Change::Same);
            let within = compare(&a, &analysis(runs(7.26, &mut rng))).classes[0]
                .growth
                .change;
            same_within += usize::from(within == Change::Same);
        }
        assert!(
            same_beyond <= 10,
            "x2.5 called same in {same_beyond} of 200"
        );
        // 88 of 200 here; the 95% interval in place of the 90% one said it of 62.
        assert!(
            same_within >= 75,
            "x1.41 called same in {same_within} of 200"
        );
    }

    /// A/A: two sweeps of the same kernel, three runs per size each off by 15% run-to-run
    /// noise, never say `grew` or `shrank` and mostly say `same`; a loop that was fixed
    /// (linear in A, flat in B) under the same noise says `shrank` every time. With one run
    /// per size and the whole size drifting by 40% (qemu's scatter at one size reaches more),
    /// A/A pairs over seven sizes are still never flagged and a fixed loop mostly still is. With no size in common, or one, nothing is decided.
    /// Three runs per size, each run's time `f(n)` times a factor from `noise(size, run)`.
    fn noisy_run(ns: &[u64], f: impl Fn(u64) -> f64, noise: impl Fn(usize, u32) -> f64) -> Run {
        testdata::command_run(ns, 3, |n, r| {
            let i = ns.iter().position(|&x| x == n).unwrap();
            (f(n) * noise(i, r)) as u64
        })
    }

    /// Runs that differ by a few percent.
    fn steady(i: usize, r: u32) -> f64 {
        1.0 + 0.02 * (((i * 3 + r as usize) % 5) as f64 - 2.0)
    }

    /// Two flat rows are `same` only while their time per call agrees: one 2.5 times dearer
    /// on B at every size grows no differently, but is no "same".
    #[test]
    fn a_flat_row_is_same_only_when_its_time_per_call_agrees() {
        let ns = [10, 100, 1000, 4000];
        let flat = |level: f64| noisy_run(&ns, |_| level, steady);
        let g = |a: Run, b: Run| {
            compare(&analysis(a), &analysis(b)).classes[0]
                .growth
                .clone()
        };
        assert_eq!(g(flat(2000.0), flat(2100.0)).change, Change::Same);
        let dearer = g(flat(2000.0), flat(5000.0));
        assert_eq!(dearer.change, Change::Inconclusive, "{dearer:?}");
        let why = dearer.reason.unwrap_or_default();
        assert!(
            why.starts_with("both flat, but the time per call at N=4000 went x2.50"),
            "{why}"
        );
    }

    /// A time per call that falls steadily with N scatters about its mean (its O(1) model)
    /// but not about a power law of N: the trend is no noise in the growth compared, and two
    /// such sides are `same`. With the mean's scatter as every point's floor, its interval
    /// was too wide to say so.
    #[test]
    fn a_steady_fall_is_no_scatter() {
        let ns = [1, 10, 100, 1000, 4000];
        let falling = |k: f64| noisy_run(&ns, move |n| k * 8000.0 * (n as f64).powf(-0.05), steady);
        let (a, b) = (analysis(falling(1.0)), analysis(falling(0.95)));
        let v = &a.runs[0].cases[0].verdict;
        let s = v.scaling.as_ref().unwrap();
        assert_eq!(v.sole_class(), Some(Complexity::Constant), "{v:?}");
        assert!(model_scatter(s, &s.model) > 0.1, "{s:?}");
        assert!(scatter(v) < 0.05, "{}", scatter(v));
        let g = &compare(&a, &b).classes[0].growth;
        assert_eq!(g.change, Change::Same, "{g:?}");
        // Three sizes leave the line one degree of freedom: the model's scatter stays.
        let few = [10, 100, 1000];
        let a = analysis(noisy_run(&few, |n| 8000.0 * (n as f64).powf(-0.05), steady));
        let v = &a.runs[0].cases[0].verdict;
        let s = v.scaling.as_ref().unwrap();
        assert_eq!(scatter(v), model_scatter(s, &s.model));
    }

    /// A smallest size measured with few calls (±70% between its runs) is not the end of the
    /// growth compared when a size above it is measured well: the change is judged from the
    /// better one, and two equal loops are `same`.
    #[test]
    fn the_growth_is_judged_from_a_well_measured_small_size() {
        let ns = [1, 10, 100, 1000, 4000];
        let wild = |i: usize, r: u32| {
            if i == 0 {
                [0.3, 1.0, 1.7][r as usize]
            } else {
                steady(i, r)
            }
        };
        let walk = |n: u64| 2000.0 + 5.0 * n as f64;
        let (a, b) = (noisy_run(&ns, walk, wild), noisy_run(&ns, walk, steady));
        let (a, b) = (analysis(a), analysis(b));
        let g = &compare(&a, &b).classes[0].growth;
        assert_eq!(g.n_range, Some((10, 4000)), "{g:?}");
        assert_eq!(g.change, Change::Same, "{g:?}");
    }

    #[test]
    fn growth_changes_only_when_it_did() {
        use crate::analysis::testutil::Rng;
        let ns = [1, 100, 1000, 4000];
        let linear: fn(u64) -> u64 = |n| 2000 + 5 * n;
        let flat: fn(u64) -> u64 = |_| 2000;
        let runs = |f: fn(u64) -> u64, rng: &mut Rng| {
            let k: Vec<f64> = (0..ns.len() * 3)
                .map(|_| (0.15 * rng.normal()).exp())
                .collect();
            testdata::command_run(&ns, 3, |n, r| {
                let i = ns.iter().position(|&x| x == n).unwrap();
                (f(n) as f64 * k[i * 3 + r as usize]) as u64
            })
        };
        // The sizes of the VM tests' waitpid sweep.
        let wide = [1, 10, 100, 1000, 2000, 4000, 6000];
        let drifting = |f: fn(u64) -> u64, rng: &mut Rng| {
            let k: Vec<f64> = wide.iter().map(|_| (DRIFT * rng.normal()).exp()).collect();
            testdata::waitpid_run(&wide, |n| {
                let i = wide.iter().position(|&x| x == n).unwrap();
                (f(n) as f64 * k[i]) as u64
            })
        };
        const DRIFT: f64 = 0.4;
        let (mut same, mut fixed, mut fixed_drifting) = (0, 0, 0);
        for seed in 0..100 {
            let mut rng = Rng::new(seed);
            let (a, b) = (runs(linear, &mut rng), runs(linear, &mut rng));
            let (aa, ab) = (analysis(a.clone()), analysis(b));
            let c = compare(&aa, &ab);
            let g = &c.classes[0].growth;
            assert!(!g.change.flagged(), "A/A seed {seed}: {g:?}");
            assert_eq!(g.reason, None, "{g:?}");
            same += usize::from(g.change == Change::Same);
            let (aa, ab) = (analysis(a), analysis(runs(flat, &mut rng)));
            let c = compare(&aa, &ab);
            let g = &c.classes[0].growth;
            assert_ne!(g.change, Change::Grew, "seed {seed}: {g:?}");
            fixed += usize::from(g.change == Change::Shrank);

            let (a, b) = (drifting(linear, &mut rng), drifting(linear, &mut rng));
            let g = compare(&analysis(a.clone()), &analysis(b)).classes[0]
                .growth
                .clone();
            assert!(!g.change.flagged(), "drifting A/A seed {seed}: {g:?}");
            let b = drifting(flat, &mut rng);
            let g = compare(&analysis(a), &analysis(b)).classes[0]
                .growth
                .clone();
            assert_ne!(g.change, Change::Grew, "seed {seed}: {g:?}");
            fixed_drifting += usize::from(g.change == Change::Shrank);
        }
        assert!(same >= 50, "A/A pairs called same: {same} of 100");
        assert!(fixed >= 95, "a fixed loop called shrank: {fixed} of 100");
        assert!(
            fixed_drifting >= 70,
            "a fixed loop under drift called shrank: {fixed_drifting} of 100"
        );
        // The same loop under a fixed cost twelve times lower: the growth ratio rises from x1.3
        // to x5, the added time does not change. Not a change of the loop.
        let a = testdata::waitpid_run(&ns, |n| 60_000 + 5 * n);
        let b = testdata::waitpid_run(&ns, |n| 5_000 + 5 * n);
        let g = compare(&analysis(a), &analysis(b)).classes[0]
            .growth
            .clone();
        assert!(g.log_change.unwrap() > 0.69, "{g:?}");
        assert!(!g.change.flagged(), "{g:?}");

        // One run per size and no repeats: still decided where the change is large, with the
        // assumption said.
        let mut a = testdata::waitpid_run(&ns, |n| 2000 + 5 * n);
        let mut b = testdata::waitpid_run(&ns, |_| 2000);
        a.workload = None;
        b.workload = None;
        let g = compare(&analysis(a), &analysis(b)).classes[0]
            .growth
            .clone();
        assert_eq!(g.change, Change::Shrank, "{g:?}");
        assert_eq!(
            g.reason.as_deref(),
            Some("one run per size on A and B: each point's error taken as at least 25%")
        );

        let a = testdata::waitpid_run(&[10, 100], |n| 1000 + n);
        let b = testdata::waitpid_run(&[1000, 4000], |n| 1000 + n);
        let g = compare(&analysis(a.clone()), &analysis(b)).classes[0]
            .growth
            .clone();
        assert_eq!(g.change, Change::Inconclusive);
        assert_eq!(
            g.reason.as_deref(),
            Some("no size with timed calls on both sides")
        );
        let b = testdata::waitpid_run(&[100, 4000], |n| 1000 + 50 * n);
        let g = compare(&analysis(a), &analysis(b)).classes[0]
            .growth
            .clone();
        assert_eq!(g.change, Change::Inconclusive);
        assert!(g.reason.unwrap().starts_with("one size in common (N=100)"));
    }

    #[test]
    fn a_per_call_difference_needs_the_repeats_to_agree() {
        use Significance::*;
        let row = |t: f64, repeats: &[f64]| Row {
            time_per_call_ns: Some(t),
            time_per_call_sd_ns: Some(t * 0.1),
            timed_calls: 10_000,
            op_repeats_ns: repeats.to_vec(),
            ..Row::default()
        };
        // +27% per call with thousands of calls: the within-run test alone says significant.
        let a = row(1000.0, &[]);
        let b = row(1270.0, &[]);
        assert_eq!(within_run_significance(&a, &b), Significant);
        // No repeats: cannot tell run-to-run drift from a change.
        assert_eq!(per_call_significance(&a, &b), Unknown);
        // Repeats that overlap: drift.
        let a = row(1000.0, &[100.0, 110.0, 90.0]);
        let b = row(1270.0, &[105.0, 95.0, 112.0]);
        assert_eq!(per_call_significance(&a, &b), NotSignificant);
        // Repeats clearly slower, as the calls are: significant.
        let b = row(1270.0, &[130.0, 128.0, 133.0]);
        assert_eq!(per_call_significance(&a, &b), Significant);
        // Repeats clearly faster while the calls got slower: not supported.
        let b = row(1270.0, &[60.0, 62.0, 58.0]);
        assert_eq!(per_call_significance(&a, &b), NotSignificant);
    }

    #[test]
    fn runs_of_the_command_decide_a_per_call_difference() {
        use Significance::*;
        let row = |runs: &[f64]| Row {
            time_per_call_ns: crate::analysis::stats::median(runs),
            time_per_call_sd_ns: Some(100.0),
            timed_calls: 10_000,
            run_times_ns: runs.to_vec(),
            ..Row::default()
        };
        let a = row(&[1000.0, 1100.0, 950.0]);
        assert_eq!(
            per_call_significance(&a, &row(&[1200.0, 900.0, 1300.0])),
            NotSignificant
        );
        assert_eq!(
            per_call_significance(&a, &row(&[2000.0, 2100.0, 1950.0])),
            Significant
        );
        // One run on a side: the runs cannot say; the old rule (no repeats: "?") holds.
        assert_eq!(per_call_significance(&a, &row(&[2000.0])), Unknown);
    }

    #[test]
    fn significance_rules() {
        use Significance::*;
        assert_eq!(
            repeat_significance(&[10.0, 11.0, 9.0], &[10.5, 9.5, 10.0]),
            NotSignificant
        );
        assert_eq!(
            repeat_significance(&[10.0, 11.0, 9.0], &[20.0, 21.0, 19.0]),
            Significant
        );
        assert_eq!(repeat_significance(&[10.0], &[20.0, 21.0]), Unknown);
        assert_eq!(Significant.mark(), "*");
        assert_eq!(Unknown.mark(), "?");
    }
}
