//! Reliability of the `tracer` CLI under signals and failures: signals during attach, sweeps
//! and report writing, SIGKILL of the tracer at every stage, and traced commands that crash.
//! No probe stays attached and no partial file masquerades as complete.
//!
//! Every test drives the real binary and asserts an exact exit code (see `tracer --help`) or
//! message class, the absence of panics and backtraces (`RUST_BACKTRACE=1` is set), and that
//! nothing is left behind: no eBPF program of ours loaded, no half-written or temporary output,
//! no workload process, zombie or SysV IPC object. They need root (CI runs as root) and load
//! eBPF, so they run one at a time (`common/reliability.rs`). The workloads binary must be
//! built next to tracer (`cargo test --workspace` or `cargo build -p workloads`).
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::reliability::*;
use common::{read_json, workloads_bin};

// =============================================================================================
// 3. Signals and failures

#[test]
fn a_signal_during_attach_records_nothing_and_never_runs_the_command() {
    let _g = serial();
    let tmp = tmpdir();
    let ipc_before = sysvipc();
    let cases = [
        (Signal::SIGINT, "record"),
        (Signal::SIGTERM, "record"),
        (Signal::SIGHUP, "record"),
        (Signal::SIGTERM, "sweep"),
    ]
    .map(|(sig, kind)| (format!("{sig} during {kind} attach"), (sig, kind)));
    each_case(cases, |what, (sig, kind)| {
        let out = tmp.path().join(format!("out-{}-{kind}", sig as i32));
        let marker = tmp.path().join(format!("command-ran-{}", sig as i32));
        let mut cmd = tracer();
        // With calibration (the default) attaching takes seconds.
        if kind == "record" {
            cmd.args(["record", "-o"])
                .arg(&out)
                .args(["--", "touch", marker.to_str().unwrap()]);
        } else {
            cmd.args(["sweep", "sysvipc", "--n", "10", "-o"])
                .arg(&out)
                .args(["--", "--iterations", "2"]);
        }
        let child = spawn(&mut cmd);
        let pid = Pid::from_raw(child.id() as i32);
        // The output is prepared right before attaching starts.
        wait_for(
            Duration::from_secs(20),
            "the tracer to start attaching",
            || partial_dir_exists(&out),
        );
        std::thread::sleep(Duration::from_millis(50));
        kill(pid, sig).unwrap();
        let r = finish(child, Duration::from_secs(60), what);
        r.expect(7, what).stderr_has("interrupted", what);
        assert!(!out.exists(), "{what}: output written");
        assert!(!marker.exists(), "{what}: the command ran");
        assert_no_temporaries(tmp.path(), what);
        assert_nothing_loaded(what);
        assert_no_strays(what);
    });
    assert_eq!(sysvipc(), ipc_before, "IPC objects changed");
}

#[test]
fn an_interrupted_sweep_keeps_finished_runs_marks_itself_partial_and_cleans_up() {
    let _g = serial();
    workloads_bin();
    let tmp = tmpdir();
    assert_no_strays("before the sweeps");
    let cases = [
        (Signal::SIGINT, "sysvipc"),
        (Signal::SIGTERM, "waitpid"),
        (Signal::SIGHUP, "sysvipc"),
    ]
    .map(|(sig, w)| (format!("{sig} during the {w} run of a sweep"), (sig, w)));
    each_case(cases, |what, (sig, workload)| {
        let ipc_before = sysvipc();
        let shm_before = count_shm();
        let out = tmp.path().join(format!("sweep-{workload}-{}", sig as i32));
        let child = spawn(
            tracer()
                .args(["sweep", "getpid", workload, "--no-verify", "--no-samples"])
                .args(["--no-flamegraphs", "--n", "10,3000", "-o"])
                .arg(&out)
                .args(["--", "--min-time", "0.3"]),
        );
        let pid = Pid::from_raw(child.id() as i32);
        // Signal once the second workload has built most of its N = 3000 objects.
        wait_for(
            Duration::from_secs(120),
            "the second workload's setup",
            || match workload {
                "sysvipc" => count_shm() > shm_before + 1000,
                _ => count_workloads_processes() > 1000,
            },
        );
        kill(pid, sig).unwrap();
        let r = finish(child, Duration::from_secs(60), what);
        r.expect(7, what).stderr_has("partial", what);

        let s = read_json(&out.join("sweep.json"));
        assert_eq!(s["status"], "partial", "{what}: {s}");
        let reason = s["partial_reason"].as_str().unwrap_or("");
        assert!(
            reason.contains(&sig.to_string()),
            "{what}: reason {reason:?}"
        );
        let runs = s["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{what}: {s}");
        assert_eq!(runs[0]["workload"], "getpid");
        assert_eq!(runs[0]["status"], "complete");
        assert_eq!(runs[0]["command_exit"], 0);
        assert_eq!(runs[1]["workload"], workload);
        assert_eq!(runs[1]["status"], "partial");
        // The workload cleaned up after itself and exited 128 + signal.
        assert_eq!(
            runs[1]["command_exit"],
            128 + sig as i32,
            "{what}: the workload's exit"
        );
        let done = read_json(&out.join("getpid/run.json"));
        assert_eq!(done["status"], "complete");
        // Both getpid cases at both sizes: the finished run is whole.
        assert_eq!(
            done["phases"].as_array().unwrap().len(),
            4,
            "{what}: finished run kept: {}",
            done["phases"]
        );
        let cut = read_json(&out.join(format!("{workload}/run.json")));
        assert_eq!(cut["status"], "partial");
        assert!(
            cut["partial_reason"]
                .as_str()
                .unwrap_or("")
                .contains(&sig.to_string())
        );

        assert_eq!(
            sysvipc(),
            ipc_before,
            "{what}: SysV IPC objects left behind"
        );
        assert_no_strays(what);
        assert_nothing_loaded(what);
        assert_no_temporaries(tmp.path(), what);
        // The partial sweep reads back.
        let r = report_without_flamegraphs(
            &out,
            tmp.path().join("rep"),
            Duration::from_secs(60),
            "report of the partial sweep",
        );
        r.expect(0, "report of the partial sweep");
        std::fs::remove_dir_all(tmp.path().join("rep")).unwrap();
    });
}

