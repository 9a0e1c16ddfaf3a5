//! The summary table of `index.html`: one short row per target and case (class, growth of the
//! time per call, the root cause's frame, links), in the findings' reading order. The long
//! verdict and root-cause lines stay in the findings and the per-target tables.

use crate::analysis::Analysis;
use crate::analysis::populations::Mix;
use crate::analysis::rootcause::{FrameGrowth, OUTSIDE_FRAME, RootCause, SELF_FRAME};
use crate::analysis::table::CaseTable;

use super::digest::{self, Kind};
use super::fmt::{class_text, growth, pct, slope};
use super::page::{SummaryRow, anchor};
use super::rootcause;

/// A frame path in short: its last frame (`f (self)` for self time; paths start below the
/// frame the stacks were cut at, so a lone `(self)` is the target's own).
fn frame(g: &FrameGrowth, target: &str) -> String {
    match g.path.as_slice() {
        [.., last] if last == OUTSIDE_FRAME => "stacks without the target's frame".to_string(),
        [.., parent, last] if last == SELF_FRAME => format!("{parent} (self)"),
        [last] if last == SELF_FRAME => format!("{target} (self)"),
        [.., last] => last.clone(),
        [] => "?".to_string(),
    }
}

/// The root cause in a few words: the culprit and its part of the added time, the frames that
/// split it, or why there is none.
pub fn cause(rc: &RootCause) -> String {
    if let Some(c) = &rc.culprit {
        return match &c.added {
            // Over 100% when the rest of the call got cheaper meanwhile.
            Some(a) => format!(
                "{}: {} of the added time{}",
                frame(c, &rc.target),
                pct(a.fraction),
                if a.fraction > 1.0 {
                    " (the rest got cheaper)"
                } else {
                    ""
                }
            ),
            None => format!(
                "{}: share {:+.0} points",
                frame(c, &rc.target),
                c.growth * 100.0
            ),
        };
    }
    if !rc.split.is_empty() {
        let names: Vec<String> = rc.split.iter().map(|g| frame(g, &rc.target)).collect();
        return format!("split: {}", names.join(", "));
    }
    if let Some(d) = &rc.dominant {
        return format!("{} holds most of the time", frame(d, &rc.target));
    }
    shortened(&(rootcause::claim(rc) + rootcause::off_cpu_note(rc)))
}

/// A claim without its parenthesised detail (the full line is in the findings), at most 80
/// characters.
fn shortened(claim: &str) -> String {
    let reason = claim.split_once(" (").map_or(claim, |(r, _)| r);
    let short: String = reason.chars().take(80).collect();
    if short.len() < reason.len() {
        format!("{short}…")
    } else {
        short
    }
}

/// A discovery's row. The answer is the top kernel loop (an entry whose time per call grows,
/// named by the frame inside it that carries the growth); without entry counts, the top
/// growing function per op (with the confirmation pass's exact class beside the sampled
/// one); or the whole process's kernel time when nothing grows.
pub(super) fn discovery_row(d: &crate::analysis::discover::Discovery) -> SummaryRow {
    let section = crate::rundata::PROFILE_TARGET.to_string();
    let links = vec![("details".into(), format!("#{}", anchor(&section)))];
    let case = format!("{} · {} (discover)", d.case_name, d.run);
    match d.entries.loops.first() {
        Some(l) => loop_row(d, l, links, case),
        None => profile_row(d, section, links, case),
    }
}

/// The row of a discover run's leading kernel loop `l`: its frame, class (by loop count
/// when counted, the exact timing's beside it), growth per call of its entry, and the frame
/// that carries it.
fn loop_row(
    d: &crate::analysis::discover::Discovery,
    l: &crate::analysis::entries::KernelEntry,
    links: Vec<(String, String)>,
    case: String,
) -> SummaryRow {
    let frame = l.frame().unwrap_or(&l.entry).to_string();
    let exact = d.exact.iter().find(|e| e.function == frame);
    let grower = l.top();
    let top = grower.map(|g| &g.scaling);
    let counted = d.counted.get(&frame);
    let mut class = class_text(top, true);
    if let Some(c) = &counted {
        class = format!("{} by loop count", c.class.label());
    } else if let Some(e) = exact {
        class.push_str(&format!(" (exact: {})", super::fmt::exact_classes(e)));
    }
    SummaryRow {
        links,
        target: frame,
        case,
        class,
        growth: grower
            .map(|g| {
                // A class fitted on the self time: the points are the self time's.
                let own = if g.fitted_on_self { "self time " } else { "" };
                format!("{own}{} per {} call", growth(&g.scaling), l.entry)
            })
            .into_iter()
            .collect(),
        root_cause: vec![loop_cause(l)],
        slope: top.map(slope).into_iter().collect(),
        plan: vec![match exact {
            Some(_) => "sampling and entry counts, then exact timing".into(),
            None => "sampling and entry counts".into(),
        }],
        grows: true,
        relevant: true,
    }
}

