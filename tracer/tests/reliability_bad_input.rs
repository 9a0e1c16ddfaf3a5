//! Reliability of the `tracer` CLI on bad input: bad command lines, outputs that exist, are
//! unwritable or fill up, corrupt run directories, a closed stdout and two sweeps racing for
//! one output. Each gets an exact exit code and message class, and nothing is lost.
//!
//! Every test drives the real binary and asserts an exact exit code (see `tracer --help`) or
//! message class, the absence of panics and backtraces (`RUST_BACKTRACE=1` is set), and that
//! nothing is left behind: no eBPF program of ours loaded, no half-written or temporary output,
//! no workload process, zombie or SysV IPC object. They need root (CI runs as root) and load
//! eBPF, so they run one at a time (`common/reliability.rs`). The workloads binary must be
//! built next to tracer (`cargo test --workspace` or `cargo build -p workloads`).
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::reliability::*;
use common::{getpid_syscall, read_json, record_targets, workloads_bin};

// =============================================================================================
// 2. Bad input

/// A plain file without execute permission (created by the test below).
const NOT_EXECUTABLE: &str = "/tmp/tracer-reliability-not-executable";

#[test]
fn bad_command_lines_exit_2_with_a_message_and_create_nothing() {
    let _g = serial();
    let cwd = tmpdir();
    std::fs::write(NOT_EXECUTABLE, b"data").unwrap();
    std::fs::set_permissions(NOT_EXECUTABLE, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cases: &[(&[&str], &str)] = &[
        // --n lists
        (&["sweep", "getpid", "--n", "1,,2"], "item 2 is empty"),
        (&["sweep", "getpid", "--n", "1,2,"], "empty"),
        (&["sweep", "getpid", "--n", "0"], "at least 1"),
        (&["sweep", "getpid", "--n", ""], "empty"),
        (&["sweep", "getpid", "--n", "1..1m+1"], "more than 10000"),
        (&["sweep", "getpid", "--n", "abc"], "not a size"),
        (&["sweep", "getpid", "--n", "100..10*2"], "larger than end"),
        (&["sweep", "getpid", "--n", "1..100*1"], "greater than 1"),
        (&["sweep", "getpid", "--n", "1..100"], "step"),
        (&["sweep", "getpid", "--n", "1..100*nan"], "factor"),
        (
            &["sweep", "getpid", "--n", "99999999999999999999"],
            "not a size",
        ),
        (
            &["sweep", "getpid", "--n", "18446744073709551615m"],
            "not a size",
        ),
        // workloads and targets
        (&["sweep", "nope"], "unknown workload"),
        (&["sweep"], "--all"),
        (&["sweep", "--all", "getpid"], "cannot be used with"),
        (&["sweep", "getpid", "--targets", "nope"], "unknown target"),
        (
            &["record", "--targets", "nope", "--", "true"],
            "unknown target",
        ),
        (&["record", "--targets", "", "--", "true"], "unknown target"),
        (&["probes", "--targets", "nope"], "unknown target"),
        // durations
        (
            &["record", "--duration", "0", "--", "true"],
            "must be positive",
        ),
        (
            &["record", "--duration", "0ms", "--", "true"],
            "must be positive",
        ),
        (
            &["record", "--duration", "8d", "--", "true"],
            "unknown duration unit",
        ),
        (&["record", "--duration", "200h", "--", "true"], "7 days"),
        (
            &["record", "--duration", "abc", "--", "true"],
            "not a duration",
        ),
        (
            &["record", "--duration", "nan", "--", "true"],
            "not a duration",
        ),
        (&["record", "--duration", "1e30s", "--", "true"], "duration"),
        // frequencies
        (&["record", "--freq", "0", "--", "true"], "out of range"),
        (&["record", "--freq", "20001", "--", "true"], "out of range"),
        (&["record", "--freq", "x", "--", "true"], "not a frequency"),
        (
            &["sweep", "getpid", "--freq", "99999999999999999999"],
            "not a frequency",
        ),
        // sizes
        (
            &["record", "--raw-events", "1", "--", "true"],
            "out of range",
        ),
        (
            &["record", "--raw-events", "4095", "--", "true"],
            "out of range",
        ),
        (
            &["record", "--raw-events", "2G", "--", "true"],
            "out of range",
        ),
        (
            &["record", "--raw-events", "1T", "--", "true"],
            "not a size",
        ),
        (
            &[
                "record",
                "--raw-events",
                "18446744073709551615K",
                "--",
                "true",
            ],
            "too large",
        ),
        (&["record", "--raw-events", "", "--", "true"], "not a size"),
        // what to trace
        (&["record", "--pid", "1", "--system"], "choose one of"),
        (
            &["record", "--comm", "a", "--cgroup", "/sys/fs/cgroup"],
            "choose one of",
        ),
        (&["record", "--pid", "1", "--comm", "a"], "choose one of"),
        (
            &["record", "--system", "--cgroup", "/sys/fs/cgroup"],
            "choose one of",
        ),
        (&["record"], "say what to trace"),
        (
            &["record", "--", "/nonexistent/command"],
            "command not found",
        ),
        (&["record", "--", NOT_EXECUTABLE], "not executable"),
        (&["record", "--pid", "0"], "no process"),
        (&["record", "--pid", "4000000000"], "no process"),
        (&["record", "--pid", "-3"], "error"),
        (&["record", "--comm", "0123456789abcdef"], "1 to 15 bytes"),
        (&["record", "--comm", ""], "1 to 15 bytes"),
        (&["record", "--cgroup", "/nonexistent/cgroup"], "cgroup"),
        (&["record", "--cgroup", "/etc/hostname"], "not a directory"),
        // subcommands and arguments
        (&[], "Usage"),
        (&["frobnicate"], "unrecognized subcommand"),
        (&["report"], "required"),
        (&["compare", "a"], "required"),
        (
            &["sweep", "getpid", "--workloads-bin", "/nonexistent"],
            "workloads-bin",
        ),
    ];
    let cases = cases
        .iter()
        .map(|(a, n)| (format!("tracer {a:?}"), (*a, *n)));
    each_case(cases, |what, (args, needle)| {
        let r = run(
            tracer().args(args).current_dir(cwd.path()),
            Duration::from_secs(30),
            what,
        );
        // Clean up first so one failure does not fail the cases after it.
        let created: Vec<String> = snapshot(cwd.path())
            .into_keys()
            .filter(|k| !k.is_empty())
            .collect();
        for e in std::fs::read_dir(cwd.path()).unwrap().flatten() {
            let _ = std::fs::remove_dir_all(e.path());
        }
        r.expect(2, what).stderr_has(needle, what);
        assert!(created.is_empty(), "{what}: created {created:?}");
    });
    let _ = std::fs::remove_file(NOT_EXECUTABLE);
    assert_nothing_loaded("bad command lines");
    assert_no_strays("bad command lines");
}

#[test]
fn duplicate_sweep_workloads_are_handled_before_anything_runs() {
    let _g = serial();
    workloads_bin();
    let tmp = tmpdir();
    let out = tmp.path().join("sweep");
    let r = run(
        tracer()
            .args(["sweep", "getpid", "getpid", "--no-verify", "--no-samples"])
            .args(["--no-flamegraphs", "--n", "10", "-o"])
            .arg(&out)
            .args(["--", "--iterations", "2"]),
        Duration::from_secs(120),
        "sweep getpid getpid",
    );
    assert_no_panic(&r.stderr, "sweep getpid getpid");
    match r.code {
        // Either refused up front ...
        Some(2) => {
            assert!(!out.exists(), "refused, yet wrote {}", out.display());
            assert!(r.stderr.contains("getpid"), "{}", r.stderr);
        }
        // ... or swept once.
        Some(0) => {
            let s = read_json(&out.join("sweep.json"));
            assert_eq!(s["runs"].as_array().unwrap().len(), 1, "{s}");
            assert_eq!(s["status"], "complete");
        }
        other => panic!(
            "a repeated workload must be refused (exit 2) or swept once (exit 0), got {other:?}: {}",
            r.stderr
        ),
    }
    assert_no_temporaries(tmp.path(), "sweep getpid getpid");
    assert_nothing_loaded("sweep getpid getpid");
    assert_no_strays("sweep getpid getpid");
}

#[test]
fn an_existing_output_is_refused_and_left_byte_for_byte() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("existing");
    copy_tree(&Path::new(FIXTURE).join("spawn"), &out);
    let file_out = tmp.path().join("a-file");
    std::fs::write(&file_out, b"precious").unwrap();
    let before = snapshot(tmp.path());
    let marker = tmp.path().join("command-ran");
    for dest in [&out, &file_out] {
        for args in [
            vec!["record", "--no-verify"],
            vec!["sweep", "getpid", "--n", "10", "--no-verify"],
        ] {
            let what = format!("{args:?} -o {}", dest.display());
            let mut cmd = tracer();
            cmd.args(&args).arg("-o").arg(dest);
            if args[0] == "record" {
                cmd.args(["--", "touch", marker.to_str().unwrap()]);
            }
            let r = run(&mut cmd, Duration::from_secs(60), &what);
            r.expect(5, &what)
                .stderr_has("already exists", &what)
                .stderr_has("--force", &what);
            assert!(!marker.exists(), "{what}: the command ran");
            assert_same_tree(&before, tmp.path(), &what);
        }
    }
    assert_nothing_loaded("existing output");

    // --force replaces the run as a whole: nothing of the old one is mixed in.
    let r = run(
        tracer()
            .args(["record", "--no-verify", "--force", "-o"])
            .arg(&out)
            .args(["--", "true"]),
        Duration::from_secs(60),
        "record --force",
    );
    r.expect(0, "record --force");
    let runj = read_json(&out.join("run.json"));
    assert_eq!(runj["command"], serde_json::json!(["true"]));
    assert!(
        !out.join("stacks/oncpu/dup_mmap/spawn/n10.folded").exists(),
        "the replaced run's files survived --force"
    );
    assert_no_temporaries(tmp.path(), "record --force");
    assert_nothing_loaded("record --force");
}

