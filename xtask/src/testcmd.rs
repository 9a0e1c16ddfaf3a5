//! `cargo xtask test`: the project's whole test suite, as an ordered list of steps.
//! Extend it by adding a [`Step`] to [`steps`]. The first failing step stops the run
//! and makes the command fail.

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{guest, paths, vmtests};

/// Which parts to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestOptions {
    /// Skip the steps that boot VMs.
    pub no_vm: bool,
    /// Only the steps that boot VMs (and what they need).
    pub vm_only: bool,
    /// The inner loop: unit tests, the native eBPF tests, and one boot of one real kernel.
    pub quick: bool,
    /// Guests at once (default: one per core, as memory allows; see `vm::slots`).
    pub jobs: Option<usize>,
}

/// One step of the suite.
pub struct Step {
    pub name: &'static str,
    /// Whether this step is, or prepares, the VM tests.
    pub vm: bool,
    pub run: Box<dyn Fn() -> Result<()>>,
}

fn cargo(args: &[&str]) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut c = Command::new(cargo);
    c.args(args).current_dir(paths::workspace_root());
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("xtask test: running {shown}");
    let st = c
        .status()
        .with_context(|| format!("could not start {shown}"))?;
    if !st.success() {
        bail!("`{shown}` failed ({st})");
    }
    Ok(())
}

/// The VM test binaries whose names pass `keep`, all at once (see [`vmtests`]), with the
/// boot log and the slot limit set for them.
fn vm_tests(jobs: Option<usize>, keep: fn(&str) -> bool) -> Result<()> {
    let log = paths::vm_dir().join("boots.log");
    let _ = std::fs::remove_file(&log);
    let mut env: Vec<(&str, OsString)> = vec![(crate::bootlog::BOOT_LOG_ENV, log.clone().into())];
    if let Some(j) = jobs {
        env.push((crate::vm::slots::JOBS_ENV, j.to_string().into()));
    }
    let jobs = jobs.unwrap_or_else(|| crate::vm::slots::default_jobs(1024));
    let bins: Vec<_> = vmtests::binaries()?
        .into_iter()
        .filter(|b| keep(&b.name))
        .collect();
    if bins.is_empty() {
        bail!("no VM test binary found under xtask/tests");
    }
    eprintln!(
        "xtask test: {} VM test binaries, up to {jobs} guests at once (TCG {}-threaded)",
        bins.len(),
        crate::vm::TcgThreads::from_env().as_str()
    );
    let outcomes = vmtests::run_all(bins, &env)?;
    eprintln!(
        "\nxtask test: {}",
        crate::bootlog::summary(&crate::bootlog::read(&log))
    );
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "VM tests failed in {} (logs under {})",
            failed.join(", "),
            paths::vm_dir().join("tests").display()
        );
    }
    Ok(())
}

/// The integration tests of the quick suite besides the unit tests: the native eBPF tests.
const QUICK_NATIVE: &[&str] = &["native"];
/// The quick suite's VM test binary: one boot of one kernel.
const QUICK_VM: &str = "vm_quick";

/// The suite, in order.
pub fn steps(opts: TestOptions) -> Vec<Step> {
    let jobs = opts.jobs;
    let setup = Step {
        // The README's test command must work on a fresh machine with no prior step.
        name: "setup: provision what the build and tests need (idempotent, quick when done)",
        vm: false,
        run: Box::new(|| crate::setup::run(false)),
    };
    let guest = Step {
        name: "guest binaries: static musl tracer, workloads, vm-init",
        vm: true,
        run: Box::new(|| guest::build().map(drop).map_err(Into::into)),
    };
    if opts.quick {
        return vec![
            setup,
            Step {
                name: "unit tests and the native eBPF tests",
                vm: false,
                run: Box::new(|| {
                    cargo(&["test", "--workspace", "--lib", "--bins"])?;
                    let mut args = vec!["test", "-p", "tracer"];
                    for t in QUICK_NATIVE {
                        args.extend(["--test", t]);
                    }
                    cargo(&args)
                }),
            },
            guest,
            Step {
                name: "one real kernel (xtask/tests/vm_quick.rs)",
                vm: true,
                run: Box::new(move || vm_tests(jobs, |name| name == QUICK_VM)),
            },
        ];
    }
    vec![
        setup,
        Step {
            name: "workspace tests: unit and native integration (VM tests show as ignored)",
            vm: false,
            run: Box::new(|| cargo(&["test", "--workspace"])),
        },
        guest,
        Step {
            // Every `#[ignore]`d test in xtask/tests/ boots VMs; the binaries run at once,
            // the host's VM slots keep the guests to one per core.
            name: "VM integration tests (xtask/tests, ignored by plain cargo test)",
            vm: true,
            run: Box::new(move || vm_tests(jobs, |_| true)),
        },
    ]
}

pub fn run(opts: TestOptions) -> Result<()> {
    let mut times: Vec<(&str, Duration)> = Vec::new();
    let total = Instant::now();
    for step in steps(opts) {
        if (opts.no_vm && step.vm) || (opts.vm_only && !step.vm) {
            eprintln!("xtask test: skipping (by request): {}", step.name);
            continue;
        }
        eprintln!("\nxtask test: === {} ===", step.name);
        let t = Instant::now();
        if let Err(e) = (step.run)() {
            eprintln!("\nxtask test: FAILED: {}: {e:#}", step.name);
            return Err(e.context(format!("test step failed: {}", step.name)));
        }
        times.push((step.name, t.elapsed()));
    }
    eprintln!(
        "\nxtask test: all steps passed in {:.0} s",
        total.elapsed().as_secs_f64()
    );
    for (name, d) in times {
        eprintln!("  {:>6.1} s  {name}", d.as_secs_f64());
    }
    Ok(())
}
