//! `cargo xtask bench`: what the tracer itself costs, side by side with bpftrace, written to
//! `BENCHMARKS.md` and `bench.json` at the workspace root (issue 6).
//!
//! Sections: added cost per traced call (interleaved rounds of untraced / tracer / tracer
//! lean / bpftrace / counter-only floor), loss (aggregate and raw-event modes), start-up and
//! shut-down, memory during a long high-rate record, `tracer report` speed on a synthetic
//! run, a perf profile of the probes, and with `--vm` the fentry/kprobe figures in a 6.1 VM.
//!
//! Benchmarks, not tests: they measure and write figures; they fail only when a measurement
//! is invalid (a tool counted the wrong number of calls) or aggregate mode lost a call.

mod analysis;
mod attach;
mod exec;
mod goals;
mod loss;
mod measure;
mod memory;
mod overhead;
mod profile;
mod render;
mod runjson;
mod startup;
mod stats;
mod synth;
mod vmbench;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtask::paths;

use exec::{Cmd, argv, path_str, probe_output};
pub use goals::evaluate;
use measure::{Attach, Config, Tools, Workload};

/// What `cargo xtask bench` was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchOptions {
    pub quick: bool,
    pub vm: bool,
    pub rounds: Option<usize>,
    /// Measure nothing: recompute the summaries and rewrite BENCHMARKS.md from bench.json.
    pub render_only: bool,
}

/// The sizes of one bench run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub quick: bool,
    pub rounds: usize,
    pub getpid_n: u64,
    pub getpid_iterations: u64,
    pub waitpid_iterations: u64,
    pub loss_iterations: u64,
    pub rings: Vec<String>,
    pub startup_reps: usize,
    pub memory_seconds: u64,
    pub synth_spans: u64,
    pub synth_samples: u64,
    pub vm_rounds: usize,
}

impl Plan {
    pub fn new(o: &BenchOptions) -> Plan {
        let q = o.quick;
        Plan {
            quick: q,
            rounds: o.rounds.unwrap_or(if q { 3 } else { 9 }),
            getpid_n: 200_000,
            getpid_iterations: if q { 2 } else { 5 },
            waitpid_iterations: if q { 1500 } else { 5000 },
            loss_iterations: if q { 10 } else { 25 },
            rings: vec!["256K".into(), "1M".into(), "16M".into()],
            startup_reps: if q { 3 } else { 7 },
            memory_seconds: if q { 15 } else { 60 },
            synth_spans: 10_000_000,
            synth_samples: 1_000_000,
            vm_rounds: o.rounds.unwrap_or(if q { 2 } else { 5 }),
        }
    }
}

/// Where and on what the figures were taken.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub date_utc: String,
    pub commit: String,
    pub dirty: bool,
    pub cpu: String,
    pub cores: usize,
    pub mem_gib: f64,
    pub kernel: String,
    pub rustc: String,
    pub bpftrace: Option<String>,
    pub perf: Option<String>,
    pub duration_s: f64,
}

/// One target of the issue, met or not.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetCheck {
    pub target: String,
    pub measured: String,
    /// None when it could not be measured.
    pub met: Option<bool>,
    /// A figure the issue asks to state, with no goal to meet.
    #[serde(default)]
    pub info: bool,
}

/// Everything one bench run measured: `bench.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub format: String,
    pub meta: Meta,
    pub plan: Plan,
    pub overhead: Vec<overhead::OverheadSet>,
    /// `--discover`'s sampling cost: the command's time per op with and without it, and with
    /// `perf record -g` at the same frequency instead, one set per workload.
    #[serde(default)]
    pub discover: Vec<overhead::OverheadSet>,
    pub loss: Option<loss::Loss>,
    pub startup: Option<startup::Startup>,
    pub memory: Option<memory::Memory>,
    pub analysis: Option<analysis::Analysis>,
    pub profile: Option<profile::Profile>,
    pub vm: Option<vmbench::VmSection>,
    /// Why a section is missing (e.g. the VM could not boot, perf absent).
    pub skipped: Vec<String>,
    pub targets: Vec<TargetCheck>,
}

pub const FORMAT: &str = "tracer-bench/1";

