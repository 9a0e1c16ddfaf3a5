//! The command line as a user meets it: help text, N-list errors, limit refusals, the JSON
//! schema of real runs, and the table layout.

mod common;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::*;
use serde_json::Value;
use workloads::cases;
use workloads::report::Status;

const T: Duration = Duration::from_secs(60);

/// Held by tests that create SysV IPC objects or compare the system-wide listings.
static IPC: Mutex<()> = Mutex::new(());

fn ipc_lock() -> MutexGuard<'static, ()> {
    IPC.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn help_documents_every_workload_its_thread_and_parameters() {
    let top = run(&["--help"], T);
    assert_eq!(top.code(), 0);
    for (cmd, target) in [
        ("waitpid", "do_wait"),
        ("spawn", "dup_mmap"),
        ("sysvipc", "sysvipc_find_ipc"),
        ("mempolicy", "get_task_policy"),
        ("getpid", "MADV_WIPEONFORK"),
    ] {
        assert!(
            top.stdout.contains(cmd) && top.stdout.contains(target),
            "top-level help lacks {cmd}/{target}"
        );
    }
    let per_command: &[(&str, &[&str])] = &[
        (
            "waitpid",
            &[
                "Newsome",
                "5.13",
                "waitpid-pid",
                "waitpid-any",
                "waitid-pidfd",
                "waitpid-wnohang",
            ],
        ),
        (
            "spawn",
            &["__mt_dup", "6.8", "spawn-wipeonfork", "--no-touch"],
        ),
        (
            "sysvipc",
            &[
                "Aquini",
                "5.15",
                "sysvipc-msg",
                "sysvipc-shm-sparse",
                "--segment-size",
                "--read-size",
                "--stride",
            ],
        ),
        (
            "mempolicy",
            &[
                "aim9",
                "/proc/PID/status",
                "mempolicy-exec",
                "--reader",
                "--policy",
                "interleave",
            ],
        ),
        (
            "getpid",
            &["van Riel", "4.14", "getpid-cached", "break-even"],
        ),
    ];
    for (cmd, words) in per_command {
        let h = run(&[cmd, "--help"], T);
        assert_eq!(h.code(), 0);
        let common = [
            "Thread reproduced",
            "--n <LIST>",
            "--iterations",
            "--min-time",
            "--warmup",
            "--repeats",
            "--json",
            "--cpu",
            "--variant",
            "Exit status",
        ];
        for w in common.iter().chain(words.iter()) {
            assert!(
                h.stdout.contains(w),
                "`workloads {cmd} --help` does not mention {w:?}:\n{}",
                h.stdout
            );
        }
    }
}

#[test]
fn malformed_n_lists_are_usage_errors_with_a_reason() {
    for (list, reason) in [
        ("1..100", "needs a step"),
        ("0,5", "at least 1"),
        ("1,,2", "empty"),
        ("ten", "not a size"),
    ] {
        let out = run(&["getpid", "--n", list], T);
        assert_eq!(out.code(), 2, "--n {list}: {}", out.stderr);
        assert!(
            out.stderr.contains(reason),
            "--n {list}: stderr should say {reason:?}:\n{}",
            out.stderr
        );
    }
}

#[test]
fn limits_refuse_up_front_naming_the_limit() {
    let _ipc = ipc_lock();
    let (shm0, msg0) = (ipc_ids("shm"), ipc_ids("msg"));
    let cases: &[(&[&str], &str)] = &[
        (&["spawn", "--n", "10m"], "vm.max_map_count"),
        (
            &["sysvipc", "--n", "100000", "--variant", "sysvipc-shm"],
            "kernel.shmmni",
        ),
        (
            &["sysvipc", "--n", "10m", "--variant", "sysvipc-msg"],
            "kernel.msgmni",
        ),
        (&["waitpid", "--n", "100m"], "kernel.pid_max"),
        (
            &["mempolicy", "--n", "1000m", "--variant", "mempolicy-page"],
            "MemAvailable",
        ),
    ];
    for (args, limit) in cases {
        let out = run(args, T);
        assert_eq!(
            out.code(),
            3,
            "{args:?} should be refused by a limit:\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(limit),
            "{args:?}: the message should name {limit}:\n{}",
            out.stderr
        );
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "{args:?}: one clear message:\n{}",
            out.stderr
        );
    }
    assert_eq!(
        (ipc_ids("shm"), ipc_ids("msg")),
        (shm0, msg0),
        "a refused run must create nothing"
    );
}

