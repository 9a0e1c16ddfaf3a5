//! The `cargo xtask` command line.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::kernel::Kernel;
use crate::vm::{Accel, TcgThreads, Transport};

/// One of a fixed set of names; else an error naming the input after `what` and listing
/// the names (`unknown transport "9p": expected disk or serial`).
pub(crate) fn parse_choice<T: Copy>(
    s: &str,
    choices: &[(&str, T)],
    what: &str,
) -> Result<T, String> {
    if let Some((_, v)) = choices.iter().find(|(name, _)| *name == s) {
        return Ok(*v);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let expected = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    };
    Err(format!("{what}{s:?}: expected {expected}"))
}

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Project automation for the kernel-path tracer"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Check and install what the build and tests need (apt packages, nightly rust-src,
    /// the musl target, bpf-linker against LLVM 22). Idempotent.
    Setup {
        /// Only check; install nothing, fail if anything is missing.
        #[arg(long)]
        check: bool,
        /// Let apt remove installed packages that conflict with what setup installs
        /// (without it, setup refuses and changes nothing).
        #[arg(long, conflicts_with = "check")]
        yes: bool,
    },
    /// Build the static musl guest binaries and print their paths.
    Guest,
    /// Fetch a Debian cloud kernel into the cache and print its paths.
    Kernel {
        #[arg(long)]
        kernel: Kernel,
    },
    /// Boot a Debian cloud kernel under qemu and run COMMAND in it.
    Vm(VmArgs),
    /// Run the test suite: workspace tests, then the VM integration tests.
    Test(TestArgs),
    /// The whole job: sweep every workload under the tracer (natively when this kernel
    /// allows function probes, else in VMs on 5.10, 6.1 and 6.12), report, compare kernels.
    Run(RunArgs),
    /// Check that a change leaves the tracer's output as it was: the tracer of BASE and the
    /// working tree's each render every run and sweep under tracer/tests/fixtures (and each
    /// DIR), and compare the fixtures' kernel pairs; every file written must be the same
    /// (JSON numbers to ten significant digits). Exits non-zero naming the files that differ.
    /// The base is built in target/same/ (a few minutes the first time).
    Same {
        /// The revision to compare with.
        #[arg(long, default_value = "HEAD")]
        base: String,
        /// More run or sweep directories to render with both.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Benchmarks of the tracer's own cost against bpftrace and the counter-only floor;
    /// writes BENCHMARKS.md and bench.json at the workspace root (not part of `test`).
    Bench(BenchArgs),
    /// Generate the tracer's man pages (tracer.1, tracer-record.1, ...) from its command line;
    /// install with `sudo install -m 644 target/man/man1/*.1 /usr/local/share/man/man1/`.
    Man {
        /// Where the pages go (default: the workspace's target/man/man1).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Write a release to copy to a box with no Rust toolchain: the static musl tracer and
    /// workloads, man pages, shell completions, a .deb and SHA256SUMS.
    Dist {
        /// Where the release goes (default: target/dist/tracer-VERSION-x86_64-linux-musl).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Fewer rounds and a shorter memory run (about 4 minutes instead of about 15).
    #[arg(long)]
    pub quick: bool,
    /// Also measure the fentry and kprobe plans in a Debian 6.1 VM (TCG; several minutes).
    #[arg(long)]
    pub vm: bool,
    /// Interleaved rounds per comparison (default 9, --quick 3; VM: 5, --quick 2).
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=100))]
    pub rounds: Option<u64>,
    /// Measure nothing: recompute the summaries from bench.json and rewrite BENCHMARKS.md.
    #[arg(long, conflicts_with_all = ["quick", "vm", "rounds"])]
    pub render_only: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the results go.
    #[arg(short, long, default_value = "target/results")]
    pub output: PathBuf,
    /// auto (native if the kernel allows function probes, else VMs), native, or vm.
    #[arg(long = "where", default_value = "auto")]
    pub place: crate::run::Where,
    /// Smaller N lists and fewer iterations (minutes instead of tens of minutes).
    #[arg(long)]
    pub quick: bool,
    /// Kernels for the VM sweeps, oldest first; each is compared with the next.
    #[arg(long, value_delimiter = ',', default_value = "5.10,6.1,6.12")]
    pub kernels: Vec<Kernel>,
    /// Guests at once (default: one per host core, as memory allows; single-threaded TCG
    /// keeps each guest on one core).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: Option<u64>,
    /// The whole job's wall time, setup and build included (15m, 900s; default 15m, --quick
    /// 8m). What is left after the build is shared by the kernels' sweeps; each cuts, in
    /// order, extra runs, rounds after the first, then the loop-count pass, and says what.
    #[arg(long, value_name = "DURATION", value_parser = crate::run::parse_budget)]
    pub budget: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Files COMMAND writes under /out come back under --out. At the --timeout, or on SIGINT or \
