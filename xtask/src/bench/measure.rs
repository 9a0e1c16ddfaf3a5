//! The measured configurations of one workload (untraced, tracer, tracer lean, bpftrace,
//! the counter-only floor), how each is run, and how each run is checked: every traced run
//! must have counted the calls the workload says it made, so a broken probe cannot look cheap.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::attach::Attach;
use super::exec::{Cmd, Output, argv, path_str};
pub use super::runjson::{TracerRun, WorkloadResult};

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
        let tail = ["--iterations", &iterations.to_string(), "--warmup", "1"];
        Workload::getpid_with(n, &tail, n + 64)
    }

    /// `workloads getpid --variant getpid-syscall --n N --min-time S`: iterations of N raw
    /// getpid syscalls for at least S seconds, one phase.
    pub fn getpid_for(n: u64, seconds: u64) -> Workload {
        Workload::getpid_with(n, &["--min-time", &seconds.to_string()], 0)
    }

    fn getpid_with(n: u64, tail: &[&str], calls_outside_phase: u64) -> Workload {
        let mut args = argv([
            "getpid",
            "--variant",
            "getpid-syscall",
            "--n",
            &n.to_string(),
        ]);
        args.extend(argv(tail));
        Workload {
            label: "getpid".into(),
            target: "getpid".into(),
            args,
            calls_outside_phase,
        }
    }

    /// `workloads getpid --variant pipe-read --n N --iterations K`: N one-byte reads from a
    /// full pipe per iteration, one phase (a read-heavy loop: a syscall that does a little
    /// work). Only discover's sampling measures it: no tracer target counts reads.
    pub fn pipe_read(n: u64, iterations: u64) -> Workload {
        let mut args = argv(["getpid", "--variant", "pipe-read", "--n", &n.to_string()]);
        args.extend(argv([
            "--iterations",
            &iterations.to_string(),
            "--warmup",
            "1",
        ]));
        Workload {
            label: "pipe read".into(),
            target: "ksys_read".into(),
            args,
            calls_outside_phase: n,
        }
    }

    /// The most discover may add per op, as a multiple of what `perf record -g` at the same
    /// frequency adds: twice on getpid, a syscall that does nothing, where a program per
    /// syscall costs more than a sampler by its nature; once elsewhere.
    pub fn discover_limit(&self) -> f64 {
        if self.label == "getpid" { 2.0 } else { 1.0 }
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

/// One configuration of the added-cost comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Config {
    Untraced,
    /// `tracer record` with default options (lean = --no-callers --no-samples --no-offcpu);
    /// `perf_events`: with `TRACER_PERF_TRACEPOINTS=1`, one perf event per tracepoint
    /// instead of raw tracepoints (the configuration before them, for comparison).
    Tracer {
        lean: bool,
        plan: Option<String>,
        perf_events: bool,
        /// With `TRACER_NO_FAST_PATH=1`: every call paired through the thread-state map, as
        /// before the per-CPU fast path (for comparison; no goal applies).
        exact_path: bool,
    },
    /// `phase_uprobes`: also uprobes on the workload binary's phase markers, as the tracer
    /// places them (what the markers alone cost).
    Bpftrace {
        phase_uprobes: bool,
    },
    /// `tracer __floor`: a counter on the same attach points, of the same mechanism as the
    /// tracer's (`perf_events`: as the tracer with `TRACER_PERF_TRACEPOINTS=1`).
    Floor {
        perf_events: bool,
    },
    /// The floor plus what timing itself needs: a clock read at each end and the entry time
    /// carried to the exit (`tracer __floor --timed`).
    TimedFloor {
        perf_events: bool,
    },
    /// `tracer record --discover -F DISCOVER_FREQ` with no target: sampling only (every
    /// kernel stack of the command's tree, and where it blocks), the mode's whole cost.
    Discover,
    /// `perf record -F DISCOVER_FREQ -g -- CMD`: what a user would run instead of discover,
    /// at the same frequency with call graphs.
    PerfRecord,
}

/// The sampling frequency of the discover comparison: `tracer sweep --discover`'s default.
pub const DISCOVER_FREQ: &str = "4999";

