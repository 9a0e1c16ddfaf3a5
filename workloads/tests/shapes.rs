//! The scaling shapes issue 4 asks for, measured natively by the workloads' own timings and
//! checked as slopes of log-log least-squares fits of the median time per op against N.
//! Tolerances are generous; absolute times are never asserted. The tests run one at a time
//! (they time things) and pin the workload to one CPU, which removes the cross-CPU wake-up
//! latency that makes fork+wait timings erratic in VMs.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn measure(tag: &str, args: &[&str]) -> (workloads::report::Report, TempDir) {
    let dir = TempDir::new(tag);
    let json = dir.path("out.json");
    let cpu = last_allowed_cpu();
    let mut full: Vec<&str> = args.to_vec();
    full.extend([
        "--cpu",
        &cpu,
        "--repeats",
        "3",
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    let out = run(&full, Duration::from_secs(120));
    assert_eq!(out.code(), 0, "workloads {full:?} failed:\n{}", out.stderr);
    let report = read_report(&json);
    assert_eq!(report.status, workloads::report::Status::Complete);
    (report, dir)
}

#[test]
fn waitpid_pid_is_flat_and_wnohang_polling_is_linear() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (r, _dir) = measure(
        "waitpid",
        &[
            "waitpid",
            "--n",
            "1,8,64,512,4096,8000",
            "--variant",
            "waitpid-pid,waitpid-wnohang",
            "--min-time",
            "0.05",
        ],
    );
    for m in &r.results {
        assert_eq!(m.ops, m.iterations, "{m:?}: one wait per iteration");
        assert_eq!(
            m.counters.get("idle_children"),
            Some(&(m.n as f64)),
            "{m:?}: N idle children were alive"
        );
    }
    let pid = medians(&r, "waitpid-pid");
    let poll = medians(&r, "waitpid-wnohang");
    assert_eq!(pid.len(), 6);
    let (s_pid, s_poll) = (loglog_slope(&pid), loglog_slope(&poll));
    eprintln!("waitpid-pid slope {s_pid:.3} {pid:?}\nwaitpid-wnohang slope {s_poll:.3} {poll:?}");
    assert!(
        s_pid.abs() < 0.3,
        "waitpid(pid) should be flat in N since 5.13: slope {s_pid:.3}, medians {pid:?}"
    );
    assert!(
        (0.6..1.6).contains(&s_poll),
        "waitpid(-1, WNOHANG) should grow about linearly with N: slope {s_poll:.3}, medians {poll:?}"
    );
}

#[test]
fn fork_time_grows_linearly_with_vmas() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Up to ~64k VMAs, but within vm.max_map_count wherever the test runs.
    let top =
        read_sysctl("vm.max_map_count").map_or(64_000, |m| m.saturating_sub(1_000).min(64_000));
    assert!(
        top >= 16_000,
        "vm.max_map_count is too small for this test: {top}"
    );
    let ns = format!("1000,4000,16000,{top}");
    let (r, _dir) = measure(
        "spawn",
        &[
            "spawn",
            "--n",
            &ns,
            "--variant",
            "spawn",
            "--min-time",
            "0.05",
        ],
    );
    for m in &r.results {
        let vmas = m.counters["vmas"];
        assert!(vmas >= m.n as f64, "{m:?}: the N VMAs must not have merged");
        assert_eq!(m.ops, m.iterations, "{m:?}: one fork per iteration");
    }
    let pts = medians(&r, "spawn");
    let s = loglog_slope(&pts);
    eprintln!("spawn slope {s:.3} {pts:?}");
    assert!(
        (0.7..1.4).contains(&s),
        "fork time should grow about linearly with VMAs: slope {s:.3}, medians {pts:?}"
    );
}

#[test]
fn proc_sysvipc_read_time_is_linear_in_objects() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let shm_free = read_sysctl("kernel.shmmni")
        .unwrap_or(4096)
        .saturating_sub(ipc_ids("shm").len() as u64);
    let top = shm_free.saturating_sub(16).min(4000);
    assert!(
        top >= 1024,
        "kernel.shmmni leaves room for only {shm_free} segments"
    );
    let ns = format!("64,256,1024,{top}");
    let (before_shm, before_msg) = (ipc_ids("shm"), ipc_ids("msg"));
    let (r, _dir) = measure(
        "sysvipc",
        &[
            "sysvipc",
            "--n",
            &ns,
            "--variant",
            "sysvipc-shm,sysvipc-msg",
            "--min-time",
            "0.1",
        ],
    );
    for m in &r.results {
        assert!(
            m.counters["entries"] >= m.n as f64,
            "{m:?}: the read must list our N objects"
        );
    }
    for case in ["sysvipc-shm", "sysvipc-msg"] {
        let pts = medians(&r, case);
        let s = loglog_slope(&pts);
        eprintln!("{case} slope {s:.3} {pts:?}");
        assert!(
            (0.75..1.3).contains(&s),
            "{case}: full read time should be linear in N: slope {s:.3}, medians {pts:?}"
        );
    }
    assert_eq!(ipc_ids("shm"), before_shm, "shm segments left behind");
    assert_eq!(ipc_ids("msg"), before_msg, "message queues left behind");
}