SIGTERM, COMMAND is stopped (SIGTERM, then SIGKILL 30 s later) and /out still comes back, \
the last message naming the entries that were complete at the stop; a second interrupt \
kills the VM at once and brings nothing back. Exit status: COMMAND's own, or \
250 setup failed, 251 kernel panic, 252 timeout (hang), 253 VM stopped without an exit \
status, 254 /out files damaged in transit, 130 interrupted.")]
pub struct VmArgs {
    /// Kernel: 5.10 (bullseye), 6.1 (bookworm) or 6.12 (trixie).
    #[arg(long)]
    pub kernel: Kernel,
    /// Host file or directory to place at the same absolute path in the guest (repeatable).
    #[arg(long = "include", value_name = "HOST_PATH")]
    pub include: Vec<PathBuf>,
    /// Where the guest's /out files go (default `target/vm/runs/<run>/out`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seconds before the run counts as hung, boot included; the guest then gets up to 180 s
    /// more to stop COMMAND and send /out.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub timeout: u64,
    /// Guest memory in MiB.
    #[arg(long, value_name = "MB", default_value_t = 1024)]
    pub mem: u32,
    /// Guest CPUs.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub cpus: u32,
    /// tcg (default), kvm, or auto (KVM if a cached probe boot works).
    #[arg(long, default_value = "tcg")]
    pub accel: Accel,
    /// TCG's vCPU threading: single (default: one host thread runs every vCPU in turn) or
    /// multi (one per vCPU; faster, but it locks up on the kernel's live text patching,
    /// which every attach and detach does). The default for every VM: XTASK_TCG_THREADS.
    #[arg(long, value_name = "MODE")]
    pub tcg_threads: Option<TcgThreads>,
    /// How /out files come back: disk (an NVMe disk, fast) or serial (second UART).
    #[arg(long, default_value = "disk")]
    pub transport: Transport,
    /// Environment variable for COMMAND (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub env: Vec<(String, String)>,
    /// Show the kernel's boot messages.
    #[arg(long)]
    pub kernel_log: bool,
    /// Keep the initramfs and raw output stream in the run directory.
    #[arg(long)]
    pub keep: bool,
    /// Use the guest binaries as they are instead of rebuilding them.
    #[arg(long)]
    pub no_build: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Skip the VM tests.
    #[arg(long, conflicts_with = "vm_only")]
    pub no_vm: bool,
    /// Only the VM tests.
    #[arg(long)]
    pub vm_only: bool,
    /// The inner loop (a few minutes): unit tests, the native eBPF tests, and one boot of
    /// one real kernel (xtask/tests/vm_quick.rs).
    #[arg(long)]
    pub quick: bool,
    /// Guests at once (default: one per host core, as memory allows; single-threaded TCG
    /// keeps each guest on one core).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: Option<u64>,
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
    if k.is_empty() {
        return Err(format!("{s:?} has an empty KEY"));
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("cargo xtask").chain(args.iter().copied()))
    }

    fn vm(args: &[&str]) -> VmArgs {
        match parse(args).unwrap().cmd {
            Cmd::Vm(v) => v,
            other => panic!("not vm: {other:?}"),
        }
    }

    #[test]
    fn vm_defaults() {
        let v = vm(&["vm", "--kernel", "6.1", "--", "uname", "-r"]);
        assert_eq!(v.kernel, Kernel::V6_1);
        assert_eq!(v.command, ["uname", "-r"]);
        assert_eq!(
            (v.timeout, v.mem, v.cpus, v.accel),
            (300, 1024, 2, Accel::Tcg)
        );
        assert!(v.include.is_empty() && v.out.is_none() && !v.no_build);
        assert_eq!(v.tcg_threads, None, "the default is the library's");
        // Defaults must agree with the library's.
        let cfg = crate::vm::VmConfig::new(Kernel::V6_1, ["x"]);
        assert_eq!(cfg.timeout, Duration::from_secs(v.timeout));
        assert_eq!((cfg.mem_mb, cfg.cpus, cfg.accel), (v.mem, v.cpus, v.accel));
        assert_eq!(cfg.transport, v.transport);
    }

    #[test]
    fn vm_all_options() {
        let opts = "vm --kernel 5.10 --include /etc/hostname --include /tmp/x --out o \
                    --timeout 30 --mem 512 --cpus 1 --accel auto --env A=b=c \
                    --transport serial --tcg-threads multi --kernel-log --keep --no-build --";
        let mut args: Vec<&str> = opts.split_whitespace().collect();
        args.extend(["sh", "-c", "exit 7"]);
        let v = vm(&args);
        assert_eq!(v.kernel, Kernel::V5_10);
        assert_eq!(
            v.include,
            [PathBuf::from("/etc/hostname"), PathBuf::from("/tmp/x")]
        );
        assert_eq!(v.out, Some(PathBuf::from("o")));
        assert_eq!(
            (v.timeout, v.mem, v.cpus, v.accel),
            (30, 512, 1, Accel::Auto)
        );
        assert_eq!(v.env, [("A".to_string(), "b=c".to_string())]);
        assert_eq!(v.transport, Transport::Serial);
        assert_eq!(v.tcg_threads, Some(TcgThreads::Multi));
        assert!(v.kernel_log && v.keep && v.no_build);
        // Flags after `--` belong to the command.
        assert_eq!(v.command, ["sh", "-c", "exit 7"]);
    }

    #[test]
    fn vm_rejects_bad_input() {
        assert!(
            parse(&["vm", "--kernel", "6.1"]).is_err(),
            "command is required"
        );
        assert!(parse(&["vm", "--kernel", "4.19", "--", "true"]).is_err());
        assert!(
            parse(&["vm", "--", "true"]).is_err(),
            "--kernel is required"
        );
        assert!(parse(&["vm", "--kernel", "6.1", "--accel", "hvf", "--", "true"]).is_err());
        assert!(parse(&["vm", "--kernel", "6.1", "--env", "NOEQUALS", "--", "true"]).is_err());
        assert!(parse(&["vm", "--kernel", "6.1", "--timeout", "-1", "--", "true"]).is_err());
    }

    #[test]
    fn other_subcommands() {
        assert!(matches!(
            parse(&["setup"]).unwrap().cmd,
            Cmd::Setup {
                check: false,
                yes: false
            }
        ));
        assert!(matches!(
            parse(&["setup", "--check"]).unwrap().cmd,
            Cmd::Setup {
                check: true,
                yes: false
            }
        ));
        assert!(matches!(
            parse(&["setup", "--yes"]).unwrap().cmd,
            Cmd::Setup {
                check: false,
                yes: true
            }
        ));
        assert!(parse(&["setup", "--check", "--yes"]).is_err());
        assert!(matches!(
            parse(&["test", "--no-vm"]).unwrap().cmd,
            Cmd::Test(TestArgs {
                no_vm: true,
                vm_only: false,
                quick: false,
                jobs: None,
            })
        ));
        assert!(parse(&["test", "--no-vm", "--vm-only"]).is_err());
        assert!(matches!(
            parse(&["test", "--quick", "-j", "3"]).unwrap().cmd,
            Cmd::Test(TestArgs {
                quick: true,
                jobs: Some(3),
                ..
            })
        ));
        assert!(parse(&["test", "-j", "0"]).is_err());
        assert!(matches!(
            parse(&["kernel", "--kernel", "trixie"]).unwrap().cmd,
            Cmd::Kernel {
                kernel: Kernel::V6_12
            }
        ));
    }

    #[test]
    fn choice_errors_list_the_names() {
        assert_eq!(
            "hvf".parse::<crate::vm::Accel>().unwrap_err(),
            "unknown accelerator \"hvf\": expected auto, tcg or kvm"
        );
        assert_eq!(
            "9p".parse::<crate::vm::Transport>().unwrap_err(),
            "unknown transport \"9p\": expected disk or serial"
        );
        assert_eq!(
            "x".parse::<crate::run::Where>().unwrap_err(),
            "\"x\": expected auto, native or vm"
        );
        assert_eq!(crate::vm::Accel::Kvm.to_string(), "kvm");
    }
}
