//! `cargo xtask test`: the project's whole test suite. Setup, the guest binaries and every
//! test binary are built first; then the VM tests (every binary at once, as many guests as
//! the host has VM slots for) run beside the workspace's own tests, so that the host's cores
//! are busy with both. Any failure fails the command; both parts run to their end first.
//!
//! `--quick` is the inner loop: unit tests, the native eBPF tests, and one boot of one real
//! kernel (`xtask/tests/vm_quick.rs`).

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

/// `cargo ARGS` in the workspace, said as it starts; the command and how it is shown.
fn cargo_command(args: &[&str]) -> (Command, String) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut c = Command::new(cargo);
    c.args(args).current_dir(paths::workspace_root());
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("xtask test: running {shown}");
    (c, shown)
}

/// `cargo ARGS --message-format=json-render-diagnostics`: the build's messages (stdout),
/// its diagnostics shown as usual (stderr).
fn cargo_json(args: &[&str]) -> Result<String> {
    let (mut c, shown) = cargo_command(args);
    let out = c
        .arg("--message-format=json-render-diagnostics")
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("could not start {shown}"))?;
    if !out.status.success() {
        bail!("`{shown}` failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cargo(args: &[&str]) -> Result<()> {
    let (mut c, shown) = cargo_command(args);
    let st = c
        .status()
        .with_context(|| format!("could not start {shown}"))?;
    if !st.success() {
        bail!("`{shown}` failed ({st})");
    }
    Ok(())
}

/// The VM test binaries cargo's build `messages` name, those whose names pass `keep` (see
/// [`vmtests`]).
fn vm_binaries(messages: &str, keep: fn(&str) -> bool) -> Result<Vec<vmtests::Binary>> {
    let bins: Vec<_> = vmtests::binaries(messages)?
        .into_iter()
        .filter(|b| keep(&b.name))
        .collect();
    if bins.is_empty() {
        bail!("no VM test binary found under xtask/tests");
    }
    Ok(bins)
}

/// `bins` all at once, with the boot log and the slot limit set for them.
fn vm_tests(bins: Vec<vmtests::Binary>, jobs: Option<usize>) -> Result<()> {
    let log = paths::vm_dir().join("boots.log");
    let _ = std::fs::remove_file(&log);
    let mut env: Vec<(&str, OsString)> = vec![(crate::bootlog::BOOT_LOG_ENV, log.clone().into())];
    if let Some(j) = jobs {
        env.push((crate::vm::slots::JOBS_ENV, j.to_string().into()));
    }
    eprintln!(
        "xtask test: {} VM test binaries, up to {} guests at once (TCG {}-threaded)",
        bins.len(),
        jobs.unwrap_or_else(|| crate::vm::slots::jobs(crate::vm::VmConfig::DEFAULT_MEM_MB)),
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

/// What a fresh clone's suite writes under `target/`, measured: the debug tests 2.3 GB
/// without incremental state (3.6 GB with it), the static guest build 0.6 GB, the setup
/// test's chroots 0.9 GB, xtask and the eBPF objects 0.4 GB, the guests' runs 0.1 GB.
const SUITE_DISK_BYTES: u64 = 5 << 30;

/// Say so before the builds when the disk cannot hold the suite: a full disk otherwise
/// shows up minutes later as a compiler's "No space left on device" in the middle of a
/// build. A warning, not an error: a target directory that already holds the builds needs
/// far less.
fn warn_if_disk_short() {
    let dir = paths::workspace_root();
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return;
    };
    // SAFETY: statvfs fills the zeroed struct it is given from a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return;
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    if free < SUITE_DISK_BYTES {
        eprintln!(
            "xtask test: warning: {:.1} GB free under {}; a suite from a fresh clone writes \
             about {:.0} GB there (set CARGO_INCREMENTAL=0 to write 1.3 GB less)",
            free as f64 / 1e9,
            dir.display(),
            SUITE_DISK_BYTES as f64 / 1e9
        );
    }
}

/// Times of the suite's parts, for the last lines.
#[derive(Default)]
struct Times(Vec<(String, Duration)>);

impl Times {
    /// Run `f` as the part `name`, said when it starts and timed.
    fn step<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("\nxtask test: === {name} ===");
        let t = Instant::now();
        let r = f().with_context(|| format!("test step failed: {name}"));
        if let Err(e) = &r {
            eprintln!("\nxtask test: FAILED: {e:#}");
        }
        self.0.push((name.to_string(), t.elapsed()));
        r
    }
}

/// The suite. The order keeps both cores busy without running more at once than they can
/// take: the static guest build and the debug build of the tests at once (cargo locks them
/// apart only when they share an artifact directory, which they do not); then the
/// workspace's tests with one VM slot held for them, the VM tests in the others, and every
/// slot to the VM tests once the workspace's are done. More guests than cores beside the
/// workspace's tests starved their vCPUs: a 5.10 guest's sampler then saw a third of its
/// CPU time, and a discover test read no loop where there is one.
pub fn run(opts: TestOptions) -> Result<()> {
    let total = Instant::now();
    let mut times = Times::default();
    let vm = !opts.no_vm;
    let native = !opts.vm_only;
    // The README's test command must work on a fresh machine with no prior step.
    times.step("setup: provision what the build and tests need", || {
        crate::setup::run(false)
    })?;
    warn_if_disk_short();
    let guest_build = vm.then(|| {
        eprintln!("\nxtask test: === guest binaries (static musl), beside the tests' build ===");
        std::thread::spawn(|| {
            let t = Instant::now();
            (guest::build().map_err(anyhow::Error::from), t.elapsed())
        })
    });
    let mut failed = Vec::new();
    // One build of every test binary the run needs, native and VM: a second `cargo test`
    // that selects other targets resolves other features for the shared dependencies (a
    // package's dev-dependencies count only where its tests are built) and compiles the
    // tracer library and what it uses a second time.
    let build = build_args(opts.quick, native);
    let messages = match times.step("build the tests", || cargo_json(&build)) {
        Ok(m) => Some(m),
        Err(e) => {
            failed.push(format!("{e:#}"));
            None
        }
    };
    let keep: fn(&str) -> bool = if opts.quick {
        |name| name == QUICK_VM
    } else {
        |_| true
    };
    let vm_bins = match (vm, &messages) {
        (true, Some(m)) => match vm_binaries(m, keep) {
            Ok(b) => Some(b),
            Err(e) => {
                failed.push(format!("{e:#}"));
                None
            }
        },
        _ => None,
    };
    if let Some(h) = guest_build {
        join_step(h, "guest binaries", &mut times, &mut failed);
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("\n"));
    }
    // SAFETY: set before the VM thread starts; read by guest::build in this process and in
    // the VM test binaries.
    unsafe { std::env::set_var(guest::BUILT_ENV, "1") };
    // One slot for the workspace's tests while they run (when there is a slot to spare).
    let slots = opts
        .jobs
        .unwrap_or_else(|| crate::vm::slots::jobs(crate::vm::VmConfig::DEFAULT_MEM_MB));
    let reserved = (native && vm_bins.is_some() && slots > 1)
        .then(|| {
            let dir = crate::vm::slots::slots_dir();
            crate::vm::slots::acquire_in(&dir, slots, || {}).ok()
        })
        .flatten();
    let jobs = opts.jobs;
    let vm_part = vm_bins.map(|bins| {
        eprintln!(
            "\nxtask test: === VM tests (xtask/tests){} ===",
            if reserved.is_some() {
                ", one slot left to the workspace's tests while they run"
            } else {
                ""
            }
        );
        std::thread::spawn(move || {
            let t = Instant::now();
            (vm_tests(bins, jobs), t.elapsed())
        })
    });
    if native {
        let r = times.step(
            "workspace tests: unit and native (VM tests show as ignored)",
            || native_tests(opts.quick),
        );
        if let Err(e) = r {
            failed.push(format!("{e:#}"));
        }
    }
    drop(reserved);
    if let Some(h) = vm_part {
        join_step(h, "VM tests", &mut times, &mut failed);
    }
    print_summary(&failed, total, &times);
    if !failed.is_empty() {
        bail!("{}", failed.join("\n"));
    }
    Ok(())
}