#[test]
fn getpid_json_follows_the_schema() {
    let dir = TempDir::new("json");
    let json = dir.path("getpid.json");
    let out = run(
        &[
            "getpid",
            "--n",
            "10,100",
            "--iterations",
            "5",
            "--warmup",
            "0",
            "--repeats",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        T,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(
        dir.entries(),
        ["getpid.json"],
        "only the final file remains"
    );

    let raw: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in ["workload", "kernel", "results", "limits", "status"] {
        assert!(raw.get(key).is_some(), "top-level {key} missing");
    }
    for row in raw["results"].as_array().unwrap() {
        for key in [
            "case",
            "case_id",
            "n",
            "repeat",
            "iterations",
            "ops",
            "total_ns",
            "time_ns_per_op",
            "cpu_ns_per_op",
        ] {
            assert!(row.get(key).is_some(), "row field {key} missing: {row}");
        }
    }

    let r = read_report(&json);
    assert_eq!(r.workload, "getpid");
    assert_eq!(r.status, Status::Complete);
    assert_eq!(
        r.kernel,
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap()
            .trim()
    );
    assert!(r.limits["kernel.pid_max"].is_u64());
    assert_eq!(
        r.results.len(),
        2 * 2 * 2,
        "2 variants x 2 sizes x 2 repeats"
    );
    for m in &r.results {
        assert_eq!(cases::case_id(&m.case), Some(m.case_id), "{m:?}");
        assert_eq!(m.iterations, 5, "{m:?}");
        assert_eq!(m.ops, 5 * m.n, "{m:?}: ops = calls");
        assert!(m.repeat < 2);
        let per = m.total_ns as f64 / m.ops as f64;
        assert!(
            (m.time_ns_per_op - per).abs() < 1e-6 * per.max(1.0),
            "{m:?}"
        );
        assert!(m.time_ns_per_op > 0.0 && m.cpu_ns_per_op > 0.0, "{m:?}");
    }
    assert_eq!(r.summary["wipe_on_fork_verified"], Value::Bool(true));
    assert!(
        r.summary["break_even_calls"]
            .as_f64()
            .is_some_and(|x| x >= 1.0),
        "{:?}",
        r.summary
    );
    assert!(out.stdout.contains("break-even"), "{}", out.stdout);
}

#[test]
fn table_is_in_google_benchmark_layout() {
    let out = run(
        &[
            "waitpid",
            "--n",
            "1,4",
            "--variant",
            "waitpid-pid,waitid-pidfd",
            "--iterations",
            "3",
            "--repeats",
            "2",
        ],
        T,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let header = out
        .stdout
        .lines()
        .find(|l| l.starts_with("Benchmark"))
        .expect("header row");
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(&cols[..4], ["Benchmark", "Time", "CPU", "Iterations"]);
    for name in [
        "waitpid-pid/1/repeats:2 ",
        "waitpid-pid/4/repeats:2_median",
        "waitid-pidfd/4/repeats:2_stddev",
    ] {
        assert!(
            out.stdout.contains(name),
            "no row {name:?}:\n{}",
            out.stdout
        );
    }
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("waitpid-pid/4/repeats:2 "))
        .unwrap();
    let f: Vec<&str> = row.split_whitespace().collect();
    assert!(
        ["ns", "us", "ms", "s"].contains(&f[2]) && ["ns", "us", "ms", "s"].contains(&f[4]),
        "{row}"
    );
    assert_eq!(f[5], "3", "iterations column: {row}");
    assert!(row.contains("waits_per_second="), "{row}");
}

#[test]
fn mempolicy_counts_pages_and_applies_a_policy() {
    let dir = TempDir::new("mempolicy");
    let json = dir.path("m.json");
    let out = run(
        &[
            "mempolicy",
            "--n",
            "16,256",
            "--iterations",
            "3",
            "--warmup",
            "0",
            "--reader",
            "--policy",
            "interleave",
            "--json",
            json.to_str().unwrap(),
        ],
        T,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let r = read_report(&json);
    assert_eq!(r.results.len(), 4 * 2, "4 variants x 2 sizes");
    for m in &r.results {
        let want = match m.case.as_str() {
            "mempolicy-page" | "mempolicy-brk" => 3 * m.n,
            "mempolicy-fork" | "mempolicy-exec" => 3,
            other => panic!("unexpected case {other}"),
        };
        assert_eq!(m.ops, want, "{m:?}");
        assert!(
            m.counters["reader_reads_per_second"] > 0.0,
            "the reader ran: {m:?}"
        );
    }
    let numa = std::path::Path::new("/sys/devices/system/node/online").exists();
    assert_eq!(
        r.summary["policy_applied"],
        Value::Bool(numa),
        "{:?} / notes {:?}",
        r.summary,
        r.notes
    );
    if !numa {
        assert!(
            r.notes.iter().any(|n| n.contains("default policy")),
            "{:?}",
            r.notes
        );
    }
}

#[test]
fn spawn_and_sysvipc_sparse_report_their_setup() {
    let _ipc = ipc_lock();
    let dir = TempDir::new("setup");
    let json = dir.path("s.json");
    let out = run(
        &[
            "spawn",
            "--n",
            "100,2000",
            "--iterations",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        T,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let r = read_report(&json);
    assert_eq!(r.results.len(), 4, "spawn and spawn-wipeonfork at 2 sizes");
    for m in &r.results {
        assert!(m.counters["vmas"] >= m.n as f64, "{m:?}");
        assert_eq!(m.ops, 2);
    }

    let json = dir.path("ipc.json");
    let shm0 = ipc_ids("shm");
    let out = run(
        &[
            "sysvipc",
            "--n",
            "10,100",
            "--variant",
            "sysvipc-shm-sparse",
            "--iterations",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        T,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let r = read_report(&json);
    for m in &r.results {
        // Spread over the id space: the highest index is near 32767 whatever N is.
        let max_idx = m.counters["max_id"] as u64 % 32768;
        assert!(max_idx >= 32768 - 32768 / m.n, "{m:?}");
        assert!(m.counters["entries"] >= m.n as f64);
    }
    assert_eq!(
        ipc_ids("shm"),
        shm0,
        "segments removed after a successful run"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/shm_next_id")
            .unwrap()
            .trim(),
        "-1"
    );
}

#[test]
fn exec_child_flag_exits_at_once() {
    let out = run(&["--exec-child"], T);
    assert_eq!(out.code(), 0);
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}
