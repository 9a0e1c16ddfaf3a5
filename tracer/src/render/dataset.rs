//! One analysed data set (a run or a sweep) written into an output directory: per target its
//! tables and plot, the flamegraphs, the exports, `summary.json`, `report.txt`, `summary.txt`
//! and the index.

use std::collections::BTreeMap;

use crate::analysis::table::CaseTable;
use crate::analysis::{Analysis, CaseResult, Dataset};
use crate::rundata::StackKind;

use super::index::TargetLinks;
use super::out::{self, OutDir};
use super::{
    ReportError, ReportOptions, digest, discover, export, flamegraphs, fmt, index, plots,
    probecost, summary, summary_json, tables, terminal,
};

/// How to read a report: the rules behind the numbers, in one line each.
pub(super) const METHOD: &[&str] = &[
    "Time per call: the target's mean on-CPU time per call when on-CPU time was measured (wall time otherwise); off-CPU = wall − on-CPU, the time blocked. \"via\" names the attach plan briefly; the runs table and the per-target tables list every attach point.",
    "Noise of a size: the per-call histogram's standard error and the spread over the workload's repeats (its CPU time per op for on-CPU times; standard deviation / √repeats) in quadrature. The tables show that spread as \"repeat spread\" (relative standard deviation).",
    "Growth is claimed only when it is clear: the time per call stays above the smallest-N time by max(20%, 3 combined standard errors) from some N on, at two sizes or more (sweeps of three sizes or more); and, with four sizes or more, a significant trend: the chosen model's growth term has a 95% confidence interval that excludes 0, or the rise is at least 3 times the sizes' RMS scatter around the model. Otherwise the verdict is O(1), \"within noise\" with the reason when the time did rise by more than 20%.",
    "Class: each model t = a + b·f(N), f ∈ {log n, n, n log n, n²}, is fitted on relative residuals; starting from the least growth, a model with more growth is chosen only when the current one fits worse than 8% RMS (or twice the noise) and the new one's RMS is at least 25% lower (Google Benchmark style, with an intercept for the fixed cost and a parsimony margin for few sizes).",
    "Slope: least-squares exponent of log(t − t at the smallest N) against log N over the sizes where growth is visible, with R² (its 95% interval is in summary.json); when only two sizes are above the smallest-N time the line shows those two points and their ratio instead of R².",
    "Root cause: each frame under the target gets a time per call at each N, its share of the target's sampled time times the target's measured time per call, and the part of the target's added time per call (smallest to largest usable N) it carries; ± is one standard error of sampling noise (binomial error of the share, times the time per call). The culprit is the frame that carries the largest part, at least half and more than 2 standard errors; the search descends into a child that carries at least 60% of its parent's added time. \"(self)\" is time in the frame itself. When no frame carries most of it the line lists the frames that split it; when the target's time per call grows by less than 20% there is nothing to attribute. The frame's share at the smallest and largest N is supporting detail (without a time per call the frame whose share grows most, by 10 points and 2 standard errors, is named). Only sizes with 5 samples or more take part, and the line says which; \"<x\" is a frame's time where it had no sample (at most one sample's share); its slope is the log-log exponent of its time per call over the sizes where it was seen.",
    "Probe cost: what one traced call pays the run's kind of probe, measured at attach with the run's own programs and options (a credential syscall traced through the same kind of probe against an untraced one, 9 interleaved rounds, median after attaching minus median before). It is the whole added cost, so an upper bound of the part inside a measured span; a time per call within 3 times it is flagged (!): the probe's cost is a third or more of what is measured. \"per call − probe\" (--subtract-probe-cost) is the time per call minus that cost, floored at 0.",
    "Flamegraphs: widths in ns; differentials compare the smallest and largest N after normalising totals, red = larger share at the largest N.",
    "Exports: trace.pftrace (runs recorded with --raw-events) opens in ui.perfetto.dev (\"Open trace file\"): a slice per traced call on its thread, the workload's phases and N per process. profiles/*.pb.gz are pprof profiles (go tool pprof -http=: FILE; also Perfetto, Parca, Pyroscope, Grafana), samples labelled target, case and n.",
];

