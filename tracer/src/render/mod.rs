//! Rendering of analysed run data: tables (Markdown, CSV, JSON, terminal), flamegraph SVGs
//! (inferno), log-log scaling plots, and an index linking everything.
//!
//! Entry points: [`write_report`] renders one run or sweep directory, [`write_compare`] two of them
//! side by side. Both only read saved data (no root, no live kernel) and write every file
//! atomically into the output directory, the index last.
//!
//! Output layout of [`write_report`]:
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
//!
//! Layout: `dataset` writes one report's directory from the pieces (`tables`, `plots`,
//! `flamegraphs`, `summary_json`, `terminal` for the terminal and `report.txt`, `index` for
//! `index.html` and `README.md`); `compare` writes a comparison from two of them. The analysis
//! returns data; `verdict`, `warnings` and `rootcause` write its sentences.

pub mod compare;
mod dataset;
pub mod digest;
pub mod discover;
pub mod entries;
pub mod export;
mod flamegraphs;
pub mod flamesvg;
pub mod fmt;
pub mod histogram;
mod index;
pub mod out;
pub mod page;
mod plots;
pub mod probecost;
pub mod rootcause;
pub mod runlength;
pub mod summary;
mod summary_json;
pub mod svgplot;
pub mod tables;
mod terminal;
pub mod trips;
pub mod verdict;
pub mod warnings;
pub mod xml;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::table::Metric;
use crate::analysis::{Analysis, AnalysisOptions, Dataset, LoadError};

pub use compare::write_compare;
pub use out::OutDir;
pub use xml::check_well_formed;

/// Errors of [`write_report`] and [`write_compare`]; each names the path involved.
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
    pub fn analysis(&self) -> AnalysisOptions {
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

/// Render an analysed run or sweep into `out_dir` (`crate::pipeline::report` loads and
/// analyses it first).
pub fn write_report(
    ds: &Dataset,
    a: &Analysis,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let mut out = OutDir::create(out_dir)?;
    let warnings = dataset::render(ds, a, &mut out, opts)?;
    let files = out.written().iter().map(|f| out_dir.join(f)).collect();
    out.commit()?;
    Ok(ReportSummary {
        out_dir: out_dir.to_path_buf(),
        verdicts: a.cases().map(verdict::line).collect(),
        root_causes: a.root_causes().map(|r| rootcause::line(&r.cause)).collect(),
        warnings,
        files,
        terminal: terminal::terminal(a),
    })
}
