//! `tracer compare`: two runs or sweeps side by side, each side's full report under `a/` and
//! `b/`, the comparison tables, the plots of both sides, the cross-kernel differentials and
//! the index.

mod page;
pub mod tables;

use std::path::Path;

use crate::analysis::{Analysis, CaseResult, Dataset, compare};

use super::dataset::{self, METHOD};
use super::out::{self, OutDir};
use super::plots::{plot_series, y_label};
use super::verdict;
use super::{
    ReportError, ReportOptions, ReportSummary, flamegraphs, index, rootcause, summary, svgplot,
};

const COMPARE_METHOD: &str = "Comparison: per target and case, grew / shrank / same / inconclusive from the change of the growth (time per call at the largest over the smallest common N) between the sides, with a 95% interval from each point's error; grew and shrank need the whole interval beyond a twofold change and the added time to change the same way; the class sets stay beside it and never decide. Per N: Tmean (the fitted time per call: the calls' 10%-trimmed mean, the median over the runs where there are several), Amean/Hmean (the workload's op time and rate) per side and (B − A)/A. * = significant at 95% (Welch's t-test: over the command's runs, or the workload's repeats, which must also differ by at least 5% for ns/call), ? = too few runs to tell. Discover sweeps of the same program (the run's name) are compared loop by loop: each kernel entry (syscall, fault) whose time per call grows on either side gets the same decision from its sampled time per call, each point's error at least its sampling error, the spread between the command's runs and the compare's floors, over the largest common N and the smaller one that gives the least error per decade; a loop on one side only is a finding when the data shows the change (shrank, grew), and the line says where each side has it.";

/// Render a comparison of two runs or sweeps (`a` is the baseline) into `out_dir`: each side's
/// full report under `a/` and `b/`, the comparison tables (`compare.{md,csv,json,txt}`), one
/// plot per target with both sides (B dashed), per target and case the differential
/// flamegraph from A to B at the largest N both sampled
/// (`flamegraphs/<kind>/<target>/<case>/diff-a-b-n<N>.svg`), and an index.
pub fn write_compare(
    (da, aa): (&Dataset, &Analysis),
    (db, ab): (&Dataset, &Analysis),
    c: &compare::Comparison,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let mut out = OutDir::create(out_dir)?;
    let mut side_warnings = Vec::new();
    for (sub, ds, an) in [("a", da, aa), ("b", db, ab)] {
        let mut side = out.nested(sub)?;
        side_warnings.push(dataset::render(ds, an, &mut side, opts)?);
        out.adopt(sub, side.written());
    }
    out.write("compare.md", tables::compare_markdown(c).as_bytes())?;
    out.write("compare.csv", tables::compare_csv(c).as_bytes())?;
    out.write("compare.json", tables::compare_json(c).as_bytes())?;
    let table = tables::compare_terminal(c);

    let (ta, tb) = (dataset::targets(aa), dataset::targets(ab));
    let mut names: Vec<String> = ta.iter().map(|(t, _)| t.clone()).collect();
    for (t, _) in &tb {
        if !names.contains(t) {
            names.push(t.clone());
        }
    }
    let mut sections = Vec::new();
    for name in &names {
        let sides = (cases_of(&ta, name), cases_of(&tb, name));
        sections.push(target_section(name, sides, c, (aa, ab), &mut out, opts)?);
    }
    let summary = page::summary_rows(c, &sections);
    let summary_text = summary::text(&summary);
    out.write("summary.txt", summary_text.as_bytes())?;
    // The thread findings across kernels first, then every quantity side by side.
    let terminal = format!(
        "Summary ({} → {}):\n{summary_text}\n{table}",
        c.label_a, c.label_b
    );
    out.write("compare.txt", terminal.as_bytes())?;

    let (verdicts, root_causes) = both_sides_lines(c, aa, ab);
    // Each side's warnings: its analysis's, then its exports'.
    let warnings: Vec<String> = side_warnings[0]
        .iter()
        .map(|w| format!("{}: {w}", c.label_a))
        .chain(
            side_warnings[1]
                .iter()
                .map(|w| format!("{}: {w}", c.label_b)),
        )
        .collect();
    let findings = page::findings(c);
    let page = index::Page {
        title: format!("tracer compare: {} vs {}", c.label_a, c.label_b),
        source: format!("A = {}, B = {}", da.root.display(), db.root.display()),
        summary,
        findings,
        warnings: warnings.clone(),
        run_header: ["side", "report"].map(String::from).to_vec(),
        runs: vec![],
        sections,
        other: other_files(c),
        method: std::iter::once(COMPARE_METHOD)
            .chain(METHOD.iter().copied())
            .map(String::from)
            .collect(),
    };
    index::write(&mut out, &page)?;
    let files = out.written().iter().map(|f| out_dir.join(f)).collect();
    out.commit()?;
    Ok(ReportSummary {
        out_dir: out_dir.to_path_buf(),
        verdicts,
        root_causes,
        warnings,
        files,
        terminal,
    })
}

