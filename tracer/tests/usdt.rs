//! USDT phase probes (`<sys/sdt.h>`) and `--phase-fn`, natively on this machine's kernel
//! (uprobes work here; the counted calls are getpid() through the syscall tracepoint
//! bracket). The benchmarks are small C programs from `tests/c/`, built by the test in the
//! forms users ship: static non-PIE, dynamic PIE, stripped.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

mod common;
use common::{nothing_loaded, serial, tracer};

fn builds() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

/// `tests/c/<src>.c` compiled with `flags` as `<out>` (once per test process).
fn build(src: &str, out: &str, flags: &[&str]) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dest = builds().join(out);
    if !dest.exists() {
        let c = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{src}.c"));
        let st = Command::new("cc")
            .args(["-O2"])
            .args(flags)
            .arg("-o")
            .arg(&dest)
            .arg(&c)
            .status()
            .expect("precondition: a C compiler (cc) is installed");
        assert!(
            st.success(),
            "compiling {} (sys/sdt.h comes with systemtap-sdt-dev, installed by cargo xtask setup)",
            c.display()
        );
    }
    dest
}

fn static_bin(src: &str) -> PathBuf {
    build(src, &format!("{src}-static"), &["-static", "-no-pie"])
}

fn pie_bin(src: &str) -> PathBuf {
    build(src, &format!("{src}-pie"), &["-fPIE", "-pie"])
}

