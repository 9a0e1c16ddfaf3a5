//! `cargo xtask`: see `cargo xtask --help` and the library docs (`xtask::vm` etc.).

mod bench;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use xtask::cli::{Cli, Cmd, VmArgs};
use xtask::vm::{self, VmConfig};
use xtask::{guest, kernel, setup, testcmd};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Setup { check, yes } => report(setup::run_with(setup::SetupOptions {
            check_only: check,
            allow_removals: yes,
        })),
        Cmd::Guest => report(
            guest::build()
                .map(|g| {
                    println!("init {}", g.init.display());
                    for (name, path) in &g.bins {
                        println!("{name} {}", path.display());
                    }
                })
                .map_err(Into::into),
        ),
        Cmd::Kernel { kernel } => report(
            kernel::fetch(kernel)
                .map(|k| {
                    println!("release {}", k.release);
                    println!("vmlinuz {}", k.vmlinuz.display());
                    if let Some(c) = &k.config {
                        println!("config {}", c.display());
                    }
                    if let Some(m) = &k.system_map {
                        println!("system_map {}", m.display());
                    }
                    println!("package {} {}", k.package, k.package_version);
                })
                .map_err(Into::into),
        ),
        Cmd::Test(t) => {
            // The VM test binaries run as children: an interrupt must stop them too.
            vm::install_interrupt_handler();
            report(testcmd::run(testcmd::TestOptions {
                no_vm: t.no_vm,
                vm_only: t.vm_only,
                quick: t.quick,
                jobs: t.jobs.map(|j| j as usize),
            }))
        }
        Cmd::Vm(args) => run_vm(args),
        Cmd::Bench(b) => {
            vm::install_interrupt_handler();
            report(bench::run(bench::BenchOptions {
                quick: b.quick,
                vm: b.vm,
                rounds: b.rounds.map(|r| r as usize),
                render_only: b.render_only,
            }))
        }
        Cmd::Man { out } => report(
            xtask::man::generate(&out.unwrap_or_else(xtask::man::default_dir)).map(|pages| {
                for p in pages {
                    println!("{}", p.display());
                }
            }),
        ),
        Cmd::Dist { out } => {
            let out = out.unwrap_or_else(xtask::dist::default_dir);
            report(xtask::dist::build(&out).map(|files| {
                for f in files {
                    println!("{}", out.join(f).display());
                }
            }))
        }
        Cmd::Same { base, dirs } => {
            report(xtask::same::run(xtask::same::SameOptions { base, dirs }))
        }
        Cmd::Run(r) => {
            vm::install_interrupt_handler();
            report(xtask::run::run(xtask::run::RunOptions {
                out: r.output,
                place: r.place,
                quick: r.quick,
                kernels: r.kernels,
                jobs: r.jobs.map(|j| j as usize),
                budget: r.budget.unwrap_or(if r.quick {
                    xtask::run::QUICK_BUDGET
                } else {
                    xtask::run::DEFAULT_BUDGET
                }),
            }))
        }
    };
    ExitCode::from(code as u8)
}

fn report(r: Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            1
        }
    }
}

fn run_vm(args: VmArgs) -> i32 {
    vm::install_interrupt_handler();
    let guest = if args.no_build {
        guest::locate()
    } else {
        guest::build()
    };
    let guest = match guest {
        Ok(g) => g,
        Err(e) => {
            eprintln!("xtask vm: error: {e}");
            return vm::exit_code::SETUP_FAILED;
        }
    };
    let cfg = match config(&args, guest) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask vm: error: {e:#}");
            return vm::exit_code::SETUP_FAILED;
        }
    };
    match vm::run(&cfg) {
        Err(e) => {
            eprintln!("xtask vm: error: {e}");
            e.exit_code()
        }
        Ok(r) => {
            eprintln!(
                "xtask vm: {} ({}, {}): boot {}, total {:.1} s; {} file(s), {} bytes in {}",
                match &r.status {
                    vm::VmStatus::Exited(s) => format!("exit status {s}"),
                    _ => "failed".into(),
                },
                r.kernel.release,
                match r.accel {
                    vm::Accel::Kvm => "kvm".to_string(),
                    _ => format!("tcg, {}-threaded", r.tcg_threads.as_str()),
                },
                r.boot_time
                    .map_or("-".into(), |b| format!("{:.1} s", b.as_secs_f64())),
                r.elapsed.as_secs_f64(),
                r.out_files.len(),
                r.out_bytes,
                r.out_dir.display()
            );
            if let Some(msg) = r.failure_message() {
                eprintln!("xtask vm: error: {msg}");
            }
            r.exit_code()
        }
    }
}

fn config(args: &VmArgs, guest: guest::GuestBinaries) -> Result<VmConfig> {
    let mut cfg = VmConfig::new(args.kernel, args.command.clone())
        .guest(guest)
        .timeout_secs(args.timeout)
        .mem_mb(args.mem)
        .cpus(args.cpus)
        .accel(args.accel)
        .tcg_threads(args.tcg_threads.unwrap_or_else(vm::TcgThreads::from_env))
        .transport(args.transport)
        .kernel_log(args.kernel_log);
    cfg.keep_run_files = args.keep;
    for inc in &args.include {
        // "Same absolute path in the guest": a relative path means the host's cwd.
        let abs =
            std::path::absolute(inc).with_context(|| format!("--include {}", inc.display()))?;
        anyhow::ensure!(
            abs.exists(),
            "--include {}: no such file or directory",
            inc.display()
        );
        cfg = cfg.include(abs);
    }
    if let Some(out) = &args.out {
        cfg = cfg.out_dir(std::path::absolute(out).context("--out")?);
    }
    for (k, v) in &args.env {
        cfg = cfg.env(k, v);
    }
    Ok(cfg)
}