/// A sweep directory big enough that rendering its report takes a few seconds.
fn big_dataset(dir: &Path, copies: usize) {
    for i in 0..copies {
        for w in ["spawn", "waitpid"] {
            copy_tree(
                &Path::new(FIXTURE).join(w),
                &dir.join(format!("{w}-{i:02}")),
            );
        }
    }
}

/// Relative links of an index.html that point at files of the report.
fn index_links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|l| !l.starts_with('#') && !l.contains("://"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_signal_during_report_writing_leaves_the_old_or_the_new_index_and_no_temporaries() {
    let _g = serial();
    let tmp = tmpdir();
    let data = tmp.path().join("data");
    big_dataset(&data, 16);
    let out = tmp.path().join("report");
    // The reference for "new": the same report, rendered without interruption.
    let reference = tmp.path().join("reference");
    let started = Instant::now();
    run(
        tracer().arg("report").arg(&data).arg("-o").arg(&reference),
        Duration::from_secs(300),
        "reference report",
    )
    .expect(0, "reference report");
    let full_time = started.elapsed();
    let new_index = std::fs::read(reference.join("index.html")).unwrap();
    // The "old" report: fast, without flamegraphs, so its index differs.
    report_without_flamegraphs(&data, &out, Duration::from_secs(120), "old report")
        .expect(0, "old report");
    let old = snapshot(&out);
    let old_index = std::fs::read(out.join("index.html")).unwrap();
    assert_ne!(old_index, new_index, "precondition: the two reports differ");

    let cases = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP]
        .into_iter()
        .enumerate()
        .map(|(i, sig)| (format!("{sig} while writing a report"), (i, sig)));
    each_case(cases, |what, (i, sig)| {
        // Somewhere in the middle of writing (early, middle, late).
        let mut delay = full_time.mul_f64([0.2, 0.5, 0.8][i]);
        let r = loop {
            restore(&old, &out);
            let mut child = spawn(tracer().arg("report").arg(&data).arg("-o").arg(&out));
            std::thread::sleep(delay);
            let signalled = child.try_wait().unwrap().is_none();
            if signalled {
                kill(Pid::from_raw(child.id() as i32), sig).unwrap();
            }
            let r = finish(child, Duration::from_secs(60), what);
            if signalled && r.code != Some(0) {
                break r;
            }
            // The report finished before the signal was sent, or after its last rename while
            // the signal was on its way: it must then be the whole new one. The signal must
            // land while the report is being written, so try again earlier.
            r.expect(0, what);
            assert!(
                std::fs::read(out.join("index.html")).unwrap() == new_index,
                "{what}: a report that exited 0 left an index that is not the new one"
            );
            delay /= 2;
            assert!(
                delay > Duration::from_millis(20),
                "{what}: the report always finished before the signal"
            );
        };
        r.expect(7, what);
        assert_no_temporaries(tmp.path(), what);
        let index = std::fs::read(out.join("index.html"))
            .unwrap_or_else(|e| panic!("{what}: index.html: {e}"));
        assert!(
            index == old_index || index == new_index,
            "{what}: index.html is neither the old nor the new one"
        );
        let html = String::from_utf8(index).unwrap();
        for link in index_links(&html) {
            assert!(
                out.join(&link).is_file(),
                "{what}: the index links {link}, which is missing"
            );
        }
    });
}

