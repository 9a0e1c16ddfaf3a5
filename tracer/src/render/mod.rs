//! Rendering of analysed run data: tables (Markdown, CSV, JSON, terminal), flamegraph SVGs
//! (inferno), log-log scaling plots, and an index linking everything.
//!
//! Entry points: [`report`] renders one run or sweep directory, [`compare_report`] two of them
//! side by side. Both only read saved data (no root, no live kernel) and write every file
//! atomically into the output directory, the index last.
//!
//! Output layout of [`report`]:
//!
//! | file | content |
//! | --- | --- |
//! | `index.html` | a summary table first (target, case, class, growth, root cause, links), the scaling plots, the findings in full, then per target its per-N tables as HTML and its flamegraphs embedded (differentials first) |
//! | `README.md` | the summary table, then the findings (one verdict per target and case, grouped into growing, flat and not fitted, each with its root cause), then links to everything below |
//! | `report.txt` | warnings, then the terminal rendering ([`ReportSummary::terminal`]) with the incidental findings in full |
//! | `summary.txt` | the summary table as text: the findings each workload exists for, then a count of the incidental target/case pairs |
//! | `summary.json` | runs (with each target's probe cost), verdicts (with fits), root causes (with rankings), each case's probe cost against its times (`probe_costs`), warnings |
//! | `tables/<target>.{md,csv,json}` | per-N tables of every case of the target (percentiles exact where the run kept raw spans) |
//! | `plots/<target>.svg` | log-log time per call vs N, one line per case, fitted model dotted |
//! | `flamegraphs/[<run>/]<kind>/<target>/<case>/n<N>.svg` | stacks of one N (`<run>/` in sweeps) |
//! | `flamegraphs/[<run>/]<kind>/<target>/<case>/diff-n<A>-n<B>.svg` | differential, smallest → largest N |
//! | `trace.pftrace` (`traces/<run>.pftrace` in sweeps) | Perfetto trace of the raw per-call spans, when the run kept them ([`export`]) |
//! | `profiles/[<run>/]<kind>-<target>.pb.gz` | pprof profiles of the folded stacks ([`export`]) |

pub mod digest;
pub mod discover;
pub mod export;
pub mod flame;
pub mod fmt;
pub mod histogram;
mod index;
pub mod out;
pub mod plot;
pub mod probecost;
pub mod rootcause;
pub mod summary;
pub mod tables;
pub mod xml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::table::Metric;
use crate::analysis::{Analysis, AnalysisOptions, Dataset, LoadError, analyze, compare, load};
use crate::rundata::StackKind;

pub use out::OutDir;
pub use xml::check_well_formed;

/// Errors of [`report`] and [`compare_report`]; each names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: flamegraph failed: {source}")]
    Flamegraph {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: rendered SVG is not well-formed XML ({what}); nothing was written")]
    Malformed { path: PathBuf, what: String },
    #[error("interrupted by {0} while writing the report; the previous report is unchanged")]
    Interrupted(String),
    /// The input has nothing to export in the asked format.
    #[error("{path}: cannot export: {what}")]
    Unexportable { path: PathBuf, what: String },
}

#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Per-call time to fit and plot (default: on-CPU mean when measured).
    pub metric: Metric,
    /// Include spans outside the workload's phases (case 0) as their own case.
    pub include_unphased: bool,
    /// Show each time per call minus the probe's own measured cost beside it.
    pub subtract_probe_cost: bool,
    /// Render flamegraph SVGs (the slow part of a report).
    pub flamegraphs: bool,
    /// Render the differential flamegraphs (smallest vs largest N).
    pub differential: bool,
    /// Flamegraph width in pixels; inferno's 1200 by default.
    pub flame_width: Option<usize>,
    /// Write the Perfetto trace and pprof profiles ([`export`]).
    pub exports: bool,
    /// Largest `events.csv` turned into a trace by the report
    /// ([`export::REPORT_TRACE_MAX_EVENTS_BYTES`] by default); larger ones get a warning.
    pub trace_max_events_bytes: u64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            metric: Metric::Auto,
            include_unphased: false,
            subtract_probe_cost: false,
            flamegraphs: true,
            differential: true,
            flame_width: None,
            exports: true,
            trace_max_events_bytes: export::REPORT_TRACE_MAX_EVENTS_BYTES,
        }
    }
}

