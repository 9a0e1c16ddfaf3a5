//! The terminal rendering of a report, and `report.txt`: the same text after the warnings,
//! with the incidental findings in full.

use crate::analysis::table::CaseTable;
use crate::analysis::{Analysis, CaseResult};

use super::digest::{Finding, Kind, findings};
use super::fmt::{align, count_of, ns, opt, pct, sig3};
use super::tables::{corrected, metric_text};
use super::{histogram, probecost};

/// Compact terminal rendering: the summary table of the findings the workloads exist for,
/// the discoveries, those findings in full (verdict line, then its root cause: always for
/// growing cases, for the others only when it names a frame), then a small table for each
/// growing one. The incidental target/case pairs are counted (and listed in full by
/// [`report_text`]). Warnings are not included (the CLI prints them on stderr); every table
/// is in `tables/`.
pub fn terminal(a: &Analysis) -> String {
    render_text(a, false)
}

fn findings_text(out: &mut String, groups: &[(Kind, Vec<&Finding>)], indent: &str) {
    for (kind, items) in groups {
        if items.is_empty() {
            continue;
        }
        out.push_str(&format!("{indent}{}:\n", kind.title()));
        for f in items {
            out.push_str(&format!("{indent}  {}\n", f.line));
            if let Some(rc) = &f.root_cause
                && (*kind == Kind::Grows || f.culprit)
            {
                out.push_str(&format!("{indent}    root cause: {rc}\n"));
            }
            for c in &f.cases {
                for l in super::trips::loop_lines(c) {
                    out.push_str(&format!("{indent}    loop: {l}\n"));
                }
            }
        }
    }
}

fn render_text(a: &Analysis, full: bool) -> String {
    let mut out = String::new();
    let summary = super::summary::rows(a, |_| Vec::new());
    if summary.iter().any(|r| r.relevant) {
        out.push_str("Summary:\n");
        out.push_str(&super::summary::text(&summary));
        out.push('\n');
    }
    // The answer first: what grows, found without naming a function.
    for d in a.discoveries() {
        out.push_str(&format!(
            "Discover ({}, {}):\n",
            d.kernel,
            if d.finds_nothing() {
                "nothing grows"
            } else {
                "from whole-process kernel stack samples"
            }
        ));
        out.push_str(&super::discover::text(
            d,
            super::discover::TERMINAL_TOP,
            align,
        ));
        out.push('\n');
    }
    let groups = findings(a);
    let split = |lead: bool| -> Vec<(Kind, Vec<&Finding>)> {
        groups
            .iter()
            .map(|(k, v)| (*k, v.iter().filter(|f| f.leads() == lead).collect()))
            .collect()
    };
    let (lead, incidental) = (split(true), split(false));
    findings_text(&mut out, &lead, "");
    let n_incidental: usize = incidental.iter().map(|(_, v)| v.len()).sum();
    if n_incidental > 0 {
        if full {
            out.push_str(&format!(
                "Incidental ({}: targets traced beside the one each workload exists for, per-call detail of confirmed functions):\n",
                count_of(n_incidental, "finding")
            ));
            findings_text(&mut out, &incidental, "  ");
        } else {
            out.push_str(&format!(
                "Incidental: {}, in report.txt and index.html\n",
                count_of(n_incidental, "more finding")
            ));
        }
    }
    if a.populations().next().is_some() {
        out.push_str("Mixed call populations (the mean per call mixes them):\n");
        for p in a.populations() {
            out.push_str(&format!("  {}\n", population_line(p)));
        }
    }
    out.push_str(&super::trips::terminal(a));
    out.push_str(&probecost::terminal(a, full));
    let shown = if full {
        &groups_all(&lead, &incidental)
    } else {
        &lead
    };
    let growing: Vec<&CaseResult> = shown
        .iter()
        .filter(|(k, _)| *k == Kind::Grows)
        .flat_map(|(_, v)| v.iter().flat_map(|f| f.cases.iter().copied()))
        .collect();
    for c in &growing {
        out.push_str(&per_n_table(&c.table));
    }
    out.push_str(&histogram::smallest_and_largest_n(a, &growing, full));
    // With nothing growing no claim is made here: the summary says which cases are flat, and
    // a discover answer above may have found growth that no timed target's time per call has.
    if a.cases().next().is_some() {
        let tables = "per-N tables (every case, every column): tables/<target>.md";
        out.push_str(&if growing.is_empty() {
            format!("\nThe {tables}\n")
        } else {
            format!("\nAbove: growing cases only; {tables}\n")
        });
    }
    out
}

