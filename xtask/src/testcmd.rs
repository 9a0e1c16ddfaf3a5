//! `cargo xtask test`: the project's whole test suite, as an ordered list of steps.
//! Extend it by adding a [`Step`] to [`steps`]. The first failing step stops the run
//! and makes the command fail.

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{guest, paths};

/// Which parts to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestOptions {
    /// Skip the steps that boot VMs.
    pub no_vm: bool,
    /// Only the steps that boot VMs (and what they need).
    pub vm_only: bool,
}

/// One step of the suite.
pub struct Step {
    pub name: &'static str,
    /// Whether this step is, or prepares, the VM tests.
    pub vm: bool,
    pub run: fn() -> Result<()>,
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

/// The suite, in order.
pub fn steps() -> Vec<Step> {
    vec![
        Step {
            // The README's test command must work on a fresh machine with no prior step.
            name: "setup: provision what the build and tests need (idempotent, quick when done)",
            vm: false,
            run: || crate::setup::run(false),
        },
        Step {
            name: "workspace tests: unit and native integration (VM tests show as ignored)",
            vm: false,
            run: || cargo(&["test", "--workspace"]),
        },
        Step {
            name: "guest binaries: static musl tracer, workloads, vm-init",
            vm: true,
            run: || guest::build().map(drop).map_err(Into::into),
        },
        Step {
            // Every `#[ignore]`d test in xtask/tests/ boots VMs; one at a time, because
            // each VM already uses both cores.
            name: "VM integration tests (xtask/tests, ignored by plain cargo test)",
            vm: true,
            run: || {
                let log = paths::vm_dir().join("boots.log");
                let _ = std::fs::remove_file(&log);
                // SAFETY: set before the cargo child starts; the driver runs no other thread.
                unsafe { std::env::set_var(crate::bootlog::BOOT_LOG_ENV, &log) };
                let result = cargo(&[
                    "test",
                    "-p",
                    "xtask",
                    "--test",
                    "*",
                    "--",
                    "--ignored",
                    "--test-threads=1",
                ]);
                eprintln!(
                    "\nxtask test: {} (TCG {}-threaded)",
                    crate::bootlog::summary(&crate::bootlog::read(&log)),
                    crate::vm::TcgThreads::from_env().as_str()
                );
                result
            },
        },
    ]
}

pub fn run(opts: TestOptions) -> Result<()> {
    let mut times: Vec<(&str, Duration)> = Vec::new();
    let total = Instant::now();
    for step in steps() {
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
