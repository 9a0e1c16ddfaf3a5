//! Sentences about loop trip counts ([`crate::analysis::trips`]) for the terminal,
//! report.txt and the index.

use crate::analysis::fit::FlatReason;
use crate::analysis::trips::TripCount;
use crate::analysis::{Analysis, CaseResult};
use crate::rundata::RunRole;

use super::fmt::{fmt_n, sig3};
use super::verdict::flat_reason;

/// The paragraph's title.
pub const TITLE: &str = "Loop trip counts (calls of one target per call of another it ran inside, counted in the kernel)";

/// One series in one line:
///
/// - `idr_find in sysvipc_find_ipc [command]: 50.5 -> 400 calls per call over N=100..800:
///   O(n), slope 1.00`
/// - `idr_get_next in sysvipc_find_ipc [command]: 1 -> 1 calls per call over N=100..800: O(1)`
/// - `wait_consider_task in do_wait [unphased]: 12.5 calls per call` (one size)
pub fn line(t: &TripCount, with_run: bool) -> String {
    let head = if with_run {
        format!("{}: {} in {} [{}]", t.run, t.inner, t.outer, t.case_name)
    } else {
        format!("{} in {} [{}]", t.inner, t.outer, t.case_name)
    };
    let (first, last) = t.range();
    let Some(s) = &t.scaling else {
        return format!("{head}: {} calls per call", sig3(last));
    };
    let (n0, n1) = (s.points[0].n, s.points[s.points.len() - 1].n);
    let class = count_class(s);
    format!(
        "{head}: {} -> {} calls per call over N={}..{}: {class}{}",
        sig3(first),
        sig3(last),
        fmt_n(n0),
        fmt_n(n1),
        longest(t).unwrap_or_default()
    )
}

/// Where the calls mix those that run the loop with others (the longest tenth make more
/// than a fifth over the mean at the largest N), the count in the calls that run it:
/// "; in the 10% of calls with the most: 11 -> 503, O(n), slope 1.00".
fn longest(t: &TripCount) -> Option<String> {
    let s = t.longest_scaling.as_ref()?;
    let (p0, p1) = (t.points.first()?, t.points.last()?);
    let (a, b) = (p0.longest?, p1.longest?);
    (b > 1.2 * p1.per_call).then(|| {
        format!(
            "; {}: {} -> {}, {}",
            super::fmt::longest_calls(),
            sig3(a),
            sig3(b),
            count_class(s)
        )
    })
}

/// A count's class as its fit reads it, with why where it reads flat: "O(n), slope 1.00",
/// "O(1)", "O(1) (above the baseline at N=10000 only)". A count that rose twelvefold at the
/// largest size alone is said to, not called O(1) bare.
fn count_class(s: &crate::analysis::fit::Scaling) -> String {
    match s.flat_reason {
        None => growing_count(s),
        Some(FlatReason::NoGrowth) => "O(1)".to_string(),
        Some(r @ FlatReason::Falls) => format!("no rising trend ({})", flat_reason(r, s)),
        Some(r) => format!("O(1) ({})", flat_reason(r, s)),
    }
}

/// A growing count's class and slope, "O(n), slope 1.00"; at two sizes, which fit every
/// growing shape, no class (and it gives no verdict one).
fn growing_count(s: &crate::analysis::fit::Scaling) -> String {
    match s.points.len() {
        2 => format!(
            "grows, slope {:.2} (two sizes only: no class)",
            s.loglog.slope
        ),
        _ => format!("{}, slope {:.2}", s.class.label(), s.loglog.slope),
    }
}

/// Under a table's verdict: the loops inside its target whose trips grow with N, e.g.
/// `wait_consider_task runs 124 -> 1001 times per call over N=100..1000: O(n), slope 0.90
/// (counted in the kernel)`, and the count in the calls with the most where they mix.
pub fn loop_lines(c: &CaseResult) -> Vec<String> {
    c.trips
        .iter()
        .filter_map(|x| {
            let s = x.scaling.as_ref().filter(|s| s.flat_reason.is_none())?;
            let (first, last) = x.range();
            Some(format!(
                "{} runs {} -> {} times per call over N={}..{}: {} (counted in the kernel){}",
                x.inner,
                sig3(first),
                sig3(last),
                fmt_n(s.points[0].n),
                fmt_n(s.points[s.points.len() - 1].n),
                growing_count(s),
                longest(x).unwrap_or_default(),
            ))
        })
        .collect()
}