/// Targets in order of first appearance, with their cases.
pub(super) fn targets(a: &Analysis) -> Vec<(String, Vec<&CaseResult>)> {
    let mut v: Vec<(String, Vec<&CaseResult>)> = Vec::new();
    for c in a.cases() {
        match v.iter_mut().find(|(n, _)| *n == c.table.target) {
            Some((_, cases)) => cases.push(c),
            None => v.push((c.table.target.clone(), vec![c])),
        }
    }
    // Targets traced but without any table still get a section (their plan and stacks).
    for r in &a.runs {
        for t in &r.targets {
            if !v.iter().any(|(n, _)| *n == t.name) {
                v.push((t.name.clone(), vec![]));
            }
        }
    }
    v
}

/// Render one analysed data set; returns its warnings (the analysis's, then the exports').
pub(super) fn render(
    ds: &Dataset,
    a: &Analysis,
    out: &mut OutDir,
    opts: &ReportOptions,
) -> Result<Vec<String>, ReportError> {
    let mut links: BTreeMap<String, TargetLinks> = BTreeMap::new();
    let mut target_list = targets(a);
    for (target, cases) in &target_list {
        let l = links.entry(target.clone()).or_default();
        if !cases.is_empty() {
            write_target(target, cases, out, l)?;
        }
    }
    if a.discoveries().next().is_some() {
        // Whole-process profiles: a section of their own, with the scaling plot of the top
        // functions of each discovery.
        let target = crate::rundata::PROFILE_TARGET.to_string();
        let plots = plots::write_discoveries(a, out)?;
        let l = links.entry(target.clone()).or_default();
        if l.plot.is_none() {
            l.plot = plots.into_iter().next();
        }
        target_list.insert(0, (target, Vec::new()));
    }

    if opts.flamegraphs {
        flamegraphs::write_report(a, out, opts, &mut links)?;
    }
    let exported = if opts.exports {
        export::write_report_exports(ds, a, out, opts.trace_max_events_bytes)?
    } else {
        export::ReportExports::default()
    };
    let mut warnings = super::warnings::texts(&a.warnings);
    warnings.extend(exported.notes.iter().cloned());

    out.write("summary.json", summary_json::text(a, &warnings).as_bytes())?;
    out.write("report.txt", terminal::report_text(a).as_bytes())?;

    let summary = summary::rows(a, |t| summary_links(t, &links));
    out.write("summary.txt", summary::text(&summary).as_bytes())?;
    let sections = target_list
        .iter()
        .map(|(t, _)| {
            let l = links.remove(t).unwrap_or_default();
            index::Section {
                title: t.clone(),
                plot: l.plot,
                links: l
                    .tables
                    .into_iter()
                    .map(|(ext, p)| (ext.to_uppercase(), p))
                    .collect(),
                tables_html: l.tables_html,
                groups: l.flames,
            }
        })
        .collect();
    let page = index::Page {
        title: format!("tracer report: {}", a.label),
        source: a.root.display().to_string(),
        summary,
        findings: findings(a),
        warnings: warnings.clone(),
        runs: runs_table(a),
        run_header: ["run", "kernel", "status", "workload", "targets and plans"]
            .map(String::from)
            .to_vec(),
        sections,
        other: [
            ("summary.json".to_string(), "summary.json".to_string()),
            ("report.txt".to_string(), "report.txt".to_string()),
            ("summary.txt".to_string(), "summary.txt".to_string()),
        ]
        .into_iter()
        .chain(exported.files.into_iter().map(|e| (e.what, e.path)))
        .collect(),
        method: METHOD.iter().map(|m| m.to_string()).collect(),
    };
    index::write(out, &page)?;
    Ok(warnings)
}

/// A target's per-N tables (`tables/<target>.{md,csv,json}`, and as HTML for the index) and
/// its scaling plot.
fn write_target(
    target: &str,
    cases: &[&CaseResult],
    out: &mut OutDir,
    l: &mut TargetLinks,
) -> Result<(), ReportError> {
    let stem = out::safe(target);
    for (ext, body) in [
        ("md", tables::markdown(target, cases)),
        ("csv", tables::csv(cases)),
        ("json", tables::json(cases)),
    ] {
        let rel = format!("tables/{stem}.{ext}");
        out.write(&rel, body.as_bytes())?;
        l.tables.push((ext.to_string(), rel));
    }
    l.tables_html = Some(tables::html(cases));
    l.plot = plots::write_target(target, cases, out)?;
    Ok(())
}

