//! The compare page's summary rows (per target and case the class on each side, each side's
//! growth, slope and root cause in short, links) and its findings (one per class change).

use crate::analysis::compare::{self, Side};
use crate::analysis::fit::{Complexity, classes_label};

use crate::render::{index, rootcause, summary, verdict};

/// Side labels short enough for a table cell: the kernel release up to its first `-`
/// (`5.10.0-32-cloud-amd64` → `5.10.0`), or A and B when that does not tell them apart.
fn short_labels(a: &str, b: &str) -> (String, String) {
    let short = |l: &str| l.split('-').next().unwrap_or(l).to_string();
    let (sa, sb) = (short(a), short(b));
    if sa == sb || sa.is_empty() || sb.is_empty() {
        ("A".into(), "B".into())
    } else {
        (sa, sb)
    }
}

/// The compare page's summary: one row per target and case in both, the class on each side,
/// each side's growth and root cause in short, links to the plot and the cross-kernel
/// differential.
pub(super) fn summary_rows(
    c: &compare::Comparison,
    sections: &[index::Section],
) -> Vec<index::SummaryRow> {
    let labels = short_labels(&c.label_a, &c.label_b);
    let mut rows: Vec<index::SummaryRow> = c
        .classes
        .iter()
        .map(|cl| {
            let mut growth = Vec::new();
            let mut causes = Vec::new();
            let mut slopes = Vec::new();
            let mut plans = Vec::new();
            for (side, label) in [(cl.side_a, &labels.0), (cl.side_b, &labels.1)] {
                if let Some((g, rc, slope, plan)) = side.map(side_cells) {
                    if !g.is_empty() {
                        growth.push(format!("{label}: {g}"));
                    }
                    if let Some(rc) = rc {
                        causes.push(format!("{label}: {rc}"));
                    }
                    slopes.push(slope);
                    plans.push(plan);
                }
            }
            // A discovered loop: each side's growth over the common sizes.
            if cl.discovered.is_some()
                && let (Some(ga), Some(gb)) = (cl.growth.growth_a, cl.growth.growth_b)
            {
                growth.push(format!("{}: ×{}", labels.0, crate::render::fmt::sig3(ga)));
                growth.push(format!("{}: ×{}", labels.1, crate::render::fmt::sig3(gb)));
            }
            // One plan for both sides when they agree.
            plans.dedup();
            let links = row_links(cl, sections, &labels);
            index::SummaryRow {
                target: cl.target.clone(),
                case: cl.case_name.clone(),
                // A decision a loop count made says so here too, not only in the full line.
                class: format!(
                    "{}{}: {} → {}",
                    cl.growth.change.label(),
                    if cl.growth.by_count.is_some() {
                        " by loop count"
                    } else {
                        ""
                    },
                    class_or_unfitted(&cl.classes_a),
                    class_or_unfitted(&cl.classes_b)
                ),
                slope: slopes,
                growth,
                root_cause: causes,
                plan: plans,
                links,
                grows: cl.growth.change.flagged(),
                // A discovered loop is the answer a discover sweep gives.
                relevant: cl.discovered.is_some()
                    || workloads::cases::is_thread_target(&cl.case_name, &cl.target),
            }
        })
        .collect();
    rows.sort_by_key(|r| !r.relevant);
    rows
}

/// One side's cells of a summary row: its growth (none for a discovered loop: the row gives
/// both sides' over the common sizes), root cause (a loop's frame), slope when it grows, and
/// plan.
fn side_cells(side: Side) -> (String, Option<String>, String, String) {
    match side {
        Side::Case(found) => {
            let (t, v) = (&found.table, &found.verdict);
            let growth = v
                .scaling
                .as_ref()
                .map(crate::render::fmt::growth)
                .unwrap_or_default();
            let cause = found
                .root_cause
                .as_ref()
                .map(|rc| summary::cause(&rc.cause));
            let grows = v.class().is_some_and(|c| c != Complexity::Constant);
            let slope = v
                .scaling
                .as_ref()
                .filter(|_| grows)
                .map(crate::render::fmt::slope)
                .unwrap_or_else(|| "-".into());
            (
                growth,
                cause,
                slope,
                crate::render::fmt::via(t.plan.as_ref()).unwrap_or_default(),
            )
        }
        Side::Loop(entry) => (
            String::new(),
            Some(summary::loop_cause(entry)),
            entry
                .top()
                .map_or_else(|| "-".into(), |g| crate::render::fmt::slope(&g.scaling)),
            "sampling and entry counts".into(),
        ),
    }
}

fn class_or_unfitted(set: &[Complexity]) -> String {
    if set.is_empty() {
        "not fitted".to_string()
    } else {
        classes_label(set)
    }
}

/// A summary row's links: its target's tables (a discovered loop, which has no target
/// section: each side's report), plot and differential flamegraph.
fn row_links(
    cl: &compare::ClassChange,
    sections: &[index::Section],
    labels: &(String, String),
) -> Vec<(String, String)> {
    let mut links = match cl.discovered {
        Some(_) => vec![
            (format!("{} report", labels.0), "a/index.html".to_string()),
            (format!("{} report", labels.1), "b/index.html".to_string()),
        ],
        None => vec![(
            "tables".to_string(),
            format!("#{}", index::anchor(&cl.target)),
        )],
    };
    if let Some(sec) = sections.iter().find(|s| s.title == cl.target) {
        if let Some(p) = &sec.plot {
            links.push(("plot".into(), p.clone()));
        }
        let prefix = format!("{} · ", cl.case_name);
        if let Some(g) = sec.groups.iter().find(|g| g.title.starts_with(&prefix)) {
            links.extend(
                g.embed
                    .first()
                    .map(|p| ("differential".to_string(), p.clone())),
            );
        }
    }
    links
}

/// The page's findings: one item per target and case, with each side's verdict and root cause
/// under it; the flagged changes (grew, shrank) first.
pub(super) fn findings(c: &compare::Comparison) -> Vec<(String, Vec<index::Item>)> {
    // A traced case's verdict and root cause (a discovered loop's row line says its own).
    let side_lines = |side: Option<Side>, label: &str| -> Vec<String> {
        let Some(Side::Case(found)) = side else {
            return Vec::new();
        };
        let mut v = vec![format!("{label}: {}", verdict::line(found))];
        if let Some(rc) = &found.root_cause {
            v.push(format!(
                "{label}: root cause: {}",
                rootcause::line(&rc.cause)
            ));
        }
        v
    };
    let (mut changed, mut same) = (Vec::new(), Vec::new());
    for cl in &c.classes {
        let mut details = side_lines(cl.side_a, &c.label_a);
        details.extend(side_lines(cl.side_b, &c.label_b));
        let item = index::Item {
            line: super::tables::class_line(c, cl),
            details,
        };
        if cl.growth.change.flagged() {
            changed.push(item);
        } else {
            same.push(item);
        }
    }
    [
        ("Growth changed".to_string(), changed),
        ("Not changed (same or inconclusive)".to_string(), same),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_sides_get_short_distinct_labels() {
        assert_eq!(
            short_labels("5.10.0-32-cloud-amd64", "6.1.0-50-cloud-amd64"),
            ("5.10.0".to_string(), "6.1.0".to_string())
        );
        assert_eq!(
            short_labels("6.1.0-50-cloud-amd64", "6.1.0-18-cloud-amd64"),
            ("A".to_string(), "B".to_string())
        );
    }
}