fn build() -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("xtask bench: cargo build --release -p tracer -p workloads");
    let st = std::process::Command::new(cargo)
        .args(["build", "--release", "-p", "tracer", "-p", "workloads"])
        .current_dir(paths::workspace_root())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .status()
        .context("could not run cargo build")?;
    if !st.success() {
        bail!("cargo build --release -p tracer -p workloads failed ({st})");
    }
    Ok(())
}

fn meta(started: Instant) -> Meta {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = exec::status_field_kib(&meminfo, "MemTotal:").unwrap_or(0);
    let root = path_str(&paths::workspace_root());
    let git = |args: &[&str]| {
        let mut a = vec!["git", "-C", root.as_str()];
        a.extend(args);
        probe_output(&a)
    };
    Meta {
        date_utc: probe_output(&["date", "-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_default(),
        commit: git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into()),
        dirty: git(&["status", "--porcelain", "--untracked-files=no"])
            .is_some_and(|s| !s.is_empty()),
        cpu,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        mem_gib: mem_kib as f64 / (1024.0 * 1024.0),
        kernel: probe_output(&["uname", "-r"]).unwrap_or_default(),
        rustc: probe_output(&["rustc", "--version"]).unwrap_or_default(),
        bpftrace: probe_output(&["bpftrace", "--version"]),
        perf: probe_output(&["perf", "--version"]),
        duration_s: started.elapsed().as_secs_f64(),
    }
}

fn resolve(tools: &Tools, target: &str) -> Result<Attach> {
    let dir = tools.scratch.join("logs");
    let out = Cmd::new(
        argv([
            path_str(&tools.tracer).as_str(),
            "probes",
            "--targets",
            target,
            "--json",
        ]),
        &dir,
        format!("probes-{target}"),
    )
    .run()?;
    let v: Value = serde_json::from_str(&out.stdout).context("tracer probes --json")?;
    Attach::from_probes(&v, target)
}

/// Recompute the ratios and targets of an existing bench.json and rewrite both files.
fn rerender() -> Result<()> {
    let root = paths::workspace_root();
    let path = root.join("bench.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let mut r: Results = serde_json::from_str(&text).context("bench.json")?;
    r.overhead = r.overhead.iter().map(overhead::reassemble).collect();
    r.discover = r.discover.iter().map(overhead::reassemble).collect();
    if let Some(v) = &mut r.vm {
        v.sets = v.sets.iter().map(overhead::reassemble).collect();
    }
    r.targets = evaluate(&r);
    write(&r)
}

fn write(results: &Results) -> Result<()> {
    let root = paths::workspace_root();
    std::fs::write(
        root.join("bench.json"),
        serde_json::to_string_pretty(results)? + "\n",
    )?;
    std::fs::write(root.join("BENCHMARKS.md"), render::markdown(results))?;
    Ok(())
}

pub fn run(opts: BenchOptions) -> Result<()> {
    if opts.render_only {
        return rerender();
    }
    let started = Instant::now();
    let plan = Plan::new(&opts);
    build()?;
    let tools = tools()?;
    let scratch = tools.scratch.clone();
    let mut skipped = Vec::new();
    if tools.bpftrace.is_none() {
        skipped.push(
            "bpftrace is not installed (cargo xtask setup installs it): no bpftrace columns".into(),
        );
    }

    // 1. Added cost per traced call.
    let getpid = Workload::getpid(plan.getpid_n, plan.getpid_iterations);
    let waitpid = Workload::waitpid(plan.waitpid_iterations);
    let configs = overhead_configs(tools.bpftrace.is_some());
    let getpid_attach = resolve(&tools, "getpid")?;
    let wait_attach = resolve(&tools, "do_wait")?;
    let overhead_sets = overhead_sets(
        &tools,
        &plan,
        [(&getpid, &getpid_attach), (&waitpid, &wait_attach)],
        &configs,
    )?;
    // The read loop's attach is never used: discover and perf trace no target.
    let pipe_read = Workload::pipe_read(plan.getpid_n, plan.getpid_iterations);
    let discover = discover_sets(
        &tools,
        &plan,
        [
            (&waitpid, &wait_attach),
            (&getpid, &getpid_attach),
            (&pipe_read, &getpid_attach),
        ],
        &mut skipped,
    )?;

    // 2. Loss.
    let loss_w = Workload::getpid(plan.getpid_n, plan.loss_iterations);
    let raw_w = Workload::getpid(plan.getpid_n, plan.loss_iterations / 2);
    let rings: Vec<&str> = plan.rings.iter().map(String::as_str).collect();
    let loss = loss::Loss {
        aggregate: loss::aggregate(&tools, &loss_w)?,
        raw: loss::raw(&tools, &raw_w, &rings)?,
        workload: loss_w,
        raw_workload: raw_w,
    };

    // 3. Start-up and shut-down.
    let startup = startup::measure(&tools, &getpid_attach, plan.startup_reps)?;

    // 4. Memory.
    let memory = memory::measure(&tools, plan.memory_seconds)?;

    // 5. Analysis speed.
    let analysis = analysis::measure(
        &tools,
        &synth::SynthSpec::new(plan.synth_spans, plan.synth_samples),
    )?;

    // Where the per-call cost goes.
    let profile = profile_section(&tools, &getpid, &getpid_attach, &mut skipped);

    // 6. fentry and kprobe in a VM.
    let vm = opts
        .vm
        .then(|| vm_section(&plan, &scratch, &mut skipped))
        .flatten();
    if !opts.vm {
        skipped.push("VM section (fentry, kprobe) not run: pass --vm".into());
    }

    let mut results = Results {
        format: FORMAT.into(),
        meta: meta(started),
        plan,
        overhead: overhead_sets,
        discover,
        loss: Some(loss),
        startup: Some(startup),
        memory: Some(memory),
        analysis: Some(analysis),
        profile,
        vm,
        skipped,
        targets: Vec::new(),
    };
    results.targets = evaluate(&results);
    write(&results)?;
    eprintln!(
        "xtask bench: wrote BENCHMARKS.md and bench.json in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    print_targets(&results);
    check_no_loss(&results)
}

/// The release binaries just built, bpftrace where installed, and a fresh scratch directory.
fn tools() -> Result<Tools> {
    let rel = paths::target_dir().join("release");
    let scratch = exec::fresh_dir(paths::target_dir().join("bench"))?;
    let bpftrace = [
        "/usr/bin/bpftrace",
        "/usr/sbin/bpftrace",
        "/usr/local/bin/bpftrace",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists());
    let tools = Tools {
        tracer: rel.join("tracer"),
        workloads: rel.join("workloads"),
        bpftrace,
        scratch,
    };
    Ok(tools)
}

/// Section 1's sets: each workload's added cost per traced call under every configuration.
fn overhead_sets(
    tools: &Tools,
    plan: &Plan,
    sets: [(&Workload, &Attach); 2],
    configs: &[Config],
) -> Result<Vec<overhead::OverheadSet>> {
    let mut overhead_sets = Vec::new();
    for (w, a) in sets {
        let title = format!("{}, {} (host)", w.label, a.mechanism);
        let mut set = overhead::measure(tools, &title, w, a, configs, plan.rounds)?;
        let (mech, points, _) = a.floor_args(false);
        let (pmech, ppoints, _) = a.floor_args(true);
        set.notes.push(format!(
            "floor = `tracer __floor {mech} {points}`: a per-CPU counter on every attach \
             point, system-wide, nothing else (raw-syscall: raw `sys_enter`/`sys_exit`, which \
             fire for every syscall, counting the ones named, as the tracer attaches them); \
             timed-floor = the same with `--timed`: also a clock read at each end and the \
             entry time kept per CPU until the exit, the least any probe that times calls \
             does; the -perf-events floors: `tracer __floor {pmech} {ppoints}`, one perf \
             event per tracepoint, the mechanism of tracer-lean-perf-events"
        ));
        overhead_sets.push(set);
    }
    Ok(overhead_sets)
}

/// Discover mode's sets: sampling only, against perf record -g at the same frequency (when
/// perf is installed; else why not, in `skipped`).
fn discover_sets(
    tools: &Tools,
    plan: &Plan,
    sets: [(&Workload, &Attach); 3],
    skipped: &mut Vec<String>,
) -> Result<Vec<overhead::OverheadSet>> {
    // Discover mode: sampling only, against perf record -g at the same frequency, on the
    // workload with the deepest kernel stacks, the syscall-heavy one and a read loop.
    let mut discover_configs = vec![Config::Untraced, Config::Discover];
    if profile::available() {
        discover_configs.push(Config::PerfRecord);
    } else {
        skipped.push("perf is not installed: discover is not compared with perf record".into());
    }
    let mut discover = Vec::new();
    for (w, a) in sets {
        discover.push(overhead::measure(
            tools,
            &format!("{}, --discover sampling (host)", w.label),
            w,
            a,
            &discover_configs,
            plan.rounds,
        )?);
    }
    Ok(discover)
}

/// The configurations of the added-cost tables: untraced, the tracer (default, lean, lean
/// without the fast path, lean on perf events), bpftrace (with and without the phase
/// markers' uprobes) when installed, and the floors.
fn overhead_configs(bpftrace: bool) -> Vec<Config> {
    let mut configs = vec![
        Config::Untraced,
        Config::Tracer {
            lean: false,
            plan: None,
            perf_events: false,
            exact_path: false,
        },
        Config::Tracer {
            lean: true,
            plan: None,
            perf_events: false,
            exact_path: false,
        },
        // The same without the per-CPU fast path: what it saves.
        Config::Tracer {
            lean: true,
            plan: None,
            perf_events: false,
            exact_path: true,
        },
        // The same without raw tracepoints: what they change.
        Config::Tracer {
            lean: true,
            plan: None,
            perf_events: true,
            exact_path: false,
        },
    ];
    if bpftrace {
        configs.push(Config::Bpftrace {
            phase_uprobes: false,
        });
        // The same with the tracer's phase-marker uprobes in the workload binary: what the
        // markers themselves cost (for comparison, under no goal).
        configs.push(Config::Bpftrace {
            phase_uprobes: true,
        });
    }
    for perf_events in [false, true] {
        configs.push(Config::Floor { perf_events });
        configs.push(Config::TimedFloor { perf_events });
    }
    configs
}

/// A perf profile of the traced getpid workload per tool, when perf is installed and works
/// (else why not, in `skipped`).
fn profile_section(
    tools: &Tools,
    getpid: &Workload,
    attach: &Attach,
    skipped: &mut Vec<String>,
) -> Option<profile::Profile> {
    if profile::available() {
        match profile::measure(tools, getpid, attach) {
            Ok(p) => Some(p),
            Err(e) => {
                skipped.push(format!("perf profile failed: {e:#}"));
                None
            }
        }
    } else {
        skipped.push("perf is not installed: no profile".into());
        None
    }
}

/// The fentry and kprobe sets, measured in a Debian 6.1 VM (why not, in `skipped`).
fn vm_section(
    plan: &Plan,
    scratch: &std::path::Path,
    skipped: &mut Vec<String>,
) -> Option<vmbench::VmSection> {
    let g = Workload::getpid(20_000, if plan.quick { 5 } else { 10 });
    let w = Workload::waitpid(if plan.quick { 200 } else { 300 });
    match vmbench::run(&g, &w, plan.vm_rounds, scratch) {
        Ok(v) => Some(v),
        Err(e) => {
            skipped.push(format!("VM section failed: {e:#}"));
            None
        }
    }
}

/// Each goal, met or missed, on the terminal.
fn print_targets(results: &Results) {
    for t in &results.targets {
        let mark = match t.met {
            Some(true) => "met   ",
            Some(false) => "MISSED",
            None => "n/a   ",
        };
        eprintln!("  {mark} {}: {}", t.target, t.measured);
    }
}

/// A bench run whose aggregate mode lost calls fails.
fn check_no_loss(results: &Results) -> Result<()> {
    let lost: Vec<&loss::AggregateRun> = results
        .loss
        .iter()
        .flat_map(|l| l.aggregate.iter())
        .filter(|a| !a.exact)
        .collect();
    if !lost.is_empty() {
        bail!(
            "aggregate mode lost calls: {}",
            lost.iter()
                .map(|a| format!("{}: {} of {}", a.options, a.counted, a.workload_ops))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}
