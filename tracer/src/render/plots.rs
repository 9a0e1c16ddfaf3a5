//! The scaling plots of a report: per target one log-log plot of its cases, per discovery one
//! of its top functions; the series are also what a comparison plots for each side.

use crate::analysis::discover::Grower;
use crate::analysis::exact::CountedLoop;
use crate::analysis::fit::classes_label;
use crate::analysis::populations::Mix;
use crate::analysis::table::Metric;
use crate::analysis::{Analysis, CaseResult};

use super::out::{self, OutDir};
use super::{ReportError, discover, svgplot};

/// Series label of a case in a plot of `cases`: the case, plus the run when a case repeats.
fn series_label(cases: &[&CaseResult], c: &CaseResult) -> String {
    let t = &c.table;
    let dup = cases
        .iter()
        .filter(|o| o.table.case_name == t.case_name)
        .count()
        > 1;
    if dup {
        format!("{} · {}", t.case_name, t.run)
    } else {
        t.case_name.clone()
    }
}

/// One series per table: its time per call against N and its fitted model, labelled with the
/// case, its class and `suffix` (a comparison's side).
pub(super) fn plot_series(
    cases: &[&CaseResult],
    suffix: Option<&str>,
    style: usize,
) -> Vec<svgplot::Series> {
    cases
        .iter()
        .map(|c| {
            let (t, v) = (&c.table, &c.verdict);
            let mut label = series_label(cases, c);
            // The dotted curve is the time's fit: say so when the class is the count's.
            match (v.count_overrides_time(), v.time_class()) {
                (Some(l), Some(t)) => label.push_str(&format!(
                    " · {} by count (dotted: {})",
                    l.class.label(),
                    t.label()
                )),
                _ => {
                    let set = v.classes();
                    if !set.is_empty() {
                        label.push_str(&format!(" · {}", classes_label(&set)));
                    }
                }
            }
            // A mixed table is drawn as its headline population: the mean of the mix is
            // what the verdict does not rest on.
            let points = match &v.mix {
                Some(Mix::Population { scaling, .. }) => {
                    label.push_str(&format!(
                        " (its {} calls per op)",
                        super::summary::mix_calls(v.mix.as_ref())
                    ));
                    scaling.points.iter().map(|p| (p.n, p.t)).collect()
                }
                _ => t.points().iter().map(|p| (p.n, p.t)).collect(),
            };
            if let Some(s) = suffix {
                label = format!("{label} · {s}");
            }
            svgplot::Series {
                label,
                points,
                model: v.headline().map(|s| s.model.clone()),
                style,
            }
        })
        .collect()
}

/// The plot's y axis: the metric of the target's tables.
pub(super) fn y_label(cases: &[&CaseResult]) -> &'static str {
    cases
        .first()
        .map_or(Metric::OncpuMean.label(), |c| c.table.metric.label())
}

/// `plots/<target>.svg`: the target's cases against N; its path, when there is anything to plot.
pub(super) fn write_target(
    target: &str,
    cases: &[&CaseResult],
    out: &mut OutDir,
) -> Result<Option<String>, ReportError> {
    let title = format!("{target}: {} vs N", y_label(cases));
    let Some(svg) = svgplot::loglog_svg(&title, y_label(cases), &plot_series(cases, None, 0))
    else {
        return Ok(None);
    };
    let rel = format!("plots/{}.svg", out::safe(target));
    out.write(&rel, svg.as_bytes())?;
    Ok(Some(rel))
}

/// A grower's series: the time its class was fitted on against N, with its model; labelled
/// by the function (marked self when that is the time), `inside` (its entry) and its class:
/// the count's where a confirmation pass counted its loop (`counted`), as the answer says.
fn grower_series(
    g: &Grower,
    inside: Option<&str>,
    counted: Option<&CountedLoop>,
) -> svgplot::Series {
    let class = match counted {
        Some(c) => format!(
            "{} by loop count (time: {})",
            c.class.label(),
            g.scaling.classes_label()
        ),
        None => g.scaling.classes_label(),
    };
    svgplot::Series {
        label: format!(
            "{}{}{} · {class}",
            g.function,
            if g.fitted_on_self { " (self)" } else { "" },
            inside.map_or(String::new(), |e| format!(" in {e}")),
        ),
        points: g
            .points
            .iter()
            .map(|p| (p.n as f64, g.fitted_ns(p)))
            .collect(),
        model: Some(g.scaling.model.clone()),
        style: 0,
    }
}

/// `plots/discover-<i>-<case>.svg`: the kernel loops of each discovery (each one's top frame,
/// time per call of its entry) against N, or, without entry counts, the top functions' time
/// per op; the paths written.
pub(super) fn write_discoveries(
    a: &Analysis,
    out: &mut OutDir,
) -> Result<Vec<String>, ReportError> {
    let mut written = Vec::new();
    for (i, d) in a.discoveries().enumerate() {
        let (series, title, y): (Vec<svgplot::Series>, String, String) =
            if d.entries.loops.is_empty() {
                (
                    d.ranked
                        .iter()
                        .take(discover::TERMINAL_TOP)
                        .map(|g| grower_series(g, None, d.counted.get(&g.function)))
                        .collect(),
                    format!(
                        "{} [{}]: kernel functions whose time grows (ns per {})",
                        d.run, d.case_name, d.per
                    ),
                    format!("ns per {}", d.per),
                )
            } else {
                (
                    d.entries
                        .loops
                        .iter()
                        .filter_map(|l| {
                            let g = l.top()?;
                            Some(grower_series(g, Some(&l.entry), d.counted.get(&g.function)))
                        })
                        .take(discover::TERMINAL_TOP)
                        .collect(),
                    format!(
                        "{} [{}]: kernel loops (ns per call of their syscall or fault)",
                        d.run, d.case_name
                    ),
                    "ns per call".to_string(),
                )
            };
        if let Some(svg) = svgplot::loglog_svg(&title, &y, &series) {
            let rel = format!("plots/discover-{i}-{}.svg", out::safe(&d.case_name));
            out.write(&rel, svg.as_bytes())?;
            written.push(rel);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::entries::tests::{discovered, shell};
    use crate::analysis::fit::Complexity;

    /// A loop the confirmation pass counted is labelled with the count's class, as the answer
    /// states it, its time's set beside it; one it did not, with its time's set alone.
    #[test]
    fn a_counted_loop_is_labelled_by_its_count() {
        let d = discovered(shell);
        let g = d.entries.loops[0].top().expect("a loop frame");
        let plain = grower_series(g, Some("wait4"), None);
        assert_eq!(
            plain.label,
            format!(
                "wait_consider_task in wait4 · {}",
                g.scaling.classes_label()
            )
        );
        let c = CountedLoop {
            class: Complexity::Linear,
            inner: "wait_consider_task".into(),
            outer: "do_wait".into(),
            from: (10, 11.0),
            to: (1000, 1001.0),
            longest: false,
        };
        let counted = grower_series(g, Some("wait4"), Some(&c));
        assert_eq!(
            counted.label,
            format!(
                "wait_consider_task in wait4 · O(n) by loop count (time: {})",
                g.scaling.classes_label()
            )
        );
    }
}
