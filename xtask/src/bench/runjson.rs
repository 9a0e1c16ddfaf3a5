//! What a run says about itself: the workload's `--json` report and the tracer's
//! `run.json`, with the check that the tracer counted exactly the workload's calls.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, ensure};
use serde_json::Value;

/// The workload's own measurement of its phase.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadResult {
    pub case_id: u32,
    pub case_name: String,
    pub ops: u64,
    pub total_ns: u64,
}

impl WorkloadResult {
    pub fn ns_per_op(&self) -> f64 {
        self.total_ns as f64 / self.ops as f64
    }

    /// From the workload's `--json` report: the sum of its result rows (one case).
    pub fn parse(v: &Value) -> Result<WorkloadResult> {
        let rows = v
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("workload JSON has no results"))?;
        ensure!(!rows.is_empty(), "workload JSON has no result rows");
        let mut out: Option<WorkloadResult> = None;
        for r in rows {
            let case_id = r["case_id"].as_u64().context("case_id")? as u32;
            let ops = r["ops"].as_u64().context("ops")?;
            let total_ns = r["total_ns"].as_u64().context("total_ns")?;
            match &mut out {
                None => {
                    out = Some(WorkloadResult {
                        case_id,
                        case_name: r["case"].as_str().unwrap_or("").to_string(),
                        ops,
                        total_ns,
                    })
                }
                Some(o) => {
                    ensure!(o.case_id == case_id, "workload JSON mixes cases");
                    o.ops += ops;
                    o.total_ns += total_ns;
                }
            }
        }
        let out = out.expect("rows not empty");
        ensure!(out.ops > 0, "workload did no operations");
        Ok(out)
    }
}

/// What a `tracer record` run says about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct TracerRun {
    pub workload: Option<WorkloadResult>,
    /// Calls of the target inside the workload's case (all N of it).
    pub calls_in_case: u64,
    /// Calls of the target in the run, phased or not.
    pub calls_total: u64,
    /// Ops the phase markers reported for the case.
    pub phase_ops: u64,
    pub phase_wall_ns: u64,
    pub counters: BTreeMap<String, u64>,
    pub attach_ms: f64,
    pub verify_ms: f64,
    pub detach_ms: f64,
    pub peak_rss_kib: u64,
    pub map_memlock_bytes: u64,
    pub plan: String,
    pub mechanism: String,
}

impl TracerRun {
    pub fn read(dir: &Path, target: &str) -> Result<TracerRun> {
        let p = dir.join("run.json");
        let text = std::fs::read_to_string(&p).with_context(|| format!("{}", p.display()))?;
        let v: Value = serde_json::from_str(&text).with_context(|| format!("{}", p.display()))?;
        TracerRun::parse(&v, target)
    }