/// The index's findings: the discoveries first, then the digest's groups, the mixed call
/// populations and the probe-cost flags.
fn findings(a: &Analysis) -> Vec<(String, Vec<index::Item>)> {
    discover_findings(a)
        .into_iter()
        .chain(digest::findings(a).into_iter().map(|(kind, items)| {
            let items = items
                .into_iter()
                .map(|f| index::Item {
                    details: f
                        .root_cause
                        .map(|rc| format!("root cause: {rc}"))
                        .into_iter()
                        .chain(f.cases.iter().flat_map(|c| {
                            super::trips::loop_lines(c)
                                .into_iter()
                                .map(|l| format!("loop: {l}"))
                        }))
                        .collect(),
                    line: f.line,
                })
                .collect();
            (kind.title().to_string(), items)
        }))
        .chain(a.populations().next().is_some().then(|| {
            (
                "Mixed call populations (the mean per call mixes them)".to_string(),
                a.populations()
                    .map(|p| index::Item {
                        line: terminal::population_line(p),
                        details: Vec::new(),
                    })
                    .collect(),
            )
        }))
        .chain(super::trips::findings(a))
        .chain(probecost::findings(a))
        .collect()
}

/// The index's runs table: one row per run with its kernel, status, workload and each
/// target's plan.
fn runs_table(a: &Analysis) -> Vec<Vec<String>> {
    a.runs
        .iter()
        .map(|r| {
            let plans: Vec<String> = r
                .targets
                .iter()
                .map(|t| match &t.plan {
                    Some(p) => format!(
                        "{}: {} ({}){}",
                        t.name,
                        p.plan,
                        p.attach_points.join(", "),
                        t.probe_cost
                            .as_ref()
                            .map_or(String::new(), |c| format!(", {}", probecost::figure(c)))
                    ),
                    None => format!("{}: not traced", t.name),
                })
                .collect();
            vec![
                r.label.clone(),
                r.kernel.clone(),
                match &r.partial_reason {
                    Some(why) => format!("partial: {why}"),
                    None => format!("{:?}", r.status).to_lowercase(),
                },
                r.workload.clone().unwrap_or_default(),
                plans.join("; "),
            ]
        })
        .collect()
}

/// A summary row's links: the target's plot and the case's differential flamegraph (on-CPU
/// stacks preferred), relative to the page.
fn summary_links(t: &CaseTable, links: &BTreeMap<String, TargetLinks>) -> Vec<(String, String)> {
    let mut out = vec![(
        "tables".to_string(),
        format!("#{}", index::anchor(&t.target)),
    )];
    let Some(l) = links.get(&t.target) else {
        return out;
    };
    if let Some(p) = &l.plot {
        out.push(("plot".into(), p.clone()));
    }
    let diff = |kind: StackKind| {
        l.diffs
            .iter()
            .find(|(run, case, k, _)| *run == t.run && *case == t.case_name && *k == kind)
    };
    if let Some((_, _, _, p)) = diff(StackKind::Oncpu).or_else(|| diff(StackKind::Offcpu)) {
        out.push(("differential".into(), p.clone()));
    }
    out
}

/// Discoveries as findings, first on the page: the answer, its root cause and coverage.
fn discover_findings(a: &Analysis) -> Vec<(String, Vec<index::Item>)> {
    if a.discoveries().next().is_none() {
        return Vec::new();
    }
    let items = a
        .discoveries()
        .map(|d| {
            let mut details = Vec::new();
            details.extend(discover::root_cause_line(d, usize::MAX));
            // Kernel loops and more calls first: the per-op growers below mix both.
            details.extend(super::entries::lines(d));
            // Without entry counts the answer is the first per-op grower: the rest follow it.
            let skip = usize::from(!d.entries.counted);
            for g in d
                .ranked
                .iter()
                .skip(skip)
                .take(discover::TERMINAL_TOP - skip)
            {
                details.push(format!(
                    "grows per {}: {} {} ({} of the added time)",
                    d.per,
                    g.function,
                    g.scaling.classes_label(),
                    fmt::pct(g.added_share.min(1.0))
                ));
            }
            details.extend(discover::coverage_line(d));
            details.extend(
                d.trips
                    .iter()
                    .map(|t| format!("counted: {}", super::trips::line(t, false))),
            );
            index::Item {
                line: discover::answer(d),
                details,
            }
        })
        .collect();
    vec![(
        "Discovered from whole-process samples (--discover)".to_string(),
        items,
    )]
}
