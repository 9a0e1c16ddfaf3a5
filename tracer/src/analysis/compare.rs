//! Comparing two analyses (e.g. two kernels) per target, case and N, in the style of mmtests'
//! compare-kernels: a mean per side, the % difference, and a significance mark.
//!
//! Three quantities are compared for each (target, case, N) present on both sides:
//!
//! * **time per call** (the table's metric, arithmetic mean over all calls). Significance comes
//!   from the within-run spread of calls: Welch's t-test on the two per-call means, with the
//!   per-call standard deviations estimated from the histograms and n = timed calls, at 95%.
//!   Because that spread ignores run-to-run drift (and with thousands of calls almost any
//!   difference passes the test), the difference must also be at least [`MIN_CALL_DIFF_PCT`],
//!   and the workload's repeats must differ significantly in the same direction (without
//!   repeats on both sides: "?").
//! * **workload time per op** (arithmetic mean over the workload's repeats), and
//! * **workload ops/s** (harmonic mean over repeats, the right mean for rates). Both are marked
//!   by Welch's t-test over the per-repeat values at 95%: this spread is the run-to-run one, as
//!   in mmtests. Fewer than two repeats on a side gives the mark "?" (cannot tell).
//!
//! The % difference is (B − A) / A: positive means B is larger (slower for times, faster for
//! rates).

use std::collections::BTreeMap;

use serde::Serialize;

use super::analyze::{Analysis, Verdict};
use super::fit::Complexity;
use super::frameshift::{FrameShift, frame_shifts};
use super::stats::{harmonic_mean, mean, t975, variance, welch};
use super::table::{CaseTable, Row};

/// Least per-call difference that can be marked significant.
pub const MIN_CALL_DIFF_PCT: f64 = 5.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Significance {
    Significant,
    NotSignificant,
    /// Not enough data to tell.
    Unknown,
}