fn stripped(src: &str) -> PathBuf {
    let dest = builds().join(format!("{src}-stripped"));
    if !dest.exists() {
        let from = static_bin(src);
        std::fs::copy(&from, &dest).unwrap();
        let st = Command::new("strip").arg(&dest).status().expect("strip");
        assert!(st.success());
    }
    dest
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn read_run(dir: &Path) -> Value {
    let t = std::fs::read_to_string(dir.join("run.json"))
        .unwrap_or_else(|e| panic!("{}/run.json: {e}", dir.display()));
    serde_json::from_str(&t).expect("run.json parses")
}

/// getpid calls per (case name, N).
fn calls(run: &Value) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["target"] == "getpid")
        .map(|s| {
            (
                s["case_name"].as_str().unwrap().to_string(),
                s["n"].as_u64().unwrap(),
                s["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// (case name, N, phases, ops) of the run's phases.
fn phases(run: &Value) -> Vec<(String, u64, u64, u64)> {
    let mut v: Vec<(String, u64, u64, u64)> = run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["case_name"].as_str().unwrap().to_string(),
                p["n"].as_u64().unwrap(),
                p["phases"].as_u64().unwrap(),
                p["ops"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn no_panic(o: &Output) {
    let t = text(o);
    assert!(
        !t.contains("panicked") && !t.contains("RUST_BACKTRACE"),
        "a panic: {t}"
    );
}

const QUICK: &[&str] = &["-t", "getpid", "--no-verify", "--no-samples"];

fn record(out: &Path, extra: &[&str], command: &[&str]) -> Output {
    run_tracer(&["record"], out, extra, command)
}

/// `tracer <sub_args[0]> <QUICK> <sub_args[1..]> -o out <extra> -- command`, checked for panics.
fn run_tracer(sub_args: &[&str], out: &Path, extra: &[&str], command: &[&str]) -> Output {
    let o = tracer()
        .arg(sub_args[0])
        .args(QUICK)
        .args(&sub_args[1..])
        .arg("-o")
        .arg(out)
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .expect("tracer runs");
    no_panic(&o);
    o
}

/// `tracer sweep` of `command` with one run per N: the tests count one run's calls per N.
fn sweep(out: &Path, extra: &[&str], command: &[&str]) -> Output {
    run_tracer(
        &["sweep", "--repeat", "1", "--no-report"],
        out,
        extra,
        command,
    )
}

/// The benchmark's own report of its semaphores ("semaphores: begin=B end=E").
fn semaphores(o: &Output) -> (u32, u32) {
    let t = text(o);
    let line = t
        .lines()
        .find_map(|l| l.strip_prefix("semaphores: "))
        .unwrap_or_else(|| panic!("no semaphore line: {t}"));
    let get = |k: &str| -> u32 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{line}"))
    };
    (get("begin="), get("end="))
}

#[test]
fn a_usdt_benchmark_swept_gets_rows_from_its_own_marks_with_its_semaphores_set() {
    let _g = serial();
    let bench = static_bin("usdt_phases");
    // Untraced, the semaphores are clear and the guarded probes never fire.
    let alone = Command::new(&bench).arg("5").output().unwrap();
    assert_eq!(semaphores(&alone), (0, 0), "{}", text(&alone));

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep");
    let b = bench.to_str().unwrap();
    let o = sweep(&out, &["--n", "40,120"], &[b, "{n}"]);
    assert!(o.status.success(), "{}", text(&o));
    // Traced, the kernel set them: each probe has two sites, each holding the semaphore once.
    assert_eq!(semaphores(&o), (2, 2), "{}", text(&o));
    let run = read_run(&out.join("usdt_phases-static"));
    let c = calls(&run);
    // Each mark's N and case come from the probe's own arguments (constants, registers and
    // the stack); the unmarked setup and teardown are the sweep's default phase at N.
    for n in [40u64, 120] {
        assert!(c.contains(&("case201".into(), n, n)), "{c:?}");
        assert!(c.contains(&("case202".into(), 2 * n, 2 * n)), "{c:?}");
        let rest = c
            .iter()
            .find(|r| r.0 == "command" && r.1 == n)
            .unwrap_or_else(|| panic!("{c:?}"));
        assert!(
            (130..=140).contains(&rest.2),
            "100 + 30 outside the marks: {c:?}"
        );
    }
    let p = phases(&run);
    for n in [40u64, 120] {
        assert!(p.contains(&("case201".into(), n, 1, n)), "{p:?}");
        assert!(p.contains(&("case202".into(), 2 * n, 1, 2 * n)), "{p:?}");
    }
    assert_eq!(run["counters"]["usdt_sites"], 4);
    assert_eq!(run["counters"]["usdt_semaphores"], 4);
    assert_eq!(
        run["counters"]["phase_markers"], 8,
        "4 marks per run, 2 runs"
    );
    assert!(nothing_loaded());
    // Detaching gave the semaphores back.
    let after = Command::new(&bench).arg("5").output().unwrap();
    assert_eq!(semaphores(&after), (0, 0));
}

#[test]
fn a_pie_usdt_benchmark_is_recorded_from_its_marks() {
    let _g = serial();
    let bench = pie_bin("usdt_phases");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = record(&out, &[], &[bench.to_str().unwrap(), "50"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(semaphores(&o), (2, 2));
    let run = read_run(&out);
    let c = calls(&run);
    assert!(c.contains(&("case201".into(), 50, 50)), "{c:?}");
    assert!(c.contains(&("case202".into(), 100, 100)), "{c:?}");
    let unphased = c.iter().find(|r| r.0 == "unphased").map_or(0, |r| r.2);
    assert!((130..=140).contains(&unphased), "{c:?}");
    assert!(nothing_loaded());
}

#[test]
fn phase_fn_counts_only_the_calls_inside_the_function() {
    let _g = serial();
    let bench = static_bin("timed_loop");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep");
    let b = bench.to_str().unwrap();
    let pf = format!("{b}:timed_loop");
    let o = sweep(
        &out,
        &["--n", "30,90", "--ops", "{N}", "--phase-fn", &pf],
        &[b, "{n}"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let run = read_run(&out.join("timed_loop-static"));
    let c = calls(&run);
    // timed_loop(N) runs twice per run: 2N calls in the phase at N; the 500 + 77 outside it
    // (per run, both runs) are unphased, not in any N row.
    assert!(c.contains(&("command".into(), 30, 60)), "{c:?}");
    assert!(c.contains(&("command".into(), 90, 180)), "{c:?}");
    let unphased = c.iter().find(|r| r.0 == "unphased").map_or(0, |r| r.2);
    assert!((2 * 577..=2 * 577 + 10).contains(&unphased), "{c:?}");
    // One phase per call of the function, each counting --ops at its N.
    let p = phases(&run);
    assert_eq!(
        p,
        vec![
            ("command".into(), 30, 2, 60),
            ("command".into(), 90, 2, 180)
        ]
    );
    assert!(nothing_loaded());
}

#[test]
fn phase_fn_in_pie_and_by_address_in_a_stripped_binary() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    // A dynamic PIE binary, by name: record has no N, so the phase is (command, N=1).
    let pie = pie_bin("timed_loop");
    let out = tmp.path().join("pie");
    let p = pie.to_str().unwrap();
    let o = record(
        &out,
        &["--phase-fn", &format!("{p}:timed_loop")],
        &[p, "25"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let c = calls(&read_run(&out));
    assert!(c.contains(&("command".into(), 1, 50)), "{c:?}");

    // A stripped static binary, by the address the unstripped build's symbol table gives.
    let unstripped = static_bin("timed_loop");
    let nm = Command::new("nm").arg(&unstripped).output().expect("nm");
    let addr = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find_map(|l| l.strip_suffix(" T timed_loop").map(str::to_string))
        .expect("timed_loop in nm");
    let s = stripped("timed_loop");
    let sp = s.to_str().unwrap();
    let out = tmp.path().join("stripped");
    let o = record(
        &out,
        &[
            "--phase-fn",
            &format!("{sp}:0x{}", addr.trim_start_matches('0')),
        ],
        &[sp, "20"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let c = calls(&read_run(&out));
    assert!(c.contains(&("command".into(), 1, 40)), "{c:?}");
    assert!(nothing_loaded());
}

/// The bytes of `from` with `patch` applied, as an executable file `name`.
fn patched(from: &Path, name: &str, patch: impl Fn(&mut Vec<u8>)) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let mut bytes = std::fs::read(from).unwrap();
    patch(&mut bytes);
    let dest = builds().join(name);
    std::fs::write(&dest, &bytes).unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).unwrap();
    dest
}

/// Offset of the first stapsdt note's header (namesz 8, type 3, owner "stapsdt").
fn first_note(bytes: &[u8]) -> usize {
    bytes
        .windows(20)
        .position(|w| {
            w[0..4] == [8, 0, 0, 0] && w[8..12] == [3, 0, 0, 0] && &w[12..20] == b"stapsdt\0"
        })
        .expect("a stapsdt note")
}

#[test]
fn hostile_binaries_and_locations_are_refused_with_exit_2_and_nothing_written() {
    let _g = serial();
    let bench = static_bin("usdt_phases");
    let timed = static_bin("timed_loop");
    let strip = stripped("timed_loop");
    // A descriptor size running past the section.
    let huge = patched(&bench, "usdt-huge-note", |b| {
        let at = first_note(b);
        b[at + 4..at + 8].copy_from_slice(&0x00ff_ff00u32.to_le_bytes());
    });
    // An argument spec the probes cannot evaluate: `%` of the first register made `?`.
    let bad_arg = patched(&bench, "usdt-bad-arg", |b| {
        let at = first_note(b);
        let rel = b[at..at + 120].windows(2).position(|w| w == b"@%").unwrap();
        b[at + rel + 1] = b'?';
    });
    // More phase sites than the probes have program copies for.
    let many = build("usdt_many_sites", "usdt-many-sites", &["-static"]);
    let t = timed.to_str().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--phase-fn".into(), "/nonexistent/bench:main".into()],
            "no such file",
        ),
        (
            vec!["--phase-fn".into(), "/etc/hostname:main".into()],
            "not an ELF file",
        ),
        (
            vec!["--phase-fn".into(), format!("{t}:no_such_function")],
            "no function \"no_such_function\"",
        ),
        (
            vec![
                "--phase-fn".into(),
                format!("{}:timed_loop", strip.display()),
            ],
            "the binary is stripped",
        ),
        (
            vec!["--phase-fn".into(), format!("{t}:0x10")],
            "outside every executable segment",
        ),
        (
            vec!["--phase-fn".into(), t.to_string()],
            "expected BINARY:SYMBOL or BINARY:0xADDR",
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let check = |o: &Output, want: &str| {
        assert_eq!(o.status.code(), Some(2), "{want}: {}", text(o));
        assert!(text(o).contains(want), "{want}: {}", text(o));
        assert!(!out.exists(), "{want}: output written");
    };
    for (args, want) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        check(&record(&out, &args, &[t, "1"]), want);
        check(
            &sweep(&out, &[&["--n", "1,2"], &args[..]].concat(), &[t, "{n}"]),
            want,
        );
    }
    for (bin, want) in [
        (&huge, "malformed .note.stapsdt: note at byte"),
        (&bad_arg, "probe tracer:phase_"),
        (&many, "more than the 12"),
    ] {
        let b = bin.to_str().unwrap();
        check(&record(&out, &[], &[b, "1"]), want);
        check(&sweep(&out, &["--n", "1,2"], &[b, "{n}"]), want);
    }
    // --phase-fn with built-in workloads: a usage error too.
    let o = tracer()
        .args([
            "sweep",
            "waitpid",
            "--phase-fn",
            &format!("{t}:timed_loop"),
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    check(&o, "--phase-fn apply to a command swept with -- CMD");
    assert!(nothing_loaded());
}

/// The phase function's binary replaced on disk between two runs of it: the probes stay on
/// the file that was there when they were attached (uprobes are placed on an inode), so
/// the first run's calls are in the phase and the replacement's are not.
#[test]
fn a_binary_replaced_while_traced_keeps_the_probes_on_the_file_they_were_placed_on() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::copy(static_bin("timed_loop"), &bench).unwrap();
    let b = bench.to_str().unwrap();
    let script = format!("{b} 10 && cp {b} {b}.new && mv {b}.new {b} && {b} 10");
    let out = dir.path().join("run");
    let o = record(
        &out,
        &["--phase-fn", &format!("{b}:timed_loop")],
        &["/bin/sh", "-c", &script],
    );
    assert!(o.status.success(), "{}", text(&o));
    let run = read_run(&out);
    assert_eq!(phases(&run), vec![("command".into(), 1, 2, 2)]);
    let c = calls(&run);
    assert!(c.contains(&("command".into(), 1, 20)), "{c:?}");
    let unphased = c.iter().find(|r| r.0 == "unphased").map_or(0, |r| r.2);
    assert!(
        unphased >= 577 + 20 + 577,
        "the replacement's calls are unphased: {c:?}"
    );
    assert!(nothing_loaded());
}

/// A script that runs the USDT benchmark: `--markers BINARY` attaches its probes.
#[test]
fn usdt_probes_of_a_binary_a_script_runs_are_attached_with_markers() {
    let _g = serial();
    let bench = static_bin("usdt_phases");
    let b = bench.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let script = format!("{b} 20 && {b} 20");
    let o = record(&out, &["--markers", b], &["/bin/sh", "-c", &script]);
    assert!(o.status.success(), "{}", text(&o));
    let run = read_run(&out);
    let p = phases(&run);
    assert_eq!(
        p,
        vec![("case201".into(), 20, 2, 40), ("case202".into(), 40, 2, 80)]
    );
    assert_eq!(run["counters"]["usdt_sites"], 4);
    assert!(nothing_loaded());
}