impl Config {
    pub fn name(&self) -> String {
        match self {
            Config::Untraced => "untraced".into(),
            Config::Tracer {
                lean,
                perf_events,
                exact_path,
                ..
            } => format!(
                "tracer{}{}{}",
                if *lean { "-lean" } else { "" },
                if *perf_events { "-perf-events" } else { "" },
                if *exact_path { EXACT_PATH } else { "" }
            ),
            Config::Bpftrace { phase_uprobes } => format!(
                "bpftrace{}",
                if *phase_uprobes { PHASE_UPROBES } else { "" }
            ),
            Config::Floor { perf_events } => {
                format!("floor{}", if *perf_events { "-perf-events" } else { "" })
            }
            Config::TimedFloor { perf_events } => {
                format!(
                    "timed-floor{}",
                    if *perf_events { "-perf-events" } else { "" }
                )
            }
            Config::Discover => "discover".into(),
            Config::PerfRecord => "perf-record".into(),
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

/// The environment that makes the tracer attach one perf event per tracepoint.
pub const PERF_EVENTS_ENV: &str = "TRACER_PERF_TRACEPOINTS=1";

/// The environment that turns the per-CPU fast path off, and the suffix of the configurations
/// run with it.
pub const NO_FAST_PATH_ENV: &str = "TRACER_NO_FAST_PATH=1";
pub const EXACT_PATH: &str = "-exact-path";

/// The suffix of the bpftrace configuration that also places the phase-marker uprobes.
pub const PHASE_UPROBES: &str = "-phase-uprobes";

/// `tracer record --targets TARGET --no-verify --force -o OUT`, then `--attach-json JSON`
/// when the workload's report is to go into the run: how every traced run here starts.
pub fn record_argv(
    tools: &Tools,
    target: &str,
    out: &Path,
    attach_json: Option<&Path>,
) -> Vec<String> {
    let mut a = argv([
        path_str(&tools.tracer).as_str(),
        "record",
        "--targets",
        target,
        "--no-verify",
        "--force",
        "-o",
        &path_str(out),
    ]);
    if let Some(json) = attach_json {
        a.extend(argv(["--attach-json", &path_str(json)]));
    }
    a
}

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
    match config {
        Config::Untraced => {
            Cmd::new(cmd, &dir, tag).run()?;
            let r = read_workload(w, &json)?;
            Ok(Sample {
                ns_per_op: r.ns_per_op(),
                ops: r.ops,
                counted: None,
            })
        }
        Config::Tracer {
            lean,
            plan,
            perf_events,
            exact_path,
        } => {
            let env = [
                (*perf_events, PERF_EVENTS_ENV),
                (*exact_path, NO_FAST_PATH_ENV),
            ]
            .into_iter()
            .filter_map(|(on, e)| on.then_some(e))
            .collect::<Vec<_>>();
            run_tracer(
                tools,
                w,
                &env,
                *lean,
                plan.as_deref(),
                (&dir, tag),
                cmd,
                &json,
            )
        }
        Config::Discover => run_discover(tools, w, (&dir, tag), cmd, &json),
        Config::PerfRecord => run_perf_record(w, (&dir, tag), cmd, &json),
        Config::Bpftrace { phase_uprobes } => {
            run_bpftrace_config(tools, w, attach, *phase_uprobes, (&dir, tag), &cmd, &json)
        }
        Config::Floor { perf_events } | Config::TimedFloor { perf_events } => {
            let timed = matches!(config, Config::TimedFloor { .. });
            run_floor(
                tools,
                w,
                attach,
                *perf_events,
                timed,
                (&dir, tag),
                cmd,
                &json,
            )
        }
    }
}

/// The workload under `perf record -g` at discover's frequency: the samples it took.
fn run_perf_record(
    w: &Workload,
    (dir, tag): (&Path, &str),
    cmd: Vec<String>,
    json: &Path,
) -> Result<Sample> {
    let data = dir.join(format!("{tag}.perf.data"));
    let mut a = argv([
        "perf",
        "record",
        "-F",
        DISCOVER_FREQ,
        "-g",
        "-o",
        &path_str(&data),
        "--",
    ]);
    a.extend(cmd);
    let out = Cmd::new(a, dir, tag).run()?;
    let _ = std::fs::remove_file(&data);
    let samples = perf_record_samples(&out.stderr)
        .ok_or_else(|| anyhow!("{tag}: perf record printed no sample count"))?;
    ensure!(samples > 0, "{tag}: perf record took no sample");
    let r = read_workload(w, json)?;
    Ok(Sample {
        ns_per_op: r.ns_per_op(),
        ops: r.ops,
        counted: Some(samples),
    })
}

/// The workload under bpftrace's equivalent probe (with the phase markers' uprobes with
/// `phase_uprobes`): its count, between the ops and the ops plus the calls outside the phase.
fn run_bpftrace_config(
    tools: &Tools,
    w: &Workload,
    attach: &Attach,
    phase_uprobes: bool,
    (dir, tag): (&Path, &str),
    cmd: &[String],
    json: &Path,
) -> Result<Sample> {
    let bt = tools
        .bpftrace
        .as_ref()
        .ok_or_else(|| anyhow!("bpftrace is not installed"))?;
    let bin = path_str(&tools.workloads);
    let script = attach.bpftrace_script(phase_uprobes.then_some(bin.as_str()))?;
    let out = run_bpftrace(bt, &script, cmd, dir, tag)?;
    let r = read_workload(w, json)?;
    let calls = bpftrace_count(&out.stdout, "@calls")
        .ok_or_else(|| anyhow!("{tag}: bpftrace printed no @calls count"))?;
    check_at_least(calls, r.ops, r.ops + w.calls_outside_phase, "bpftrace", tag)?;
    Ok(Sample {
        ns_per_op: r.ns_per_op(),
        ops: r.ops,
        counted: Some(calls),
    })
}

/// What the workload wrote of its run (`--json`).
fn read_workload(w: &Workload, json: &Path) -> Result<WorkloadResult> {
    let text = std::fs::read_to_string(json)
        .with_context(|| format!("{} did not write {}", w.label, json.display()))?;
    WorkloadResult::parse(&serde_json::from_str(&text)?)
}

/// The workload under `tracer record` (with `env` set, lean, on a forced plan), its count
/// checked exact.
#[allow(clippy::too_many_arguments)]
fn run_tracer(
    tools: &Tools,
    w: &Workload,
    env: &[&str],
    lean: bool,
    plan: Option<&str>,
    (dir, tag): (&Path, &str),
    cmd: Vec<String>,
    json: &Path,
) -> Result<Sample> {
    let out = dir.join(tag);
    let mut a = Vec::new();
    if !env.is_empty() {
        a.push("/usr/bin/env".to_string());
        a.extend(env.iter().map(|e| e.to_string()));
    }
    a.extend(record_argv(tools, &w.target, &out, Some(json)));
    if lean {
        a.extend(argv(LEAN_FLAGS));
    }
    if let Some(p) = plan {
        a.extend(argv(["--plan", &format!("{}={p}", w.target)]));
    }
    a.push("--".into());
    a.extend(cmd);
    Cmd::new(a, dir, tag).run()?;
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

/// The workload under `tracer record --discover`: the samples it took.
fn run_discover(
    tools: &Tools,
    w: &Workload,
    (dir, tag): (&Path, &str),
    cmd: Vec<String>,
    json: &Path,
) -> Result<Sample> {
    let out = dir.join(tag);
    let mut a = argv([
        path_str(&tools.tracer).as_str(),
        "record",
        "--discover",
        "-F",
        DISCOVER_FREQ,
        "--force",
        "-o",
        &path_str(&out),
        "--",
    ]);
    a.extend(cmd);
    Cmd::new(a, dir, tag).run()?;
    // No target is traced: only the counters matter here.
    let p = out.join("run.json");
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(&p).with_context(|| format!("{}", p.display()))?,
    )
    .with_context(|| format!("{}", p.display()))?;
    let _ = std::fs::remove_dir_all(&out);
    let samples = run["counters"]["samples_total"].as_u64().unwrap_or(0);
    ensure!(samples > 0, "{tag}: --discover took no sample");
    let r = read_workload(w, json)?;
    Ok(Sample {
        ns_per_op: r.ns_per_op(),
        ops: r.ops,
        counted: Some(samples),
    })
}

/// The workload under `tracer __floor` (`--timed` with `timed`): the hits, at least the
/// attach points' per call for every op.
#[allow(clippy::too_many_arguments)]
fn run_floor(
    tools: &Tools,
    w: &Workload,
    attach: &Attach,
    perf_events: bool,
    timed: bool,
    (dir, tag): (&Path, &str),
    cmd: Vec<String>,
    json: &Path,
) -> Result<Sample> {
    let (mech, points, per_call) = attach.floor_args(perf_events);
    let mut a = argv([path_str(&tools.tracer).as_str(), "__floor"]);
    if timed {
        a.push("--timed".into());
    }
    a.extend(argv([&mech, &points, "--"]));
    a.extend(cmd);
    let out = Cmd::new(a, dir, tag).run()?;
    let hits =
        floor_hits(&out.stdout).ok_or_else(|| anyhow!("{tag}: tracer __floor printed no hits"))?;
    let r = read_workload(w, json)?;
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

/// The sample count of perf record's closing line, "[ perf record: Captured and wrote 0.041
/// MB /path/perf.data (123 samples) ]".
fn perf_record_samples(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .filter(|l| l.contains("perf record: Captured"))
        .find_map(|l| {
            let (head, _) = l.rsplit_once(" samples)")?;
            head.rsplit_once('(')?.1.trim().parse().ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_outputs() {
        let bt = "Attaching 2 probes...\nbench table\n\n@calls: 1000004\n@ns:\n[64, 128) 5 |@|\n";
        assert_eq!(bpftrace_count(bt, "@calls"), Some(1_000_004));
        assert_eq!(bpftrace_count("@calls:\n", "@calls"), None);
        assert_eq!(floor_hits("table\n{\"hits\": 42}\n"), Some(42));
        assert_eq!(floor_hits("table only\n"), None);
        let perf = "[ perf record: Woken up 3 times to write data ]\n\
                    [ perf record: Captured and wrote 0.412 MB /t/p.data (1523 samples) ]\n";
        assert_eq!(perf_record_samples(perf), Some(1523));
        assert_eq!(
            perf_record_samples("[ perf record: Woken up 1 times ]\n"),
            None
        );
    }
}