/// The arguments of the one `cargo test --no-run` that builds every test binary the run
/// needs, native and VM: a second `cargo test` that selects other targets resolves other
/// features for the shared dependencies (a package's dev-dependencies count only where its
/// tests are built) and compiles the tracer library and what it uses a second time.
fn build_args(quick: bool, native: bool) -> Vec<&'static str> {
    let mut build: Vec<&str> = vec!["test", "--workspace"];
    match (quick, native) {
        (true, _) => {
            // The eBPF crate's binary is for BPF only: `--bins` would select it for the
            // host (its `test = false` holds only when no target flag is given).
            build.extend(["--exclude", "tracer-ebpf", "--lib", "--bins"]);
            for t in QUICK_NATIVE {
                build.extend(["--test", t]);
            }
            build.extend(["--test", QUICK_VM]);
        }
        (false, false) => build.extend(["--test", "vm_*"]),
        (false, true) => {}
    }
    build.push("--no-run");
    build
}

/// The workspace's unit and native tests (`--quick`: the quick set).
fn native_tests(quick: bool) -> Result<()> {
    if quick {
        let mut args = vec![
            "test",
            "--workspace",
            "--exclude",
            "tracer-ebpf",
            "--lib",
            "--bins",
        ];
        for t in QUICK_NATIVE {
            args.extend(["--test", t]);
        }
        args.push("--no-fail-fast");
        cargo(&args)
    } else {
        // Every binary runs even after one fails: one run of the suite shows every failure.
        cargo(&["test", "--workspace", "--no-fail-fast"])
    }
}

/// Waits for a step run on a thread of its own, its time and failure recorded as `name`'s.
fn join_step<T>(
    h: std::thread::JoinHandle<(Result<T>, Duration)>,
    name: &str,
    times: &mut Times,
    failed: &mut Vec<String>,
) {
    let (r, took) = h
        .join()
        .unwrap_or_else(|_| (Err(anyhow::anyhow!("its thread panicked")), Duration::ZERO));
    times.0.push((name.into(), took));
    if let Err(e) = r {
        eprintln!("\nxtask test: FAILED: {name}: {e:#}");
        failed.push(format!("{name}: {e:#}"));
    }
}

/// The run's outcome and each step's time.
fn print_summary(failed: &[String], total: Instant, times: &Times) {
    eprintln!(
        "\nxtask test: {} in {:.0} s",
        if failed.is_empty() {
            "all passed"
        } else {
            "FAILED"
        },
        total.elapsed().as_secs_f64()
    );
    for (name, d) in &times.0 {
        eprintln!("  {:>6.1} s  {name}", d.as_secs_f64());
    }
}
