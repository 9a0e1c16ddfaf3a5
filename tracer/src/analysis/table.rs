//! Per-N tables: one per traced target and workload case, one row per N.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::rundata::{Dist, InvocationSpan, PlanUsed, Run, RunRole, SpanRow};

use super::fit::Point;
use super::hist;
use super::probecost::{self, ProbeCostCheck};
use super::raw::RawPercentiles;
use super::stats::{mean, median, variance};

/// Which per-call time the scaling fit and plots use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// On-CPU mean when the run measured on-CPU time, else wall mean.
    #[default]
    Auto,
    /// Mean on-CPU time per call: the loop's cost, without time blocked.
    OncpuMean,
    /// Mean wall time per call (includes sleeping, e.g. do_wait waiting for the child).
    WallMean,
}

impl Metric {
    pub fn label(self) -> &'static str {
        match self {
            Metric::Auto | Metric::OncpuMean => "on-CPU time per call",
            Metric::WallMean => "wall time per call",
        }
    }
}

/// Where a row's percentiles come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PercentileSource {
    /// Estimated from the in-kernel log-linear histogram: within 1/16 of the value.
    Histogram,
    /// Exact nearest-rank values from every call's span in `events.csv`.
    RawSpans,
}

impl PercentileSource {
    /// The name in CSV and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            PercentileSource::Histogram => "histogram",
            PercentileSource::RawSpans => "raw-spans",
        }
    }
}

/// One N of a [`CaseTable`]. Timing fields are None when not measured (count-only plans,
/// no timed calls): "unavailable", never zero.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Row {
    pub n: u64,
    pub calls: u64,
    pub untimed: u64,
    /// Workload operations in the phases of this (case, N).
    pub ops: Option<u64>,
    pub calls_per_op: Option<f64>,
    pub oncpu_mean_ns: Option<f64>,
    pub oncpu_p50_ns: Option<f64>,
    pub oncpu_p90_ns: Option<f64>,
    pub oncpu_p99_ns: Option<f64>,
    pub oncpu_max_ns: Option<f64>,
    /// None when there are no percentiles.
    pub percentiles_from: Option<PercentileSource>,
    /// Wall minus on-CPU, per call: time blocked.
    pub offcpu_mean_ns: Option<f64>,
    pub wall_mean_ns: Option<f64>,
    /// Wall time of all timed calls.
    pub total_ns: Option<u64>,
    /// The workload's own time per op (median over repeats), or phase wall / ops without a
    /// workload report.
    pub op_ns: Option<f64>,
    /// "workload" or "phases": where `op_ns` came from.
    pub op_source: Option<String>,
    /// Per-repeat times per op from the workload report.
    pub op_repeats_ns: Vec<f64>,
    /// Relative standard deviation over the workload's repeats (≥ 2) of its own CPU time per
    /// op when the fitted metric is on-CPU time (wall time per op otherwise): the run-to-run
    /// noise of this (case, N). The target's own time is aggregated over all repeats, so the
    /// workload's spread stands in for it.
    pub repeat_rel_sd: Option<f64>,
    /// The fitted metric's robust centre in each run of the command at this N (an external
    /// sweep's runs, in the order they ran): each is a point of its own in the fits, and with
    /// two or more `time_per_call_ns` is their median.
    pub run_times_ns: Vec<f64>,
    /// Target wall time per op (mean wall × calls per op).
    pub target_ns_per_op: Option<f64>,
    /// `target_ns_per_op / op_ns`.
    pub share_of_op: Option<f64>,
    /// The fitted metric per call (the robust centre: the calls' mean with the fastest and the
    /// slowest [`hist::TRIM`] of them left out), the calls' spread as that centre sees it
    /// ([`hist::trimmed_sd`], from the histogram: over √calls, the centre's standard error),
    /// and the number of timed calls behind it.
    pub time_per_call_ns: Option<f64>,
    pub time_per_call_sd_ns: Option<f64>,
    pub timed_calls: u64,
    /// The probe's own cost per call over `time_per_call_ns` ([`super::probecost`]).
    pub probe_share: Option<f64>,
    /// `time_per_call_ns` is within 3 times the probe's cost: the probe is a third or more
    /// of what is measured.
    pub probe_flagged: bool,
    /// `time_per_call_ns` minus the probe's cost (with `--subtract-probe-cost`).
    pub corrected_time_per_call_ns: Option<f64>,
    /// The per-call histogram behind `time_per_call_ns` (None without timed calls), for the
    /// terminal's histograms. Not in the tables' JSON: run.json has every histogram.
    #[serde(skip)]
    pub hist: Option<Dist>,
}