    pub fn parse(v: &Value, target: &str) -> Result<TracerRun> {
        let workload = match v.get("workload") {
            Some(w) if !w.is_null() => Some(WorkloadResult::parse(w)?),
            _ => None,
        };
        let case = workload.as_ref().map(|w| w.case_id);
        let mut calls_in_case = 0;
        let mut calls_total = 0;
        for s in v["spans"].as_array().context("spans")? {
            if s["target"].as_str() != Some(target) {
                continue;
            }
            let calls = s["calls"].as_u64().context("calls")?;
            calls_total += calls;
            if case.is_some() && s["case"].as_u64().map(|c| c as u32) == case {
                calls_in_case += calls;
            }
        }
        let mut phase_ops = 0;
        let mut phase_wall_ns = 0;
        for p in v["phases"].as_array().context("phases")? {
            if case.is_some() && p["case"].as_u64().map(|c| c as u32) == case {
                phase_ops += p["ops"].as_u64().context("ops")?;
                phase_wall_ns += p["wall_ns"].as_u64().context("wall_ns")?;
            }
        }
        let counters = v["counters"]
            .as_object()
            .context("counters")?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect();
        let res = &v["resources"];
        let t = v["targets"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"].as_str() == Some(target)))
            .ok_or_else(|| anyhow!("run.json does not trace {target}"))?;
        Ok(TracerRun {
            workload,
            calls_in_case,
            calls_total,
            phase_ops,
            phase_wall_ns,
            counters,
            attach_ms: res["attach_ms"].as_f64().unwrap_or(f64::NAN),
            verify_ms: res["verify_ms"].as_f64().unwrap_or(f64::NAN),
            detach_ms: res["detach_ms"].as_f64().unwrap_or(f64::NAN),
            peak_rss_kib: res["peak_rss_kib"].as_u64().unwrap_or(0),
            map_memlock_bytes: res["map_memlock_bytes"].as_u64().unwrap_or(0),
            plan: t["plan"]["plan"].as_str().unwrap_or("").to_string(),
            mechanism: t["plan"]["mechanism"].as_str().unwrap_or("").to_string(),
        })
    }

    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// The tracer counted exactly the calls the workload made in its phase.
    pub fn check_exact(&self, target: &str) -> Result<()> {
        let w = self
            .workload
            .as_ref()
            .ok_or_else(|| anyhow!("run.json carries no workload report"))?;
        ensure!(
            self.phase_ops == w.ops,
            "phase markers saw {} ops, the workload reports {}",
            self.phase_ops,
            w.ops
        );
        ensure!(
            self.calls_in_case == w.ops,
            "the tracer counted {} {target} calls in case {}, the workload made {} \
             (aggregate_map_full={}, thread_map_full={})",
            self.calls_in_case,
            w.case_name,
            w.ops,
            self.counter("aggregate_map_full"),
            self.counter("thread_map_full")
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_json(calls: u64, phase_ops: u64, wl_ops: u64) -> Value {
        json!({
            "spans": [
                {"target": "getpid", "case": 0, "calls": 200004},
                {"target": "getpid", "case": 40, "calls": calls},
                {"target": "do_wait", "case": 40, "calls": 9}
            ],
            "phases": [{"case": 40, "ops": phase_ops, "wall_ns": 5}],
            "counters": {"ringbuf_drops": 3},
            "resources": {"attach_ms": 250.5, "verify_ms": 0.0, "detach_ms": 400.0,
                          "peak_rss_kib": 68000, "map_memlock_bytes": 1000},
            "targets": [{"name": "getpid", "plan": {"plan": "syscall-bracket",
                         "mechanism": "tracepoint (syscall enter/exit)"}}],
            "workload": {"results": [{"case": "getpid-syscall", "case_id": 40,
                         "ops": wl_ops, "total_ns": wl_ops * 150}]}
        })
    }

    #[test]
    fn tracer_run_counts_and_checks() {
        let r = TracerRun::parse(&run_json(1000, 1000, 1000), "getpid").unwrap();
        assert_eq!(
            (r.calls_in_case, r.calls_total, r.phase_ops),
            (1000, 201004, 1000)
        );
        assert_eq!(r.counter("ringbuf_drops"), 3);
        assert_eq!(r.workload.as_ref().unwrap().ns_per_op(), 150.0);
        assert_eq!(r.attach_ms, 250.5);
        r.check_exact("getpid").unwrap();
        // A probe that missed calls, or markers that disagree with the workload, fail.
        let lost = TracerRun::parse(&run_json(999, 1000, 1000), "getpid").unwrap();
        assert!(
            lost.check_exact("getpid")
                .unwrap_err()
                .to_string()
                .contains("counted 999")
        );
        let markers = TracerRun::parse(&run_json(1000, 900, 1000), "getpid").unwrap();
        assert!(markers.check_exact("getpid").is_err());
        assert!(TracerRun::parse(&run_json(1, 1, 1), "dup_mmap").is_err());
    }

    #[test]
    fn workload_rows_sum() {
        let v = json!({"results": [
            {"case": "x", "case_id": 1, "ops": 10, "total_ns": 100},
            {"case": "x", "case_id": 1, "ops": 30, "total_ns": 500}]});
        let r = WorkloadResult::parse(&v).unwrap();
        assert_eq!((r.ops, r.total_ns, r.ns_per_op()), (40, 600, 15.0));
        let mixed = json!({"results": [
            {"case": "x", "case_id": 1, "ops": 10, "total_ns": 100},
            {"case": "y", "case_id": 2, "ops": 30, "total_ns": 500}]});
        assert!(WorkloadResult::parse(&mixed).is_err());
        assert!(WorkloadResult::parse(&json!({"results": []})).is_err());
    }
}