/// The root-cause cell of a discovered kernel loop: the frame whose own time carries its
/// entry's added time per call, and how much of it.
pub(super) fn loop_cause(l: &crate::analysis::entries::KernelEntry) -> String {
    match &l.cause {
        Some(c) => format!(
            "{} (self): {} of {}'s added time per call",
            c.function,
            pct(c.self_share.clamp(0.0, 1.0)),
            l.entry
        ),
        None => format!("no single frame carries {}'s growth", l.entry),
    }
}

/// The row of a discover run with no kernel loop named: its top function (or the profile
/// itself), or, when entries were counted and none is a loop, what grows per op instead.
fn profile_row(
    d: &crate::analysis::discover::Discovery,
    section: String,
    links: Vec<(String, String)>,
    case: String,
) -> SummaryRow {
    let top = d.ranked.first();
    let scaling = top.map(|g| &g.scaling).or(d.total.as_ref());
    let exact = top.and_then(|g| d.exact.iter().find(|e| e.function == g.function));
    let mut class = class_text(scaling, true);
    if let Some(e) = exact {
        class.push_str(&format!(" (exact: {})", super::fmt::exact_classes(e)));
    }
    // Entries counted and none of them a loop: what grows per op is said by what carries
    // it (more calls, a longer run), not by a function.
    let no_loop = d.entries.counted && !d.nothing_grows();
    SummaryRow {
        links,
        target: match top {
            Some(_) if no_loop => section,
            Some(g) => g.function.clone(),
            None => section,
        },
        case,
        class: if no_loop {
            let loops = if d.entries.undecided.is_empty() {
                "no kernel loop"
            } else {
                "kernel loop undecided"
            };
            format!("{loops}; per {}: {class}", d.per)
        } else {
            class
        },
        growth: scaling
            .map(|s| format!("{} per {}", growth(s), d.per))
            .into_iter()
            .collect(),
        root_cause: vec![profile_cause(d, no_loop)],
        slope: scaling
            .filter(|_| !d.nothing_grows())
            .map(slope)
            .into_iter()
            .collect(),
        plan: vec![match exact {
            Some(_) => "sampling, then exact timing".into(),
            None => "sampling".into(),
        }],
        // More calls or a longer run grow the workload's kernel time, but no kernel loop does.
        grows: !d.nothing_grows() && !no_loop,
        relevant: true,
    }
}

/// The root-cause cell of [`profile_row`].
fn profile_cause(d: &crate::analysis::discover::Discovery, no_loop: bool) -> String {
    match &d.cause {
        _ if no_loop => {
            let why = match &d.entries.growth {
                Some(g) => super::runlength::summary_cause(d, g),
                None => "no loop".into(),
            };
            match d.entries.first_undecided() {
                Some((e, g)) => format!(
                    "{why}; undecided: {} in {} ({})",
                    g.function,
                    e.entry,
                    super::entries::undecided_why(g)
                ),
                None => why,
            }
        }
        Some(c) => format!(
            "{} (self): {} of the added kernel time",
            c.function,
            pct(c.self_share.clamp(0.0, 1.0))
        ),
        None if d.nothing_grows() => "no kernel function grows".into(),
        None => "no single function carries most of it".into(),
    }
}

/// The headline population's calls per op: "100" or "≈1.00·N".
pub fn mix_calls(m: Option<&Mix>) -> String {
    match m.map(Mix::calls) {
        Some((n, true)) => format!("≈{}·N", super::fmt::sig3(n)),
        Some((c, false)) => super::fmt::sig3(c),
        None => String::new(),
    }
}