impl Row {
    /// Relative standard error of `time_per_call_ns` from the per-call histogram alone.
    pub fn hist_rel_se(&self) -> Option<f64> {
        let (m, sd) = (self.time_per_call_ns?, self.time_per_call_sd_ns?);
        (m > 0.0 && self.timed_calls > 0).then(|| sd / (self.timed_calls as f64).sqrt() / m)
    }

    /// Relative standard error of `time_per_call_ns`: the histogram's and the repeats'
    /// (relative spread / √repeats) in quadrature. The second is usually the larger: calls
    /// within one run vary less than runs do.
    pub fn rel_se(&self) -> Option<f64> {
        let hist = self.hist_rel_se();
        let repeats = self.op_repeats_ns.len().max(self.run_times_ns.len());
        let reps = self
            .repeat_rel_sd
            .map(|sd| sd / (repeats.max(1) as f64).sqrt());
        match (hist, reps) {
            (None, None) => None,
            (h, r) => Some((h.unwrap_or(0.0).powi(2) + r.unwrap_or(0.0).powi(2)).sqrt()),
        }
    }
}

/// The centre of one run's calls of a target, as the tables fit it: the trimmed mean of its
/// on-CPU times (`oncpu`) or of its wall times. None without calls.
pub fn run_centre(span: &InvocationSpan, oncpu: bool) -> Option<f64> {
    let d = if oncpu { &span.oncpu } else { &span.wall };
    hist::trimmed_mean(d, hist::TRIM).filter(|t| *t > 0.0)
}

/// Relative standard deviation of repeated values (None under two, or with a zero mean).
fn rel_sd(v: &[f64]) -> Option<f64> {
    match (variance(v), mean(v)) {
        (Some(var), Some(m)) if m > 0.0 => Some(var.sqrt() / m),
        _ => None,
    }
}

/// Relative standard error of the value fitted from runs' centres: their relative spread over
/// √runs (as [`Row::rel_se`] counts the repeats). None under two runs.
pub fn rel_se_of_runs(runs: &[f64]) -> Option<f64> {
    rel_sd(runs).map(|sd| sd / (runs.len() as f64).sqrt())
}

/// The rows of one target and case in one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseTable {
    /// Run label (the run directory's name).
    pub run: String,
    pub kernel: String,
    pub target: String,
    pub case: u32,
    pub case_name: String,
    pub plan: Option<PlanUsed>,
    /// False for count-only plans.
    pub timed: bool,
    /// The resolved metric (never `Auto`).
    pub metric: Metric,
    pub rows: Vec<Row>,
    /// The plan's own cost per call and the sizes it is large at (None for runs recorded
    /// before it was measured).
    pub probe_cost: Option<ProbeCostCheck>,
}

impl CaseTable {
    /// What its run is to its sweep.
    pub fn role(&self) -> RunRole {
        RunRole::of(&self.run).0
    }

    /// Points for the scaling fit (N > 0 with a time).
    pub fn points(&self) -> Vec<Point> {
        self.rows
            .iter()
            .filter_map(|r| {
                let t = r.time_per_call_ns?;
                (r.n > 0 && t > 0.0).then(|| Point {
                    n: r.n as f64,
                    t,
                    rel_se: r.rel_se(),
                })
            })
            .collect()
    }

