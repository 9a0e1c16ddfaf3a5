//! The VM test binaries (`xtask/tests/vm_*.rs`), run side by side.
//!
//! Every test there is `#[ignore]`d for plain `cargo test`: it boots real kernels under
//! qemu. Here each binary runs as its own process with many test threads, all at once; the
//! host's VM slots ([`crate::vm::slots`]) keep the guests to one per core, whichever binary
//! or thread starts them. A binary's output goes to `target/vm/tests/<binary>.log`; a line
//! says when each one ends, and a failed binary's failures are printed in full.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::paths;

/// Threads per test binary: tests that wait for a kernel another test is booting, or for a
/// VM slot, cost nothing meanwhile.
const TEST_THREADS: usize = 16;

/// Set for the test binaries: a binary that boots several kernels starts them all at its
/// first test, so that they queue for the host's VM slots at once instead of one after the
/// other (see `xtask/tests/common`). Unset (a developer running one test), a kernel boots
/// only when a test needs it.
pub const SUITE_ENV: &str = "XTASK_VM_SUITE";

/// One VM test binary: its name (`vm_tracer`), executable and ignored tests.
#[derive(Debug, Clone)]
pub struct Binary {
    pub name: String,
    pub exe: PathBuf,
    pub tests: Vec<String>,
}

/// The integration-test executables in cargo's JSON messages, by target name.
pub fn test_executables(messages: &str) -> BTreeMap<String, PathBuf> {
    let mut exes = BTreeMap::new();
    for line in messages.lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_test_target = m["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|x| x == "test"));
        if m["reason"] == "compiler-artifact"
            && is_test_target
            && let (Some(name), Some(exe)) =
                (m["target"]["name"].as_str(), m["executable"].as_str())
        {
            exes.insert(name.to_string(), PathBuf::from(exe));
        }
    }
    exes
}

/// The ignored tests of a test binary, from `--list --ignored` (`name: test` lines).
pub fn ignored_tests(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

fn list(exe: &Path) -> Result<Vec<String>> {
    let out = Command::new(exe)
        .args(["--list", "--ignored"])
        .output()
        .with_context(|| format!("listing the tests of {}", exe.display()))?;
    if !out.status.success() {
        bail!("{} --list failed ({})", exe.display(), out.status);
    }
    Ok(ignored_tests(&String::from_utf8_lossy(&out.stdout)))
}

/// The VM test binaries among the test executables cargo's JSON `messages` name (`cargo
/// test --no-run --message-format=json`): the `vm_*` integration tests that have ignored
/// tests.
pub fn binaries(messages: &str) -> Result<Vec<Binary>> {
    let mut found = Vec::new();
    for (name, exe) in test_executables(messages) {
        if !name.starts_with("vm_") {
            continue;
        }
        let tests = list(&exe)?;
        if !tests.is_empty() {
            found.push(Binary { name, exe, tests });
        }
    }
    Ok(found)
}

/// How one binary ended.
#[derive(Debug)]
pub struct Outcome {
    pub name: String,
    pub passed: bool,
    pub elapsed: Duration,
    pub log: PathBuf,
}

struct Running {
    bin: Binary,
    child: Child,
    started: Instant,
    log: PathBuf,
}

/// The failures section libtest prints at the end (`failures:` up to the result line), or
/// the log's last lines when there is none (a crash).
pub fn failures_of(log: &str) -> String {
    if let Some(i) = log.find("\nfailures:\n") {
        return log[i + 1..].trim_end().to_string();
    }
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Run `bins` at once, `env` added to each; returns when all have ended.
pub fn run_all(bins: Vec<Binary>, env: &[(&str, OsString)]) -> Result<Vec<Outcome>> {
    let logs = paths::vm_dir().join("tests");
    fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let mut running = Vec::new();
    for bin in bins {
        let log = logs.join(format!("{}.log", bin.name));
        let file = fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut c = Command::new(&bin.exe);
        c.args(["--ignored", &format!("--test-threads={TEST_THREADS}")])
            .env(SUITE_ENV, "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        for (k, v) in env {
            c.env(k, v);
        }
        eprintln!(
            "xtask test: {} ({} tests) started; its output: {}",
            bin.name,
            bin.tests.len(),
            log.display()
        );
        let child = c
            .spawn()
            .with_context(|| format!("starting {}", bin.exe.display()))?;
        running.push(Running {
            bin,
            child,
            started: Instant::now(),
            log,
        });
    }
    let mut done = Vec::new();
    while !running.is_empty() {
        let mut i = 0;
        while i < running.len() {
            match running[i].child.try_wait()? {
                None => i += 1,
                Some(st) => {
                    let r = running.swap_remove(i);
                    let elapsed = r.started.elapsed();
                    eprintln!(
                        "xtask test: {} {} in {:.0} s ({} tests)",
                        r.bin.name,
                        if st.success() { "passed" } else { "FAILED" },
                        elapsed.as_secs_f64(),
                        r.bin.tests.len()
                    );
                    if !st.success() {
                        let text = fs::read_to_string(&r.log).unwrap_or_default();
                        eprintln!("{}\n", failures_of(&text));
                    }
                    done.push(Outcome {
                        name: r.bin.name,
                        passed: st.success(),
                        elapsed,
                        log: r.log,
                    });
                }
            }
        }
        if crate::vm::interrupted() {
            for r in &mut running {
                let _ = r.child.kill();
                let _ = r.child.wait();
            }
            bail!("interrupted");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_test_executables_in_cargo_messages() {
        let msgs = r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"xtask"},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["test"],"name":"vm_tracer"},"executable":"/t/vm_tracer-1"}
{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"xtask"},"executable":"/t/xtask"}
not json
{"reason":"build-finished","success":true}"#;
        let exes = test_executables(msgs);
        assert_eq!(exes.len(), 1, "{exes:?}");
        assert_eq!(exes["vm_tracer"], PathBuf::from("/t/vm_tracer-1"));
    }

    #[test]
    fn lists_ignored_tests_and_cuts_out_failures() {
        let list = "uname_on_5_10: test\nuname_on_6_1: test\n\n2 tests, 0 benchmarks\n";
        assert_eq!(ignored_tests(list), ["uname_on_5_10", "uname_on_6_1"]);
        let log = "running 2 tests\ntest a ... ok\ntest b ... FAILED\n\nfailures:\n\n---- b stdout ----\nboom\n\nfailures:\n    b\n\ntest result: FAILED. 1 passed; 1 failed\n";
        let f = failures_of(log);
        assert!(
            f.starts_with("failures:\n\n---- b stdout ----\nboom"),
            "{f}"
        );
        assert!(
            f.ends_with("test result: FAILED. 1 passed; 1 failed"),
            "{f}"
        );
        assert_eq!(failures_of("a\nb"), "a\nb");
    }
}