#[test]
fn unwritable_outputs_exit_5() {
    let _g = serial();
    let tmp = tmpdir();
    let a_file = tmp.path().join("a-file");
    std::fs::write(&a_file, b"x").unwrap();
    let ro_dir = tmp.path().join("read-only");
    let _ro = Mount::read_only_bind(&ro_dir);
    let good = tmp.path().join("good");
    copy_tree(&Path::new(FIXTURE).join("spawn"), &good);
    let marker = tmp.path().join("command-ran");
    let before = snapshot(tmp.path());
    let dests = [
        PathBuf::from("/proc/tracer-reliability/out"),
        a_file.join("out"),
        ro_dir.join("out"),
    ];
    let mut all = Vec::new();
    for dest in &dests {
        let cases: Vec<(String, Vec<String>)> = vec![
            (
                "record".into(),
                ["record", "--no-verify", "-o"]
                    .into_iter()
                    .map(String::from)
                    .chain([dest.to_string_lossy().into_owned()])
                    .chain(["--", "touch"].map(String::from))
                    .chain([marker.to_string_lossy().into_owned()])
                    .collect(),
            ),
            (
                "sweep".into(),
                ["sweep", "getpid", "--n", "10", "--no-verify", "-o"]
                    .into_iter()
                    .map(String::from)
                    .chain([dest.to_string_lossy().into_owned()])
                    .collect(),
            ),
            (
                "report".into(),
                vec![
                    "report".into(),
                    good.to_string_lossy().into_owned(),
                    "-o".into(),
                    dest.to_string_lossy().into_owned(),
                ],
            ),
            (
                "compare".into(),
                vec![
                    "compare".into(),
                    good.to_string_lossy().into_owned(),
                    good.to_string_lossy().into_owned(),
                    "-o".into(),
                    dest.to_string_lossy().into_owned(),
                ],
            ),
        ];
        for (kind, args) in cases {
            all.push((format!("{kind} -o {}", dest.display()), args));
        }
    }
    each_case(all, |what, args| {
        let r = run(tracer().args(&args), Duration::from_secs(60), what);
        r.expect(5, what);
        assert!(
            r.stderr.contains("cannot write") || r.stderr.contains("writing"),
            "{what}: the message must say the output is not writable: {}",
            r.stderr
        );
        assert!(!marker.exists(), "{what}: the command ran");
        assert_same_tree(&before, tmp.path(), what);
    });
    assert_nothing_loaded("unwritable outputs");
    assert_no_strays("unwritable outputs");
}