    /// Every run of every size as its own point (the evidence between classes): the runs'
    /// times where a row has two or more, else the row's point.
    pub fn run_points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for r in self.rows.iter().filter(|r| r.n > 0) {
            if r.run_times_ns.len() >= 2 {
                out.extend(r.run_times_ns.iter().filter(|t| **t > 0.0).map(|&t| Point {
                    n: r.n as f64,
                    t,
                    rel_se: None,
                }));
            } else if let Some(t) = r.time_per_call_ns.filter(|t| *t > 0.0) {
                out.push(Point {
                    n: r.n as f64,
                    t,
                    rel_se: r.rel_se(),
                });
            }
        }
        out
    }

    /// `target [case]`, the name used in verdicts and file names.
    pub fn key(&self) -> String {
        format!("{} [{}]", self.target, self.case_name)
    }

    /// The plan measured something other than the target itself (a stand-in).
    pub fn stand_in(&self) -> Option<String> {
        let p = self.plan.as_ref()?;
        (!p.attach_points.iter().any(|a| a == &self.target))
            .then(|| format!("{} {}", p.plan, p.attach_points.join(",")))
    }
}

/// The workload's own report (`--json`), parsed leniently: unknown fields are ignored and
/// malformed results skipped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    #[serde(default)]
    pub workload: String,
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub results: Vec<WorkloadResult>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    #[serde(default)]
    pub case: String,
    #[serde(default)]
    pub case_id: Option<u32>,
    pub n: u64,
    #[serde(default)]
    pub repeat: u32,
    #[serde(default)]
    pub iterations: u64,
    #[serde(default)]
    pub ops: u64,
    #[serde(default)]
    pub total_ns: u64,
    pub time_ns_per_op: f64,
    #[serde(default)]
    pub cpu_ns_per_op: Option<f64>,
}

impl WorkloadReport {
    /// Parse the `workload` value of a run; results that do not parse are counted in the
    /// second value.
    pub fn from_value(v: &serde_json::Value) -> (WorkloadReport, usize) {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        let mut rep = WorkloadReport {
            workload: s("workload"),
            kernel: s("kernel"),
            status: s("status"),
            results: vec![],
        };
        let mut bad = 0;
        for r in v
            .get("results")
            .and_then(|r| r.as_array())
            .map(|a| a.as_slice())
            .unwrap_or(&[])
        {
            match serde_json::from_value::<WorkloadResult>(r.clone()) {
                Ok(r) => rep.results.push(r),
                Err(_) => bad += 1,
            }
        }
        (rep, bad)
    }

    /// Per-repeat times per op of one (case, N), in repeat order.
    pub fn times(&self, case: u32, case_name: &str, n: u64) -> Vec<f64> {
        self.per_repeat(case, case_name, n, |r| Some(r.time_ns_per_op))
    }

    /// Per-repeat CPU times per op of one (case, N), in repeat order; empty unless every
    /// repeat reported one.
    pub fn cpu_times(&self, case: u32, case_name: &str, n: u64) -> Vec<f64> {
        let v = self.per_repeat(case, case_name, n, |r| r.cpu_ns_per_op);
        if v.len() == self.times(case, case_name, n).len() {
            v
        } else {
            Vec::new()
        }
    }

    fn per_repeat(
        &self,
        case: u32,
        case_name: &str,
        n: u64,
        value: impl Fn(&WorkloadResult) -> Option<f64>,
    ) -> Vec<f64> {
        let mut v: Vec<(u32, f64)> = self
            .results
            .iter()
            .filter(|r| {
                r.n == n
                    && (r.case_id == Some(case) || (r.case_id.is_none() && r.case == case_name))
            })
            .filter_map(|r| Some((r.repeat, value(r)?)))
            .filter(|(_, t)| t.is_finite() && *t > 0.0)
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        v.into_iter().map(|(_, t)| t).collect()
    }
}

