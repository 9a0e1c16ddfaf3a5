//! The measured configurations of one workload (untraced, tracer, tracer lean, bpftrace,
//! the counter-only floor), how each is run, and how each run is checked: every traced run
//! must have counted the calls the workload says it made, so a broken probe cannot look cheap.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::exec::{Cmd, Output, argv, path_str};

/// The programs the host benchmarks drive.
#[derive(Debug, Clone)]
pub struct Tools {
    pub tracer: PathBuf,
    pub workloads: PathBuf,
    pub bpftrace: Option<PathBuf>,
    /// Run directories and logs.
    pub scratch: PathBuf,
}

/// A workload command (without `--json`) and the tracer target that sees its calls.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Workload {
    /// "getpid" or "fork+waitpid".
    pub label: String,
    /// The tracer target: "getpid" or "do_wait".
    pub target: String,
    /// Arguments after the workloads binary.
    pub args: Vec<String>,
    /// Traced calls the workload makes outside its measured phase (warm-up, setup,
    /// teardown): the tolerance for tools that cannot see the phase markers.
    pub calls_outside_phase: u64,
}

impl Workload {
    /// `workloads getpid --variant getpid-syscall --n N --iterations K`: N raw getpid
    /// syscalls per iteration, one phase.
    pub fn getpid(n: u64, iterations: u64) -> Workload {
        Workload {
            label: "getpid".into(),
            target: "getpid".into(),
            args: argv([
                "getpid",
                "--variant",
                "getpid-syscall",
                "--n",
                &n.to_string(),
                "--iterations",
                &iterations.to_string(),
                "--warmup",
                "1",
            ]),
            calls_outside_phase: n + 64,
        }
    }

    /// `workloads waitpid --variant waitpid-pid --n 1 --iterations K --cpu 1`: one op is a
    /// fork of a child that exits at once and a waitpid() for it.
    pub fn waitpid(iterations: u64) -> Workload {
        Workload {
            label: "fork+waitpid".into(),
            target: "do_wait".into(),
            args: argv([
                "waitpid",
                "--variant",
                "waitpid-pid",
                "--n",
                "1",
                "--iterations",
                &iterations.to_string(),
                "--warmup",
                "1",
                "--cpu",
                "1",
            ]),
            calls_outside_phase: 64,
        }
    }

    /// The full command line writing its JSON report to `json`.
    pub fn command(&self, workloads: &Path, json: &Path) -> Vec<String> {
        let mut v = vec![path_str(workloads)];
        v.extend(self.args.iter().cloned());
        v.extend(["--json".to_string(), path_str(json)]);
        v
    }
}

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

/// How a target is attached: the tracer's resolved plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attach {
    /// "tracepoint", "fentry" or "kprobe".
    pub mechanism: String,
    pub plan: String,
    pub points: Vec<String>,
}

