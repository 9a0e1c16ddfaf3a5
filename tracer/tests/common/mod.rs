//! What the native test binaries share: the root check and the lock that keeps their tests
//! one at a time (they load programs and count what is loaded), the binaries under test, and
//! the leak check. Each test binary uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

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
