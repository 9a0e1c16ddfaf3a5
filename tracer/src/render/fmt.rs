//! Number and plan formatting and text-column alignment shared by the renderers.

use crate::analysis::fit::{Complexity, FlatReason, MIN_SIZES_FOR_CI, Scaling};
use crate::rundata::PlanUsed;

pub use workloads::numbers::{PercentStyle, percent, sig3};

/// Integer-looking N for text: `4000`, not `4000.0`.
pub fn fmt_n(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Nanoseconds with a unit and three significant digits: `850ns`, `1.23µs`, `45.6ms`, `2.00s`.
pub fn ns(v: f64) -> String {
    workloads::numbers::duration_ns(v, workloads::numbers::DurationStyle::Compact)
}

/// The plan in a few words for one-line summaries, e.g. `syscall-bracket (wait4, waitid)`
/// or `fentry do_wait`; the full attach points are in the tables and the index.
pub fn via(plan: Option<&PlanUsed>) -> Option<String> {
    plan.map(plan_short)
}

/// Attach points named as a reader would: a syscall tracepoint pair by its syscall
/// (`syscalls:sys_enter_wait4` -> `wait4`), other tracepoints by their event, functions as they
/// are. Deduplicated, in order.
pub fn short_points(points: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in points {
        let name = match p.split_once(':') {
            Some((_, event)) => event
                .strip_prefix("sys_enter_")
                .or_else(|| event.strip_prefix("sys_exit_"))
                .unwrap_or(event),
            None => p.as_str(),
        };
        if !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Most attach points a short plan form names before it says `+k more`.
const SHORT_POINTS: usize = 4;

/// `fentry do_wait`, `syscall-bracket (wait4, waitid)`,
/// `callers-kprobe (sysvipc_proc_start, sysvipc_proc_next)`.
pub fn plan_short(p: &PlanUsed) -> String {
    let mut pts = short_points(&p.attach_points);
    if pts.len() > SHORT_POINTS {
        let more = pts.len() - SHORT_POINTS;
        pts.truncate(SHORT_POINTS);
        pts.push(format!("+{more} more"));
    }
    match pts.as_slice() {
        [] => p.plan.clone(),
        [one] => format!("{} {one}", p.plan),
        many => format!("{} ({})", p.plan, many.join(", ")),
    }
}

/// 10^d nanoseconds as an axis label: `1ns`, `10ns`, `100ns`, `1µs`, ... `100s`.
pub fn ns_decade(d: i32) -> String {
    const UNITS: [&str; 4] = ["ns", "µs", "ms", "s"];
    if d < 0 {
        return format!("{}ns", 10f64.powi(d));
    }
    let unit = ((d / 3) as usize).min(UNITS.len() - 1);
    let mantissa = 10u64.pow((d - 3 * unit as i32) as u32);
    format!("{mantissa}{}", UNITS[unit])
}

/// `1 finding`, `3 findings`.
pub fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A share as a percentage: `95.3%`, `0.12%`.
/// Where a count was read in the calls that run its loop ([`crate::analysis::trips::TripPoint::longest`]):
/// "in the 10% of calls with the most".
pub fn longest_calls() -> String {
    format!(
        "in the {:.0}% of calls with the most",
        crate::analysis::trips::LONGEST_SHARE * 100.0
    )
}

pub fn pct(s: f64) -> String {
    percent(s, PercentStyle::Tenths)
}

/// An optional value through `f`, or `n/a`.
pub fn opt<T: Copy>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_string(), f)
}

/// N as an axis label: 1, 10, 100, 1k, 10k, 100k, 1M.
pub fn count_short(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        sig3(x)
    };
    format!("{s}{suffix}")
}

/// Right-align columns of text rows.
pub fn align(rows: &[Vec<String>]) -> String {
    align_cells(rows, true)
}

/// Text columns, left-aligned (names and sentences rather than numbers).
pub fn align_left(rows: &[Vec<String>]) -> String {
    align_cells(rows, false)
}