#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    pub metric: Metric,
    /// Include spans outside any workload phase (case 0).
    pub include_unphased: bool,
    /// Give each row its time per call minus the probe's measured cost, beside the measured.
    pub subtract_probe_cost: bool,
}

/// Tables for every (target, case) with spans in `run`, in target order then case id.
/// Percentiles are exact where `raw` (the run's `events.csv`) holds every timed call of a row,
/// and estimated from the histograms elsewhere.
pub fn tables(
    run: &Run,
    label: &str,
    opts: &TableOptions,
    raw: Option<&RawPercentiles>,
) -> Vec<CaseTable> {
    let workload = run
        .workload
        .as_ref()
        .map(|v| WorkloadReport::from_value(v).0);
    let mut groups: BTreeMap<(usize, u32), Vec<&SpanRow>> = BTreeMap::new();
    for s in &run.spans {
        if s.case == tracer_ebpf::CASE_UNPHASED && !opts.include_unphased {
            continue;
        }
        let Some(ti) = run.targets.iter().position(|t| t.name == s.target) else {
            continue;
        };
        groups.entry((ti, s.case)).or_default().push(s);
    }
    let mut out = Vec::new();
    for ((ti, case), mut spans) in groups {
        spans.sort_by_key(|s| s.n);
        let target = &run.targets[ti];
        let plan_timed = target.plan.as_ref().is_none_or(|p| p.timed);
        let has_oncpu = spans.iter().any(|s| s.oncpu.sum_ns > 0);
        let metric = match opts.metric {
            Metric::Auto if has_oncpu => Metric::OncpuMean,
            Metric::Auto => Metric::WallMean,
            m => m,
        };
        let case_name = spans[0].case_name.clone();
        let mut rows: Vec<Row> = spans
            .iter()
            .map(|s| {
                let mut r = row(run, s, plan_timed, has_oncpu, metric, workload.as_ref());
                exact_percentiles(&mut r, raw, s);
                r
            })
            .collect();
        let timed = plan_timed && rows.iter().any(|r| r.timed_calls > 0);
        let times: Vec<(u64, Option<f64>)> =
            rows.iter().map(|r| (r.n, r.time_per_call_ns)).collect();
        let probe_cost =
            probecost::check(target.probe_cost.as_ref(), &times, opts.subtract_probe_cost).map(
                |(check, sizes)| {
                    for (r, size) in rows.iter_mut().zip(sizes) {
                        r.probe_share = size.share;
                        r.probe_flagged = size.flagged;
                        r.corrected_time_per_call_ns = size.corrected_ns;
                    }
                    check
                },
            );
        out.push(CaseTable {
            run: label.to_string(),
            kernel: run.kernel.release.clone(),
            target: target.name.clone(),
            case,
            case_name,
            plan: target.plan.clone(),
            timed,
            metric,
            rows,
            probe_cost,
        });
    }
    out
}

/// Replace a row's estimated percentiles by exact ones when the raw spans hold every timed
/// call of it (none were dropped from the ring buffer, nor missing from the file).
fn exact_percentiles(r: &mut Row, raw: Option<&RawPercentiles>, s: &SpanRow) {
    if r.oncpu_p50_ns.is_none() {
        return;
    }
    let Some(e) = raw.and_then(|raw| raw.get(&s.target, s.case, s.n)) else {
        return;
    };
    if e.count != r.timed_calls {
        return;
    }
    let [p50, p90, p99] = e.oncpu.map(|v| Some(v as f64));
    r.oncpu_p50_ns = p50;
    r.oncpu_p90_ns = p90;
    r.oncpu_p99_ns = p99;
    r.percentiles_from = Some(PercentileSource::RawSpans);
}