#[test]
fn a_full_disk_during_record_exits_5_and_leaves_nothing() {
    let _g = serial();
    let tmp = tmpdir();
    let ipc_before = sysvipc();
    // Raw events stream into events.csv during the run: the disk fills while recording.
    let small = tmp.path().join("small");
    {
        let _m = Mount::tmpfs(&small, "64k");
        let what = "record --raw-events into 64 KiB";
        let r = run(
            record_targets(tracer(), "getpid")
                .args(["--raw-events", "4M", "-o"])
                .arg(small.join("run"))
                .arg("--")
                .arg(workloads_bin())
                .args(getpid_syscall("100000"))
                .args(["--iterations", "3"]),
            Duration::from_secs(120),
            what,
        );
        r.expect(5, what).stderr_has("No space left", what);
        assert!(
            snapshot(&small).len() == 1,
            "{what}: left on the full filesystem: {:?}",
            snapshot(&small).keys().collect::<Vec<_>>()
        );
        assert_nothing_loaded(what);
    }
    // Without raw events the run files themselves do not fit.
    let tiny = tmp.path().join("tiny");
    {
        let _m = Mount::tmpfs(&tiny, "4k");
        let what = "record into 4 KiB";
        let r = run(
            tracer()
                .args(["record", "--no-verify", "-o"])
                .arg(tiny.join("run"))
                .args(["--", "sh", "-c", "/bin/true; /bin/true"]),
            Duration::from_secs(120),
            what,
        );
        r.expect(5, what).stderr_has("No space left", what);
        assert!(
            snapshot(&tiny).len() == 1,
            "{what}: left on the full filesystem: {:?}",
            snapshot(&tiny).keys().collect::<Vec<_>>()
        );
        assert_nothing_loaded(what);
    }
    assert_no_strays("full disk");
    assert_eq!(sysvipc(), ipc_before, "IPC objects changed");
}