/// The target's cases on one side (none when that side did not trace it).
fn cases_of<'a>(side: &[(String, Vec<&'a CaseResult>)], name: &str) -> Vec<&'a CaseResult> {
    side.iter()
        .find(|(t, _)| t == name)
        .map(|(_, cases)| cases.clone())
        .unwrap_or_default()
}

/// One target's section of the index: its plot with both sides (B dashed), links to each
/// side's table, and the differential flamegraphs from A to B.
fn target_section(
    name: &str,
    (ca, cb): (Vec<&CaseResult>, Vec<&CaseResult>),
    c: &compare::Comparison,
    (aa, ab): (&Analysis, &Analysis),
    out: &mut OutDir,
    opts: &ReportOptions,
) -> Result<index::Section, ReportError> {
    let mut series = plot_series(&ca, Some(&c.label_a), 0);
    series.extend(plot_series(&cb, Some(&c.label_b), 1));
    let y = if ca.is_empty() {
        y_label(&cb)
    } else {
        y_label(&ca)
    };
    let mut plot_rel = None;
    if let Some(svg) = svgplot::loglog_svg(&format!("{name}: {y} vs N"), y, &series) {
        let rel = format!("plots/{}.svg", out::safe(name));
        out.write(&rel, svg.as_bytes())?;
        plot_rel = Some(rel);
    }
    let mut links = Vec::new();
    for (side, label) in [("a", &c.label_a), ("b", &c.label_b)] {
        let rel = format!("{side}/tables/{}.md", out::safe(name));
        if out.has(&rel) {
            links.push((format!("{label} table"), rel));
        }
    }
    let groups = if opts.flamegraphs && opts.differential {
        flamegraphs::cross_kernel(aa, ab, (&c.label_a, &c.label_b), name, out, opts)?
    } else {
        Vec::new()
    };
    Ok(index::Section {
        title: name.to_string(),
        plot: plot_rel,
        links,
        tables_html: None,
        groups,
    })
}

/// The verdict lines (the class changes, then each side's verdicts) and the root-cause lines
/// of both sides, each named by its side.
fn both_sides_lines(
    c: &compare::Comparison,
    aa: &Analysis,
    ab: &Analysis,
) -> (Vec<String>, Vec<String>) {
    let mut verdicts: Vec<String> = c
        .classes
        .iter()
        .map(|cl| tables::class_line(c, cl))
        .collect();
    for (label, an) in [(&c.label_a, aa), (&c.label_b, ab)] {
        verdicts.extend(an.cases().map(|c| format!("{label}: {}", verdict::line(c))));
    }
    let root_causes = [(&c.label_a, aa), (&c.label_b, ab)]
        .into_iter()
        .flat_map(|(label, an)| {
            an.root_causes()
                .map(move |r| format!("{label}: {}", rootcause::line(&r.cause)))
        })
        .collect();
    (verdicts, root_causes)
}

/// The index's links to the comparison's files and to each side's full report.
fn other_files(c: &compare::Comparison) -> Vec<(String, String)> {
    vec![
        ("comparison (Markdown)".into(), "compare.md".into()),
        ("comparison (CSV)".into(), "compare.csv".into()),
        ("comparison (JSON)".into(), "compare.json".into()),
        ("comparison (text)".into(), "compare.txt".into()),
        (
            format!("A: {} full report", c.label_a),
            "a/index.html".into(),
        ),
        (
            format!("B: {} full report", c.label_b),
            "b/index.html".into(),
        ),
    ]
}
