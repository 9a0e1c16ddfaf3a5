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

/// One target per figure of merit of `set`, its added cost counted per `per` (call, op).
fn ratio_targets<'a>(
    set: &'a overhead::OverheadSet,
    per: &'a str,
) -> impl Iterator<Item = TargetCheck> + 'a {
    set.ratios.iter().map(move |ratio| TargetCheck {
        target: format!(
            "{}: {} / {} added ns per {per} <= {}",
            set.title, ratio.numerator, ratio.denominator, ratio.limit
        ),
        measured: ratio
            .of_medians
            .map_or("n/a (an added cost not above noise)".into(), |v| {
                format!("{v:.2}")
            }),
        met: ratio.met,
        info: false,
    })
}

/// The issue's targets against the figures.
pub fn evaluate(r: &Results) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for set in r
        .overhead
        .iter()
        .chain(r.vm.iter().flat_map(|v| v.sets.iter()))
    {
        out.extend(ratio_targets(set, "call"));
    }
    if let Some(l) = &r.loss {
        for a in &l.aggregate {
            out.push(TargetCheck {
                target: format!("zero loss in aggregate mode, {}", a.options),
                measured: format!(
                    "{} of {} calls counted at {:.2} M calls/s",
                    a.counted,
                    a.workload_ops,
                    a.rate_per_s / 1e6
                ),
                met: Some(a.exact),
                info: false,
            });
        }
    }
    if let Some(s) = &r.startup {
        out.extend(startup_targets(s));
    }
    for set in &r.discover {
        if let Some(p) = overhead::discover_overhead(set) {
            out.push(TargetCheck {
                target: format!("{}: added to the command's time per op", set.title),
                measured: format!("{:+.1}% ({:+.1}% to {:+.1}%)", p.median, p.min, p.max),
                met: None,
                info: true,
            });
        }
        out.extend(ratio_targets(set, "op"));
    }
    if let Some(m) = &r.memory {
        let peak = m.peak_rss_kib.max(m.sampled_peak_rss_kib);
        out.push(TargetCheck {
            target: format!("peak RSS < 100 MiB during a {} s record", m.seconds),
            measured: format!("{:.1} MiB", peak as f64 / 1024.0),
            met: Some(peak > 0 && peak < 100 * 1024),
            info: false,
        });
    }
    if let Some(a) = &r.analysis
        && let Some(t) = a.timings.first()
    {
        out.push(TargetCheck {
            target: format!(
                "tracer report on {} M spans + {} M samples < 10 s",
                a.synth.spans as f64 / 1e6,
                a.synth.samples as f64 / 1e6
            ),
            measured: format!(
                "{:.2} s (exact percentiles from the raw spans in {} of {} rows)",
                t.wall_s, a.exact_rows, a.table_rows
            ),
            met: Some(t.wall_s < 10.0),
            info: false,
        });
    }
    out
}

/// The start-up goals: every probe attached within half a second of launch, detached within
/// 0.3 s, for the configurations measured.
fn startup_targets(s: &startup::Startup) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for name in [
        "tracer record (default targets, verified)",
        "tracer record --no-verify (default targets)",
        "tracer record --targets getpid --no-verify",
    ] {
        if let Ok(x) = startup::find(s, name) {
            let ext = x.to_attached_ms.map(|m| m.median);
            out.push(TargetCheck {
                target: format!("all probes attached in < 0.5 s: {name}"),
                measured: format!(
                    "{} ms launch -> command starts (attach_ms {})",
                    ext.map_or("?".into(), |v| format!("{v:.0}")),
                    x.attach_ms
                        .map_or("?".into(), |m| format!("{:.0}", m.median))
                ),
                met: ext.map(|v| v < 500.0),
                info: false,
            });
        }
    }
    for name in [
        "tracer record (default targets, verified)",
        "tracer record --targets getpid --no-verify",
    ] {
        if let Ok(x) = startup::find(s, name) {
            let d = x.detach_ms.map(|m| m.median);
            out.push(TargetCheck {
                target: format!("detached in < 0.3 s: {name}"),
                measured: format!(
                    "detach_ms {} (command starts -> exit {} ms)",
                    d.map_or("?".into(), |v| format!("{v:.0}")),
                    x.to_exit_ms
                        .map_or("?".into(), |m| format!("{:.0}", m.median))
                ),
                met: d.map(|v| v < 300.0),
                info: false,
            });
        }
    }
    out
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
        scratch: scratch.clone(),
    };
    let mut skipped = Vec::new();
    if tools.bpftrace.is_none() {
        skipped.push(
            "bpftrace is not installed (cargo xtask setup installs it): no bpftrace columns".into(),
        );
    }

    // 1. Added cost per traced call.
    let getpid = Workload::getpid(plan.getpid_n, plan.getpid_iterations);
    let waitpid = Workload::waitpid(plan.waitpid_iterations);
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
    if tools.bpftrace.is_some() {
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
    let getpid_attach = resolve(&tools, "getpid")?;
    let wait_attach = resolve(&tools, "do_wait")?;
    let mut overhead_sets = Vec::new();
    for (w, a) in [(&getpid, &getpid_attach), (&waitpid, &wait_attach)] {
        let title = format!("{}, {} (host)", w.label, a.mechanism);
        let mut set = overhead::measure(&tools, &title, w, a, &configs, plan.rounds)?;
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

    // Discover mode: sampling only, against perf record -g at the same frequency, on the
    // workload with the deepest kernel stacks and on the syscall-heavy one.
    let mut discover_configs = vec![Config::Untraced, Config::Discover];
    if profile::available() {
        discover_configs.push(Config::PerfRecord);
    } else {
        skipped.push("perf is not installed: discover is not compared with perf record".into());
    }
    let mut discover = Vec::new();
    for (w, a) in [(&waitpid, &wait_attach), (&getpid, &getpid_attach)] {
        discover.push(overhead::measure(
            &tools,
            &format!("{}, --discover sampling (host)", w.label),
            w,
            a,
            &discover_configs,
            plan.rounds,
        )?);
    }

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
    let profile = if profile::available() {
        match profile::measure(&tools, &getpid, &getpid_attach) {
            Ok(p) => Some(p),
            Err(e) => {
                skipped.push(format!("perf profile failed: {e:#}"));
                None
            }
        }
    } else {
        skipped.push("perf is not installed: no profile".into());
        None
    };

    // 6. fentry and kprobe in a VM.
    let vm = if opts.vm {
        let g = Workload::getpid(20_000, if plan.quick { 5 } else { 10 });
        let w = Workload::waitpid(if plan.quick { 200 } else { 300 });
        match vmbench::run(&g, &w, plan.vm_rounds, &scratch) {
            Ok(v) => Some(v),
            Err(e) => {
                skipped.push(format!("VM section failed: {e:#}"));
                None
            }
        }
    } else {
        skipped.push("VM section (fentry, kprobe) not run: pass --vm".into());
        None
    };

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
    for t in &results.targets {
        let mark = match t.met {
            Some(true) => "met   ",
            Some(false) => "MISSED",
            None => "n/a   ",
        };
        eprintln!("  {mark} {}: {}", t.target, t.measured);
    }
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