impl Attach {
    /// From `tracer probes --json` (the plan `tracer record` would use).
    pub fn from_probes(v: &Value, target: &str) -> Result<Attach> {
        let t = v["targets"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"].as_str() == Some(target)))
            .ok_or_else(|| anyhow!("tracer probes does not list {target}"))?;
        let plan = &t["plan"];
        ensure!(
            !plan.is_null(),
            "no plan for {target} on this kernel: {}",
            t["rejected"]
        );
        let mech_text = plan["mechanism"].as_str().unwrap_or("");
        let mechanism = if mech_text.starts_with("fentry") {
            "fentry"
        } else if mech_text.starts_with("kprobe") {
            "kprobe"
        } else if mech_text.starts_with("tracepoint") {
            "tracepoint"
        } else {
            bail!("{target}: mechanism {mech_text:?} has no bpftrace equivalent here")
        };
        Ok(Attach {
            mechanism: mechanism.into(),
            plan: plan["plan"].as_str().unwrap_or("").into(),
            points: plan["attach_points"]
                .as_array()
                .context("attach_points")?
                .iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect(),
        })
    }

    /// The equivalent bpftrace program: a start-time map keyed by tid on entry (filtered to
    /// the command's pid) and a histogram of the delta on exit, as funclatency does.
    pub fn bpftrace_script(&self) -> Result<String> {
        let (enters, exits): (Vec<String>, Vec<String>) = match self.mechanism.as_str() {
            "tracepoint" => {
                let mut en = Vec::new();
                let mut ex = Vec::new();
                for p in &self.points {
                    let tp = format!("tracepoint:{p}");
                    if p.contains(":sys_enter_") {
                        en.push(tp);
                    } else if p.contains(":sys_exit_") {
                        ex.push(tp);
                    } else {
                        bail!("tracepoint {p} is neither a syscall entry nor exit");
                    }
                }
                (en, ex)
            }
            "fentry" => (
                vec![format!("kfunc:{}", self.points[0])],
                vec![format!("kretfunc:{}", self.points[0])],
            ),
            "kprobe" => (
                vec![format!("kprobe:{}", self.points[0])],
                vec![format!("kretprobe:{}", self.points[0])],
            ),
            m => bail!("no bpftrace equivalent for {m}"),
        };
        ensure!(
            !enters.is_empty() && !exits.is_empty(),
            "no entry/exit pair in {:?}",
            self.points
        );
        Ok(format!(
            "{} /pid == cpid/ {{ @start[tid] = nsecs; }}\n\
             {} /@start[tid]/ {{ @ns = hist(nsecs - @start[tid]); delete(@start[tid]); @calls = count(); }}\n",
            enters.join(","),
            exits.join(",")
        ))
    }

    /// Arguments of `tracer __floor` and the hits one traced call makes: 2 either way. A
    /// counter on every point for tracepoints (a call enters and exits one syscall); on both
    /// ends of the one function for fentry/kprobe (fentry+fexit, kprobe+kretprobe).
    pub fn floor_args(&self) -> (String, String, u64) {
        match self.mechanism.as_str() {
            "tracepoint" => ("tracepoint".into(), self.points.join(","), 2),
            m => (m.to_string(), self.points[0].clone(), 2),
        }
    }
}

/// One configuration of the added-cost comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Config {
    Untraced,
    /// `tracer record` with default options (lean = --no-callers --no-samples --no-offcpu).
    Tracer {
        lean: bool,
        plan: Option<String>,
    },
    Bpftrace,
    Floor,
    /// The floor plus what timing itself needs: a clock read at each end and the entry time
    /// carried to the exit (`tracer __floor --timed`).
    TimedFloor,
    /// `tracer record --discover` with no target: sampling only (every kernel stack of the
    /// command's tree, and where it blocks), the mode's whole cost.
    Discover,
}

impl Config {
    pub fn name(&self) -> String {
        match self {
            Config::Untraced => "untraced".into(),
            Config::Tracer { lean: false, .. } => "tracer".into(),
            Config::Tracer { lean: true, .. } => "tracer-lean".into(),
            Config::Bpftrace => "bpftrace".into(),
            Config::Floor => "floor".into(),
            Config::TimedFloor => "timed-floor".into(),
            Config::Discover => "discover".into(),
        }
    }
}

/// One measured run: the workload's ns per op, and what the tool counted against what it
/// should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub ns_per_op: f64,
    pub ops: u64,
    pub counted: Option<u64>,
}

pub const LEAN_FLAGS: [&str; 3] = ["--no-callers", "--no-samples", "--no-offcpu"];

