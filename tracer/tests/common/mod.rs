//! What the test binaries share: the root check and the lock that keeps the native tests one
//! at a time (they load programs and count what is loaded), the binaries under test and the
//! recordings they are run for, the leak check, and reading back what was written. Each test
//! binary uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tracer::rundata::{KernelInfo, Run, TargetReport};

pub mod hog;
pub mod reliability;
pub mod sweeps;

static SERIAL: Mutex<()> = Mutex::new(());

/// Calls of kernel entry `entry` (a syscall's name, `page_fault`) a discover run counted
/// (run.json `entries`), over every phase and N.
pub fn entry_calls(run: &Value, entry: &str) -> u64 {
    run["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["entry"] == entry)
        .map(|e| e["calls"].as_u64().unwrap())
        .sum()
}

/// Root, and no other test of this binary running.
pub fn serial() -> MutexGuard<'static, ()> {
    assert!(
        nix::unistd::geteuid().is_root(),
        "native eBPF tests need root (run them with sudo or through `cargo xtask test`)"
    );
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn tracer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tracer"))
}

/// `tracer` (a tracer command, as the test binary sets it up) given `record --no-verify
/// --no-samples --targets TARGETS`, for the caller to add options, `-o` and the command to.
pub fn record_targets(mut tracer: Command, targets: &str) -> Command {
    tracer.args([
        "record",
        "--no-verify",
        "--no-samples",
        "--targets",
        targets,
    ]);
    tracer
}

/// The workloads binary's arguments for its getpid syscall loop at the sizes `n` (a comma
/// list); further options (iterations, warmup ...) follow them.
pub fn getpid_syscall(n: &str) -> [&str; 5] {
    ["getpid", "--variant", "getpid-syscall", "--n", n]
}

/// The workloads binary, built next to the tracer by `cargo test --workspace`.
pub fn workloads_bin() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_tracer")).with_file_name("workloads");
    assert!(
        p.is_file(),
        "precondition: {} is built (`cargo test --workspace` builds it; else `cargo build -p \
         workloads`)",
        p.display()
    );
    p
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Names (relative to `dir`) and contents of every file under `dir`.
pub fn file_tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// A complete synthetic run on kernel `release` with `targets` and nothing recorded yet, for
/// a fixture to fill in; it sets the header fields it cares about over these.
pub fn synthetic_run(release: &str, targets: Vec<TargetReport>) -> Run {
    Run::empty(
        KernelInfo {
            release: release.into(),
            version: "#1".into(),
            machine: "x86_64".into(),
        },
        targets,
    )
}

/// The loaded programs that are ours.
pub fn loaded_tracer_programs() -> Vec<String> {
    let ours = tracer::engine::program_names();
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .filter_map(|p| p.name_as_str().map(str::to_string))
        .filter(|n| ours.contains(n))
        .collect()
}

/// Nothing of ours is loaded. The kernel frees a closed program asynchronously (RCU), so
/// give it a moment before calling a leftover a leak.
pub fn nothing_loaded() -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if loaded_tracer_programs().is_empty() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0, "sched_getaffinity");
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}