fn align_cells(rows: &[Vec<String>], right: bool) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                let pad = " ".repeat(widths[c] - s.chars().count());
                if right {
                    format!("{pad}{s}")
                } else {
                    format!("{s}{pad}")
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A count per op: whole numbers from 100 on, three significant digits below (0.00150, not
/// 0.00).
pub fn count(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v > 0.0 && v < 1.0 {
        let decimals = (2.0 - v.log10().floor()).clamp(2.0, 9.0) as usize;
        format!("{v:.decimals$}")
    } else {
        sig3(v)
    }
}

/// `1.20µs → 41.0µs (×34) over N=10..8000`: the first and last fitted points.
pub fn growth(s: &Scaling) -> String {
    let (Some(first), Some(last)) = (s.points.first(), s.points.last()) else {
        return String::new();
    };
    format!(
        "{} → {} (×{:.2}) over N={}..{}",
        ns(first.t),
        ns(last.t),
        last.t / first.t,
        first.n,
        last.n
    )
}

/// The fitted exponent in short, with its 95% interval when it says something: from
/// [`MIN_SIZES_FOR_CI`] sizes on (over three, one degree of freedom, it spans several units
/// of exponent: "1.21 [-2.36, 4.78]").
pub fn slope(s: &Scaling) -> String {
    match s.slope.slope_ci95 {
        Some((lo, hi)) if s.slope.points >= MIN_SIZES_FOR_CI => {
            format!("{:.2} [{lo:.2}, {hi:.2}]", s.slope.slope)
        }
        _ => format!("{:.2}", s.slope.slope),
    }
}

/// The class as the verdict line words it: O(1) that rose but not clearly enough is "O(1)
/// within noise", so a growth column of ×12 beside it does not read as a contradiction.
pub fn class_text(s: Option<&Scaling>, timed: bool) -> String {
    match s {
        Some(s)
            if s.class == Complexity::Constant
                && s.flat_reason.is_some_and(|r| r != FlatReason::NoGrowth) =>
        {
            format!("{} within noise", s.class.label())
        }
        Some(s) => s.classes_label(),
        None if timed => "not fitted".to_string(),
        None => "count only".to_string(),
    }
}

/// A fitted class set and its slope: "O(n), slope 1.02" (a discovered frame's time).
pub fn classes_and_slope(s: &Scaling) -> String {
    format!("{}, slope {}", s.classes_label(), slope(s))
}

/// The classes an exact confirmation leaves: "O(n)", "O(n) or O(n log n)", or "not fitted".
pub fn exact_classes(e: &crate::analysis::exact::ExactVerdict) -> String {
    let c = e.classes();
    if c.is_empty() {
        "not fitted".to_string()
    } else {
        crate::analysis::fit::classes_label(&c)
    }
}

/// Where a class set of several would part: "a size near N=320000 would tell O(n) from
/// O(n log n)" (None for one class, fewer than three sizes or no parting within
/// [`crate::analysis::fit::PARTING_SEARCH`] of the largest N).
pub fn parting(s: &Scaling) -> Option<String> {
    let at = s.parts_at()?;
    Some(format!(
        "a size near N={} would tell {} from {}",
        fmt_n(at as f64),
        s.classes.first()?.label(),
        s.classes.last()?.label()
    ))
}

pub(super) fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

pub(super) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub(super) fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| {
        format!("{x:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    })
}

/// Where a loop count that gives a class missed sizes the time has: " at N=100..1000 only"
/// (empty when it counted them all).
pub fn counted_only(range: Option<(u64, u64)>) -> String {
    range.map_or(String::new(), |(a, b)| {
        format!(" at N={}..{} only", fmt_n(a as f64), fmt_n(b as f64))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(fmt_n(4000.0), "4000");
        assert_eq!(fmt_n(2.5), "2.5");
        assert_eq!(ns(850.0), "850ns");
        assert_eq!(ns(1234.0), "1.23µs");
        assert_eq!(ns(45_600_000.0), "45.6ms");
        assert_eq!(ns(2e9), "2.00s");
        assert_eq!(sig3(0.0), "0");
    }

    #[test]
    fn formats() {
        assert_eq!(ns(850.0), "850ns");
        assert_eq!(ns(1234.0), "1.23µs");
        assert_eq!(ns(45_600_000.0), "45.6ms");
        assert_eq!(ns(2e9), "2.00s");
        assert_eq!(pct(0.953), "95.3%");
        assert_eq!(pct(0.0012), "0.12%");
        assert_eq!(count_short(10_000.0), "10k");
        assert_eq!(count_short(1.0), "1");
        assert_eq!(opt(None::<f64>, ns), "n/a");
        assert_eq!(ns_decade(0), "1ns");
        assert_eq!(ns_decade(4), "10µs");
        assert_eq!(ns_decade(9), "1s");
        assert_eq!(ns_decade(11), "100s");
    }

    #[test]
    fn growth_gives_both_ends_and_their_ratio() {
        let pts: Vec<crate::analysis::fit::Point> =
            [(10.0, 1000.0), (100.0, 5000.0), (1000.0, 41000.0)]
                .iter()
                .map(|&(n, t)| crate::analysis::fit::Point {
                    n,
                    t,
                    rel_se: Some(0.01),
                })
                .collect();
        let s = crate::analysis::fit::fit_scaling(&pts).unwrap();
        assert_eq!(growth(&s), "1.00µs → 41.0µs (×41.00) over N=10..1000");
    }
}