/// The rows of a report: discoveries first, then the findings' groups (growing, flat, not
/// fitted). `links(table)` gives each row's links beyond its section.
pub fn rows(a: &Analysis, links: impl Fn(&CaseTable) -> Vec<(String, String)>) -> Vec<SummaryRow> {
    let mut out = Vec::new();
    for d in a.discoveries() {
        out.push(discovery_row(d));
    }
    for (kind, findings) in digest::findings(a) {
        for f in findings {
            let Some(first) = f.cases.first() else {
                continue;
            };
            let (t, v) = (&first.table, &first.verdict);
            let cases: Vec<&str> = f.cases.iter().map(|c| c.table.case_name.as_str()).collect();
            let mut case = cases.join(", ");
            // A sweep's runs are its workloads: named unless the case already says it.
            if a.is_sweep && case != t.run {
                case.push_str(&format!(" · {}", t.run));
            }
            let root_cause = match &first.root_cause {
                Some(rc) => Some(cause(&rc.cause)),
                None if kind == Kind::Grows => Some("no stacks sampled".into()),
                None => None,
            };
            let grows = kind == Kind::Grows;
            out.push(SummaryRow {
                target: t.target.clone(),
                case,
                class: match (v.count_overrides_time(), &v.mix) {
                    (Some(l), _) => format!("{} by loop count", l.class.label()),
                    (None, Some(Mix::Population { .. })) => format!(
                        "{} ({} calls per op)",
                        class_text(v.headline(), t.timed),
                        mix_calls(v.mix.as_ref())
                    ),
                    (None, Some(Mix::Unsplit { .. })) if v.headline().is_none() => {
                        "no class: mixed calls".to_string()
                    }
                    (None, _) => class_text(v.headline(), t.timed),
                },
                slope: v
                    .headline()
                    .filter(|_| grows)
                    .map(slope)
                    .into_iter()
                    .collect(),
                growth: v.headline().map(growth).into_iter().collect(),
                root_cause: root_cause.into_iter().collect(),
                plan: super::fmt::via(t.plan.as_ref())
                    .map(|p| match super::probecost::summary_mark(t) {
                        Some(m) => format!("{p}; {m}"),
                        None => p,
                    })
                    .into_iter()
                    .collect(),
                links: links(t),
                grows,
                relevant: f.leads(),
            });
        }
    }
    // What the workloads exist for first; the order within each part is the findings'.
    out.sort_by_key(|r| !r.relevant);
    out
}