#[test]
fn a_full_disk_during_report_exits_5_and_keeps_earlier_results() {
    let _g = serial();
    let tmp = tmpdir();
    let data = tmp.path().join("data");
    copy_tree(Path::new(FIXTURE), &data);
    let fs = tmp.path().join("fs");
    let _m = Mount::tmpfs(&fs, "2m");

    // A fresh report that does not fit: no report directory at all afterwards.
    let out = fs.join("report");
    let filler = fill_leaving(&fs, 96 << 10);
    let what = "report into a nearly full filesystem";
    let r = run(
        tracer().arg("report").arg(&data).arg("-o").arg(&out),
        Duration::from_secs(120),
        what,
    );
    r.expect(5, what).stderr_has("No space left", what);
    assert!(
        !out.exists(),
        "{what}: a half-written report was left: {:?}",
        snapshot(&out).keys().collect::<Vec<_>>()
    );
    assert_no_temporaries(&fs, what);
    std::fs::remove_file(&filler).unwrap();

    // An earlier report is kept byte for byte when re-rendering runs out of space.
    let r = report_without_flamegraphs(&data, &out, Duration::from_secs(120), "first report");
    r.expect(0, "first report");
    let before = snapshot(&out);
    let _filler = fill_leaving(&fs, 96 << 10);
    let what = "re-rendering the report with flamegraphs on a nearly full filesystem";
    let r = run(
        tracer()
            .arg("report")
            .arg(&data)
            .args(["--metric", "wall", "-o"])
            .arg(&out),
        Duration::from_secs(120),
        what,
    );
    r.expect(5, what);
    assert_same_tree(&before, &out, what);
    assert_no_temporaries(&fs, what);
}