impl Significance {
    pub fn mark(self) -> &'static str {
        match self {
            Significance::Significant => "*",
            Significance::NotSignificant => "",
            Significance::Unknown => "?",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quantity {
    /// The target's time per call (the table metric), ns.
    TimePerCall,
    /// The workload's time per op, ns.
    OpTime,
    /// The workload's ops per second.
    OpRate,
}

impl Quantity {
    pub fn label(self) -> &'static str {
        match self {
            Quantity::TimePerCall => "ns/call",
            Quantity::OpTime => "op ns",
            Quantity::OpRate => "ops/s",
        }
    }

    /// mmtests' name of the mean used.
    pub fn mean_name(self) -> &'static str {
        match self {
            Quantity::OpRate => "Hmean",
            _ => "Amean",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareRow {
    pub target: String,
    pub case_name: String,
    pub n: u64,
    pub quantity: Quantity,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// (b − a) / a × 100.
    pub diff_pct: Option<f64>,
    pub significance: Significance,
}

/// The scaling classes of one target and case on both sides (None: not fitted, or absent).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassChange {
    pub target: String,
    pub case_name: String,
    pub a: Option<Complexity>,
    pub b: Option<Complexity>,
    /// The side has the target and case at all.
    pub in_a: bool,
    pub in_b: bool,
}

/// Its JSON form (`compare.json`) is written by `render::compare`.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub label_a: String,
    pub label_b: String,
    pub rows: Vec<CompareRow>,
    pub classes: Vec<ClassChange>,
    /// Frames whose share of the added time changed most, per target and case.
    pub frame_shifts: Vec<FrameShift>,
}

type Key = (String, String);

fn by_key(a: &Analysis) -> BTreeMap<Key, (&CaseTable, &Verdict)> {
    let mut m = BTreeMap::new();
    for (t, v) in a.tables.iter().zip(&a.verdicts) {
        m.entry((t.target.clone(), t.case_name.clone()))
            .or_insert((t, v));
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
pub fn compare(a: &Analysis, b: &Analysis) -> Comparison {
    let (label_a, label_b) = side_labels(a, b);
    let (ma, mb) = (by_key(a), by_key(b));
    let mut rows = Vec::new();
    let mut classes = Vec::new();
    let keys: std::collections::BTreeSet<&Key> = ma.keys().chain(mb.keys()).collect();
    for key in keys {
        let (ta, tb) = (ma.get(key), mb.get(key));
        let ca = ta.and_then(|(_, v)| v.class());
        let cb = tb.and_then(|(_, v)| v.class());
        classes.push(ClassChange {
            target: key.0.clone(),
            case_name: key.1.clone(),
            a: ca,
            b: cb,
            in_a: ta.is_some(),
            in_b: tb.is_some(),
        });
        let (Some((ta, _)), Some((tb, _))) = (ta, tb) else {
            continue;
        };
        for ra in &ta.rows {
            let Some(rb) = tb.rows.iter().find(|r| r.n == ra.n) else {
                continue;
            };
            rows.extend(compare_rows(&key.0, &key.1, ra, rb));
        }
    }
    Comparison {
        label_a,
        label_b,
        rows,
        classes,
        frame_shifts: frame_shifts(a, b),
    }
}

fn pct(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => Some((b - a) / a * 100.0),
        _ => None,
    }
}

fn compare_rows(target: &str, case: &str, ra: &Row, rb: &Row) -> Vec<CompareRow> {
    let mut out = Vec::new();
    let row = |quantity, a, b, significance| CompareRow {
        target: target.to_string(),
        case_name: case.to_string(),
        n: ra.n,
        quantity,
        a,
        b,
        diff_pct: pct(a, b),
        significance,
    };
    if ra.time_per_call_ns.is_some() || rb.time_per_call_ns.is_some() {
        let sig = per_call_significance(ra, rb);
        out.push(row(
            Quantity::TimePerCall,
            ra.time_per_call_ns,
            rb.time_per_call_ns,
            sig,
        ));
    }
    let (xa, xb) = (&ra.op_repeats_ns, &rb.op_repeats_ns);
    if !xa.is_empty() || !xb.is_empty() {
        out.push(row(
            Quantity::OpTime,
            mean(xa),
            mean(xb),
            repeat_significance(xa, xb),
        ));
        let rate = |v: &[f64]| v.iter().map(|t| 1e9 / t).collect::<Vec<f64>>();
        let (qa, qb) = (rate(xa), rate(xb));
        out.push(row(
            Quantity::OpRate,
            harmonic_mean(&qa),
            harmonic_mean(&qb),
            repeat_significance(&qa, &qb),
        ));
    }
    out
}

/// A per-call difference is significant when the calls' own spread says so (Welch, plus
/// the minimum difference) *and* the run-to-run spread agrees: the workload's repeats differ
/// significantly in the same direction. The within-run test alone marked +27% at one N and
/// −42% at the next as both significant (6.1 → 6.12 fork with N VMAs): with thousands of
/// calls almost any drift between two runs passes it. Without repeats on both sides the
/// answer is "cannot tell".
pub fn per_call_significance(ra: &Row, rb: &Row) -> Significance {
    let within = within_run_significance(ra, rb);
    if within != Significance::Significant {
        return within;
    }
    let (xa, xb) = (&ra.op_repeats_ns, &rb.op_repeats_ns);
    match repeat_significance(xa, xb) {
        Significance::Significant => {
            let calls_up = rb.time_per_call_ns > ra.time_per_call_ns;
            let ops_up = mean(xb) > mean(xa);
            if calls_up == ops_up {
                Significance::Significant
            } else {
                Significance::NotSignificant
            }
        }
        other => other,
    }
}

/// Welch's test on per-call means with histogram spreads, plus the minimum difference.
fn within_run_significance(ra: &Row, rb: &Row) -> Significance {
    let (Some(ma), Some(mb)) = (ra.time_per_call_ns, rb.time_per_call_ns) else {
        return Significance::Unknown;
    };
    let (Some(sa), Some(sb)) = (ra.time_per_call_sd_ns, rb.time_per_call_sd_ns) else {
        return Significance::Unknown;
    };
    if ma <= 0.0 || ((mb - ma) / ma * 100.0).abs() < MIN_CALL_DIFF_PCT {
        return Significance::NotSignificant;
    }
    let (na, nb) = (ra.timed_calls as f64, rb.timed_calls as f64);
    match welch(ma, sa * sa, na, mb, sb * sb, nb) {
        Some((t, df)) if t.abs() > t975(df) => Significance::Significant,
        Some(_) => Significance::NotSignificant,
        // No spread on either side: any difference beyond the minimum is real.
        None if na >= 2.0 && nb >= 2.0 => Significance::Significant,
        None => Significance::Unknown,
    }
}

/// Welch's test over per-repeat values.
pub fn repeat_significance(a: &[f64], b: &[f64]) -> Significance {
    let (Some(va), Some(vb)) = (variance(a), variance(b)) else {
        return Significance::Unknown;
    };
    let (ma, mb) = (mean(a).unwrap_or(0.0), mean(b).unwrap_or(0.0));
    match welch(ma, va, a.len() as f64, mb, vb, b.len() as f64) {
        Some((t, df)) if t.abs() > t975(df) => Significance::Significant,
        Some(_) => Significance::NotSignificant,
        None if ma != mb => Significance::Significant,
        None => Significance::NotSignificant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze::{AnalysisOptions, analyze};
    use crate::analysis::load::{Dataset, LoadedRun};
    use crate::analysis::testdata;
    use crate::rundata::Run;

    fn analysis(run: Run) -> Analysis {
        let ds = Dataset {
            root: "/x".into(),
            is_sweep: false,
            runs: vec![LoadedRun {
                label: "r".into(),
                dir: "/nonexistent".into(),
                run,
            }],
            notes: vec![],
        };
        analyze(&ds, &AnalysisOptions::default()).unwrap()
    }

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
        let c = compare(&analysis(old), &analysis(new));
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
            (c.classes[0].a, c.classes[0].b),
            (Some(Complexity::Linear), Some(Complexity::Constant))
        );
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