#[test]
fn traced_command_failures_exit_8_with_the_command_status() {
    let _g = serial();
    let tmp = tmpdir();
    // A program the kernel refuses to execute (EACCES): it lives on a noexec filesystem.
    let noexec = tmp.path().join("noexec");
    std::fs::create_dir(&noexec).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &noexec,
        Some("tmpfs"),
        nix::mount::MsFlags::MS_NOEXEC,
        Some("size=1m"),
    )
    .expect("precondition: mount a noexec tmpfs");
    let _m = Mount(noexec.clone());
    let bogus = noexec.join("true");
    std::fs::copy("/bin/true", &bogus).unwrap();
    let bogus = bogus.to_string_lossy().into_owned();
    let cases: Vec<(&str, Vec<&str>, i32, i32)> = vec![
        (
            "crashes with SIGSEGV",
            vec!["sh", "-c", "kill -SEGV $$"],
            8,
            139,
        ),
        (
            "killed by SIGKILL",
            vec!["sh", "-c", "kill -KILL $$"],
            8,
            137,
        ),
        ("exits 1", vec!["false"], 8, 1),
        ("cannot be executed", vec![bogus.as_str()], 8, 127),
        ("exits before the duration", vec!["true"], 0, 0),
    ];
    let cases = cases
        .into_iter()
        .enumerate()
        .map(|(i, (w, c, code, exit))| (w.to_string(), (i, c, code, exit)));
    each_case(cases, |what, (i, command, code, command_exit)| {
        let out = tmp.path().join(format!("run{i}"));
        let started = Instant::now();
        let r = run(
            tracer()
                .args(["record", "--no-verify", "--duration", "60s", "-o"])
                .arg(&out)
                .arg("--")
                .args(&command),
            Duration::from_secs(60),
            what,
        );
        r.expect(code, what);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: recording must stop when the command ends"
        );
        let runj = read_json(&out.join("run.json"));
        assert_eq!(runj["status"], "complete", "{what}");
        assert_eq!(runj["command_exit"], command_exit, "{what}");
        if command_exit == 127 {
            assert!(r.stderr.contains("cannot run"), "{what}: {}", r.stderr);
        }
        assert_nothing_loaded(what);
        assert_no_strays(what);
    });
    assert_no_temporaries(tmp.path(), "command failures");
}

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> std::os::fd::OwnedFd {
    let (r, w) = nix::unistd::pipe().unwrap();
    drop(r);
    w
}