impl ReportOptions {
    fn analysis(&self) -> AnalysisOptions {
        AnalysisOptions {
            metric: self.metric,
            include_unphased: self.include_unphased,
            subtract_probe_cost: self.subtract_probe_cost,
        }
    }
}

/// What a report found and wrote.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportSummary {
    pub out_dir: PathBuf,
    /// One scaling verdict per target and case, e.g. `do_wait [waitpid-pid]: O(n), slope 0.98
    /// (R² 0.99), visible from N≈100; 1.20µs -> 41.0µs per call over N=10..8000; via fentry
    /// do_wait`.
    pub verdicts: Vec<String>,
    /// One root-cause line per target and case with stacks.
    pub root_causes: Vec<String>,
    pub warnings: Vec<String>,
    /// Every file written, under `out_dir`.
    pub files: Vec<PathBuf>,
    /// The compact terminal rendering, for the CLI to print: findings first, then the tables
    /// of the growing cases only. Without the warnings (the CLI prints those on stderr).
    pub terminal: String,
}

/// How to read a report: the rules behind the numbers, in one line each.
const METHOD: &[&str] = &[
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

const COMPARE_METHOD: &str = "Comparison: Amean/Hmean per side and (B − A)/A. * = significant at 95% (Welch's t-test: over the workload's repeats for op time and ops/s; over the per-call histogram spread for ns/call, which must also differ by at least 5%), ? = too few repeats to tell.";

/// Links the index shows for one target.
#[derive(Default)]
struct TargetLinks {
    plot: Option<String>,
    tables: Vec<(String, String)>,
    /// The per-N tables as HTML, for the index.
    tables_html: Option<String>,
    flames: Vec<index::FlameGroup>,
    /// (run, case, kind, path) of the differential flamegraphs, for the summary's links.
    diffs: Vec<(String, String, StackKind, String)>,
}

/// Render the run or sweep at `data_dir` into `out_dir`.
pub fn report(
    data_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let ds = load(data_dir)?;
    let a = analyze(&ds, &opts.analysis())?;
    let mut out = OutDir::create(out_dir)?;
    let warnings = render_analysis(&ds, &a, &mut out, opts)?;
    let files = out.written().iter().map(|f| out_dir.join(f)).collect();
    out.commit()?;
    Ok(ReportSummary {
        out_dir: out_dir.to_path_buf(),
        verdicts: a.verdicts.iter().map(|v| v.line.clone()).collect(),
        root_causes: a
            .root_causes
            .iter()
            .map(|r| rootcause::line(&r.cause))
            .collect(),
        warnings,
        files,
        terminal: tables::terminal(&a),
    })
}

/// Targets in order of first appearance, with the indices of their tables.
fn targets(a: &Analysis) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, t) in a.tables.iter().enumerate() {
        match v.iter_mut().find(|(n, _)| *n == t.target) {
            Some((_, idx)) => idx.push(i),
            None => v.push((t.target.clone(), vec![i])),
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

/// Series label of a table in a plot: the case, plus the run when a case repeats.
fn series_label(a: &Analysis, idx: &[usize], i: usize) -> String {
    let t = &a.tables[i];
    let dup = idx
        .iter()
        .filter(|&&j| a.tables[j].case_name == t.case_name)
        .count()
        > 1;
    if dup {
        format!("{} · {}", t.case_name, t.run)
    } else {
        t.case_name.clone()
    }
}

fn plot_series(
    a: &Analysis,
    idx: &[usize],
    suffix: Option<&str>,
    style: usize,
) -> Vec<plot::Series> {
    idx.iter()
        .map(|&i| {
            let (t, v) = (&a.tables[i], &a.verdicts[i]);
            let mut label = series_label(a, idx, i);
            if let Some(c) = v.class() {
                label.push_str(&format!(" · {}", c.label()));
            }
            if let Some(s) = suffix {
                label = format!("{label} · {s}");
            }
            plot::Series {
                label,
                points: t.points().iter().map(|p| (p.n, p.t)).collect(),
                model: v.scaling.as_ref().map(|s| s.model.clone()),
                style,
            }
        })
        .collect()
}

fn y_label(a: &Analysis, idx: &[usize]) -> &'static str {
    idx.first()
        .map_or(Metric::OncpuMean.label(), |&i| a.tables[i].metric.label())
}

#[derive(Serialize)]
struct SummaryJson<'a> {
    label: &'a str,
    root: &'a Path,
    runs: &'a [crate::analysis::analyze::RunInfo],
    verdicts: &'a [crate::analysis::Verdict],
    root_causes: &'a [crate::analysis::CaseRootCause],
    discoveries: &'a [crate::analysis::discover::Discovery],
    populations: &'a [crate::analysis::populations::PopulationSplit],
    /// Per (run, target, case): the probe's cost and the sizes it is a third or more of the
    /// time per call at.
    probe_costs: Vec<ProbeCostJson<'a>>,
    warnings: &'a [String],
}

