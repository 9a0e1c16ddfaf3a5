//! `cargo xtask run`: the whole job, end to end, on a fresh machine.
//!
//! 1. provision (idempotent `setup`);
//! 2. build the tracer and the workloads;
//! 3. ask the running kernel what it allows (`tracer probes --json`): when every target
//!    can be measured by a function probe (fentry, kprobe or an out-of-line caller), sweep
//!    every workload natively;
//! 4. otherwise (this project's Firecracker kernel refuses kprobes and fentry) sweep every
//!    workload inside VMs on Debian's 5.10, 6.1 and 6.12 kernels, render each report, and
//!    compare each kernel with the next with `tracer compare`;
//! 5. print the verdicts and where everything is.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::MultiProgress;

use crate::kernel::Kernel;
use crate::progress::Progress;
use crate::{guest, setup, vm};

/// Where the sweeps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// Natively if the kernel allows function probes, else in VMs.
    Auto,
    Native,
    Vm,
}

impl std::str::FromStr for Where {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let places = [
            ("auto", Where::Auto),
            ("native", Where::Native),
            ("vm", Where::Vm),
        ];
        crate::cli::parse_choice(s, &places, "")
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub out: PathBuf,
    pub place: Where,
    /// Smaller N lists and fewer iterations: minutes instead of tens of minutes.
    pub quick: bool,
    pub kernels: Vec<Kernel>,
    /// Guests at once (None: one per core, as memory allows).
    pub jobs: Option<usize>,
    /// The whole job's wall time, setup and build included (see [`sweep_budget`]).
    pub budget: Duration,
}

/// N lists per workload for sweeps under TCG, where everything is 3-20x slower than bare
/// metal: large enough to show each thread's shape, small enough to finish.
///
/// In the order they are swept: the cheapest first. Under `--budget` each workload's later
/// rounds get an equal share of what is left when it starts, and time a workload does not
/// use goes to those after it. waitpid, 23-42 s a round under qemu against 1-10 s for the
/// others, kept one round of three when it came first, and one run per size let a single
/// slow run at N = 3000 (14.2 ms per call against 4.2 ms in another sweep) flag 6.1 -> 6.12
/// `shrank`; last, it takes what the others leave.
fn vm_n_lists(quick: bool) -> Vec<(&'static str, &'static str)> {
    if quick {
        // Four sizes: growth must show at two sizes above the smallest N's time, and under
        // TCG 5.10's children walk only outgrows do_wait's fixed cost from N≈500.
        vec![
            ("getpid", "1000,10000"),
            ("mempolicy", "1,100,1000"),
            ("sysvipc", "1,100,250,500"),
            ("spawn", "1,100,500,1000"),
            ("waitpid", "1,100,500,1000"),
        ]
    } else {
        vec![
            ("getpid", "1000,10000,100000"),
            ("mempolicy", "1,10,100,1000,4000"),
            // O(N^2) before 5.15: keep the largest N affordable on 5.10.
            ("sysvipc", "1,10,100,500,1000"),
            ("spawn", "1,10,100,1000,4000"),
            // The children walk only dominates do_wait's TCG-inflated fixed cost from N≈1000;
            // its class comes from the loop count, exact at any size. A run at N = 6000 (the
            // setup forks them all) took 26-30 s of a 6.1 guest's sweep, at 3000 about 14.
            ("waitpid", "1,10,100,1000,3000"),
        ]
    }
}

fn sweep_args(quick: bool, vm: bool) -> Vec<String> {
    // The workloads by name, in vm_n_lists's order (not --all's).
    let mut a: Vec<String> = vec!["sweep".into()];
    a.extend(vm_n_lists(quick).iter().map(|(w, _)| w.to_string()));
    if vm {
        for (w, list) in vm_n_lists(quick) {
            a.push("--n-for".into());
            a.push(format!("{w}={list}"));
        }
        a.push("--no-report".into());
    } else if quick {
        a.push("--n".into());
        a.push("1,100,1000".into());
    }
    a.push("-o".into());
    a.push(if vm {
        "/out/sweep".into()
    } else {
        "SWEEP_DIR".into()
    });
    // Every size runs three times (the sweep's default rounds), so a third of the timed
    // operations per run keeps each size's calls at 30 (quick: 12).
    a.push("--".into());
    a.push("--iterations".into());
    a.push(if quick { "4" } else { "10" }.into());
    a.push("--cpu".into());
    a.push("1".into());
    a
}