fn row(
    run: &Run,
    s: &SpanRow,
    plan_timed: bool,
    has_oncpu: bool,
    metric: Metric,
    workload: Option<&WorkloadReport>,
) -> Row {
    let timed_calls = if plan_timed { hist::count(&s.wall) } else { 0 };
    let timed = timed_calls > 0;
    let phase = run.phases.iter().find(|p| p.case == s.case && p.n == s.n);
    let ops = phase.map(|p| p.ops).filter(|o| *o > 0);
    let calls_per_op = ops.map(|o| s.calls as f64 / o as f64);
    let on =
        |d: &Dist, f: &dyn Fn(&Dist) -> Option<f64>| if timed && has_oncpu { f(d) } else { None };
    let oncpu_mean_ns = on(&s.oncpu, &|d| Some(d.sum_ns as f64 / timed_calls as f64));
    let wall_mean_ns = timed.then(|| s.wall.sum_ns as f64 / timed_calls as f64);
    let offcpu_mean_ns = match (wall_mean_ns, oncpu_mean_ns) {
        (Some(w), Some(c)) => Some((w - c).max(0.0)),
        _ => None,
    };
    let op_repeats_ns = workload
        .map(|w| w.times(s.case, &s.case_name, s.n))
        .unwrap_or_default();
    let oncpu_fitted = matches!(metric, Metric::OncpuMean) && has_oncpu;
    let noise_source = match workload {
        Some(w) if oncpu_fitted => {
            let cpu = w.cpu_times(s.case, &s.case_name, s.n);
            if cpu.is_empty() {
                op_repeats_ns.clone()
            } else {
                cpu
            }
        }
        _ => op_repeats_ns.clone(),
    };
    let run_times_ns = if timed {
        run_times(run, s, oncpu_fitted)
    } else {
        Vec::new()
    };
    // The workload's repeats where it reports them, else the command's runs.
    let repeat_rel_sd = rel_sd(&noise_source).or_else(|| rel_sd(&run_times_ns));
    let (op_ns, op_source) = op_time(&op_repeats_ns, phase, ops);
    let target_ns_per_op = match (wall_mean_ns, calls_per_op) {
        (Some(w), Some(c)) => Some(w * c),
        _ => None,
    };
    let share_of_op = match (target_ns_per_op, op_ns) {
        (Some(t), Some(o)) if o > 0.0 => Some(t / o),
        _ => None,
    };
    // The fitted value is the robust centre of the calls (a trimmed mean), not their mean: one
    // call preempted for milliseconds among a few dozen must not move a size's value
    // several-fold. The means stay as columns.
    let fitted = match metric {
        Metric::OncpuMean if has_oncpu => &s.oncpu,
        _ => &s.wall,
    };
    let (time_per_call_ns, time_per_call_sd_ns) = if timed {
        fitted_time(fitted, &run_times_ns)
    } else {
        (None, None)
    };
    Row {
        n: s.n,
        calls: s.calls,
        untimed: s.untimed,
        ops,
        calls_per_op,
        oncpu_mean_ns,
        oncpu_p50_ns: on(&s.oncpu, &|d| hist::quantile(d, 0.5)),
        oncpu_p90_ns: on(&s.oncpu, &|d| hist::quantile(d, 0.9)),
        oncpu_p99_ns: on(&s.oncpu, &|d| hist::quantile(d, 0.99)),
        oncpu_max_ns: on(&s.oncpu, &|d| Some(d.max_ns as f64)),
        percentiles_from: (timed && has_oncpu).then_some(PercentileSource::Histogram),
        offcpu_mean_ns,
        wall_mean_ns,
        total_ns: timed.then_some(s.wall.sum_ns),
        op_ns,
        op_source,
        op_repeats_ns,
        repeat_rel_sd,
        run_times_ns,
        target_ns_per_op,
        share_of_op,
        time_per_call_ns,
        time_per_call_sd_ns,
        timed_calls,
        probe_share: None,
        probe_flagged: false,
        corrected_time_per_call_ns: None,
        hist: timed.then(|| match metric {
            Metric::OncpuMean if has_oncpu => s.oncpu.clone(),
            _ => s.wall.clone(),
        }),
    }
}

