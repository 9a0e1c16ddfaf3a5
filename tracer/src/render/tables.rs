//! Tables as Markdown, CSV, JSON and compact terminal text.

use serde::Serialize;

use crate::analysis::compare::{Comparison, Quantity};
use crate::analysis::frameshift::FrameShift;
use crate::analysis::table::{CaseTable, Metric, PercentileSource, Row};
use crate::analysis::{Analysis, CaseRootCause, Verdict};

use super::digest::{Finding, Kind, findings};
use super::fmt::{PercentStyle, count_of, ns, opt, pct, percent, sig3};
use super::probecost;
use super::rootcause::{self, root_cause_of};

const MD_HEADER: [&str; 15] = [
    "N",
    "calls",
    "calls/op",
    "on-CPU mean",
    "p50",
    "p90",
    "p99",
    "max",
    "off-CPU mean",
    "wall mean",
    "total",
    "op time",
    "repeat spread",
    "share of op",
    "probe share",
];

/// The column of corrected times, present when `--subtract-probe-cost` gave any.
const CORRECTED: &str = "per call − probe";

fn corrected(t: &CaseTable) -> bool {
    t.rows
        .iter()
        .any(|r| r.corrected_time_per_call_ns.is_some())
}

fn header(t: &CaseTable) -> Vec<&'static str> {
    let mut h = MD_HEADER.to_vec();
    if corrected(t) {
        h.push(CORRECTED);
    }
    h
}

fn cells(t: &CaseTable, r: &Row) -> Vec<String> {
    let mut c = vec![
        r.n.to_string(),
        r.calls.to_string(),
        opt(r.calls_per_op, |v| format!("{v:.2}")),
        opt(r.oncpu_mean_ns, ns),
        opt(r.oncpu_p50_ns, ns),
        opt(r.oncpu_p90_ns, ns),
        opt(r.oncpu_p99_ns, ns),
        opt(r.oncpu_max_ns, ns),
        opt(r.offcpu_mean_ns, ns),
        opt(r.wall_mean_ns, ns),
        opt(r.total_ns, |v| ns(v as f64)),
        opt(r.op_ns, ns),
        opt(r.repeat_rel_sd, |v| format!("±{}", pct(v))),
        opt(r.share_of_op, pct),
        // A flagged size is marked: the probe is a third or more of its time per call.
        opt(r.probe_share, |v| {
            format!("{}{}", pct(v), if r.probe_flagged { " (!)" } else { "" })
        }),
    ];
    if corrected(t) {
        c.push(opt(r.corrected_time_per_call_ns, ns));
    }
    c
}

fn plan_line(t: &CaseTable) -> String {
    match &t.plan {
        Some(p) => format!(
            "plan `{}` ({}: {}){}{}",
            p.plan,
            p.mechanism,
            p.attach_points.join(", "),
            if p.timed { "" } else { ", count only" },
            if p.note.is_empty() {
                String::new()
            } else {
                format!(": {}", p.note)
            }
        ),
        None => "no plan".to_string(),
    }
}

fn metric_text(t: &CaseTable) -> &'static str {
    if t.timed {
        t.metric.label()
    } else {
        "count only (no durations)"
    }
}

