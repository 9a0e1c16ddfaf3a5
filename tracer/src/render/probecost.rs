//! Sentences about the probe's own cost ([`crate::analysis::probecost`]) for the tables, the
//! index, the terminal and `tracer record`'s summary.

use crate::analysis::Analysis;
use crate::analysis::probecost::{ProbeCostCheck, share};
use crate::analysis::table::CaseTable;
use crate::rundata::ProbeCost;

use super::fmt::{ns, pct};

/// What the flag says.
pub const FLAG: &str = "the probe's cost is a third or more of what is measured";

/// The figure of a run's target: `probe 255ns per call` or `probe cost not measured (why)`.
pub fn figure(c: &ProbeCost) -> String {
    match (c.probe_cost_ns, &c.not_measured) {
        (Some(v), _) => format!("probe {} per call", ns(v)),
        (None, Some(why)) => format!("probe cost not measured ({why})"),
        (None, None) => "probe cost not measured".to_string(),
    }
}

/// The fact line of a table: the figure, how it was measured, and the sizes it is flagged at.
pub fn fact(c: &ProbeCostCheck) -> String {
    let Some(v) = c.probe_cost_ns else {
        return format!(
            "not measured ({}): {}",
            c.mechanism,
            c.not_measured.as_deref().unwrap_or("no reason recorded")
        );
    };
    let mut s = format!("{} per call ({}, measured at attach)", ns(v), c.mechanism);
    if c.flagged() {
        s.push_str(&format!("; {FLAG} at N={}", n_list(&c.flagged_n)));
    }
    s
}

