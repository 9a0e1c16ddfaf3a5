//! Helpers shared by the VM test files (`vm_tracer.rs`, `vm_external.rs`): build the guest
//! once, boot a kernel with a busybox script, read what comes back under /out, and render it
//! with the tracer on the host.

// Each test file is its own crate and uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use xtask::guest::{self, GuestBinaries};
use xtask::kernel::Kernel;
use xtask::vm::{self, VmConfig, VmReport, VmStatus};

/// The guest binaries, built once per test process (a no-op when up to date).
pub fn guest() -> GuestBinaries {
    static GUEST: OnceLock<GuestBinaries> = OnceLock::new();
    GUEST
        .get_or_init(|| guest::build().expect("building the guest binaries"))
        .clone()
}

/// An empty scratch directory for one boot: `<tmp>/tracer-vm-<name>-<pid>`.
pub fn work_dir(name: &str) -> PathBuf {
    let work = std::env::temp_dir().join(format!("tracer-vm-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).unwrap();
    work
}

/// Boot `kernel`, run `script` (busybox sh, traced with `set -x`) and return the report and
/// the /out directory. `configure` gets the boot's scratch directory and the VM config, to
/// add files, includes and environment. The script must end with status 0.
pub fn boot(
    kernel: Kernel,
    name: &str,
    script: &str,
    timeout_secs: u64,
    configure: impl Fn(&Path, VmConfig) -> VmConfig,
) -> (VmReport, PathBuf) {
    let work = work_dir(name);
    let script_path = work.join("script.sh");
    fs::write(&script_path, format!("set -x\n{script}")).unwrap();
    let out = work.join("out");
    let run = || {
        // A retry starts from an empty /out: nothing of the first attempt may count.
        let _ = fs::remove_dir_all(&out);
        let cfg = VmConfig::new(kernel, ["sh", script_path.to_str().unwrap()])
            .guest(guest())
            .include(&script_path)
            .out_dir(&out)
            .timeout_secs(timeout_secs);
        let report = vm::run(&configure(&work, cfg)).expect("the VM starts");
        assert_qemu_gone(report.qemu_pid);
        report
    };
    let mut report = run();
    let mut secs = report.elapsed.as_secs_f64();
    // Under qemu's multi-threaded TCG (the default before; XTASK_TCG_THREADS=multi now) the
    // faults below came from its handling of the kernel's live text patching; single-threaded
    // TCG, the default, is not known to show them, so each retry is logged (bootlog) and
    // counted by `cargo xtask test`.
    // The emulated guest has gone silent mid-script on this 2-core host (a run that takes
    // a minute, reproduced at once in a fresh VM, sat for 26 minutes without a console byte;
    // a test of its own stalled in 2 of 4 boots), which is qemu TCG's, not the kernel's or
    // ours: boot again. A frozen guest is caught by its silent heartbeat within a minute, so
    // it gets two more boots; a run that kept beating but never ended gets one (it may be
    // ours: a second timeout fails the test like any other status).
    // The same fault of qemu's multi-threaded TCG with the kernel's live text patching
    // also shows as a trap on a half-patched instruction: "Oops: int3" at __schedule+0x343
    // (a jmp whose first byte was the breakpoint) in the rcu_preempt kthread, no task of ours,
    // while tracepoints were being attached on 6.12. It counts as a stall.
    let text_poke_trap = |r: &VmReport| {
        matches!(r.status, VmStatus::KernelPanic { .. }) && r.console.contains("Oops: int3")
    };
    let mut stalls = 0;
    let mut timeouts = 0;
    let mut retried = Vec::new();
    loop {
        match report.status {
            VmStatus::Stalled { .. } | VmStatus::LockedUp { .. } if stalls < 2 => stalls += 1,
            VmStatus::KernelPanic { .. } if stalls < 2 && text_poke_trap(&report) => stalls += 1,
            VmStatus::Timeout { .. } if timeouts < 1 => timeouts += 1,
            _ => break,
        }
        let why = report.failure_message().unwrap_or_default();
        retried.push(why.clone());
        eprintln!(
            "{name}: {why}; booting it once more\n{}",
            report
                .console
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
        report = run();
        secs += report.elapsed.as_secs_f64();
    }
    xtask::bootlog::record(&xtask::bootlog::Entry {
        name: name.to_string(),
        secs,
        retried,
    });
    match report.status {
        VmStatus::Exited(0) => {}
        ref other => panic!(
            "{name}: the guest script did not finish cleanly: {other:?}\n{}",
            report.command_output.as_deref().unwrap_or(&report.console)
        ),
    }
    (report, out)
}

/// qemu was reaped by the runner: its pid is gone (or reused by something else).
pub fn assert_qemu_gone(pid: u32) {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert!(!comm.starts_with("qemu-system"), "qemu left behind");
}

pub fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `/out/status`: the `name=exit-code` lines the scripts append after each command.
pub fn status_of(out: &Path) -> BTreeMap<String, i32> {
    let text = fs::read_to_string(out.join("status")).expect("status file");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
        .collect()
}

/// Run the guest's static tracer on the host (analysis needs no root and no VM).
pub fn host_tracer(args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new(guest().tracer())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tracer {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The verdict of `target` for `case` in a report's summary.json.
pub fn verdict<'a>(summary: &'a Value, target: &str, case: &str) -> &'a Value {
    summary["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["target"] == target && v["case_name"] == case)
        .unwrap_or_else(|| panic!("no verdict for {target} [{case}]: {summary}"))
}

/// The host's dynamically linked `programs` (by name on PATH, from Debian's packages) staged
/// for a guest: the paths to include (each program, its shared libraries and the loader, at
/// their real host paths) and the shell lines that make them resolvable in the guest's
/// bare initramfs (the loader at its ELF interpreter path, each library under the names
/// `ldd` gives). The guest then runs them by name, as a user's script would.
pub fn stage_host_programs(programs: &[&str]) -> (Vec<PathBuf>, String) {
    let mut includes: Vec<PathBuf> = Vec::new();
    let mut setup = String::new();
    let add = |p: PathBuf, includes: &mut Vec<PathBuf>| {
        if !includes.contains(&p) {
            includes.push(p);
        }
    };
    for name in programs {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        assert!(
            found.status.success() && !path.is_empty(),
            "precondition: {name} is installed on the host (cargo xtask setup)"
        );
        let real = fs::canonicalize(&path).unwrap();
        add(real.clone(), &mut includes);
        if real != Path::new(&path) {
            setup.push_str(&format!("ln -sf {} {path}\n", real.display()));
        }
        let ldd = std::process::Command::new("ldd")
            .arg(&real)
            .output()
            .unwrap();
        assert!(ldd.status.success(), "ldd {}", real.display());
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or the loader's
            // "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has no file.
            let linked = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next(),
                None => line
                    .split_whitespace()
                    .next()
                    .filter(|p| p.starts_with('/')),
            };
            let Some(linked) = linked.filter(|p| p.starts_with('/')) else {
                continue;
            };
            let real = fs::canonicalize(linked).unwrap();
            add(real.clone(), &mut includes);
            if real != Path::new(linked) {
                let dir = Path::new(linked).parent().unwrap();
                setup.push_str(&format!(
                    "mkdir -p {}; [ -e {linked} ] || ln -s {} {linked}\n",
                    dir.display(),
                    real.display()
                ));
            }
        }
    }
    (includes, setup)
}

/// One boot per key (a kernel, or a kernel and a part of a file's work), shared by the tests
/// of a file: the first test that asks for a boot's results boots it, the others wait for
/// them. Under `cargo xtask test` ([`xtask::vmtests::SUITE_ENV`] set) the first request
/// starts every boot of the file at once, so that they queue for the host's VM slots
/// together rather than one after another; run by hand with a filter, only the boots a test
/// asks for run.
pub struct Boots<K: 'static> {
    keys: &'static [K],
    boot: fn(K) -> PathBuf,
    /// Per key: its result once booted (`Err` holds the boot's panic message), and whether
    /// a thread is booting it.
    state: std::sync::Mutex<BTreeMap<K, Booting>>,
    done: std::sync::Condvar,
}

#[derive(Clone)]
enum Booting {
    Started,
    Done(Result<PathBuf, String>),
}

impl<K: Copy + Ord + Send + Sync + std::fmt::Debug + 'static> Boots<K> {
    pub const fn new(keys: &'static [K], boot: fn(K) -> PathBuf) -> Self {
        Boots {
            keys,
            boot,
            state: std::sync::Mutex::new(BTreeMap::new()),
            done: std::sync::Condvar::new(),
        }
    }

    /// Start booting `key` on a thread of its own unless it is booting or booted.
    fn start(&'static self, key: K) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.contains_key(&key) {
            return;
        }
        state.insert(key, Booting::Started);
        drop(state);
        std::thread::spawn(move || {
            let boot = self.boot;
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || boot(key)))
                .map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "the boot panicked".into())
                });
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.insert(key, Booting::Done(result));
            self.done.notify_all();
        });
    }

    /// The /out directory of `key`'s boot, booting it (and under the suite, every boot of
    /// the file) first if needed. Panics with the boot's message if it failed.
    pub fn out(&'static self, key: K) -> PathBuf {
        assert!(
            self.keys.contains(&key),
            "{key:?} is not booted by this file"
        );
        if std::env::var_os(xtask::vmtests::SUITE_ENV).is_some() {
            for &k in self.keys {
                self.start(k);
            }
        }
        self.start(key);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(Booting::Done(r)) = state.get(&key) {
                match r {
                    Ok(p) => return p.clone(),
                    Err(msg) => panic!("the {key:?} boot failed: {msg}"),
                }
            }
            state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}
