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
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::kernel::Kernel;
use crate::progress::Progress;
use crate::{guest, paths, setup, vm};

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
}

/// N lists per workload for sweeps under TCG, where everything is 3-20x slower than bare
/// metal: large enough to show each thread's shape, small enough to finish.
fn vm_n_lists(quick: bool) -> Vec<(&'static str, &'static str)> {
    if quick {
        // Four sizes: growth must show at two sizes above the smallest N's time, and under
        // TCG 5.10's children walk only outgrows do_wait's fixed cost from N≈500.
        vec![
            ("waitpid", "1,100,500,1000"),
            ("spawn", "1,100,500,1000"),
            ("sysvipc", "1,100,250,500"),
            ("mempolicy", "1,100,1000"),
            ("getpid", "1000,10000"),
        ]
    } else {
        vec![
            // The children walk only dominates do_wait's TCG-inflated fixed cost from N≈1000.
            ("waitpid", "1,10,100,1000,2000,4000,6000"),
            ("spawn", "1,10,100,1000,4000"),
            // O(N^2) before 5.15: keep the largest N affordable on 5.10.
            ("sysvipc", "1,10,100,500,1000"),
            ("mempolicy", "1,10,100,1000,4000"),
            ("getpid", "1000,10000,100000"),
        ]
    }
}

fn sweep_args(quick: bool, vm: bool) -> Vec<String> {
    let mut a: Vec<String> = vec!["sweep".into(), "--all".into()];
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

/// The host's tracer, built in release mode.
fn host_tracer() -> PathBuf {
    paths::workspace_root().join("target/release/tracer")
}

fn cargo_build_release() -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("xtask run: building tracer and workloads (release)");
    let st = Command::new(cargo)
        .args(["build", "--release", "-p", "tracer", "-p", "workloads"])
        .current_dir(paths::workspace_root())
        .status()
        .context("starting cargo")?;
    if !st.success() {
        bail!("cargo build --release -p tracer -p workloads failed ({st})");
    }
    Ok(())
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

/// The kernel pairs `cargo xtask run` compares: each kernel with the next one given, in the
/// order given (5.10 -> 6.1 -> 6.12 by default: do_wait's fix in 5.13, sysvipc's by 6.1,
/// `__mt_dup` in 6.8).
fn history_steps(kernels: &[Kernel]) -> Vec<(Kernel, Kernel)> {
    kernels.windows(2).map(|w| (w[0], w[1])).collect()
}

pub fn run(opts: RunOptions) -> Result<()> {
    let started = Instant::now();
    setup::run(false).context("provisioning")?;
    cargo_build_release()?;
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

    let mut reports: Vec<(String, PathBuf)> = Vec::new();
    let mut comparisons: Vec<(String, PathBuf)> = Vec::new();
    if native {
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
        eprintln!("xtask run: sweeping natively into {}", sweep.display());
        let st = Command::new(host_tracer()).args(&all).status()?;
        if !st.success() {
            bail!("tracer sweep failed ({st})");
        }
        reports.push(("native".into(), sweep.join("report")));
    } else {
        let guest = guest::build().context("building the guest binaries")?;
        for &k in &opts.kernels {
            let dir = out.join(k.version());
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!(
                "xtask run: sweeping every workload on Linux {} (qemu TCG)",
                k.version()
            );
            let mut cmd = vec!["tracer".to_string()];
            cmd.extend(sweep_args(opts.quick, true));
            let progress = Arc::new(Mutex::new(Progress::new(
                &format!("sweep on {}", k.version()),
                vm_n_lists(opts.quick).len() as u64,
            )));
            let sink = Arc::clone(&progress);
            let cfg = vm::VmConfig::new(k, cmd)
                .guest(guest.clone())
                .out_dir(&dir)
                .timeout_secs(if opts.quick { 1800 } else { 3600 })
                // On a terminal the bar replaces the workloads' output (kept in the run's
                // console.log); in a log, both.
                .echo(!std::io::stderr().is_terminal())
                .on_line(move |line| {
                    let mut p = sink.lock().unwrap_or_else(|e| e.into_inner());
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
            let label = format!("Linux {}", k.version());
            println!(
                "\n== {label}: {}\n{}",
                sweep.join("report/index.html").display(),
                summary_table(&sweep.join("report"))
            );
            reports.push((label, sweep.join("report")));
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
    }

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
    fn where_parses() {
        assert_eq!("vm".parse::<Where>().unwrap(), Where::Vm);
        assert!("elsewhere".parse::<Where>().is_err());
    }
}
