//! The offline pipeline the commands drive: load a run or sweep directory (`analysis::load`),
//! analyse it (`analysis::analyze`), render it (`render`). Each stage takes the previous
//! one's result; nothing downstream reads the run directory again.
use std::path::Path;

use crate::analysis::{analyze, load};
use crate::render::{self, ReportError, ReportOptions, ReportSummary};

/// Load, analyse and render the run or sweep at `data_dir` into `out_dir`.
pub fn report(
    data_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let ds = load(data_dir)?;
    let a = analyze(&ds, &opts.analysis());
    render::write_report(&ds, &a, out_dir, opts)
}

/// Load and analyse two runs or sweeps (`a_dir` the baseline) and render their comparison
/// into `out_dir`.
pub fn compare(
    a_dir: &Path,
    b_dir: &Path,
    out_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let (da, db) = (load(a_dir)?, load(b_dir)?);
    let aa = analyze(&da, &opts.analysis());
    let ab = analyze(&db, &opts.analysis());
    render::write_compare((&da, &aa), (&db, &ab), out_dir, opts)
}