fn n_list(ns: &[u64]) -> String {
    ns.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// One line for a flagged table, e.g. `getpid [getpid-syscall]: the probe's cost is a third
/// or more of what is measured: 255ns per call (tracepoint ...) against 102ns → 110ns per
/// call at N=1000, 5000 (up to 250%)`; None when it is not flagged.
pub fn flag_line(t: &CaseTable) -> Option<String> {
    let c = t.probe_cost.as_ref().filter(|c| c.flagged())?;
    let times: Vec<f64> = t
        .rows
        .iter()
        .filter(|r| r.probe_flagged)
        .filter_map(|r| r.time_per_call_ns)
        .collect();
    let (lo, hi) = times
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let range = if times.len() > 1 && lo != hi {
        format!("{} – {}", ns(lo), ns(hi))
    } else {
        ns(lo)
    };
    Some(format!(
        "{}: {FLAG}: {} per call ({}) against {range} per call measured at N={}{}",
        t.key(),
        ns(c.probe_cost_ns?),
        c.mechanism,
        n_list(&c.flagged_n),
        c.max_share
            .map_or(String::new(), |m| format!(" ({})", share_text(m)))
    ))
}

/// The probe's share of a time per call in words: a percentage, or a multiple when the
/// probe's whole cost exceeds the measured time (part of it falls outside the measured span).
fn share_text(m: f64) -> String {
    if m >= 1.0 {
        format!("the probe's cost is up to {m:.1}x the measured time")
    } else {
        format!("up to {} of it", pct(m))
    }
}

/// What the summary table adds to a flagged case's plan.
pub fn summary_mark(t: &CaseTable) -> Option<String> {
    let c = t.probe_cost.as_ref().filter(|c| c.flagged())?;
    Some(format!(
        "probe {} per call, ≥ 1/3 of the time",
        ns(c.probe_cost_ns?)
    ))
}

/// The terminal's paragraph: every distinct figure once, then a line per flagged table (with
/// `full`, every one; otherwise those of cases that exist for their target, and a count of the
/// others). Empty when no run recorded a probe cost.
pub fn terminal(a: &Analysis, full: bool) -> String {
    let mut figures: Vec<String> = Vec::new();
    for r in &a.runs {
        for t in &r.targets {
            if let Some(c) = &t.probe_cost {
                let f = match c.probe_cost_ns {
                    Some(v) => format!("{}: {} per call", c.mechanism, ns(v)),
                    None => format!("{}: {}", c.mechanism, figure(c)),
                };
                if !figures.contains(&f) {
                    figures.push(f);
                }
            }
        }
    }
    if figures.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "Probe's own cost (measured at attach): {}\n",
        figures.join("; ")
    );
    let mut hidden = 0;
    for t in a.cases().map(|c| &c.table) {
        let Some(l) = flag_line(t) else { continue };
        if full || workloads::cases::is_thread_target(&t.case_name, &t.target) {
            out.push_str(&format!("  {l}\n"));
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        out.push_str(&format!(
            "  and {hidden} flagged about targets the workloads do not exist for, in report.txt\n"
        ));
    }
    out
}

/// The index's findings group: one item per flagged table (none when nothing is flagged).
pub(super) fn findings(a: &Analysis) -> Option<(String, Vec<super::page::Item>)> {
    let items: Vec<super::page::Item> = a
        .cases()
        .filter_map(|c| flag_line(&c.table))
        .map(|line| super::page::Item {
            line,
            details: Vec::new(),
        })
        .collect();
    (!items.is_empty()).then(|| ("The probe's own cost".to_string(), items))
}

/// `tracer record`'s note under a target's line: its figure, and the flag when the mean per
/// call is within three times it.
pub fn record_note(c: &ProbeCost, mean_ns: Option<f64>) -> String {
    let mut s = format!("    {}", figure(c));
    if let (Some(v), Some(m)) = (c.probe_cost_ns, mean_ns)
        && let Some((share, true)) = share(m, v)
    {
        s.push_str(&format!(
            " ({}): {FLAG} ({})",
            c.mechanism,
            if share >= 1.0 {
                format!("{share:.1}x the mean")
            } else {
                format!("{} of the mean", pct(share))
            }
        ));
    } else {
        s.push_str(&format!(" ({})", c.mechanism));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::table::{TableOptions, tables};
    use crate::analysis::testdata;

    fn cost(v: Option<f64>) -> ProbeCost {
        ProbeCost {
            mechanism: "kprobe/kretprobe".into(),
            probe_cost_ns: v,
            spread_ns: None,
            method: String::new(),
            not_measured: v.is_none().then(|| "refused on this kernel: EPERM".into()),
        }
    }

    #[test]
    fn flagged_tables_get_the_sentence_and_others_do_not() {
        // waitpid_run's on-CPU time per call is 1000 + 5N ns: 1050 ns at N=10, 1500 at 100,
        // 6000 at 1000; a 600 ns probe is a third or more of the first two only.
        let mut run = testdata::waitpid_run(&[10, 100, 1000], |n| 1000 + 5 * n);
        run.targets[0].probe_cost = Some(cost(Some(600.0)));
        let t = &tables(&run, "r", &TableOptions::default(), None)[0];
        let line = flag_line(t).expect("flagged");
        assert!(line.contains(FLAG), "{line}");
        assert!(line.contains("600ns per call (kprobe/kretprobe)"), "{line}");
        assert!(line.contains("N=10, 100"), "{line}");
        assert!(line.contains("up to 57.1%"), "{line}");
        assert!(fact(t.probe_cost.as_ref().unwrap()).contains("at N=10, 100"));
        assert_eq!(
            summary_mark(t).as_deref(),
            Some("probe 600ns per call, ≥ 1/3 of the time")
        );

        run.targets[0].probe_cost = Some(cost(Some(100.0)));
        let t = &tables(&run, "r", &TableOptions::default(), None)[0];
        assert_eq!(flag_line(t), None);
        assert_eq!(summary_mark(t), None);
        let f = fact(t.probe_cost.as_ref().unwrap());
        assert_eq!(f, "100ns per call (kprobe/kretprobe, measured at attach)");
    }

    #[test]
    fn an_unmeasured_cost_says_why() {
        let c = cost(None);
        assert_eq!(
            figure(&c),
            "probe cost not measured (refused on this kernel: EPERM)"
        );
        let (check, _) =
            crate::analysis::probecost::check(Some(&c), &[(1, Some(5.0))], false).unwrap();
        assert!(fact(&check).contains("refused on this kernel"));
    }

    #[test]
    fn the_record_note_flags_a_short_mean_only() {
        let c = cost(Some(300.0));
        let short = record_note(&c, Some(250.0));
        assert!(
            short.contains(FLAG) && short.contains("1.2x the mean"),
            "{short}"
        );
        let third = record_note(&c, Some(600.0));
        assert!(third.contains("50.0% of the mean"), "{third}");
        let long = record_note(&c, Some(10_000.0));
        assert!(!long.contains(FLAG), "{long}");
        assert!(long.contains("probe 300ns per call"), "{long}");
    }
}