/// Where the table's percentiles come from, when it has any.
fn percentile_text(t: &CaseTable) -> Option<String> {
    let from: Vec<PercentileSource> = t.rows.iter().filter_map(|r| r.percentiles_from).collect();
    let exact = from
        .iter()
        .filter(|p| **p == PercentileSource::RawSpans)
        .count();
    match (exact, from.len()) {
        (_, 0) => None,
        (0, _) => Some("estimated from the in-kernel histograms (within 1/16 of the value)".into()),
        (e, n) if e == n => Some("exact, from every call's span in events.csv".into()),
        (e, n) => Some(format!(
            "exact from events.csv in {e} of {n} rows; the others lost spans and are estimated from the in-kernel histograms"
        )),
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// One Markdown document for a target: a section per (run, case) with its verdict, root cause
/// and table.
pub fn markdown(target: &str, a: &Analysis, idx: &[usize]) -> String {
    let mut out = format!("# {target}\n\n");
    for &i in idx {
        let (t, v) = (&a.tables[i], &a.verdicts[i]);
        out.push_str(&format!(
            "## {} · {} · kernel {}\n\n",
            t.case_name, t.run, t.kernel
        ));
        out.push_str(&format!("- {}\n", md_escape(&plan_line(t))));
        out.push_str(&format!("- fitted: {}\n", metric_text(t)));
        if let Some(p) = percentile_text(t) {
            out.push_str(&format!("- percentiles: {p}\n"));
        }
        if let Some(c) = &t.probe_cost {
            out.push_str(&format!(
                "- probe cost: {}\n",
                md_escape(&probecost::fact(c))
            ));
        }
        out.push_str(&format!("- verdict: `{}`\n", v.line));
        if let Some(rc) = root_cause_of(a, t) {
            out.push_str(&format!(
                "- root cause ({} stacks): `{}`\n",
                rc.kind.as_str(),
                rootcause::line(&rc.cause)
            ));
        }
        out.push('\n');
        let h = header(t);
        out.push_str(&format!("| {} |\n", h.join(" | ")));
        out.push_str(&format!("|{}\n", " ---: |".repeat(h.len())));
        for r in &t.rows {
            out.push_str(&format!("| {} |\n", cells(t, r).join(" | ")));
        }
        out.push('\n');
    }
    out
}

/// The per-N tables of a target as an HTML fragment for the index: per (run, case) a heading,
/// its plan, verdict and root cause as wrapped text, and the table. Cells are escaped here.
pub fn html(a: &Analysis, idx: &[usize]) -> String {
    use super::xml::escape;
    let mut out = String::new();
    for &i in idx {
        let (t, v) = (&a.tables[i], &a.verdicts[i]);
        out.push_str(&format!(
            "<h4>{} · {} · kernel {}</h4>\n<ul class=\"facts\">\n",
            escape(&t.case_name),
            escape(&t.run),
            escape(&t.kernel)
        ));
        let mut fact = |k: &str, v: &str| {
            out.push_str(&format!("<li><b>{k}</b> {}</li>\n", escape(v)));
        };
        let plan = plan_line(t).replace('`', "");
        fact("plan", plan.strip_prefix("plan ").unwrap_or(&plan));
        fact("fitted", metric_text(t));
        if let Some(p) = percentile_text(t) {
            fact("percentiles", &p);
        }
        if let Some(c) = &t.probe_cost {
            fact("probe cost", &probecost::fact(c));
        }
        fact("verdict", &v.line);
        if let Some(rc) = root_cause_of(a, t) {
            fact(
                &format!("root cause ({} stacks)", rc.kind.as_str()),
                &rootcause::line(&rc.cause),
            );
        }
        out.push_str("</ul>\n<div class=\"scroll\"><table class=\"num\">\n<tr>");
        for h in header(t) {
            out.push_str(&format!("<th>{}</th>", escape(h)));
        }
        out.push_str("</tr>\n");
        for r in &t.rows {
            out.push_str("<tr>");
            for c in cells(t, r) {
                out.push_str(&format!("<td>{}</td>", escape(&c)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table></div>\n");
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| {
        format!("{x:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    })
}

/// Flat CSV of the tables: raw nanoseconds, empty fields for unavailable values.
pub fn csv(a: &Analysis, idx: &[usize]) -> String {
    let mut out = String::from(
        "run,kernel,target,case,case_name,n,calls,untimed,ops,calls_per_op,oncpu_mean_ns,oncpu_p50_ns,oncpu_p90_ns,oncpu_p99_ns,oncpu_max_ns,offcpu_mean_ns,wall_mean_ns,total_ns,op_ns,op_source,repeat_rel_sd,target_ns_per_op,share_of_op,percentiles_from,probe_cost_ns,probe_share,probe_flagged,corrected_time_per_call_ns\n",
    );
    for &i in idx {
        let t = &a.tables[i];
        for r in &t.rows {
            let fields = [
                csv_field(&t.run),
                csv_field(&t.kernel),
                csv_field(&t.target),
                t.case.to_string(),
                csv_field(&t.case_name),
                r.n.to_string(),
                r.calls.to_string(),
                r.untimed.to_string(),
                r.ops.map_or(String::new(), |v| v.to_string()),
                num(r.calls_per_op),
                num(r.oncpu_mean_ns),
                num(r.oncpu_p50_ns),
                num(r.oncpu_p90_ns),
                num(r.oncpu_p99_ns),
                num(r.oncpu_max_ns),
                num(r.offcpu_mean_ns),
                num(r.wall_mean_ns),
                r.total_ns.map_or(String::new(), |v| v.to_string()),
                num(r.op_ns),
                r.op_source.clone().unwrap_or_default(),
                num(r.repeat_rel_sd),
                num(r.target_ns_per_op),
                num(r.share_of_op),
                r.percentiles_from
                    .map_or(String::new(), |p| p.as_str().to_string()),
                num(t.probe_cost.as_ref().and_then(|c| c.probe_cost_ns)),
                num(r.probe_share),
                r.probe_flagged.to_string(),
                num(r.corrected_time_per_call_ns),
            ];
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

#[derive(Serialize)]
struct JsonCase<'a> {
    table: &'a CaseTable,
    verdict: &'a Verdict,
    root_cause: Option<&'a CaseRootCause>,
}

/// JSON of the tables with their verdicts and root causes (null for unavailable values).
pub fn json(a: &Analysis, idx: &[usize]) -> String {
    let v: Vec<JsonCase> = idx
        .iter()
        .map(|&i| JsonCase {
            table: &a.tables[i],
            verdict: &a.verdicts[i],
            root_cause: root_cause_of(a, &a.tables[i]),
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&v).expect("tables serialize");
    s.push('\n');
    s
}

/// Right-align columns of text rows.
fn align(rows: &[Vec<String>]) -> String {
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
    for d in &a.discoveries {
        out.push_str(&format!(
            "Discover ({}, {}):\n",
            d.kernel,
            if d.nothing_grows() {
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
            .map(|(k, v)| (*k, v.iter().filter(|f| f.leads(a) == lead).collect()))
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
    if !a.populations.is_empty() {
        out.push_str("Mixed call populations (the mean per call mixes them):\n");
        for p in &a.populations {
            out.push_str(&format!("  {}\n", population_line(p)));
        }
    }
    out.push_str(&probecost::terminal(a, full));
    let shown = if full {
        &groups_all(&lead, &incidental)
    } else {
        &lead
    };
    let growing: Vec<usize> = shown
        .iter()
        .filter(|(k, _)| *k == Kind::Grows)
        .flat_map(|(_, v)| v.iter().flat_map(|f| f.tables.iter().copied()))
        .collect();
    for i in &growing {
        let t = &a.tables[*i];
        out.push_str(&format!(
            "\n{} · {} · {} · {}\n",
            t.key(),
            t.kernel,
            t.via().unwrap_or_else(|| "no plan".to_string()),
            metric_text(t)
        ));
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
    }
    out.push_str(&histograms(a, &growing, full));
    if !a.tables.is_empty() {
        out.push_str(&format!(
            "\n{} per-N tables (every case, every column): tables/<target>.md\n",
            if growing.is_empty() {
                "No case grows with N;"
            } else {
                "Above: growing cases only;"
            }
        ));
    }
    out
}

/// The tables whose histograms the terminal shows: every growing case shown, and for a target
/// with none, its timed case with the most timed calls (so each measured target gets one;
/// without `full`, only among the cases that exist for that target).
fn histogram_tables(a: &Analysis, growing: &[usize], full: bool) -> Vec<usize> {
    let mut chosen: Vec<usize> = growing.to_vec();
    let mut seen: Vec<&str> = growing
        .iter()
        .map(|&i| a.tables[i].target.as_str())
        .collect();
    for (i, t) in a.tables.iter().enumerate() {
        if seen.contains(&t.target.as_str()) {
            continue;
        }
        let calls = |j: usize| -> u64 { a.tables[j].rows.iter().map(|r| r.timed_calls).sum() };
        let best = (i..a.tables.len())
            .filter(|&j| a.tables[j].target == t.target && calls(j) > 0)
            .filter(|&j| {
                full || (workloads::cases::is_thread_target(&a.tables[j].case_name, &t.target)
                    && !a.tables[j].run.ends_with(crate::rundata::CONFIRM_SUFFIX))
            })
            .max_by_key(|&j| (calls(j), std::cmp::Reverse(j)));
        seen.push(&t.target);
        chosen.extend(best);
    }
    chosen
}

/// funclatency-style histograms of the smallest and largest N of each chosen table, side by
/// side.
fn histograms(a: &Analysis, growing: &[usize], full: bool) -> String {
    let mut out = String::new();
    for i in histogram_tables(a, growing, full) {
        let t = &a.tables[i];
        let with: Vec<(u64, &crate::rundata::Dist)> = t
            .rows
            .iter()
            .filter_map(|r| r.hist.as_ref().map(|h| (r.n, h)))
            .filter(|(_, h)| crate::analysis::hist::count(h) > 0)
            .collect();
        let (Some(first), Some(last)) = (
            with.iter().min_by_key(|x| x.0),
            with.iter().max_by_key(|x| x.0),
        ) else {
            continue;
        };
        let mut columns = vec![super::histogram::Column {
            title: format!("N={}", first.0),
            dist: first.1,
        }];
        if last.0 != first.0 {
            columns.push(super::histogram::Column {
                title: format!("N={}", last.0),
                dist: last.1,
            });
        }
        let run = if a.is_sweep {
            format!(" · {}", t.run)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\n{}{run} · per-call histogram, smallest and largest N\n",
            t.key()
        ));
        let label = match t.metric {
            Metric::WallMean => "wall",
            _ => "on-CPU",
        };
        out.push_str(&super::histogram::log2(label, &columns, 20));
    }
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
            pop.scaling.as_ref().map_or("unfitted", |s| s.class.label()),
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
        out.push_str(&format!("warning: {w}\n"));
    }
    out.push_str(&render_text(a, true));
    out
}

/// Both parts of the findings, the leading ones first.
fn groups_all<'a>(
    lead: &[(Kind, Vec<&'a Finding>)],
    incidental: &[(Kind, Vec<&'a Finding>)],
) -> Vec<(Kind, Vec<&'a Finding>)> {
    lead.iter().chain(incidental).cloned().collect()
}

fn quantity_value(q: Quantity, v: Option<f64>) -> String {
    match q {
        Quantity::OpRate => opt(v, sig3),
        _ => opt(v, ns),
    }
}

fn diff_cell(c: &crate::analysis::compare::CompareRow) -> String {
    let m = c.significance.mark();
    opt(c.diff_pct, |d| format!("{m}{d:+.2}%{m}"))
}

/// mmtests-like comparison table in Markdown.
/// One line per target and case whose frames' shares moved between the two sides, the
/// largest change first: `dup_mmap [spawn]: mas_store 28% -> 5%, ... of the added time
/// (6.1.0 -> 6.12.0)`.
pub fn frame_shift_lines(c: &Comparison) -> Vec<String> {
    let mut groups: Vec<((&str, &str), Vec<&FrameShift>)> = Vec::new();
    for s in &c.frame_shifts {
        let key = (s.target.as_str(), s.case_name.as_str());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    // The cases the workloads exist for first (dup_mmap under spawn before dup_mmap under a
    // mempolicy fork), each part in the analysis' order.
    groups.sort_by_key(|((target, case), _)| !workloads::cases::is_thread_target(case, target));
    groups
        .into_iter()
        .map(|((target, case), shifts)| {
            let parts: Vec<String> = shifts
                .iter()
                .map(|s| {
                    format!(
                        "{} {} -> {}",
                        s.frame,
                        percent(s.a, PercentStyle::Whole),
                        percent(s.b, PercentStyle::Whole)
                    )
                })
                .collect();
            format!(
                "{target} [{case}]: {} {} ({} -> {})",
                parts.join(", "),
                shifts[0].basis.text(),
                c.label_a,
                c.label_b
            )
        })
        .collect()
}

pub fn compare_markdown(c: &Comparison) -> String {
    let mut out = format!("# {} vs {}\n\n", c.label_a, c.label_b);
    out.push_str("Scaling classes:\n\n");
    for cl in &c.classes {
        out.push_str(&format!("- `{}`\n", cl.line));
    }
    let shifts = frame_shift_lines(c);
    if !shifts.is_empty() {
        out.push_str("\nWhere the time moved (frames whose share changed most):\n\n");
        for l in shifts {
            out.push_str(&format!("- `{l}`\n"));
        }
    }
    out.push_str(&format!(
        "\n`*` marks a significant difference, `?` too little data to tell (rules: see compare.json / the tracer docs). Diff is ({b} − {a}) / {a}.\n\n",
        a = c.label_a,
        b = c.label_b
    ));
    out.push_str(&format!(
        "| target | case | N | quantity | mean | {} | {} | diff |\n| --- | --- | ---: | --- | --- | ---: | ---: | ---: |\n",
        md_escape(&c.label_a),
        md_escape(&c.label_b)
    ));
    for r in &c.rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.target,
            r.case_name,
            r.n,
            r.quantity.label(),
            r.quantity.mean_name(),
            quantity_value(r.quantity, r.a),
            quantity_value(r.quantity, r.b),
            diff_cell(r)
        ));
    }
    out
}

pub fn compare_csv(c: &Comparison) -> String {
    let mut out = String::from("target,case_name,n,quantity,mean,a,b,diff_pct,significance\n");
    for r in &c.rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            csv_field(&r.target),
            csv_field(&r.case_name),
            r.n,
            r.quantity.label(),
            r.quantity.mean_name(),
            num(r.a),
            num(r.b),
            num(r.diff_pct),
            r.significance.mark()
        ));
    }
    out
}

pub fn compare_json(c: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(c).expect("comparison serializes");
    s.push('\n');
    s
}

/// mmtests-like terminal rendering: `Amean  do_wait waitpid-pid N=100  1.23µs  1.10µs * -10.60%*`.
pub fn compare_terminal(c: &Comparison) -> String {
    let mut out = String::new();
    for cl in &c.classes {
        out.push_str(&format!("{}\n", cl.line));
    }
    let shifts = frame_shift_lines(c);
    if !shifts.is_empty() {
        out.push_str("\nWhere the time moved:\n");
        for l in shifts {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.push('\n');
    let mut rows: Vec<Vec<String>> = vec![vec![
        String::new(),
        String::new(),
        String::new(),
        c.label_a.clone(),
        c.label_b.clone(),
        "diff".into(),
    ]];
    for r in &c.rows {
        rows.push(vec![
            r.quantity.mean_name().to_string(),
            format!("{} {} N={}", r.target, r.case_name, r.n),
            r.quantity.label().to_string(),
            quantity_value(r.quantity, r.a),
            quantity_value(r.quantity, r.b),
            diff_cell(r),
        ]);
    }
    out.push_str(&align(&rows));
    out
}

#[cfg(test)]
mod frame_shift_tests {
    use super::*;
    use crate::analysis::frameshift::ShareBasis;

    #[test]
    fn the_cases_the_workloads_exist_for_lead_the_frame_shifts() {
        let shift = |target: &str, case: &str, frame: &str| FrameShift {
            target: target.into(),
            case_name: case.into(),
            frame: frame.into(),
            basis: ShareBasis::AddedTime,
            a: 0.3,
            b: 0.05,
        };
        let c = Comparison {
            label_a: "6.1".into(),
            label_b: "6.12".into(),
            rows: Vec::new(),
            classes: Vec::new(),
            frame_shifts: vec![
                shift("dup_mmap", "mempolicy-fork", "copy_page_range"),
                shift("dup_mmap", "spawn", "mas_store"),
                shift("dup_mmap", "spawn", "mas_wr_bnode"),
            ],
        };
        let lines = frame_shift_lines(&c);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("dup_mmap [spawn]: mas_store 30% -> 5%, mas_wr_bnode"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("dup_mmap [mempolicy-fork]: "),
            "{lines:?}"
        );
    }
}
