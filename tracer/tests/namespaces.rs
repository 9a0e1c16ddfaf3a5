//! PID namespaces (a container, a Kubernetes debug pod, `unshare -p`): the tracer inside one
//! counts what it counts outside, for record, `--pid`, built-in and external sweeps and
//! discover; a namespace whose /proc is another's is refused before anything loads; a command
//! entering a namespace under a tracer outside it is followed as anywhere else.
//!
//! The probes see every task by its pid in the initial namespace; the tracer inside one knows
//! its command by its pid there. These tests fail if the two are ever mixed: nothing would be
//! counted, or another process would be.
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod common;
use common::{getpid_syscall, nothing_loaded, read_json, serial, workloads_bin};

const TRACER: &str = env!("CARGO_BIN_EXE_tracer");

/// `unshare -p -f --mount-proc TRACER ARGS`: the tracer as the first process of a new PID
/// namespace with its own /proc, as a container starts it.
fn tracer_inside(args: &[&str]) -> Output {
    Command::new("unshare")
        .args(["-p", "-f", "--mount-proc", TRACER])
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("precondition: util-linux unshare is installed")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_ok(o: &Output, what: &str) {
    assert!(o.status.success(), "{what}: {}\n{}", o.status, text(o));
    assert!(!text(o).contains("panicked"), "{what}: {}", text(o));
}

/// Calls of `target` in the rows of `case_name`, by N.
fn calls_by_n(run: &Value, target: &str, case_name: &str) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["target"] == target && r["case_name"] == case_name)
        .map(|r| (r["n"].as_u64().unwrap(), r["calls"].as_u64().unwrap()))
        .collect();
    v.sort();
    v
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_tracer_inside_a_pid_namespace_counts_what_it_counts_outside() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let w = workloads_bin();
    let w = s(&w);

    // record: the command the tracer starts, found by its pid in the namespace; its markers
    // attached (uprobes take the namespace's pids too), calibration counting its own child.
    let rec = tmp.path().join("record");
    let mut args = vec![
        "record",
        "--no-samples",
        "-t",
        "getpid",
        "-o",
        s(&rec),
        "--",
        w,
    ];
    args.extend(getpid_syscall("1000"));
    args.extend(["--iterations", "3", "--warmup", "0"]);
    let o = tracer_inside(&args);
    assert_ok(&o, "record inside");
    assert!(!text(&o).contains("inlined"), "{}", text(&o));
    let run = read_json(&rec.join("run.json"));
    assert_eq!(
        calls_by_n(&run, "getpid", "getpid-syscall"),
        [(1000, 3000)],
        "{}",
        text(&o)
    );

    // A built-in sweep by rounds: one workload process per N and round, each run's calls
    // exact.
    let sw = tmp.path().join("sweep");
    let o = tracer_inside(&[
        "sweep",
        "getpid",
        "--repeat",
        "3",
        "--n",
        "300,1200",
        "-t",
        "getpid",
        "--no-samples",
        "--no-report",
        "-o",
        s(&sw),
        "--",
        "--variant",
        "getpid-syscall",
        "--iterations",
        "2",
        "--warmup",
        "0",
    ]);
    assert_ok(&o, "built-in sweep inside");
    let run = read_json(&sw.join("getpid/run.json"));
    let runs = run["invocations"].as_array().unwrap();
    let runs_at = |n: u64| runs.iter().filter(|i| i["n"] == n).count() as u64;
    assert!(runs_at(300) >= 3 && runs_at(1200) >= 3, "{}", text(&o));
    assert_eq!(
        calls_by_n(&run, "getpid", "getpid-syscall"),
        [(300, 600 * runs_at(300)), (1200, 2400 * runs_at(1200))],
        "{}",
        text(&o)
    );
    for i in runs {
        let n = i["n"].as_u64().unwrap();
        assert_eq!(i["spans"][0]["target"], "getpid", "{i}");
        assert_eq!(i["spans"][0]["calls"], 2 * n, "N={n}: {i}");
    }

    // An external sweep: a new command (a shell around the workload) per run, each run one
    // phase at its N; the shell and its child are both followed from the shell's pid.
    let ext = tmp.path().join("external");
    let script = format!(
        "{w} getpid --variant getpid-syscall --n $TRACER_N --iterations 2 --warmup 0 >/dev/null"
    );
    let o = tracer_inside(&[
        "sweep",
        "--n",
        "500,2000",
        "--repeat",
        "1",
        "-t",
        "getpid",
        "--no-samples",
        "--no-report",
        "-o",
        s(&ext),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_ok(&o, "external sweep inside");
    let run = read_json(&ext.join("sh/run.json"));
    let got = calls_by_n(&run, "getpid", "command");
    assert_eq!(got.len(), 2, "{got:?}");
    for ((n, calls), want) in got.iter().zip([500u64, 2000]) {
        assert_eq!(*n, want);
        // 2N timed calls, and the few the workload and the shell make themselves.
        assert!(
            (2 * n..2 * n + 20).contains(calls),
            "N={n}: {calls} calls\n{}",
            text(&o)
        );
    }

    // --pid: a process already running in the namespace, given by its pid there.
    let pid_run = tmp.path().join("pid");
    let script = format!(
        "{w} getpid --variant getpid-syscall --n 100000 --iterations 1000 --warmup 0 \
         >/dev/null 2>&1 & sleep 0.3; {TRACER} record --no-samples -t getpid -p $! -d 1s \
         -o {} ; st=$?; kill $!; wait; exit $st",
        s(&pid_run)
    );
    let o = Command::new("unshare")
        .args(["-p", "-f", "--mount-proc", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&o, "--pid inside");
    let run = read_json(&pid_run.join("run.json"));
    let calls: u64 = calls_by_n(&run, "getpid", "unphased")
        .iter()
        .map(|c| c.1)
        .sum();
    assert!(calls > 10_000, "{calls} calls in 1 s of a getpid loop");

    // A namespace without its own /proc: /proc names other processes by the same numbers.
    let refused = tmp.path().join("refused");
    let o = Command::new("unshare")
        .args([
            "-p",
            "-f",
            TRACER,
            "record",
            "-t",
            "getpid",
            "-o",
            s(&refused),
        ])
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        text(&o).contains("whose /proc is another namespace's")
            && text(&o).contains("--mount-proc"),
        "{}",
        text(&o)
    );
    assert!(!refused.exists(), "nothing written");

    // A command entering a namespace under a tracer outside it: followed from outside.
    let outside = tmp.path().join("outside");
    let o = Command::new(TRACER)
        .args(["record", "--no-samples", "-t", "getpid", "--markers", w])
        .args([
            "-o",
            s(&outside),
            "--",
            "unshare",
            "-p",
            "-f",
            "--mount-proc",
            w,
        ])
        .args(getpid_syscall("1000"))
        .args(["--iterations", "3", "--warmup", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&o, "a command entering a namespace");
    let run = read_json(&outside.join("run.json"));
    assert_eq!(
        calls_by_n(&run, "getpid", "getpid-syscall"),
        [(1000, 3000)],
        "{}",
        text(&o)
    );
    assert!(nothing_loaded(), "programs left loaded");
}