#[derive(Serialize)]
struct ProbeCostJson<'a> {
    run: &'a str,
    target: &'a str,
    case_name: &'a str,
    #[serde(flatten)]
    check: &'a crate::analysis::probecost::ProbeCostCheck,
}

/// Render one analysed data set; returns its warnings (the analysis's, then the exports').
fn render_analysis(
    ds: &Dataset,
    a: &Analysis,
    out: &mut OutDir,
    opts: &ReportOptions,
) -> Result<Vec<String>, ReportError> {
    let mut links: BTreeMap<String, TargetLinks> = BTreeMap::new();
    let target_list = targets(a);
    for (target, idx) in &target_list {
        let l = links.entry(target.clone()).or_default();
        if idx.is_empty() {
            continue;
        }
        let stem = out::safe(target);
        for (ext, body) in [
            ("md", tables::markdown(target, a, idx)),
            ("csv", tables::csv(a, idx)),
            ("json", tables::json(a, idx)),
        ] {
            let rel = format!("tables/{stem}.{ext}");
            out.write(&rel, body.as_bytes())?;
            l.tables.push((ext.to_string(), rel));
        }
        l.tables_html = Some(tables::html(a, idx));
        let title = format!("{target}: {} vs N", y_label(a, idx));
        if let Some(svg) = plot::loglog_svg(&title, y_label(a, idx), &plot_series(a, idx, None, 0))
        {
            let rel = format!("plots/{stem}.svg");
            out.write(&rel, svg.as_bytes())?;
            l.plot = Some(rel);
        }
    }

    let mut target_list = target_list;
    if !a.discoveries.is_empty() {
        // Whole-process profiles: a section of their own, with the scaling plot of the top
        // functions of each discovery.
        let target = crate::rundata::PROFILE_TARGET.to_string();
        let l = links.entry(target.clone()).or_default();
        for (i, d) in a.discoveries.iter().enumerate() {
            let series: Vec<plot::Series> = d
                .ranked
                .iter()
                .take(discover::TERMINAL_TOP)
                .map(|g| plot::Series {
                    label: format!("{} · {}", g.function, g.scaling.class.label()),
                    points: g.points.iter().map(|p| (p.n as f64, p.incl_ns)).collect(),
                    model: Some(g.scaling.model.clone()),
                    style: 0,
                })
                .collect();
            let title = format!(
                "{} [{}]: kernel functions whose time grows (ns per {})",
                d.run, d.case_name, d.per
            );
            if let Some(svg) = plot::loglog_svg(&title, &format!("ns per {}", d.per), &series) {
                let rel = format!("plots/discover-{i}-{}.svg", out::safe(&d.case_name));
                out.write(&rel, svg.as_bytes())?;
                if l.plot.is_none() {
                    l.plot = Some(rel);
                }
            }
        }
        target_list.insert(0, (target, Vec::new()));
    }

    if opts.flamegraphs {
        render_flamegraphs(a, out, opts, &mut links)?;
    }
    let exported = if opts.exports {
        export::write_report_exports(ds, a, out, opts.trace_max_events_bytes)?
    } else {
        export::ReportExports::default()
    };
    let mut warnings = a.warnings.clone();
    warnings.extend(exported.notes.iter().cloned());

    let summary = SummaryJson {
        label: &a.label,
        root: &a.root,
        runs: &a.runs,
        verdicts: &a.verdicts,
        root_causes: &a.root_causes,
        discoveries: &a.discoveries,
        populations: &a.populations,
        probe_costs: a
            .tables
            .iter()
            .filter_map(|t| {
                Some(ProbeCostJson {
                    run: &t.run,
                    target: &t.target,
                    case_name: &t.case_name,
                    check: t.probe_cost.as_ref()?,
                })
            })
            .collect(),
        warnings: &warnings,
    };
    let mut json = serde_json::to_string_pretty(&summary).expect("summary serializes");
    json.push('\n');
    out.write("summary.json", json.as_bytes())?;
    out.write("report.txt", tables::report_text(a).as_bytes())?;

    let summary = summary::rows(a, |i| summary_links(a, i, &links));
    out.write("summary.txt", summary::text(&summary).as_bytes())?;
    let sections: Vec<(String, TargetLinks)> = target_list
        .iter()
        .map(|(t, _)| (t.clone(), links.remove(t).unwrap_or_default()))
        .collect();
    let page = index::Page {
        title: format!("tracer report: {}", a.label),
        source: a.root.display().to_string(),
        summary,
        findings: discover_findings(a)
            .into_iter()
            .chain(digest::findings(a).into_iter().map(|(kind, items)| {
                let items = items
                    .into_iter()
                    .map(|f| index::Item {
                        line: f.line,
                        details: f
                            .root_cause
                            .map(|rc| format!("root cause: {rc}"))
                            .into_iter()
                            .collect(),
                    })
                    .collect();
                (kind.title().to_string(), items)
            }))
            .chain((!a.populations.is_empty()).then(|| {
                (
                    "Mixed call populations (the mean per call mixes them)".to_string(),
                    a.populations
                        .iter()
                        .map(|p| index::Item {
                            line: tables::population_line(p),
                            details: Vec::new(),
                        })
                        .collect(),
                )
            }))
            .chain(probecost::findings(a))
            .collect(),
        warnings: warnings.clone(),
        runs: a
            .runs
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
            .collect(),
        run_header: ["run", "kernel", "status", "workload", "targets and plans"]
            .map(String::from)
            .to_vec(),
        sections: sections
            .into_iter()
            .map(|(t, l)| index::Section {
                title: t,
                plot: l.plot,
                links: l
                    .tables
                    .into_iter()
                    .map(|(ext, p)| (ext.to_uppercase(), p))
                    .collect(),
                tables_html: l.tables_html,
                groups: l.flames,
            })
            .collect(),
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

/// A summary row's links: the target's plot and the case's differential flamegraph (on-CPU
/// stacks preferred), relative to the page.
fn summary_links(
    a: &Analysis,
    i: usize,
    links: &BTreeMap<String, TargetLinks>,
) -> Vec<(String, String)> {
    let t = &a.tables[i];
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
    if a.discoveries.is_empty() {
        return Vec::new();
    }
    let items = a
        .discoveries
        .iter()
        .map(|d| {
            let mut details = Vec::new();
            if let Some(c) = &d.cause {
                details.push(format!(
                    "root cause: {} (self) carries {} of the added kernel time; via {}",
                    c.function,
                    fmt::pct(c.self_share.clamp(0.0, 1.0)),
                    c.callers.join(" → ")
                ));
            }
            for g in d.ranked.iter().skip(1).take(discover::TERMINAL_TOP - 1) {
                details.push(format!(
                    "also grows: {} {} ({} of the added time)",
                    g.function,
                    g.scaling.class.label(),
                    fmt::pct(g.added_share.min(1.0))
                ));
            }
            details.extend(discover::coverage_line(d));
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

fn render_flamegraphs(
    a: &Analysis,
    out: &mut OutDir,
    opts: &ReportOptions,
    links: &mut BTreeMap<String, TargetLinks>,
) -> Result<(), ReportError> {
    // (run, target, case id, case name, kind) -> stack indices: cases in the workload's order,
    // kinds in a fixed order.
    let mut groups: BTreeMap<(usize, String, u32, String, StackKind), Vec<usize>> = BTreeMap::new();
    for (i, s) in a.stacks.iter().enumerate() {
        if s.folded.is_empty()
            || (s.file.case == tracer_ebpf::CASE_UNPHASED && !opts.include_unphased)
        {
            continue;
        }
        groups
            .entry((
                s.run,
                s.file.target.clone(),
                s.file.case,
                s.file.case_name.clone(),
                s.file.kind,
            ))
            .or_default()
            .push(i);
    }
    for ((ri, target, _, case_name, kind), mut idx) in groups {
        idx.sort_by_key(|&i| a.stacks[i].file.n);
        let run = &a.runs[ri];
        let plan = run
            .targets
            .iter()
            .find(|t| t.name == target)
            .and_then(|t| t.plan.as_ref());
        let info = flame::FlameInfo {
            kind,
            target: &target,
            case_name: &case_name,
            kernel: &run.kernel,
            plan,
            width: opts.flame_width,
        };
        let prefix = if a.is_sweep {
            format!("{}/", out::safe(&run.label))
        } else {
            String::new()
        };
        let dir = format!(
            "flamegraphs/{prefix}{}/{}/{}",
            kind.as_str(),
            out::safe(&target),
            out::safe(&case_name)
        );
        let mut items = Vec::new();
        let mut embed = Vec::new();
        let (first, last) = (&a.stacks[idx[0]], &a.stacks[idx[idx.len() - 1]]);
        // The differential first: it is what shows which frames grow.
        if opts.differential && first.file.n != last.file.n {
            let (n0, n1) = (first.file.n, last.file.n);
            let rel = format!("{dir}/diff-n{n0}-n{n1}.svg");
            let svg = flame::differential(&info, n0, &first.folded, n1, &last.folded).map_err(
                |source| ReportError::Flamegraph {
                    path: out.root().join(&rel),
                    source,
                },
            )?;
            out.write(&rel, &svg)?;
            items.push((format!("differential N={n0} → N={n1}"), rel.clone()));
            links.entry(target.clone()).or_default().diffs.push((
                run.label.clone(),
                case_name.clone(),
                kind,
                rel.clone(),
            ));
            embed.push(rel);
        }
        for &i in &idx {
            let s = &a.stacks[i];
            let rel = format!("{dir}/n{}.svg", s.file.n);
            let svg =
                flame::flamegraph(&info, s.file.n, &s.folded, s.file.count).map_err(|source| {
                    ReportError::Flamegraph {
                        path: out.root().join(&rel),
                        source,
                    }
                })?;
            out.write(&rel, &svg)?;
            // The largest N is embedded beside the differential; the others are links.
            if i == idx[idx.len() - 1] {
                embed.push(rel.clone());
            }
            items.push((format!("N={}", s.file.n), rel));
        }
        let mut title = format!("{} · {}", case_name, flame::kind_label(kind));
        if a.is_sweep {
            title.push_str(&format!(" · {}", run.label));
        }
        links
            .entry(target.clone())
            .or_default()
            .flames
            .push(index::FlameGroup {
                title,
                items,
                embed,
            });
    }
    Ok(())
}

/// Render a comparison of two runs or sweeps (`a` is the baseline) into `out_dir`: each side's
/// full report under `a/` and `b/`, the comparison tables (`compare.{md,csv,json,txt}`), one
/// plot per target with both sides (B dashed), per target and case the differential
/// flamegraph from A to B at the largest N both sampled
/// (`flamegraphs/<kind>/<target>/<case>/diff-a-b-n<N>.svg`), and an index.
pub fn compare_report(
    a_dir: &Path,
    b_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let (da, db) = (load(a_dir)?, load(b_dir)?);
    let aa = analyze(&da, &opts.analysis())?;
    let ab = analyze(&db, &opts.analysis())?;
    let mut out = OutDir::create(out_dir)?;
    let mut side_warnings = Vec::new();
    for (sub, ds, an) in [("a", &da, &aa), ("b", &db, &ab)] {
        let mut side = out.nested(sub)?;
        side_warnings.push(render_analysis(ds, an, &mut side, opts)?);
        out.adopt(sub, side.written());
    }
    let c = compare::compare(&aa, &ab);
    out.write("compare.md", tables::compare_markdown(&c).as_bytes())?;
    out.write("compare.csv", tables::compare_csv(&c).as_bytes())?;
    out.write("compare.json", tables::compare_json(&c).as_bytes())?;
    let table = tables::compare_terminal(&c);

    let (ta, tb) = (targets(&aa), targets(&ab));
    let mut names: Vec<String> = ta.iter().map(|(t, _)| t.clone()).collect();
    for (t, _) in &tb {
        if !names.contains(t) {
            names.push(t.clone());
        }
    }
    let mut sections = Vec::new();
    for name in &names {
        let ia = ta
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, i)| i.clone())
            .unwrap_or_default();
        let ib = tb
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, i)| i.clone())
            .unwrap_or_default();
        let mut series = plot_series(&aa, &ia, Some(&c.label_a), 0);
        series.extend(plot_series(&ab, &ib, Some(&c.label_b), 1));
        let y = if ia.is_empty() {
            y_label(&ab, &ib)
        } else {
            y_label(&aa, &ia)
        };
        let mut plot_rel = None;
        if let Some(svg) = plot::loglog_svg(&format!("{name}: {y} vs N"), y, &series) {
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
            cross_kernel_flames(&aa, &ab, (&c.label_a, &c.label_b), name, &mut out, opts)?
        } else {
            Vec::new()
        };
        sections.push(index::Section {
            title: name.clone(),
            plot: plot_rel,
            links,
            tables_html: None,
            groups,
        });
    }
    let summary = compare_summary(&aa, &ab, &c, &sections);
    let summary_text = summary::text(&summary);
    out.write("summary.txt", summary_text.as_bytes())?;
    // The thread findings across kernels first, then every quantity side by side.
    let terminal = format!(
        "Summary ({} → {}):\n{summary_text}\n{table}",
        c.label_a, c.label_b
    );
    out.write("compare.txt", terminal.as_bytes())?;

    let mut verdicts: Vec<String> = c.classes.iter().map(|cl| cl.line.clone()).collect();
    verdicts.extend(
        aa.verdicts
            .iter()
            .map(|v| format!("{}: {}", c.label_a, v.line)),
    );
    verdicts.extend(
        ab.verdicts
            .iter()
            .map(|v| format!("{}: {}", c.label_b, v.line)),
    );
    let root_causes: Vec<String> = aa
        .root_causes
        .iter()
        .map(|r| format!("{}: {}", c.label_a, rootcause::line(&r.cause)))
        .chain(
            ab.root_causes
                .iter()
                .map(|r| format!("{}: {}", c.label_b, rootcause::line(&r.cause))),
        )
        .collect();
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
    // One item per class change, with each side's verdict and root cause under it.
    let side_lines = |an: &Analysis, label: &str, target: &str, case: &str| -> Vec<String> {
        let mut v = Vec::new();
        for (t, vd) in an.tables.iter().zip(&an.verdicts) {
            if t.target == target && t.case_name == case {
                v.push(format!("{label}: {}", vd.line));
                if let Some(rc) = rootcause::root_cause_of(an, t) {
                    v.push(format!(
                        "{label}: root cause: {}",
                        rootcause::line(&rc.cause)
                    ));
                }
            }
        }
        v
    };
    let (mut changed, mut same) = (Vec::new(), Vec::new());
    for cl in &c.classes {
        let mut details = side_lines(&aa, &c.label_a, &cl.target, &cl.case_name);
        details.extend(side_lines(&ab, &c.label_b, &cl.target, &cl.case_name));
        let item = index::Item {
            line: cl.line.clone(),
            details,
        };
        if cl.a == cl.b {
            same.push(item);
        } else {
            changed.push(item);
        }
    }
    let findings: Vec<(String, Vec<index::Item>)> = [
        ("Scaling class changed".to_string(), changed),
        ("Same scaling class".to_string(), same),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect();
    let page = index::Page {
        title: format!("tracer compare: {} vs {}", c.label_a, c.label_b),
        source: format!("A = {}, B = {}", a_dir.display(), b_dir.display()),
        summary,
        findings,
        warnings: warnings.clone(),
        run_header: ["side", "report"].map(String::from).to_vec(),
        runs: vec![],
        sections,
        other: vec![
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
        ],
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

/// Stacks of one target by (case, kind) and N, the first of each when runs repeat them.
type StacksByN<'a> = BTreeMap<(String, StackKind), BTreeMap<u64, &'a crate::analysis::StackData>>;

fn stacks_by_n<'a>(an: &'a Analysis, target: &str, opts: &ReportOptions) -> StacksByN<'a> {
    let mut m: StacksByN<'a> = BTreeMap::new();
    for s in &an.stacks {
        if s.file.target != target
            || s.folded.is_empty()
            || (s.file.case == tracer_ebpf::CASE_UNPHASED && !opts.include_unphased)
        {
            continue;
        }
        m.entry((s.file.case_name.clone(), s.file.kind))
            .or_default()
            .entry(s.file.n)
            .or_insert(s);
    }
    m
}

/// Differential flamegraphs of one target between the two sides, per (case, stack kind) at the
/// largest N both sides sampled: what a kernel change did to the stacks at the same size.
fn cross_kernel_flames(
    aa: &Analysis,
    ab: &Analysis,
    (label_a, label_b): (&str, &str),
    target: &str,
    out: &mut OutDir,
    opts: &ReportOptions,
) -> Result<Vec<index::FlameGroup>, ReportError> {
    let (sa, sb) = (stacks_by_n(aa, target, opts), stacks_by_n(ab, target, opts));
    let mut groups = Vec::new();
    for ((case_name, kind), by_n_a) in &sa {
        let Some(by_n_b) = sb.get(&(case_name.clone(), *kind)) else {
            continue;
        };
        let Some((&n, before)) = by_n_a.iter().rev().find(|(n, _)| by_n_b.contains_key(n)) else {
            continue;
        };
        let after = by_n_b[&n];
        let run_b = &ab.runs[after.run];
        // Each side cut at the target by its own plan's frames, so the two kernels' stacks
        // line up below it.
        let anchors = |an: &Analysis, s: &crate::analysis::StackData| {
            let plan = an.runs[s.run]
                .targets
                .iter()
                .find(|t| t.name == target)
                .and_then(|t| t.plan.as_ref());
            crate::analysis::stacks::Anchors::new(target, plan)
        };
        let before_aligned = before.folded.aligned(&anchors(aa, before));
        let after_aligned = after.folded.aligned(&anchors(ab, after));
        let info = flame::FlameInfo {
            kind: *kind,
            target,
            case_name,
            kernel: &run_b.kernel,
            plan: None,
            width: opts.flame_width,
        };
        let rel = format!(
            "flamegraphs/{}/{}/{}/diff-a-b-n{n}.svg",
            kind.as_str(),
            out::safe(target),
            out::safe(case_name)
        );
        let svg = flame::cross_kernel(&info, n, label_a, &before_aligned, label_b, &after_aligned)
            .map_err(|source| ReportError::Flamegraph {
                path: out.root().join(&rel),
                source,
            })?;
        out.write(&rel, &svg)?;
        groups.push(index::FlameGroup {
            title: format!(
                "{case_name} · {} · {label_a} → {label_b} at N={n}",
                flame::kind_label(*kind)
            ),
            items: vec![(
                format!("differential {label_a} → {label_b}, N={n}"),
                rel.clone(),
            )],
            embed: vec![rel],
        });
    }
    Ok(groups)
}

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
fn compare_summary(
    aa: &Analysis,
    ab: &Analysis,
    c: &compare::Comparison,
    sections: &[index::Section],
) -> Vec<index::SummaryRow> {
    let side = |an: &Analysis, target: &str, case: &str| {
        let i = an
            .tables
            .iter()
            .position(|t| t.target == target && t.case_name == case)?;
        let (t, v) = (&an.tables[i], &an.verdicts[i]);
        let growth = v.scaling.as_ref().map(summary::growth).unwrap_or_default();
        let cause = rootcause::root_cause_of(an, t).map(|rc| summary::cause(&rc.cause));
        let grows = v
            .class()
            .is_some_and(|c| c != crate::analysis::fit::Complexity::Constant);
        let slope = v
            .scaling
            .as_ref()
            .filter(|_| grows)
            .map(summary::slope)
            .unwrap_or_else(|| "-".into());
        Some((growth, cause, slope, t.via().unwrap_or_default()))
    };
    let class = |cl: Option<crate::analysis::fit::Complexity>| {
        cl.map_or("not fitted", |c| c.label()).to_string()
    };
    let labels = short_labels(&c.label_a, &c.label_b);
    let mut rows: Vec<index::SummaryRow> = c
        .classes
        .iter()
        .map(|cl| {
            let mut growth = Vec::new();
            let mut causes = Vec::new();
            let mut slopes = Vec::new();
            let mut plans = Vec::new();
            for (an, label) in [(aa, &labels.0), (ab, &labels.1)] {
                if let Some((g, rc, slope, plan)) = side(an, &cl.target, &cl.case_name) {
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
            // One plan for both sides when they agree.
            plans.dedup();
            let mut links = vec![(
                "tables".to_string(),
                format!("#{}", index::anchor(&cl.target)),
            )];
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
            index::SummaryRow {
                target: cl.target.clone(),
                case: cl.case_name.clone(),
                class: format!("{} → {}", class(cl.a), class(cl.b)),
                slope: slopes,
                growth,
                root_cause: causes,
                plan: plans,
                links,
                grows: cl.a != cl.b,
                relevant: workloads::cases::is_thread_target(&cl.case_name, &cl.target),
            }
        })
        .collect();
    rows.sort_by_key(|r| !r.relevant);
    rows
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