#[test]
fn a_closed_stdout_neither_panics_nor_loses_the_run() {
    let _g = serial();
    workloads_bin();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    let what = "record with stdout closed";
    let child = tracer()
        .args(["record", "--no-verify", "-o"])
        .arg(&out)
        // The command inherits the closed stdout too; this one writes nothing.
        .args(["--", "sh", "-c", "/bin/true; /bin/true"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = finish(child, Duration::from_secs(60), what);
    r.expect(0, what);
    let runj = read_json(&out.join("run.json"));
    assert_eq!(runj["status"], "complete");
    assert_eq!(
        calls_of(&runj, "dup_mmap", None),
        2,
        "{what}: counts intact"
    );
    assert_nothing_loaded(what);

    let what = "probes with stdout closed";
    let child = tracer()
        .arg("probes")
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = finish(child, Duration::from_secs(60), what);
    assert_no_panic(&r.stderr, what);
    assert!(
        matches!(r.code, Some(0) | Some(4)),
        "{what}: exit {:?}: {}",
        r.code,
        r.stderr
    );
    assert_nothing_loaded(what);

    let what = "sweep with stdout closed";
    let sweep = tmp.path().join("sweep");
    let child = tracer()
        .args(["sweep", "getpid", "--no-verify", "--n", "10", "-o"])
        .arg(&sweep)
        .args(["--", "--iterations", "2"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = finish(child, Duration::from_secs(120), what);
    r.expect(0, what);
    assert_eq!(read_json(&sweep.join("sweep.json"))["status"], "complete");
    assert!(
        sweep.join("report/index.html").is_file(),
        "{what}: the report after the sweep was not written"
    );
    assert_nothing_loaded(what);
    assert_no_strays(what);
    assert_no_temporaries(tmp.path(), "closed stdout");
}

/// The hidden temporary directory tracer `pid` stages `dest` in.
fn partial_dir_of(dest: &Path, pid: u32) -> PathBuf {
    let name = dest.file_name().unwrap().to_string_lossy().into_owned();
    dest.with_file_name(format!(".{name}.partial-{pid}"))
}

/// The stray processes (see `stray_processes`) that are still running, zombies left out.
fn running_strays() -> Vec<String> {
    stray_processes()
        .into_iter()
        .filter(|s| !s.contains(" state Z "))
        .collect()
}

/// Where SIGKILL hits the tracer in `sigkill_at_each_stage_...`.
#[derive(Clone, Copy, Debug)]
enum KillStage {
    /// While attaching (calibration makes that take seconds); the command was never started.
    Attach { sweep: bool },
    /// While the workload runs, once it holds many SysV objects or children.
    Run { sweep: bool, workload: &'static str },
    /// While `record` writes the run (after the command ended).
    WriteRun,
    /// While `report` writes a report.
    WriteReport,
}

#[test]
fn sigkill_at_each_stage_kills_the_command_and_the_next_run_removes_the_temporaries() {
    let _g = serial();
    let wl = workloads_bin();
    let tmp = tmpdir();
    assert_no_strays("before");
    let data = tmp.path().join("data");
    big_dataset(&data, 6);
    let documented: [(&str, &[&str]); 2] = [
        (
            "record",
            &["SIGKILL", "PR_SET_PDEATHSIG", ".NAME.partial-PID"],
        ),
        ("sweep", &["SIGKILL", "SysV IPC objects"]),
    ];
    for (sub, needles) in documented {
        let help = run(
            tracer().args([sub, "--help"]),
            Duration::from_secs(10),
            "help",
        );
        help.expect(0, "help");
        for needle in needles {
            assert!(
                help.stdout.contains(needle),
                "`tracer {sub} --help` should mention {needle}:\n{}",
                help.stdout
            );
        }
    }
    let cases = [
        ("attach (record)", KillStage::Attach { sweep: false }),
        ("attach (sweep)", KillStage::Attach { sweep: true }),
        (
            "run (record, shm segments)",
            KillStage::Run {
                sweep: false,
                workload: "sysvipc-shm",
            },
        ),
        (
            "run (sweep, message queues)",
            KillStage::Run {
                sweep: true,
                workload: "sysvipc-msg",
            },
        ),
        (
            "run (sweep, idle children)",
            KillStage::Run {
                sweep: true,
                workload: "waitpid",
            },
        ),
        ("write (record)", KillStage::WriteRun),
        ("write (report)", KillStage::WriteReport),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (name, stage))| (format!("SIGKILL during {name}"), (i, stage)));
    each_case(cases, |what, (i, stage)| {
        let dir = tmp.path().join(format!("case{i}"));
        std::fs::create_dir(&dir).unwrap();
        let out = dir.join("out");
        let marker = dir.join("command-ran");
        let ipc_before = sysvipc();
        let (shm0, msg0) = (count_shm(), sysvipc()["msg"].len());
        let mut attempts = 0;
        let (pid, killed_at) = loop {
            attempts += 1;
            let mut cmd = tracer();
            match stage {
                KillStage::Attach { sweep: false } => {
                    cmd.args(["record", "-o"]).arg(&out).args([
                        "--",
                        "touch",
                        marker.to_str().unwrap(),
                    ]);
                }
                KillStage::Attach { sweep: true } => {
                    cmd.args(["sweep", "sysvipc", "--n", "10", "-o"])
                        .arg(&out)
                        .args(["--", "--iterations", "2"]);
                }
                KillStage::Run { sweep, workload } => {
                    let (name, args): (&str, &[&str]) = match workload {
                        "sysvipc-shm" | "sysvipc-msg" => ("sysvipc", &["--variant", workload]),
                        _ => ("waitpid", &[]),
                    };
                    if sweep {
                        cmd.args(["sweep", name, "--no-verify", "--n", "3000", "-o"])
                            .arg(&out)
                            .arg("--")
                            .args(args);
                    } else {
                        cmd.args(["record", "--no-verify", "-o"])
                            .arg(&out)
                            .arg("--")
                            .arg(&wl)
                            .args([name, "--n", "3000"])
                            .args(args);
                    }
                    cmd.args(["--min-time", "60"]);
                }
                KillStage::WriteRun => {
                    cmd.args(["record", "--no-verify", "-o"])
                        .arg(&out)
                        .arg("--")
                        .arg(&wl)
                        .args(["getpid", "--n", "10,20,30,40,50,60,70,80"])
                        .args(["--iterations", "2"]);
                }
                KillStage::WriteReport => {
                    cmd.arg("report").arg(&data).arg("-o").arg(&out);
                }
            }
            // Not pipes: a command that outlived the tracer would hold them open, and reading
            // them to the end would wait for it.
            let log = tmp.path().join(format!("case{i}.stderr"));
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start tracer");
            let pid = child.id();
            let partial = partial_dir_of(&out, pid);
            // Wait for the stage, then SIGKILL at once.
            let limit = Duration::from_secs(120);
            let deadline = Instant::now() + limit;
            let reached = |child: &mut std::process::Child| -> Option<bool> {
                if child.try_wait().unwrap().is_some() {
                    return Some(false);
                }
                let hit = match stage {
                    KillStage::Attach { .. } | KillStage::WriteReport => partial.exists(),
                    KillStage::Run { workload, .. } => match workload {
                        "sysvipc-shm" => count_shm() > shm0 + 1000,
                        "sysvipc-msg" => sysvipc()["msg"].len() > msg0 + 1000,
                        _ => count_workloads_processes() > 1000,
                    },
                    // run.json is the first file written once the command has ended.
                    KillStage::WriteRun => partial.join("run.json").exists(),
                };
                hit.then_some(true)
            };
            let hit = loop {
                if let Some(h) = reached(&mut child) {
                    break h;
                }
                assert!(Instant::now() < deadline, "{what}: stage not reached");
                std::thread::sleep(Duration::from_micros(500));
            };
            if hit {
                if matches!(stage, KillStage::Attach { .. }) {
                    // Into the attach proper (the output is prepared right before it).
                    std::thread::sleep(Duration::from_millis(100));
                }
                if matches!(stage, KillStage::WriteReport) {
                    // Into the rendering, which takes about a second here.
                    std::thread::sleep(Duration::from_millis(50));
                }
                kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
            }
            let status = child.wait().unwrap();
            let killed_at = Instant::now();
            let r = Ran {
                code: status.code(),
                stdout: String::new(),
                stderr: std::fs::read_to_string(&log).unwrap(),
            };
            if hit && r.code.is_none() && !out.exists() {
                assert_no_panic(&r.stderr, what);
                break (pid, killed_at);
            }
            // The tracer finished (or committed) before the signal landed: try again.
            assert!(
                attempts < 10,
                "{what}: the tracer never was in the stage when killed (exit {:?}):\n{}",
                r.code,
                r.stderr
            );
            r.expect(0, what);
            std::fs::remove_dir_all(&out).unwrap();
            assert_nothing_loaded(what);
        };
        // The kernel detached everything with the tracer's last file descriptor.
        assert_nothing_loaded(what);
        // The command (and the workload's children) got SIGKILL once the tracer was gone.
        loop {
            let left = running_strays();
            if left.is_empty() {
                break;
            }
            assert!(
                killed_at.elapsed() < Duration::from_secs(2),
                "{what}: still running 2 s after the tracer died:\n{}",
                left.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Their SysV objects are gone too.
        let ipc_deadline = Instant::now() + Duration::from_secs(2);
        while sysvipc() != ipc_before && Instant::now() < ipc_deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            sysvipc(),
            ipc_before,
            "{what}: SysV IPC objects left behind"
        );
        // Zombies are reaped (by init, which may take a moment).
        assert_no_strays(what);
        assert!(!marker.exists(), "{what}: the command ran");
        assert!(!out.exists(), "{what}: an output appeared");
        // SIGKILL cannot be caught: the temporary directory stays until the next writer.
        assert!(
            partial_dir_of(&out, pid).is_dir(),
            "{what}: precondition: the killed tracer's temporary directory"
        );
        let next = dir.join("next");
        if matches!(
            stage,
            KillStage::WriteReport | KillStage::Attach { sweep: true }
        ) {
            report_without_flamegraphs(FIXTURE, &next, Duration::from_secs(60), "the next report")
                .expect(0, "the next report");
        } else {
            run(
                tracer()
                    .args(["record", "--no-verify", "--targets", "getpid", "-o"])
                    .arg(&next)
                    .args(["--", "true"]),
                Duration::from_secs(60),
                "the next record",
            )
            .expect(0, "the next record");
        }
        assert!(next.is_dir(), "{what}: the next run's output");
        assert_no_temporaries(&dir, what);
        assert_nothing_loaded(what);
    });
}