/// The small per-N table of a growing case: its time per call, percentiles and share of the
/// op at each N.
fn per_n_table(t: &CaseTable) -> String {
    let mut out = format!(
        "\n{} · {} · {} · {}\n",
        t.key(),
        t.kernel,
        super::fmt::via(t.plan.as_ref()).unwrap_or_else(|| "no plan".to_string()),
        metric_text(t)
    );
    let mut head: Vec<String> = [
        "N", "calls/op", "per call", "p50", "p99", "off-CPU", "op", "share",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if corrected(t) {
        head.push("− probe".into());
    }
    let mut rows: Vec<Vec<String>> = vec![head];
    for r in &t.rows {
        let mut row = vec![
            r.n.to_string(),
            opt(r.calls_per_op, |v| format!("{v:.2}")),
            opt(r.time_per_call_ns, ns),
            opt(r.oncpu_p50_ns, ns),
            opt(r.oncpu_p99_ns, ns),
            opt(r.offcpu_mean_ns, ns),
            opt(r.op_ns, ns),
            opt(r.share_of_op, pct),
        ];
        if corrected(t) {
            row.push(opt(r.corrected_time_per_call_ns, ns));
        }
        rows.push(row);
    }
    out.push_str(&align(&rows));
    out
}

/// One line about a table whose calls are two populations.
pub fn population_line(p: &crate::analysis::populations::PopulationSplit) -> String {
    let mut line = format!(
        "{} [{}]: calls per op {} → {} ≈ {} + {}·N: a fixed population and one that grows with N",
        p.target,
        p.case_name,
        sig3(p.calls_per_op.0),
        sig3(p.calls_per_op.1),
        sig3(p.fixed_per_op),
        sig3(p.per_n),
    );
    if !p.separated {
        line.push_str(
            "; their times overlap, so the histogram cannot split them: mark the timed loop \
             (phase markers) or use --discover with --ops",
        );
        return line;
    }
    line.push_str(&format!(
        "; split by the per-call histogram ({} the slower):",
        if p.fixed_slower {
            "the fixed ones"
        } else {
            "the N ones"
        }
    ));
    for pop in &p.populations {
        let (first, last) = (&pop.points[0], &pop.points[pop.points.len() - 1]);
        line.push_str(&format!(
            " {}: {} {} → {} per call;",
            if pop.kind == "fixed" {
                format!("the {} per op", sig3(p.fixed_per_op))
            } else {
                format!("the ≈{}·N per op", sig3(p.per_n))
            },
            pop.scaling
                .as_ref()
                .map_or("unfitted".to_string(), |s| s.classes_label()),
            ns(first.t),
            ns(last.t)
        ));
    }
    line.pop();
    line
}

/// `report.txt`: the terminal rendering after the warnings.
pub fn report_text(a: &Analysis) -> String {
    let mut out = String::new();
    for w in &a.warnings {
        out.push_str(&format!("warning: {}\n", super::warnings::text(w)));
    }
    out.push_str(&render_text(a, true));
    out
}

/// Both parts of the findings, the leading ones first.
fn groups_all<'a, 'b>(
    lead: &[(Kind, Vec<&'a Finding<'b>>)],
    incidental: &[(Kind, Vec<&'a Finding<'b>>)],
) -> Vec<(Kind, Vec<&'a Finding<'b>>)> {
    lead.iter().chain(incidental).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::entries::tests::{discovered, shell};
    use crate::analysis::testdata::analysis_of_discoveries;

    /// The header says "nothing grows" only when nothing does: a kernel loop found where the
    /// per-op ranking named nothing (a loop too light to rank) is a finding.
    #[test]
    fn a_kernel_loop_beneath_the_ranking_is_not_nothing_grows() {
        let header = |d| {
            let t = terminal(&analysis_of_discoveries("6.18", vec![d]));
            t.lines()
                .find(|l| l.starts_with("Discover ("))
                .map(str::to_string)
                .unwrap_or_else(|| panic!("{t}"))
        };
        let mut d = discovered(shell);
        d.ranked.clear();
        assert!(d.nothing_grows() && !d.entries.loops.is_empty());
        assert!(header(d.clone()).ends_with("from whole-process kernel stack samples):"));
        let e = &mut d.entries;
        (e.loops, e.undecided, e.more_calls) = (Vec::new(), Vec::new(), Vec::new());
        assert!(header(d).ends_with("nothing grows):"));
    }
}