/// The host's tracer: the guest's static musl build, which runs natively as well (one
/// release build of the tracer instead of two).
fn host_tracer() -> PathBuf {
    guest::release_dir().join("tracer")
}

/// `--budget` unless given: the main job from nothing on a 2-core host, setup and build
/// included.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(15 * 60);
/// `--quick`'s.
pub const QUICK_BUDGET: Duration = Duration::from_secs(8 * 60);

/// How `cargo xtask run` spends `--budget`, counted from its start: setup and the build
/// first (whatever they take), then the sweeps, then [`REPORT_RESERVE`] for the reports
/// and compares. Guests run in waves of as many as the host has slots for; each sweep gets
/// an equal part of what is left for its wave, less [`GUEST_OVERHEAD`], and cuts what does
/// not fit (`tracer sweep --budget`).
pub const REPORT_RESERVE: Duration = Duration::from_secs(45);
/// A guest's time outside its sweep: boot, attach and verify, the files' way back.
pub const GUEST_OVERHEAD: Duration = Duration::from_secs(40);
/// Least budget a sweep is given, however late it starts: its first rounds run anyway.
pub const MIN_SWEEP: Duration = Duration::from_secs(60);

/// Each sweep's budget when `left` remains for `sweeps` sweeps (`in_guest`: each in a guest)
/// run `at_once` at a time.
pub fn sweep_budget(left: Duration, sweeps: usize, at_once: usize, in_guest: bool) -> Duration {
    let waves = sweeps.div_ceil(at_once.max(1)).max(1) as u32;
    let each = left.saturating_sub(REPORT_RESERVE) / waves;
    let each = if in_guest {
        each.saturating_sub(GUEST_OVERHEAD)
    } else {
        each
    };
    each.max(MIN_SWEEP)
}

/// `--budget` values: `15m`, `900s`, `1h`, or plain seconds.
pub fn parse_budget(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'm')) => (&s[..i], 60.0),
        Some((i, 'h')) => (&s[..i], 3600.0),
        Some((i, 's')) => (&s[..i], 1.0),
        _ => (s, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v * mult)),
        _ => Err(format!("{s:?} is not a duration (try 15m, 900s, 1h)")),
    }
}

