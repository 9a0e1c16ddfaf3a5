//! `summary.json`: the runs, verdicts, root causes, discoveries, call populations, each case's
//! probe cost against its times, and the warnings, as data.

use std::path::Path;

use serde::Serialize;

use crate::analysis::Analysis;

#[derive(Serialize)]
struct SummaryJson<'a> {
    label: &'a str,
    root: &'a Path,
    runs: &'a [crate::analysis::analyze::RunInfo],
    verdicts: Vec<VerdictJson<'a>>,
    root_causes: Vec<RootCauseJson<'a>>,
    discoveries: Vec<&'a crate::analysis::discover::Discovery>,
    populations: Vec<&'a crate::analysis::populations::PopulationSplit>,
    /// Calls of one target per call of another it ran inside (runs with nested targets).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    trip_counts: Vec<&'a crate::analysis::trips::TripCount>,
    /// Per (run, target, case): the probe's cost and the sizes it is a third or more of the
    /// time per call at.
    probe_costs: Vec<ProbeCostJson<'a>>,
    warnings: &'a [String],
}

/// A case's verdict under the names of its run, kernel, target and case.
#[derive(Serialize)]
struct VerdictJson<'a> {
    run: &'a str,
    kernel: &'a str,
    target: &'a str,
    case_name: &'a str,
    #[serde(flatten)]
    verdict: super::verdict::VerdictJson<'a>,
}

/// A case's root cause under the names of its run, target and case.
#[derive(Serialize)]
struct RootCauseJson<'a> {
    run: &'a str,
    target: &'a str,
    case_name: &'a str,
    #[serde(flatten)]
    root_cause: &'a crate::analysis::CaseRootCause,
}

#[derive(Serialize)]
struct ProbeCostJson<'a> {
    run: &'a str,
    target: &'a str,
    case_name: &'a str,
    #[serde(flatten)]
    check: &'a crate::analysis::probecost::ProbeCostCheck,
}

/// The pretty-printed `summary.json` of an analysis, with the report's `warnings`.
pub(super) fn text(a: &Analysis, warnings: &[String]) -> String {
    let summary = SummaryJson {
        label: &a.label,
        root: &a.root,
        runs: &a.runs,
        verdicts: a
            .cases()
            .map(|c| VerdictJson {
                run: &c.table.run,
                kernel: &c.table.kernel,
                target: &c.table.target,
                case_name: &c.table.case_name,
                verdict: super::verdict::VerdictJson::of(c),
            })
            .collect(),
        root_causes: a
            .cases()
            .filter_map(|c| {
                Some(RootCauseJson {
                    run: &c.table.run,
                    target: &c.table.target,
                    case_name: &c.table.case_name,
                    root_cause: c.root_cause.as_ref()?,
                })
            })
            .collect(),
        discoveries: a.discoveries().collect(),
        populations: a.populations().collect(),
        trip_counts: a.trip_counts(),
        probe_costs: a
            .cases()
            .map(|c| &c.table)
            .filter_map(|t| {
                Some(ProbeCostJson {
                    run: &t.run,
                    target: &t.target,
                    case_name: &t.case_name,
                    check: t.probe_cost.as_ref()?,
                })
            })
            .collect(),
        warnings,
    };
    let mut json = serde_json::to_string_pretty(&summary).expect("summary serializes");
    json.push('\n');
    json
}
