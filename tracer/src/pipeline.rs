//! The offline pipeline the commands drive: load a run or sweep directory (`analysis::load`),
//! analyse it (`analysis::analyze`), render it (`render`). Each stage takes the previous
//! one's result; nothing downstream reads the run directory again.
use std::path::Path;

use crate::analysis::{self, Analysis, Comparison, analyze, load};
use crate::render::{self, ReportError, ReportOptions, ReportSummary};

/// Load, analyse and render the run or sweep at `data_dir` into `out_dir`.
pub fn report(
    data_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    report_analysed(data_dir, out_dir, opts).map(|(s, _)| s)
}

/// [`report`], returning the analysis it rendered too (what `--expect` judges).
pub fn report_analysed(
    data_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<(ReportSummary, Analysis), ReportError> {
    let ds = load(data_dir)?;
    let a = analyze(&ds, &opts.analysis());
    Ok((render::write_report(&ds, &a, out_dir, opts)?, a))
}

/// Load and analyse the run or sweep at `data_dir`, rendering nothing.
pub fn analyse(data_dir: &Path, opts: &ReportOptions) -> Result<Analysis, ReportError> {
    Ok(analyze(&load(data_dir)?, &opts.analysis()))
}

/// Load and analyse two runs or sweeps (`a_dir` the baseline) and render their comparison
/// into `out_dir`.
pub fn compare(
    a_dir: &Path,
    b_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    compare_analysed(a_dir, b_dir, out_dir, opts, |_| ()).map(|(s, _)| s)
}

/// [`compare`], and `then` applied to the comparison it rendered (what `--fail-on` judges):
/// the comparison borrows from both sides' analyses, which live here.
pub fn compare_analysed<T>(
    a_dir: &Path,
    b_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
    then: impl FnOnce(&Comparison) -> T,
) -> Result<(ReportSummary, T), ReportError> {
    let (da, db) = (load(a_dir)?, load(b_dir)?);
    let aa = analyze(&da, &opts.analysis());
    let ab = analyze(&db, &opts.analysis());
    let c = analysis::compare(&aa, &ab);
    let summary = render::write_compare((&da, &aa), (&db, &ab), &c, out_dir, opts)?;
    Ok((summary, then(&c)))
}