/// Does this kernel let every default target be measured with a function probe?
/// Returns the reason when not.
fn native_function_probes() -> Result<Result<(), String>> {
    let out = Command::new(host_tracer())
        .args(["probes", "--json"])
        .output()
        .context("running tracer probes")?;
    let doc: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(d) => d,
        Err(_) => {
            return Ok(Err(format!(
                "tracer probes failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    };
    let mut missing = Vec::new();
    for t in doc["targets"].as_array().into_iter().flatten() {
        let mech = t["plan"]["mechanism"].as_str().unwrap_or("");
        if !(mech.starts_with("fentry") || mech.starts_with("kprobe")) {
            let plan = t["plan"]["plan"].as_str().unwrap_or("none");
            missing.push(format!("{} ({plan})", t["name"].as_str().unwrap_or("?")));
        }
    }
    if missing.is_empty() {
        Ok(Ok(()))
    } else {
        Ok(Err(format!(
            "this kernel allows no function probe for {}",
            missing.join(", ")
        )))
    }
}

fn tracer_cmd(args: &[&str]) -> Result<String> {
    let out = Command::new(host_tracer())
        .args(args)
        .output()
        .with_context(|| format!("running tracer {args:?}"))?;
    if !out.status.success() {
        bail!(
            "tracer {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The summary table a report or comparison wrote (`summary.txt`): the findings each
/// workload exists for.
fn summary_table(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("summary.txt")).unwrap_or_default()
}

/// What a line of the guest's sweep output says about its progress.
#[derive(Debug, PartialEq, Eq)]
enum SweepLine<'a> {
    /// `waitpid: done (7 N values)` (or `partial`): a workload finished.
    Finished(&'a str),
    /// `waitpid-pid/1000  3578 us ...`: a case's result at one N.
    Result(&'a str),
    Other,
}

fn sweep_line(line: &str) -> SweepLine<'_> {
    if let Some((name, rest)) = line.split_once(": ")
        && !name.contains(' ')
        && (rest.starts_with("done (") || rest.starts_with("partial ("))
    {
        return SweepLine::Finished(line);
    }
    match line.split_whitespace().next() {
        Some(first)
            if first
                .split_once('/')
                .is_some_and(|(case, n)| !case.is_empty() && n.parse::<u64>().is_ok()) =>
        {
            SweepLine::Result(first)
        }
        _ => SweepLine::Other,
    }
}

/// Sweep every workload on `k` in a guest and render the report; returns the sweep
/// directory. Its progress is a bar on `board` (a terminal), else lines prefixed with the
/// kernel, so that guests side by side stay readable in a log.
fn sweep_in_vm(
    k: Kernel,
    quick: bool,
    budget: Duration,
    guest: &guest::GuestBinaries,
    out: &Path,
    board: Option<&MultiProgress>,
) -> Result<PathBuf> {
    let dir = out.join(k.version());
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = vec!["tracer".to_string()];
    cmd.extend(sweep_args(quick, true));
    cmd.insert(2, format!("{}s", budget.as_secs()));
    cmd.insert(2, "--budget".into());
    let progress = Arc::new(Mutex::new(Progress::new_in(
        &format!("sweep on {}", k.version()),
        vm_n_lists(quick).len() as u64,
        board,
    )));
    let sink = Arc::clone(&progress);
    let prefix = format!("[{}] ", k.version());
    let plain = board.is_none();
    let cfg = vm::VmConfig::new(k, cmd)
        .guest(guest.clone())
        .out_dir(&dir)
        // A sweep's first rounds run whatever its budget: room for them, then a hang.
        .timeout_secs((budget * 3).max(Duration::from_secs(1200)).as_secs())
        // Guests side by side: their lines go through on_line, prefixed, never raw.
        .echo(false)
        .on_line(move |line| {
            let mut p = sink.lock().unwrap_or_else(|e| e.into_inner());
            if plain {
                eprintln!("{prefix}{line}");
            }
            match sweep_line(line) {
                SweepLine::Finished(l) => p.inc(l),
                SweepLine::Result(r) => p.message(r),
                SweepLine::Other => {}
            }
        });
    let report = vm::run(&cfg).map_err(|e| anyhow::anyhow!("{e}"));
    drop(cfg);
    if let Ok(p) = Arc::try_unwrap(progress) {
        p.into_inner().unwrap_or_else(|e| e.into_inner()).finish();
    }
    let report = report?;
    match report.status {
        vm::VmStatus::Exited(0) => {}
        ref other => bail!(
            "the sweep on {} did not finish: {other:?}: {}",
            k.version(),
            report.failure_message().unwrap_or_default()
        ),
    }
    let sweep = dir.join("sweep");
    tracer_cmd(&["report", sweep.to_str().unwrap()])?;
    Ok(sweep)
}

/// The kernel pairs `cargo xtask run` compares: each kernel with the next one given, in the
/// order given (5.10 -> 6.1 -> 6.12 by default: do_wait's fix in 5.13, sysvipc's by 6.1,
/// `__mt_dup` in 6.8).
fn history_steps(kernels: &[Kernel]) -> Vec<(Kernel, Kernel)> {
    kernels.windows(2).map(|w| (w[0], w[1])).collect()
}

pub fn run(opts: RunOptions) -> Result<()> {
    let started = Instant::now();
    setup::run(false).context("provisioning")?;
    let guest = guest::build().context("building the tracer and workloads (static, release)")?;
    eprintln!(
        "xtask run: set up and built in {:.0} s of the {:.0} s budget (--budget)",
        started.elapsed().as_secs_f64(),
        opts.budget.as_secs_f64()
    );
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let out = opts.out.canonicalize()?;

    let native = match opts.place {
        Where::Native => true,
        Where::Vm => false,
        Where::Auto => match native_function_probes()? {
            Ok(()) => true,
            Err(why) => {
                eprintln!("xtask run: {why}; sweeping inside VMs on Debian kernels instead");
                false
            }
        },
    };

    let (reports, comparisons) = if native {
        (vec![sweep_native(&opts, &out, started)?], Vec::new())
    } else {
        sweep_in_vms(&opts, &out, started, &guest)?
    };
    println!();
    for (label, dir) in reports.iter().chain(&comparisons) {
        println!("== {label}: {}", dir.join("index.html").display());
    }
    // The answer last, where the reader's eye lands: the findings the workloads exist for,
    // across each pair of kernels when there are several (else this machine's).
    if comparisons.is_empty() {
        if let Some((label, dir)) = reports.last() {
            println!("\n{label}:\n{}", summary_table(dir));
        }
    } else {
        for (label, dir) in &comparisons {
            println!("\n{label}:\n{}", summary_table(dir));
        }
    }
    println!(
        "\nxtask run: done in {:.0} s; results under {}",
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// Sweeps every workload on this machine's kernel, into `out/native`: its report.
fn sweep_native(opts: &RunOptions, out: &Path, started: Instant) -> Result<(String, PathBuf)> {
    let sweep = out.join("native");
    let args: Vec<String> = sweep_args(opts.quick, false)
        .into_iter()
        .map(|a| {
            if a == "SWEEP_DIR" {
                sweep.to_string_lossy().into_owned()
            } else {
                a
            }
        })
        .collect();
    let mut all = args;
    all.insert(1, "--force".into());
    let budget = sweep_budget(opts.budget.saturating_sub(started.elapsed()), 1, 1, false);
    all.insert(1, format!("{}s", budget.as_secs()));
    all.insert(1, "--budget".into());
    eprintln!("xtask run: sweeping natively into {}", sweep.display());
    let st = Command::new(host_tracer()).args(&all).status()?;
    if !st.success() {
        bail!("tracer sweep failed ({st})");
    }
    Ok(("native".into(), sweep.join("report")))
}

/// Reports or comparisons, each with its label.
type Labelled = Vec<(String, PathBuf)>;

/// Sweeps every workload in a VM per kernel, as many at once as the host's slots allow,
/// then compares each kernel with the next: the reports and the comparisons.
fn sweep_in_vms(
    opts: &RunOptions,
    out: &Path,
    started: Instant,
    guest: &guest::GuestBinaries,
) -> Result<(Labelled, Labelled)> {
    if let Some(j) = opts.jobs {
        // SAFETY: set before any thread of ours starts; read by vm::slots.
        unsafe { std::env::set_var(vm::slots::JOBS_ENV, j.to_string()) };
    }
    eprintln!(
        "xtask run: sweeping every workload on Linux {} (qemu TCG), up to {} at once",
        opts.kernels
            .iter()
            .map(|k| k.version())
            .collect::<Vec<_>>()
            .join(", "),
        vm::slots::jobs(vm::VmConfig::DEFAULT_MEM_MB)
    );
    let at_once = vm::slots::jobs(vm::VmConfig::DEFAULT_MEM_MB);
    let budget = sweep_budget(
        opts.budget.saturating_sub(started.elapsed()),
        opts.kernels.len(),
        at_once,
        true,
    );
    eprintln!(
        "xtask run: {:.0} s for each kernel's sweep ({} at once; tracer sweep --budget cuts \
         what does not fit and says so)",
        budget.as_secs_f64(),
        at_once
    );
    // One thread per kernel; the host's VM slots decide how many guests run at once.
    let board = Progress::drawable().then(MultiProgress::new);
    let swept: Vec<(Kernel, Result<PathBuf>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = opts
            .kernels
            .iter()
            .map(|&k| {
                let (guest, out, board) = (&guest, &out, board.as_ref());
                let quick = opts.quick;
                (
                    k,
                    scope.spawn(move || sweep_in_vm(k, quick, budget, guest, out, board)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(k, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the {} sweep panicked", k.version())));
                (k, r)
            })
            .collect()
    });
    let mut reports = Vec::new();
    let mut comparisons = Vec::new();
    let mut failed = Vec::new();
    for (k, r) in swept {
        match r {
            Ok(sweep) => {
                let label = format!("Linux {}", k.version());
                println!(
                    "\n== {label}: {}\n{}",
                    sweep.join("report/index.html").display(),
                    summary_table(&sweep.join("report"))
                );
                reports.push((label, sweep.join("report")));
            }
            Err(e) => failed.push(format!("{}: {e:#}", k.version())),
        }
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("\n"));
    }
    // Each kernel against the next: the history of each thread's fix, one step at a time.
    for (a, b) in history_steps(&opts.kernels) {
        let cmp = out.join(format!("compare-{}-{}", a.version(), b.version()));
        let sweep_of = |k: Kernel| out.join(k.version()).join("sweep");
        tracer_cmd(&[
            "compare",
            sweep_of(a).to_str().unwrap(),
            sweep_of(b).to_str().unwrap(),
            "-o",
            cmp.to_str().unwrap(),
        ])?;
        comparisons.push((format!("Linux {} -> {}", a.version(), b.version()), cmp));
    }
    Ok((reports, comparisons))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_sweeps_name_every_workload_and_write_to_out() {
        let a = sweep_args(false, true);
        for w in ["waitpid", "spawn", "sysvipc", "mempolicy", "getpid"] {
            assert!(
                a.iter().any(|x| x.starts_with(&format!("{w}="))),
                "{w} missing: {a:?}"
            );
        }
        // Named, cheapest first: waitpid, the costly one, inherits what the others leave.
        for args in [&a, &sweep_args(true, false)] {
            let named: Vec<&str> = args[1..6].iter().map(String::as_str).collect();
            assert_eq!(
                named,
                ["getpid", "mempolicy", "sysvipc", "spawn", "waitpid"],
                "{args:?}"
            );
        }
        let o = a.iter().position(|x| x == "-o").unwrap();
        assert_eq!(a[o + 1], "/out/sweep");
        assert!(a.contains(&"--no-report".to_string()));
        let native = sweep_args(true, false);
        assert!(native.contains(&"SWEEP_DIR".to_string()));
        assert!(!native.iter().any(|x| x == "--no-report"));
    }

    #[test]
    fn sweep_lines_mark_progress() {
        assert_eq!(
            sweep_line("waitpid: done (7 N values)"),
            SweepLine::Finished("waitpid: done (7 N values)")
        );
        assert_eq!(
            sweep_line("spawn: partial (5 N values), exited 1"),
            SweepLine::Finished("spawn: partial (5 N values), exited 1")
        );
        assert_eq!(
            sweep_line("waitpid-pid/1000                             3578 us          228 us"),
            SweepLine::Result("waitpid-pid/1000")
        );
        for other in [
            "tracer: warning: waitpid: counter stack_errors = 1",
            "Benchmark    Time    CPU   Iterations",
            "sweep written to /out/sweep",
            "",
        ] {
            assert_eq!(sweep_line(other), SweepLine::Other, "{other}");
        }
    }

    #[test]
    fn every_kernel_is_compared_with_the_next() {
        use Kernel::*;
        assert_eq!(
            history_steps(&[V5_10, V6_1, V6_12]),
            vec![(V5_10, V6_1), (V6_1, V6_12)]
        );
        assert_eq!(history_steps(&[V6_1, V5_10]), vec![(V6_1, V5_10)]);
        assert!(history_steps(&[V6_1]).is_empty());
    }

    #[test]
    fn the_budget_left_after_the_build_is_shared_by_waves_of_guests() {
        let min = |m: u64| Duration::from_secs(m * 60);
        // 12 minutes left, three kernels two at a time: two waves of (12m - 45 s) / 2 each,
        // less a guest's overhead.
        let each = sweep_budget(min(12), 3, 2, true);
        assert_eq!(each, (min(12) - REPORT_RESERVE) / 2 - GUEST_OVERHEAD);
        // Three at once: one wave.
        assert_eq!(
            sweep_budget(min(12), 3, 3, true),
            min(12) - REPORT_RESERVE - GUEST_OVERHEAD
        );
        // Natively, no guest overhead.
        assert_eq!(sweep_budget(min(12), 1, 1, false), min(12) - REPORT_RESERVE);
        // Nothing left: the least a sweep gets.
        assert_eq!(sweep_budget(Duration::ZERO, 3, 2, true), MIN_SWEEP);
    }

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_budget("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_budget("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_budget("120"), Ok(Duration::from_secs(120)));
        assert!(parse_budget("0m").is_err());
        assert!(parse_budget("soon").is_err());
    }

    #[test]
    fn where_parses() {
        assert_eq!("vm".parse::<Where>().unwrap(), Where::Vm);
        assert!("elsewhere".parse::<Where>().is_err());
    }
}
