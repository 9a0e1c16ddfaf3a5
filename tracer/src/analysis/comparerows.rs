//! The per-N rows of a compare, in the style of mmtests' compare-kernels: per target, case
//! and N, a mean per side, the % difference (B − A) / A, and a significance mark (the
//! module docs of [`mod@super::compare`] say how each quantity is marked).

use serde::Serialize;

use super::stats::{harmonic_mean, mean, t975, variance, welch};
use super::table::Row;

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

    /// mmtests' name of the mean used; `Tmean` for the time per call, the table's fitted
    /// robust centre (a trimmed mean of the calls, the median over the runs where there are
    /// several).
    pub fn mean_name(self) -> &'static str {
        match self {
            Quantity::OpRate => "Hmean",
            Quantity::TimePerCall => "Tmean",
            Quantity::OpTime => "Amean",
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

fn pct(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => Some((b - a) / a * 100.0),
        _ => None,
    }
}

pub(super) fn compare_rows(target: &str, case: &str, ra: &Row, rb: &Row) -> Vec<CompareRow> {
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
/// answer is "cannot tell". Where each side ran the command two or more times at this N (an
/// external sweep), the runs' own times decide instead: Welch's test over them, plus the
/// minimum difference.
pub fn per_call_significance(ra: &Row, rb: &Row) -> Significance {
    let (ya, yb) = (&ra.run_times_ns, &rb.run_times_ns);
    if ya.len() >= 2 && yb.len() >= 2 {
        let (Some(ma), Some(mb)) = (ra.time_per_call_ns, rb.time_per_call_ns) else {
            return Significance::Unknown;
        };
        if ma <= 0.0 || ((mb - ma) / ma * 100.0).abs() < MIN_CALL_DIFF_PCT {
            return Significance::NotSignificant;
        }
        return repeat_significance(ya, yb);
    }
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
pub(super) fn within_run_significance(ra: &Row, rb: &Row) -> Significance {
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
