//! One run of one workload: the measuring loop around the phase markers, the table, the
//! report, progress on stderr, and the final JSON.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::IsTerminal;
use std::path::PathBuf;

use serde_json::Value;
use workloads::cases;
use workloads::marker;
use workloads::report::{Measurement, PhaseTotals, Report, Status};

use super::error::{Error, Result};
use super::limits::Limits;
use super::options::{Common, Plan};
use super::{signals, sys, table};

/// How often a running phase looks at the clock and the stop flag, at the latest.
const CHECK_INTERVAL_NS: u64 = 20_000_000;

/// What one measured phase is about.
pub struct PhaseSpec<'a> {
    /// Case name from `cases::CASES`.
    pub case: &'static str,
    pub n: u64,
    /// Plural name of one op, for the rate counter (`forks` -> `forks_per_second`).
    pub unit: &'a str,
}

pub struct Session {
    pub workload: &'static str,
    pub plan: Plan,
    pub report: Report,
    pub limits: Limits,
    json: Option<PathBuf>,
    verbose: bool,
    progress: bool,
    quiet: bool,
}

impl Session {
    pub fn new(workload: &'static str, common: &Common, limits: Limits) -> Self {
        let mut report = Report::new(workload, &sys::kernel_release());
        report.command = std::env::args().collect();
        report.limits = limits.to_json();
        let plan = Plan::from_common(common);
        report.config.insert(
            "iterations".into(),
            common.iterations.map_or(Value::Null, Value::from),
        );
        report.config.insert(
            "min_time_s".into(),
            plan.min_time
                .map_or(Value::Null, |d| Value::from(d.as_secs_f64())),
        );
        report
            .config
            .insert("warmup".into(), Value::from(plan.warmup));
        report
            .config
            .insert("repeats".into(), Value::from(plan.repeats));
        report
            .config
            .insert("cpu".into(), common.cpu.map_or(Value::Null, Value::from));
        Session {
            workload,
            plan,
            report,
            limits,
            json: common.json.clone(),
            verbose: common.verbose,
            progress: common.verbose || std::io::stderr().is_terminal(),
            quiet: common.quiet,
        }
    }

    /// Records a config value (N list, variants, workload parameters) in the report.
    pub fn config(&mut self, key: &str, value: impl Into<Value>) {
        self.report.config.insert(key.to_string(), value.into());
    }

    pub fn summary(&mut self, key: &str, value: impl Into<Value>) {
        self.report.summary.insert(key.to_string(), value.into());
    }

    /// Prints the table header (once the op unit is known).
    pub fn start_table(&self, unit: &str) {
        if self.quiet {
            return;
        }
        table::print(&[table::header(self.workload, &self.report.kernel, unit)
            .trim_end()
            .to_string()]);
    }

    /// Per-N progress on stderr, when it is a terminal or --verbose is on.
    pub fn progress(&self, msg: impl Display) {
        if self.progress {
            eprintln!("[{}] {msg}", self.workload);
        }
    }

    /// A remark that belongs in the report (degraded option, skipped variant); also on stderr.
    pub fn note(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        eprintln!("[{}] note: {msg}", self.workload);
        self.report.notes.push(msg);
    }

    /// Runs `plan.warmup` unmeasured iterations of `op`.
    pub fn warmup(&self, op: &mut dyn FnMut() -> Result<u64>) -> Result<()> {
        for _ in 0..self.plan.warmup {
            signals::check()?;
            op()?;
        }
        Ok(())
    }

    /// Warm-up, then `plan.repeats` phases of `op` (each between its own begin/end markers).
    /// `op` does one iteration and returns how many operations it did. Returns one row per
    /// repeat; nothing is recorded until [`Session::commit`].
    pub fn measure(
        &mut self,
        spec: &PhaseSpec<'_>,
        op: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<Vec<Measurement>> {
        let case_id = cases::case_id(spec.case)
            .unwrap_or_else(|| panic!("case {} missing from cases.rs", spec.case));
        self.warmup(op)?;
        let mut rows = Vec::new();
        for repeat in 0..self.plan.repeats {
            signals::check()?;
            if self.verbose {
                eprintln!(
                    "[{}] phase begin case={} case_id={case_id} n={} repeat={repeat}",
                    self.workload, spec.case, spec.n
                );
            }
            let t = self.phase(case_id, spec.n, op)?;
            let mut m = Measurement::new(spec.case, case_id, spec.n, repeat, t);
            if t.total_ns > 0 {
                m.counters.insert(
                    format!("{}_per_second", spec.unit),
                    t.ops as f64 * 1e9 / t.total_ns as f64,
                );
            }
            if self.verbose {
                eprintln!(
                    "[{}] phase end case={} n={} repeat={repeat} ops={} time_ns_per_op={:.1}",
                    self.workload, spec.case, spec.n, t.ops, m.time_ns_per_op
                );
            }
            rows.push(m);
        }
        Ok(rows)
    }

    /// One marked phase. The end marker is emitted even when the phase stops early, so the
    /// tracer never sees an unterminated phase.
    fn phase(
        &self,
        case_id: u32,
        n: u64,
        op: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<PhaseTotals> {
        let mut iters = 0u64;
        let mut ops = 0u64;
        let mut batch = 1u64;
        marker::tracer_phase_begin(case_id, n);
        let wall0 = sys::monotonic_ns();
        let cpu0 = sys::thread_cpu_ns();
        let outcome = 'run: loop {
            for _ in 0..batch {
                match op() {
                    Ok(k) => {
                        ops += k;
                        iters += 1;
                    }
                    Err(e) => break 'run Err(e),
                }
            }
            let elapsed = sys::monotonic_ns() - wall0;
            if let Some(sig) = signals::pending() {
                break Err(Error::Interrupted(sig));
            }
            if self.plan.done(iters, elapsed) {
                break Ok(());
            }
            batch = self.plan.next_batch(iters, elapsed, CHECK_INTERVAL_NS);
        };
        let total_ns = sys::monotonic_ns() - wall0;
        let cpu_total_ns = sys::thread_cpu_ns() - cpu0;
        marker::tracer_phase_end(case_id, n, ops);
        outcome.map(|()| PhaseTotals {
            iterations: iters,
            ops,
            total_ns,
            cpu_total_ns,
        })
    }

    /// Adds `counters` to every row, prints the rows and records them in the report.
    pub fn commit(&mut self, mut rows: Vec<Measurement>, counters: &BTreeMap<String, f64>) {
        for r in &mut rows {
            r.counters
                .extend(counters.iter().map(|(k, v)| (k.clone(), *v)));
        }
        if !self.quiet {
            table::print(&table::rows(&rows, self.plan.repeats));
        }
        self.report.results.extend(rows);
    }

    /// Median time per op of the committed rows of (case, n) (the upper middle one of an even
    /// count, so a measured value).
    pub fn median_ns_per_op(&self, case: &str, n: u64) -> Option<f64> {
        let xs: Vec<f64> = self
            .report
            .results
            .iter()
            .filter(|m| m.case == case && m.n == n)
            .map(|m| m.time_ns_per_op)
            .collect();
        workloads::numbers::upper_median(&xs)
    }

    /// Writes the JSON report (if asked for) with `status`.
    pub fn finish(mut self, status: Status) -> Result<()> {
        self.report.status = status;
        if let Some(path) = &self.json {
            self.report
                .write_atomic(path)
                .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        }
        Ok(())
    }
}