/// Run one configuration once and check its count.
pub fn run_config(
    tools: &Tools,
    w: &Workload,
    attach: &Attach,
    config: &Config,
    tag: &str,
) -> Result<Sample> {
    let dir = tools.scratch.join("runs");
    std::fs::create_dir_all(&dir)?;
    let json = dir.join(format!("{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let cmd = w.command(&tools.workloads, &json);
    let read_workload = |json: &Path| -> Result<WorkloadResult> {
        let text = std::fs::read_to_string(json)
            .with_context(|| format!("{} did not write {}", w.label, json.display()))?;
        WorkloadResult::parse(&serde_json::from_str(&text)?)
    };
    match config {
        Config::Untraced => {
            Cmd::new(cmd, &dir, tag).run()?;
            let r = read_workload(&json)?;
            Ok(Sample {
                ns_per_op: r.ns_per_op(),
                ops: r.ops,
                counted: None,
            })
        }
        Config::Tracer { lean, plan } => {
            let out = dir.join(tag);
            let mut a = argv([
                path_str(&tools.tracer).as_str(),
                "record",
                "--targets",
                &w.target,
                "--no-verify",
                "--force",
                "-o",
                &path_str(&out),
                "--attach-json",
                &path_str(&json),
            ]);
            if *lean {
                a.extend(argv(LEAN_FLAGS));
            }
            if let Some(p) = plan {
                a.extend(argv(["--plan", &format!("{}={p}", w.target)]));
            }
            a.push("--".into());
            a.extend(cmd);
            Cmd::new(a, &dir, tag).run()?;
            let run = TracerRun::read(&out, &w.target)?;
            let _ = std::fs::remove_dir_all(&out);
            run.check_exact(&w.target)
                .with_context(|| format!("{tag}: the tracer's count is wrong"))?;
            let r = run.workload.expect("checked");
            Ok(Sample {
                ns_per_op: r.ns_per_op(),
                ops: r.ops,
                counted: Some(run.calls_in_case),
            })
        }
        Config::Discover => {
            let out = dir.join(tag);
            let mut a = argv([
                path_str(&tools.tracer).as_str(),
                "record",
                "--discover",
                "--force",
                "-o",
                &path_str(&out),
                "--",
            ]);
            a.extend(cmd);
            Cmd::new(a, &dir, tag).run()?;
            // No target is traced: only the counters matter here.
            let p = out.join("run.json");
            let run: Value = serde_json::from_str(
                &std::fs::read_to_string(&p).with_context(|| format!("{}", p.display()))?,
            )
            .with_context(|| format!("{}", p.display()))?;
            let _ = std::fs::remove_dir_all(&out);
            let samples = run["counters"]["samples_total"].as_u64().unwrap_or(0);
            ensure!(samples > 0, "{tag}: --discover took no sample");
            let r = read_workload(&json)?;
            Ok(Sample {
                ns_per_op: r.ns_per_op(),
                ops: r.ops,
                counted: Some(samples),
            })
        }
        Config::Bpftrace => {
            let bt = tools
                .bpftrace
                .as_ref()
                .ok_or_else(|| anyhow!("bpftrace is not installed"))?;
            let script = attach.bpftrace_script()?;
            let out = run_bpftrace(bt, &script, &cmd, &dir, tag)?;
            let r = read_workload(&json)?;
            let calls = bpftrace_count(&out.stdout, "@calls")
                .ok_or_else(|| anyhow!("{tag}: bpftrace printed no @calls count"))?;
            check_at_least(calls, r.ops, r.ops + w.calls_outside_phase, "bpftrace", tag)?;
            Ok(Sample {
                ns_per_op: r.ns_per_op(),
                ops: r.ops,
                counted: Some(calls),
            })
        }
        Config::Floor | Config::TimedFloor => {
            let (mech, points, per_call) = attach.floor_args();
            let mut a = argv([path_str(&tools.tracer).as_str(), "__floor"]);
            if *config == Config::TimedFloor {
                a.push("--timed".into());
            }
            a.extend(argv([&mech, &points, "--"]));
            a.extend(cmd);
            let out = Cmd::new(a, &dir, tag).run()?;
            let hits = floor_hits(&out.stdout)
                .ok_or_else(|| anyhow!("{tag}: tracer __floor printed no hits"))?;
            let r = read_workload(&json)?;
            // The floor counts system-wide and both points of a bracket: at least
            // per_call x ops, and nothing stops other processes from adding more.
            ensure!(
                hits >= per_call * r.ops,
                "{tag}: the floor counted {hits} hits for {} ops ({per_call} per call expected)",
                r.ops
            );
            Ok(Sample {
                ns_per_op: r.ns_per_op(),
                ops: r.ops,
                counted: Some(hits),
            })
        }
    }
}

/// `bpftrace -e SCRIPT -c CMD` with output to log files.
pub fn run_bpftrace(
    bpftrace: &Path,
    script: &str,
    cmd: &[String],
    dir: &Path,
    tag: &str,
) -> Result<Output> {
    // bpftrace -c takes one string and splits it on spaces: our paths have none.
    ensure!(
        cmd.iter().all(|a| !a.contains(char::is_whitespace)),
        "bpftrace -c cannot pass arguments with spaces: {cmd:?}"
    );
    let a = argv([
        path_str(bpftrace).as_str(),
        "-e",
        script,
        "-c",
        &cmd.join(" "),
    ]);
    Cmd::new(a, dir, tag).run()
}

/// Was `counted` within `[lo, hi]`?
fn check_at_least(counted: u64, lo: u64, hi: u64, who: &str, tag: &str) -> Result<()> {
    ensure!(
        (lo..=hi).contains(&counted),
        "{tag}: {who} counted {counted} calls, expected {lo}..={hi}"
    );
    Ok(())
}

/// `@name: 123` from bpftrace's exit print.
pub fn bpftrace_count(stdout: &str, name: &str) -> Option<u64> {
    let prefix = format!("{name}: ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// `{"hits": N}`: the last JSON line `tracer __floor` printed.
pub fn floor_hits(stdout: &str) -> Option<u64> {
    stdout.lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l.trim())
            .ok()
            .and_then(|v| v["hits"].as_u64())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tp_attach() -> Attach {
        Attach {
            mechanism: "tracepoint".into(),
            plan: "syscall-bracket".into(),
            points: vec![
                "syscalls:sys_exit_wait4".into(),
                "syscalls:sys_enter_wait4".into(),
                "syscalls:sys_exit_waitid".into(),
                "syscalls:sys_enter_waitid".into(),
            ],
        }
    }

    #[test]
    fn bpftrace_script_pairs_entries_and_exits() {
        let s = tp_attach().bpftrace_script().unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with(
            "tracepoint:syscalls:sys_enter_wait4,tracepoint:syscalls:sys_enter_waitid /pid == cpid/"
        ));
        assert!(lines[1].starts_with(
            "tracepoint:syscalls:sys_exit_wait4,tracepoint:syscalls:sys_exit_waitid /@start[tid]/"
        ));
        assert!(s.contains("hist(nsecs - @start[tid])") && s.contains("@calls = count()"));
        let k = Attach {
            mechanism: "kprobe".into(),
            plan: "kprobe".into(),
            points: vec!["__x64_sys_getpid".into()],
        };
        assert!(
            k.bpftrace_script()
                .unwrap()
                .contains("kretprobe:__x64_sys_getpid /@start")
        );
        let bad = Attach {
            points: vec!["sched:sched_switch".into()],
            ..tp_attach()
        };
        assert!(bad.bpftrace_script().is_err());
    }

    #[test]
    fn floor_arguments() {
        let (m, p, per) = tp_attach().floor_args();
        assert_eq!(m, "tracepoint");
        assert_eq!(p.split(',').count(), 4);
        assert_eq!(
            per, 2,
            "a wait4 call hits its own enter and exit, not waitid's"
        );
        let f = Attach {
            mechanism: "fentry".into(),
            plan: "fentry".into(),
            points: vec!["do_wait".into()],
        };
        assert_eq!(f.floor_args(), ("fentry".into(), "do_wait".into(), 2));
    }

    #[test]
    fn parses_tool_outputs() {
        let bt = "Attaching 2 probes...\nbench table\n\n@calls: 1000004\n@ns:\n[64, 128) 5 |@|\n";
        assert_eq!(bpftrace_count(bt, "@calls"), Some(1_000_004));
        assert_eq!(bpftrace_count("@calls:\n", "@calls"), None);
        assert_eq!(floor_hits("table\n{\"hits\": 42}\n"), Some(42));
        assert_eq!(floor_hits("table only\n"), None);
    }

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