/// A run directory broken in one way, by a function of its path.
type Corruption = (&'static str, fn(&Path) -> PathBuf);

fn edit_run_json(dir: &Path, f: impl FnOnce(&mut Value)) {
    let p = dir.join("run.json");
    let mut v = read_json(&p);
    f(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

const STACK: &str = "stacks/oncpu/dup_mmap/spawn/n100.folded";

fn corruptions() -> Vec<Corruption> {
    vec![
        ("truncated run.json", |d| {
            let p = d.join("run.json");
            let b = std::fs::read(&p).unwrap();
            std::fs::write(&p, &b[..b.len() / 2]).unwrap();
            d.to_path_buf()
        }),
        ("empty run.json", |d| {
            std::fs::write(d.join("run.json"), b"").unwrap();
            d.to_path_buf()
        }),
        ("garbage run.json", |d| {
            std::fs::write(d.join("run.json"), b"\x00\xff not json {{{").unwrap();
            d.to_path_buf()
        }),
        ("wrong format tag", |d| {
            edit_run_json(d, |v| v["format"] = "tracer-run/9".into());
            d.to_path_buf()
        }),
        ("no format tag", |d| {
            edit_run_json(d, |v| {
                v.as_object_mut().unwrap().remove("format");
            });
            d.to_path_buf()
        }),
        ("a field of the wrong type", |d| {
            edit_run_json(d, |v| v["spans"][0]["calls"] = "many".into());
            d.to_path_buf()
        }),
        ("missing stack file", |d| {
            std::fs::remove_file(d.join(STACK)).unwrap();
            d.to_path_buf()
        }),
        ("truncated stack file", |d| {
            let p = d.join(STACK);
            let b = std::fs::read(&p).unwrap();
            std::fs::write(&p, &b[..b.len() / 2]).unwrap();
            d.to_path_buf()
        }),
        ("garbage stack file", |d| {
            std::fs::write(d.join(STACK), b"a;b;c\nnot a weight x\n").unwrap();
            d.to_path_buf()
        }),
        ("stack path escaping the run", |d| {
            edit_run_json(d, |v| {
                v["stack_files"][0]["path"] = "../../../etc/passwd".into()
            });
            d.to_path_buf()
        }),
        ("truncated events.csv", |d| {
            std::fs::write(
                d.join("events.csv"),
                "end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns\n1,2,3,dup_mmap,1,10,50",
            )
            .unwrap();
            d.to_path_buf()
        }),
        ("events.csv of another format", |d| {
            std::fs::write(d.join("events.csv"), "time,pid,latency\n1,2,3\n").unwrap();
            d.to_path_buf()
        }),
        ("histogram disagreeing with calls", |d| {
            edit_run_json(d, |v| v["spans"][0]["wall"]["hist"][0][1] = 1.into());
            d.to_path_buf()
        }),
        ("histogram bucket out of range", |d| {
            edit_run_json(d, |v| {
                let h = &mut v["spans"][0]["wall"]["hist"][0][0];
                *h = (tracer_ebpf::HIST_BUCKETS + 5000).into();
            });
            d.to_path_buf()
        }),
        ("histogram counts overflowing", |d| {
            edit_run_json(d, |v| {
                let row = &mut v["spans"][0];
                row["calls"] = 4.into();
                row["untimed"] = 0.into();
                for kind in ["wall", "oncpu"] {
                    row[kind]["hist"] = serde_json::json!([[172, u64::MAX - 1], [173, 6]]);
                }
            });
            d.to_path_buf()
        }),
        ("run.json is a directory", |d| {
            std::fs::remove_file(d.join("run.json")).unwrap();
            std::fs::create_dir(d.join("run.json")).unwrap();
            d.to_path_buf()
        }),
        ("run directory is a file", |d| {
            let f = d.with_extension("file");
            std::fs::write(&f, b"not a directory").unwrap();
            f
        }),
        ("empty directory", |d| {
            let e = d.with_extension("empty");
            std::fs::create_dir(&e).unwrap();
            e
        }),
        ("nonexistent", |d| d.with_extension("missing")),
    ]
}

#[test]
fn corrupt_run_directories_exit_6_and_keep_earlier_results() {
    let _g = serial();
    let tmp = tmpdir();
    let good = tmp.path().join("good");
    copy_tree(&Path::new(FIXTURE).join("spawn"), &good);
    let report = tmp.path().join("report");
    run(
        tracer().arg("report").arg(&good).arg("-o").arg(&report),
        Duration::from_secs(60),
        "report of the good run",
    )
    .expect(0, "report of the good run");
    let before = snapshot(&report);
    let cases = corruptions()
        .into_iter()
        .enumerate()
        .map(|(i, (name, f))| (name.to_string(), (i, f)));
    each_case(cases, |name, (i, corrupt)| {
        restore(&before, &report);
        let copy = tmp.path().join(format!("case{i}"));
        copy_tree(&good, &copy);
        let bad = corrupt(&copy);
        let what = format!("report of a run with {name}");
        let r = run(
            tracer().arg("report").arg(&bad).arg("-o").arg(&report),
            Duration::from_secs(60),
            &what,
        );
        r.expect(6, &what);
        assert!(
            r.stderr.contains(&*bad.to_string_lossy()),
            "{what}: the message must name the input: {}",
            r.stderr
        );
        assert_same_tree(&before, &report, &what);

        let what = format!("compare with a run with {name}");
        let cmp = tmp.path().join(format!("cmp{i}"));
        let r = run(
            tracer()
                .arg("compare")
                .arg(&good)
                .arg(&bad)
                .arg("-o")
                .arg(&cmp),
            Duration::from_secs(60),
            &what,
        );
        r.expect(6, &what);
        assert!(!cmp.exists(), "{what}: wrote a comparison");
    });
    // A sweep with one broken run is refused as a whole.
    restore(&before, &report);
    let sweep = tmp.path().join("sweep");
    copy_tree(Path::new(FIXTURE), &sweep);
    let p = sweep.join("waitpid/run.json");
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 3]).unwrap();
    let what = "report of a sweep with a truncated run";
    let r = run(
        tracer().arg("report").arg(&sweep).arg("-o").arg(&report),
        Duration::from_secs(60),
        what,
    );
    r.expect(6, what).stderr_has("waitpid", what);
    assert_same_tree(&before, &report, what);
    assert_no_temporaries(tmp.path(), "corrupt inputs");
}