/// The time per call a size is fitted with, and the spread that goes with it: the median of
/// the runs' centres where there are several (it resists one disturbed run as the trimmed
/// mean resists one disturbed call), else the calls' trimmed mean; the trimmed standard
/// deviation (sd/√calls is its error).
fn fitted_time(fitted: &Dist, run_times_ns: &[f64]) -> (Option<f64>, Option<f64>) {
    (
        if run_times_ns.len() >= 2 {
            median(run_times_ns)
        } else {
            hist::trimmed_mean(fitted, hist::TRIM)
        },
        hist::trimmed_sd(fitted, hist::TRIM),
    )
}

/// Each run of a sweep's command at `s`'s N (the user's, or a built-in workload's round):
/// the fitted metric's centre over that run's calls of this case alone.
fn run_times(run: &Run, s: &SpanRow, oncpu: bool) -> Vec<f64> {
    run.invocations
        .iter()
        .filter(|i| i.n == s.n && !i.failed())
        .filter_map(|i| {
            let sp = i
                .spans
                .iter()
                .find(|x| x.target == s.target && x.case == s.case)?;
            run_centre(sp, oncpu)
        })
        .collect()
}

/// The time of one op and where it comes from: the workload's repeats (their median), else
/// the phase's wall time over its ops.
fn op_time(
    op_repeats_ns: &[f64],
    phase: Option<&crate::rundata::PhaseRow>,
    ops: Option<u64>,
) -> (Option<f64>, Option<String>) {
    match median(op_repeats_ns) {
        Some(m) => (Some(m), Some("workload".to_string())),
        None => match (phase, ops) {
            (Some(p), Some(o)) if p.wall_ns > 0 => (
                Some(p.wall_ns as f64 / o as f64),
                Some("phases".to_string()),
            ),
            _ => (None, None),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testdata;

    #[test]
    fn raw_spans_make_percentiles_exact_only_where_they_hold_every_call() {
        let mut run = testdata::waitpid_run(&[10, 100], |n| n);
        let values: Vec<u64> = (1..=200).collect();
        run.spans[0].oncpu = hist::from_values(&values);
        run.spans[0].wall = hist::from_values(&values.iter().map(|v| v + 2000).collect::<Vec<_>>());
        let mut csv = crate::rundata::EVENTS_HEADER.to_string();
        for v in &values {
            csv.push_str(&format!("1,2,3,do_wait,1,10,{},{v}\n", v + 2000));
        }
        // N=100 lost one of its 200 spans.
        for _ in 0..199 {
            csv.push_str("1,2,3,do_wait,1,100,2100,100\n");
        }
        let raw = super::super::raw::read_from(csv.as_bytes(), std::path::Path::new("e")).unwrap();
        let opts = TableOptions::default();
        let estimated = &tables(&run, "r", &opts, None)[0];
        let t = &tables(&run, "r", &opts, Some(&raw))[0];
        let (r10, r100) = (&t.rows[0], &t.rows[1]);
        assert_eq!(r10.percentiles_from, Some(PercentileSource::RawSpans));
        assert_eq!(
            (r10.oncpu_p50_ns, r10.oncpu_p90_ns, r10.oncpu_p99_ns),
            (Some(100.0), Some(180.0), Some(198.0))
        );
        // The histogram's estimate of the same row is close but not exact.
        let e10 = &estimated.rows[0];
        assert_eq!(e10.percentiles_from, Some(PercentileSource::Histogram));
        assert_ne!(e10.oncpu_p90_ns, Some(180.0));
        assert!((e10.oncpu_p90_ns.unwrap() / 180.0 - 1.0).abs() < 1.0 / 16.0);
        // An incomplete row keeps the histogram's figures, and says so.
        assert_eq!(r100.percentiles_from, Some(PercentileSource::Histogram));
        assert_eq!(r100.oncpu_p50_ns, estimated.rows[1].oncpu_p50_ns);
        // Everything but the percentiles is the same either way.
        assert_eq!(r10.oncpu_mean_ns, e10.oncpu_mean_ns);
        assert_eq!(r10.time_per_call_ns, e10.time_per_call_ns);
    }

    #[test]
    fn rows_combine_spans_phases_and_workload() {
        let run = testdata::waitpid_run(&[10, 100, 1000], |n| 1000 + 5 * n);
        let t = tables(&run, "r", &TableOptions::default(), None);
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert_eq!(
            (t.target.as_str(), t.case_name.as_str()),
            ("do_wait", "waitpid-pid")
        );
        assert_eq!(t.metric, Metric::OncpuMean);
        assert_eq!(
            t.rows.iter().map(|r| r.n).collect::<Vec<_>>(),
            vec![10, 100, 1000]
        );
        let r = &t.rows[1];
        assert_eq!(r.calls, 200);
        assert_eq!(r.calls_per_op, Some(1.0));
        // On-CPU 1000 + 5N = 1500 ns exactly; wall adds 2000 ns blocked.
        assert!((r.oncpu_mean_ns.unwrap() - 1500.0).abs() < 1e-9);
        assert!((r.offcpu_mean_ns.unwrap() - 2000.0).abs() < 1e-9);
        assert!((r.wall_mean_ns.unwrap() - 3500.0).abs() < 1e-9);
        let p50 = r.oncpu_p50_ns.unwrap();
        assert!((p50 - 1500.0).abs() <= 1500.0 / 16.0, "{p50}");
        // Median of the repeats 9000, 10000, 11000 ns per op.
        assert_eq!(r.op_ns, Some(10_000.0));
        assert_eq!(r.op_source.as_deref(), Some("workload"));
        assert!((r.share_of_op.unwrap() - 0.35).abs() < 1e-9);
        assert_eq!(r.time_per_call_ns, r.oncpu_mean_ns);
        assert_eq!(t.points().len(), 3);
    }

    #[test]
    fn count_only_rows_have_no_timing() {
        let mut run = testdata::waitpid_run(&[10, 100], |n| 1000 + n);
        let plan = run.targets[0].plan.as_mut().unwrap();
        plan.timed = false;
        for s in &mut run.spans {
            s.untimed = s.calls;
            s.wall = Dist::default();
            s.oncpu = Dist::default();
        }
        run.workload = None;
        let t = &tables(&run, "r", &TableOptions::default(), None)[0];
        assert!(!t.timed);
        let r = &t.rows[0];
        assert_eq!(r.calls, 200);
        assert_eq!(r.calls_per_op, Some(1.0));
        for v in [
            r.oncpu_mean_ns,
            r.oncpu_p99_ns,
            r.offcpu_mean_ns,
            r.wall_mean_ns,
            r.share_of_op,
        ] {
            assert_eq!(v, None);
        }
        assert_eq!(r.total_ns, None);
        // Without a workload report the op time comes from the phases.
        assert_eq!(r.op_source.as_deref(), Some("phases"));
        assert!(t.points().is_empty());
    }

    #[test]
    fn workload_report_is_parsed_leniently() {
        let v = serde_json::json!({"workload":"waitpid","results":[
            {"case":"waitpid-pid","case_id":1,"n":10,"repeat":1,"time_ns_per_op":20.0},
            {"case":"waitpid-pid","case_id":1,"n":10,"repeat":0,"time_ns_per_op":10.0},
            {"case":"waitpid-any","n":10,"repeat":0,"time_ns_per_op":30.0},
            {"case":"broken"}
        ]});
        let (w, bad) = WorkloadReport::from_value(&v);
        assert_eq!(bad, 1);
        assert_eq!(w.times(1, "waitpid-pid", 10), vec![10.0, 20.0]);
        assert_eq!(w.times(2, "waitpid-any", 10), vec![30.0]);
        assert!(w.times(1, "waitpid-pid", 11).is_empty());
    }
}