fn several_runs(a: &Analysis) -> bool {
    a.runs.len() > 1
}

/// The series not already stated under a discovery (its `counted:` lines), and of a
/// loop-count pass only those that joined a timed case (the pass traces every counted target
/// during every workload it runs: do_wait's trips while `spawn` reaps its children are no
/// finding).
fn unshown(a: &Analysis) -> Vec<&TripCount> {
    let mut out: Vec<&TripCount> = a
        .runs
        .iter()
        .flat_map(|r| {
            let no_case = (r.role() != RunRole::LoopCount).then_some(&r.trips);
            r.cases
                .iter()
                .flat_map(|c| &c.trips)
                .chain(no_case.into_iter().flatten())
        })
        .filter(|t| !a.discoveries().any(|d| d.trips.contains(t)))
        .collect();
    a.sort_trips(&mut out);
    out
}

/// The terminal's paragraph; empty when no run had nested targets.
pub fn terminal(a: &Analysis) -> String {
    let lines: Vec<String> = unshown(a)
        .into_iter()
        .map(|t| line(t, several_runs(a)))
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!("{TITLE}:\n");
    for l in lines {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

/// The index's findings group (none when no run had nested targets).
pub(super) fn findings(a: &Analysis) -> Option<(String, Vec<super::page::Item>)> {
    let items: Vec<super::page::Item> = unshown(a)
        .into_iter()
        .map(|t| super::page::Item {
            line: line(t, several_runs(a)),
            details: Vec::new(),
        })
        .collect();
    (!items.is_empty()).then(|| (TITLE.to_string(), items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::trips::trip_counts;
    use crate::rundata::SpanRow;
    use tracer_ebpf::hist_bucket;

    /// 300 waits walk the N + 1 children among N reaps of one: the line gives the mean over
    /// all calls and the count in the calls with the most; without the per-call histogram,
    /// the mean alone.
    /// A span row of the command's case with no trips or calls inside it yet.
    fn row(target: &str, n: u64, calls: u64) -> SpanRow {
        SpanRow {
            target: target.into(),
            case: workloads::cases::CASE_COMMAND,
            case_name: "command".into(),
            n,
            calls,
            untimed: 0,
            wall: Default::default(),
            oncpu: Default::default(),
            within: Default::default(),
            trips: Vec::new(),
        }
    }

    #[test]
    fn a_mixed_count_says_the_calls_that_run_the_loop() {
        let mut spans = Vec::new();
        for n in [10u64, 100, 500] {
            let mut outer = row("do_wait", n, 300 + n);
            outer.trips = vec![(hist_bucket(1), n), (hist_bucket(n + 1), 300)];
            outer.trips.sort();
            let mut inner = row("wait_consider_task", n, 300 * (n + 1) + n);
            inner.within.insert("do_wait".into(), inner.calls);
            spans.extend([outer, inner]);
        }
        let t = &trip_counts("confirm", &spans)[0];
        let l = line(t, false);
        assert!(
            l.starts_with("wait_consider_task in do_wait [command]: 10.7 -> 188 calls per call"),
            "{l}"
        );
        assert!(
            l.ends_with("; in the 10% of calls with the most: 11.0 -> 504, O(n), slope 0.98"),
            "{l}"
        );
        for r in &mut spans {
            r.trips.clear();
        }
        let l = line(&trip_counts("confirm", &spans)[0], false);
        assert!(!l.contains("with the most"), "{l}");
    }

    /// A count in the calls with the most that rises at the largest size only (a fork's page
    /// zeroing, 1.57 -> 18.3 per call in a 5.10 guest) says so, as the mean's does.
    #[test]
    fn a_count_that_rises_at_the_largest_size_only_says_so() {
        let mut spans = Vec::new();
        for (n, k) in [(100u64, 2u64), (1000, 2), (10_000, 18)] {
            let mut outer = row("kernel_init_free_pages", n, 300);
            outer.trips = vec![(hist_bucket(1), 270), (hist_bucket(k), 30)];
            outer.trips.sort();
            let mut inner = row("clear_page_erms", n, 270 + 30 * k);
            inner.within.insert(outer.target.clone(), inner.calls);
            spans.extend([outer, inner]);
        }
        let l = line(&trip_counts("confirm", &spans)[0], false);
        assert!(
            l.ends_with(
                "; in the 10% of calls with the most: 2.00 -> 18.0, O(1) (above the baseline \
                 at N=10000 only)"
            ),
            "{l}"
        );
    }
}
