//! The per-N tables of a target as Markdown, CSV, JSON and an HTML fragment for the index.
//!
//! The terminal text is in `super::terminal`; the comparison tables are in `compare::tables`.

use serde::Serialize;

use crate::analysis::table::{CaseTable, PercentileSource, Row};
use crate::analysis::{CaseResult, CaseRootCause};

use super::fmt::{csv_field, md_escape, ns, num, opt, pct};
use super::probecost;
use super::rootcause;

const MD_HEADER: [&str; 16] = [
    "N",
    "calls",
    "calls/op",
    "fitted",
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

pub(super) fn corrected(t: &CaseTable) -> bool {
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
        opt(r.time_per_call_ns, ns),
        opt(r.oncpu_mean_ns, ns),
        opt(r.oncpu_p50_ns, ns),
        opt(r.oncpu_p90_ns, ns),
        opt(r.oncpu_p99_ns, ns),
        opt(r.oncpu_max_ns, ns),
        opt(r.offcpu_mean_ns, ns),
        opt(r.wall_mean_ns, ns),
        opt(r.total_ns, |v| ns(v as f64)),
        opt(r.op_ns, ns),
        // An external sweep's sizes may have different numbers of runs (extra runs where
        // they disagreed): the spread says over how many.
        opt(r.repeat_rel_sd, |v| match r.run_times_ns.len() {
            k if k >= 2 && r.op_repeats_ns.is_empty() => format!("±{} ({k} runs)", pct(v)),
            _ => format!("±{}", pct(v)),
        }),
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
        Some(_) => format!("plan {}", plan_text(t, "`")),
        None => plan_text(t, "`"),
    }
}

/// The plan, its mechanism and attach points, with its name between `quote`s.
fn plan_text(t: &CaseTable, quote: &str) -> String {
    match &t.plan {
        Some(p) => format!(
            "{quote}{}{quote} ({}: {}){}{}",
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

/// What the fitted column is: the metric and its robust centre.
pub(super) fn metric_text(t: &CaseTable) -> String {
    if !t.timed {
        return "count only (no durations)".to_string();
    }
    let trim = crate::analysis::hist::TRIM * 100.0;
    if t.rows.iter().any(|r| r.run_times_ns.len() >= 2) {
        format!(
            "{}, median over the runs of each run's {trim:.0}%-trimmed mean",
            t.metric.label()
        )
    } else {
        format!("{}, {trim:.0}%-trimmed mean", t.metric.label())
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

/// One Markdown document for a target: a section per (run, case) with its verdict, root cause
/// and table.
pub fn markdown(target: &str, cases: &[&CaseResult]) -> String {
    let mut out = format!("# {target}\n\n");
    for c in cases {
        let t = &c.table;
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
        out.push_str(&format!("- verdict: `{}`\n", super::verdict::line(c)));
        if let Some(rc) = &c.root_cause {
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
pub fn html(cases: &[&CaseResult]) -> String {
    use super::xml::escape;
    let mut out = String::new();
    for c in cases {
        let t = &c.table;
        out.push_str(&format!(
            "<h4>{} · {} · kernel {}</h4>\n<ul class=\"facts\">\n",
            escape(&t.case_name),
            escape(&t.run),
            escape(&t.kernel)
        ));
        let mut fact = |k: &str, v: &str| {
            out.push_str(&format!("<li><b>{k}</b> {}</li>\n", escape(v)));
        };
        fact("plan", &plan_text(t, ""));
        fact("fitted", &metric_text(t));
        if let Some(p) = percentile_text(t) {
            fact("percentiles", &p);
        }
        if let Some(c) = &t.probe_cost {
            fact("probe cost", &probecost::fact(c));
        }
        fact("verdict", &super::verdict::line(c));
        if let Some(rc) = &c.root_cause {
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

/// Flat CSV of the tables: raw nanoseconds, empty fields for unavailable values.
pub fn csv(cases: &[&CaseResult]) -> String {
    let mut out = String::from(
        "run,kernel,target,case,case_name,n,calls,untimed,ops,calls_per_op,oncpu_mean_ns,oncpu_p50_ns,oncpu_p90_ns,oncpu_p99_ns,oncpu_max_ns,offcpu_mean_ns,wall_mean_ns,total_ns,op_ns,op_source,repeat_rel_sd,target_ns_per_op,share_of_op,percentiles_from,probe_cost_ns,probe_share,probe_flagged,corrected_time_per_call_ns,time_per_call_ns\n",
    );
    for t in cases.iter().map(|c| &c.table) {
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
                num(r.time_per_call_ns),
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
    verdict: super::verdict::VerdictJson<'a>,
    root_cause: Option<&'a CaseRootCause>,
}

/// JSON of the tables with their verdicts and root causes (null for unavailable values).
pub fn json(cases: &[&CaseResult]) -> String {
    let v: Vec<JsonCase> = cases
        .iter()
        .map(|c| JsonCase {
            table: &c.table,
            verdict: super::verdict::VerdictJson::of(c),
            root_cause: c.root_cause.as_ref(),
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&v).expect("tables serialize");
    s.push('\n');
    s
}
