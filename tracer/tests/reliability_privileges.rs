//! Reliability of the `tracer` CLI without privileges and with plans the kernel refuses: an
//! exact exit code and a hint, never a backtrace, nothing left behind.
//!
//! Every test drives the real binary and asserts an exact exit code (see `tracer --help`) or
//! message class, the absence of panics and backtraces (`RUST_BACKTRACE=1` is set), and that
//! nothing is left behind: no eBPF program of ours loaded, no half-written or temporary output,
//! no workload process, zombie or SysV IPC object. They need root (CI runs as root) and load
//! eBPF, so they run one at a time (`common/reliability.rs`). The workloads binary must be
//! built next to tracer (`cargo test --workspace` or `cargo build -p workloads`).
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::reliability::*;
use common::{read_json, workloads_bin};

// =============================================================================================
// 1. Privileges and kernels

/// Run as the unprivileged user `nobody` (uid/gid 65534, no supplementary groups).
fn as_nobody(cmd: &mut Command) -> &mut Command {
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Run as root with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN removed from the bounding set, so
/// the exec'd tracer starts without them.
fn as_root_without_bpf_caps(cmd: &mut Command) -> &mut Command {
    const CAP_SYS_ADMIN: libc::c_ulong = 21;
    const CAP_PERFMON: libc::c_ulong = 38;
    const CAP_BPF: libc::c_ulong = 39;
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for cap in [CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF] {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
}

#[test]
fn without_privileges_every_command_exits_3_with_a_hint_and_no_backtrace() {
    let _g = serial();
    let dir = world_writable_tmpdir();
    // Binaries an unprivileged user can execute wherever the build tree lives.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tracer_copy = bin.join("tracer");
    std::fs::copy(TRACER, &tracer_copy).unwrap();
    std::fs::copy(workloads_bin(), bin.join("workloads")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = work.join("command-ran");

    let cases: Vec<Vec<String>> = vec![
        vec!["record", "-o", "run", "--", "touch"]
            .into_iter()
            .map(String::from)
            .chain([marker.to_string_lossy().into_owned()])
            .collect(),
        ["record", "--system", "--duration", "1s", "-o", "run2"]
            .map(String::from)
            .to_vec(),
        ["sweep", "getpid", "--n", "10", "-o", "sweep"]
            .map(String::from)
            .to_vec(),
        ["probes"].map(String::from).to_vec(),
        ["probes", "--json"].map(String::from).to_vec(),
        ["probes", "--verify"].map(String::from).to_vec(),
    ];
    for drop_privileges in [
        as_nobody as fn(&mut Command) -> &mut Command,
        as_root_without_bpf_caps,
    ] {
        for args in &cases {
            let what = format!("{args:?}");
            let mut cmd = Command::new(&tracer_copy);
            cmd.args(args)
                .current_dir(&work)
                .env("RUST_BACKTRACE", "1")
                .stdin(Stdio::null());
            drop_privileges(&mut cmd);
            let r = run(&mut cmd, Duration::from_secs(30), &what);
            r.expect(3, &what)
                .stderr_has("insufficient privileges", &what)
                .stderr_has("sudo", &what)
                .stderr_has("CAP_BPF", &what);
            assert!(
                std::fs::read_dir(&work).unwrap().next().is_none(),
                "{what}: wrote into the output directory: {:?}",
                snapshot(&work).keys().collect::<Vec<_>>()
            );
        }
    }
    assert!(!marker.exists(), "the command ran without tracing");
    assert_nothing_loaded("unprivileged runs");
    assert_no_strays("unprivileged runs");
}

/// Does this kernel offer kprobes? (From the tracer's own report, which the probes tests in
/// native.rs check against the kernel.)
fn kernel_has_kprobes() -> bool {
    let r = run(
        tracer().args(["probes", "--json"]),
        Duration::from_secs(60),
        "probes --json",
    );
    let doc: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("probes --json: {e}\n{}\n{}", r.stdout, r.stderr));
    doc["facts"]["kprobe_pmu"]
        .as_bool()
        .expect("facts.kprobe_pmu")
}

#[test]
fn forcing_a_plan_the_kernel_refuses_exits_4_and_says_why() {
    let _g = serial();
    let has_kprobes = kernel_has_kprobes();
    let tmp = tmpdir();
    let marker = tmp.path().join("command-ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "record, forced target only",
            vec!["record", "--targets", "do_wait", "--plan", "do_wait=kprobe"],
        ),
        (
            "record, all targets (the forced one must not be dropped silently)",
            vec!["record", "--plan", "do_wait=kprobe"],
        ),
        (
            "sweep",
            vec!["sweep", "waitpid", "--n", "10", "--plan", "do_wait=kprobe"],
        ),
    ];
    let cases = cases.into_iter().map(|(w, a)| (w.to_string(), a));
    let mut case_no = 0;
    each_case(cases, |what, args| {
        case_no += 1;
        let out = tmp.path().join(format!("out{case_no}"));
        let mut cmd = tracer();
        cmd.args(&args).arg("-o").arg(&out);
        if args[0] == "record" {
            cmd.args(touch);
        } else {
            cmd.args(["--", "--iterations", "2"]);
        }
        let r = run(&mut cmd, Duration::from_secs(120), what);
        if has_kprobes {
            r.expect(0, what);
            let run_dir = if args[0] == "record" {
                out.clone()
            } else {
                out.join("waitpid")
            };
            let runj = read_json(&run_dir.join("run.json"));
            let t = runj["targets"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == "do_wait")
                .unwrap();
            assert_eq!(
                t["plan"]["plan"], "kprobe",
                "{what}: the forced plan is used"
            );
            std::fs::remove_dir_all(&out).unwrap();
            let _ = std::fs::remove_file(&marker);
        } else {
            r.expect(4, what)
                .stderr_has("do_wait", what)
                .stderr_has("kprobe", what)
                .stderr_has("CONFIG_KPROBES", what);
            assert!(!out.exists(), "{what}: output written for a refused plan");
            assert!(!marker.exists(), "{what}: the command ran");
        }
        assert_no_temporaries(tmp.path(), what);
        assert_nothing_loaded(what);
        assert_no_strays(what);
    });
    // `probes` explains the refusal.
    let r = run(
        tracer().args(["probes", "--plan", "do_wait=kprobe"]),
        Duration::from_secs(60),
        "probes --plan",
    );
    if has_kprobes {
        r.expect(0, "probes --plan");
    } else {
        r.expect(4, "probes --plan");
        assert!(
            r.stdout.contains("do_wait: NOT MEASURABLE")
                && r.stdout.contains("rejected kprobe")
                && r.stdout.contains("CONFIG_KPROBES"),
            "probes must say why: {}",
            r.stdout
        );
    }
    assert_nothing_loaded("probes --plan");
}

#[test]
fn plans_naming_unknown_targets_or_plans_are_usage_errors() {
    let _g = serial();
    let tmp = tmpdir();
    let cases = [
        (vec!["--plan", "nosuchtarget=kprobe"], "nosuchtarget"),
        (
            vec!["--targets", "do_wait", "--plan", "do_wait=bogus"],
            "unknown plan",
        ),
        (vec!["--plan", "do_wait"], "TARGET=PLAN"),
        (vec!["--plan", "=kprobe"], "TARGET=PLAN"),
    ];
    let cases = cases
        .into_iter()
        .enumerate()
        .map(|(i, (a, n))| (format!("record {a:?}"), (i, a, n)));
    each_case(cases, |what, (i, args, needle)| {
        let out = tmp.path().join(format!("out{i}"));
        let marker = tmp.path().join(format!("command-ran-{i}"));
        let r = run(
            tracer()
                .arg("record")
                .args(&args)
                .arg("-o")
                .arg(&out)
                .args(["--", "touch", marker.to_str().unwrap()]),
            Duration::from_secs(60),
            what,
        );
        r.expect(2, what).stderr_has(needle, what);
        assert!(!out.exists(), "{what}: output written");
        assert!(!marker.exists(), "{what}: the command ran");
        assert_no_temporaries(tmp.path(), what);
        assert_nothing_loaded(what);
    });
}