/// The summary table as plain text, for the terminal and `summary.txt`: the findings the
/// workloads exist for, one aligned row each (a compare row's sides joined by `|`), then
/// one line counting the incidental target/case pairs.
pub fn text(rows: &[SummaryRow]) -> String {
    let (lead, incidental): (Vec<&SummaryRow>, Vec<&SummaryRow>) =
        rows.iter().partition(|r| r.relevant);
    let mut out = String::new();
    if !lead.is_empty() {
        let mut cells: Vec<Vec<String>> = vec![
            [
                "target",
                "case",
                "class",
                "slope",
                "growth of the time per call",
                "root cause",
                "plan",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for r in &lead {
            cells.push(vec![
                r.target.clone(),
                r.case.clone(),
                r.class.clone(),
                r.slope.join(" | "),
                r.growth.join(" | "),
                r.root_cause.join(" | "),
                r.plan.join(" | "),
            ]);
        }
        out.push_str(&super::fmt::align_left(&cells));
    }
    if !incidental.is_empty() {
        let growing = incidental.iter().filter(|r| r.grows).count();
        out.push_str(&format!(
            "(+{}, {growing} growing: report.txt, index.html)\n",
            super::fmt::count_of(incidental.len(), "incidental finding")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slope_interval_is_shown_from_four_sizes_on() {
        use crate::analysis::fit::{Point, fit_scaling};
        let at = |ns: &[f64]| {
            let pts: Vec<Point> = ns
                .iter()
                .enumerate()
                .map(|(i, &n)| Point {
                    n,
                    t: 1000.0 + 50.0 * n * (1.0 + 0.03 * (i % 2) as f64),
                    rel_se: Some(0.02),
                })
                .collect();
            slope(&fit_scaling(&pts).unwrap())
        };
        let three = at(&[1.0, 1000.0, 2000.0, 4000.0]);
        assert!(!three.contains('['), "{three}");
        let four = at(&[1.0, 500.0, 1000.0, 2000.0, 4000.0]);
        assert!(four.contains(" ["), "{four}");
    }

    fn fg(path: &[&str], fraction: Option<f64>) -> FrameGrowth {
        FrameGrowth {
            path: path.iter().map(|s| s.to_string()).collect(),
            shares: vec![(10, 0.1), (1000, 0.9)],
            per_decade: 0.4,
            growth: 0.8,
            growth_se: None,
            added: fraction.map(|f| crate::analysis::rootcause::AddedTime {
                from_ns: 10.0,
                to_ns: 1000.0,
                ns: 990.0,
                se_ns: 5.0,
                fraction: f,
                fraction_se: 0.01,
            }),
        }
    }

    #[test]
    fn a_cause_over_all_the_added_time_says_the_rest_got_cheaper() {
        let rc = |fraction: f64| RootCause {
            target: "do_wait".into(),
            case_name: "waitpid-any".into(),
            stand_in: None,
            whole_stack: false,
            samples: Vec::new(),
            sizes_used: Vec::new(),
            pass_through: Vec::new(),
            culprit: Some(fg(&["walk"], Some(fraction))),
            culprit_by_time: false,
            target_ns: None,
            split: Vec::new(),
            also: Vec::new(),
            dominant: None,
            culprit_times: Vec::new(),
            slope: None,
            description: None,
            ranking: Vec::new(),
            off_cpu: false,
        };
        assert_eq!(
            cause(&rc(1.149)),
            "walk: 114.9% of the added time (the rest got cheaper)"
        );
        assert_eq!(cause(&rc(0.85)), "walk: 85.0% of the added time");
    }

    fn scaling(ts: &[f64]) -> crate::analysis::fit::Scaling {
        let points: Vec<crate::analysis::fit::Point> = [1.0, 100.0, 1000.0]
            .iter()
            .zip(ts)
            .map(|(&n, &t)| crate::analysis::fit::Point {
                n,
                t,
                rel_se: Some(0.05),
            })
            .collect();
        crate::analysis::fit::fit_scaling(&points).unwrap()
    }

    #[test]
    fn a_flat_class_that_rose_says_within_noise() {
        // Above the baseline at the largest N only: O(1), but not "no growth".
        assert_eq!(
            class_text(Some(&scaling(&[8700.0, 9560.0, 13100.0])), true),
            "O(1) within noise"
        );
        assert_eq!(
            class_text(Some(&scaling(&[8700.0, 8650.0, 8720.0])), true),
            "O(1)"
        );
        assert_eq!(
            class_text(Some(&scaling(&[1000.0, 100_000.0, 1_000_000.0])), true),
            "O(n)"
        );
        assert_eq!(class_text(None, false), "count only");
    }

    #[test]
    fn frames_are_named_by_their_last_element() {
        assert_eq!(
            frame(&fg(&["do_wait", OUTSIDE_FRAME], None), "do_wait"),
            "stacks without the target's frame"
        );
        assert_eq!(frame(&fg(&["a", "b"], None), "t"), "b");
        assert_eq!(frame(&fg(&["a", SELF_FRAME], None), "t"), "a (self)");
        // The target's own time.
        assert_eq!(
            frame(&fg(&[SELF_FRAME], None), "sysvipc_find_ipc"),
            "sysvipc_find_ipc (self)"
        );
    }

    fn analysis_of(discoveries: Vec<crate::analysis::discover::Discovery>) -> Analysis {
        crate::analysis::testdata::analysis_of_discoveries("6.18", discoveries)
    }

    #[test]
    fn a_discovery_is_a_row_naming_its_function() {
        let d = crate::render::discover::tests::discovery(true);
        let got = rows(&analysis_of(vec![d]), |_| unreachable!("no tables"));
        assert_eq!(got.len(), 1);
        let r = &got[0];
        // The row names the answer: the top growing function, with its per-op growth.
        assert_eq!(r.target, "wait_consider_task");
        assert_eq!(r.case, "command · bench (discover)");
        assert!(r.grows);
        assert!(
            r.growth[0].ends_with("over N=10..3000 per run"),
            "{:?}",
            r.growth
        );
        assert_eq!(r.plan, ["sampling"], "no confirmation pass in the fixture");
        assert!(
            r.root_cause[0].starts_with("wait_consider_task (self): "),
            "{:?}",
            r.root_cause
        );
        let flat = crate::render::discover::tests::discovery(false);
        let got = rows(&analysis_of(vec![flat]), |_| unreachable!("no tables"));
        assert!(!got[0].grows);
        assert_eq!(got[0].target, crate::rundata::PROFILE_TARGET);
        assert_eq!(got[0].root_cause, ["no kernel function grows"]);
    }

    #[test]
    fn long_reasons_are_cut_before_their_detail() {
        assert_eq!(shortened("no frame grows (N=1..3)"), "no frame grows");
        let long = "y".repeat(200);
        let r = shortened(&long);
        assert!(r.ends_with('…') && r.chars().count() == 81, "{r}");
    }
}
