//! Reliability and safety of the `tracer` CLI (issue 7): missing privileges, impossible plans,
//! bad command lines, outputs that exist, are unwritable or fill up, corrupt run directories,
//! signals during attach, sweeps and report writing, SIGKILL of the tracer at every stage,
//! traced commands that crash, a closed stdout, full kernel maps, a soak at a high call rate,
//! two tracers at once, and two sweeps racing for one output.
//!
//! Every test drives the real binary and asserts an exact exit code (see `tracer --help`) or
//! message class, the absence of panics and backtraces (`RUST_BACKTRACE=1` is set), and that
//! nothing is left behind: no eBPF program of ours loaded, no half-written or temporary output,
//! no workload process, zombie or SysV IPC object.
//!
//! They need root (CI runs as root) and load eBPF, so they run one at a time. The workloads
//! binary must be built next to tracer (`cargo test --workspace` or `cargo build -p
//! workloads`). `TRACER_SOAK_SECS` lengthens the soak (default 60 s).
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

mod common;
use common::{getpid_syscall, loaded_tracer_programs, read_json, record_targets, workloads_bin};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    assert!(
        nix::unistd::geteuid().is_root(),
        "reliability tests need root (run them with sudo or through `cargo xtask test`)"
    );
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A failed test must not make the next one fail for its leftovers.
    wait_until_nothing_loaded();
    g
}

const TRACER: &str = env!("CARGO_BIN_EXE_tracer");
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sweep-5.10");

fn tracer() -> Command {
    let mut c = Command::new(TRACER);
    c.env("RUST_BACKTRACE", "1").stdin(Stdio::null());
    c
}

/// What a finished tracer run printed and returned.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Assert the exit code and that the tracer did not panic.
    fn expect(&self, code: i32, what: &str) -> &Ran {
        assert_no_panic(&self.stderr, what);
        assert_eq!(
            self.code,
            Some(code),
            "{what}: exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    fn stderr_has(&self, needle: &str, what: &str) -> &Ran {
        assert!(
            self.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "{what}: stderr should mention {needle:?}:\n{}",
            self.stderr
        );
        self
    }
}

/// Run every case even when some fail, then fail with the list of failed cases (one broken
/// behaviour must not hide the others).
fn each_case<T>(cases: impl IntoIterator<Item = (String, T)>, mut f: impl FnMut(&str, T)) {
    let mut failed = Vec::new();
    let mut total = 0;
    for (name, case) in cases {
        total += 1;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&name, case)));
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let first = msg.lines().next().unwrap_or("").to_string();
            failed.push(format!("{name}: {first}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {total} cases failed:\n  {}",
        failed.len(),
        failed.join("\n  ")
    );
}

fn assert_no_panic(stderr: &str, what: &str) {
    for bad in ["panicked", "stack backtrace", "RUST_BACKTRACE"] {
        assert!(
            !stderr.contains(bad),
            "{what}: {bad:?} in stderr:\n{stderr}"
        );
    }
}

/// Collect a spawned child's output, killing it (and failing) after `limit`.
fn finish(mut child: std::process::Child, limit: Duration, what: &str) -> Ran {
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ran {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn run(cmd: &mut Command, limit: Duration, what: &str) -> Ran {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    finish(child, limit, what)
}

fn spawn(cmd: &mut Command) -> std::process::Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tracer")
}

/// Programs are freed once their last fd closes; allow the kernel a moment after exit.
fn wait_until_nothing_loaded() -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = loaded_tracer_programs();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_nothing_loaded(what: &str) {
    let left = wait_until_nothing_loaded();
    assert!(left.is_empty(), "{what}: programs left loaded: {left:?}");
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Every file and directory under `dir` with its content (None for directories).
fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(root: &Path, p: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let md = std::fs::symlink_metadata(p).unwrap();
        if md.is_dir() {
            out.insert(rel, None);
            let mut entries: Vec<_> = std::fs::read_dir(p).unwrap().flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                walk(root, &e.path(), out);
            }
        } else {
            out.insert(rel, Some(std::fs::read(p).unwrap()));
        }
    }
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out
}

/// Put `dir` back to `snap` (so one failed case cannot fail the cases after it).
fn restore(snap: &BTreeMap<String, Option<Vec<u8>>>, dir: &Path) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    for (rel, content) in snap {
        let p = dir.join(rel);
        match content {
            None => std::fs::create_dir_all(&p).unwrap(),
            Some(b) => std::fs::write(&p, b).unwrap(),
        }
    }
}

fn assert_same_tree(before: &BTreeMap<String, Option<Vec<u8>>>, dir: &Path, what: &str) {
    let after = snapshot(dir);
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(
        changed.is_empty(),
        "{what}: {} changed: {changed:?}",
        dir.display()
    );
}

/// Temporary or half-written names the writers use, anywhere under `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .into_keys()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap_or(k);
            name.contains(".partial-") || name.contains(".tmp-") || name.ends_with(".old")
        })
        .collect()
}

fn assert_no_temporaries(dir: &Path, what: &str) {
    let t = temporaries(dir);
    assert!(
        t.is_empty(),
        "{what}: temporary output left in {}: {t:?}",
        dir.display()
    );
}

/// /proc/<pid>/stat fields: (comm, state, ppid).
fn proc_stat(pid: u32) -> Option<(String, char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let mut rest = stat[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((comm, state, ppid))
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// Processes (zombies included) of the workloads binary and of the tracer's calibration
/// children: none may outlive a tracer run.
fn stray_processes() -> Vec<String> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&p| p != me)
        .filter_map(|p| {
            let (comm, state, ppid) = proc_stat(p)?;
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let ours = comm == "workloads"
                || cmdline.contains("__calibrate")
                || cmdline.contains("__probe_cost")
                || cmdline.contains("__exec-held")
                || (state == 'Z' && ppid == me);
            ours.then(|| format!("pid {p} ({comm}) state {state} ppid {ppid}: {cmdline}"))
        })
        .collect()
}

fn assert_no_strays(what: &str) {
    // Reaping by init after the tracer exits takes a moment.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let s = stray_processes();
        if s.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            panic!("{what}: processes left behind:\n{}", s.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SysV IPC objects now, by kind (header lines dropped).
fn sysvipc() -> BTreeMap<&'static str, Vec<String>> {
    ["shm", "msg", "sem"]
        .into_iter()
        .map(|k| {
            let text = std::fs::read_to_string(format!("/proc/sysvipc/{k}")).unwrap_or_default();
            (k, text.lines().skip(1).map(str::to_string).collect())
        })
        .collect()
}

fn count_shm() -> usize {
    sysvipc()["shm"].len()
}

/// Wait until `cond` holds (polling), failing with `what` after `limit`.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Calls of `target` summed over every N of `case_name` (every row when None).
fn calls_of(run: &Value, target: &str, case_name: Option<&str>) -> u64 {
    run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["target"] == target)
        .filter(|r| case_name.is_none_or(|c| r["case_name"] == c))
        .map(|r| r["calls"].as_u64().unwrap())
        .sum()
}

fn ops_of(run: &Value, case_name: &str) -> u64 {
    run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["case_name"] == case_name)
        .map(|p| p["ops"].as_u64().unwrap())
        .sum()
}

fn counter(run: &Value, name: &str) -> u64 {
    run["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("counter {name} missing: {}", run["counters"]))
}

/// A temporary directory others (an unprivileged child) may enter and write.
fn world_writable_tmpdir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("tracer-rel-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// A mounted filesystem that is unmounted (lazily) when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(dir).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size},mode=0755").as_str()),
        )
        .unwrap_or_else(|e| {
            panic!(
                "precondition: cannot mount a tmpfs at {}: {e}",
                dir.display()
            )
        });
        Mount(dir.to_path_buf())
    }

    fn read_only_bind(dir: &Path) -> Mount {
        use nix::mount::MsFlags;
        std::fs::create_dir_all(dir).unwrap();
        nix::mount::mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
            .unwrap_or_else(|e| panic!("precondition: bind mount {}: {e}", dir.display()));
        let m = Mount(dir.to_path_buf());
        nix::mount::mount(
            None::<&str>,
            dir,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .unwrap_or_else(|e| panic!("precondition: remount {} read-only: {e}", dir.display()));
        m
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Free bytes on the filesystem holding `p`.
fn free_bytes(p: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(p).unwrap();
    s.blocks_available() as u64 * s.fragment_size() as u64
}

/// Fill the filesystem holding `dir` until about `leave` bytes are free.
fn fill_leaving(dir: &Path, leave: u64) -> PathBuf {
    let filler = dir.join("filler");
    let free = free_bytes(dir);
    assert!(free > leave, "precondition: only {free} bytes free");
    std::fs::write(&filler, vec![0u8; (free - leave) as usize]).unwrap();
    filler
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

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
    let r = run(
        tracer()
            .arg("report")
            .arg(&data)
            .args(["--no-flamegraphs", "-o"])
            .arg(&out),
        Duration::from_secs(120),
        "first report",
    );
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

// =============================================================================================
// 3. Signals and failures

/// The hidden temporary directory a writer creates next to `dest` while working.
fn partial_dir_exists(dest: &Path) -> bool {
    let name = dest.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(dest.parent().unwrap())
        .unwrap()
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!(".{name}.partial-"))
        })
}

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

/// Count processes of the workloads binary (the waitpid workload's idle children).
fn count_workloads_processes() -> usize {
    all_pids()
        .into_iter()
        .filter(|&p| proc_stat(p).is_some_and(|(c, _, _)| c == "workloads"))
        .count()
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
        let r = run(
            tracer()
                .arg("report")
                .arg(&out)
                .args(["--no-flamegraphs", "-o"])
                .arg(tmp.path().join("rep")),
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
    run(
        tracer()
            .arg("report")
            .arg(&data)
            .args(["--no-flamegraphs", "-o"])
            .arg(&out),
        Duration::from_secs(120),
        "old report",
    )
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
            run(
                tracer()
                    .arg("report")
                    .arg(FIXTURE)
                    .args(["--no-flamegraphs", "-o"])
                    .arg(&next),
                Duration::from_secs(60),
                "the next report",
            )
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

// =============================================================================================
// 4. Full kernel maps

#[test]
fn a_full_phase_map_is_counted_and_reported() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    // 4200 (case, N) phases: more than the 4096 the phase map holds.
    let what = "record of 4200 phases";
    let r = run(
        tracer()
            .args([
                "record",
                "--no-verify",
                "--no-samples",
                "--targets",
                "getpid",
                "-o",
            ])
            .arg(&out)
            .arg("--")
            .arg(workloads_bin())
            .args(["getpid", "--variant", "getpid-cached", "--n", "1..4200+1"])
            .args(["--iterations", "1", "--warmup", "0"]),
        Duration::from_secs(180),
        what,
    );
    r.expect(0, what).stderr_has("aggregate_map_full", what);
    let runj = read_json(&out.join("run.json"));
    let kept = runj["phases"].as_array().unwrap().len() as u64;
    assert!(
        kept < 4200,
        "precondition: the phase map must fill ({kept} kept)"
    );
    assert_eq!(
        counter(&runj, "aggregate_map_full"),
        4200 - kept,
        "every phase that did not fit is counted"
    );
    assert_nothing_loaded(what);

    // The report says the numbers are incomplete.
    let what = "report of a run whose maps filled";
    let rep = tmp.path().join("rep");
    let r = run(
        tracer()
            .arg("report")
            .arg(&out)
            .args(["--no-flamegraphs", "-o"])
            .arg(&rep),
        Duration::from_secs(120),
        what,
    );
    r.expect(0, what);
    let summary = std::fs::read_to_string(rep.join("summary.json")).unwrap();
    assert!(
        r.stderr.contains("aggregate_map_full") && summary.contains("aggregate_map_full"),
        "{what}: the warning must reach the user and summary.json:\n{}",
        r.stderr
    );
}

/// Environment variable that turns `helper_sysvipc_read_flood` on.
const HELPER_ENV: &str = "TRACER_RELIABILITY_HELPER";
/// Phases of the flood: each a distinct (case, N) key of its own.
const FLOOD_KEYS: u64 = 300;
/// Read sizes, in /proc/sysvipc/shm lines, so that each read takes a different time (a
/// read returns at most one page, ~25 lines, so all sizes stay below that).
const FLOOD_READS: [usize; 14] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 17, 20, 23, 26];
/// The aggregate rows the flood runs with: one for calls outside phases, the rest for the
/// first phases; the later phases find the table full.
const FLOOD_MAX_PHASES: u64 = 100;

/// SysV shm segments removed on drop.
struct ShmSegments(Vec<i32>);

impl ShmSegments {
    fn create(n: usize) -> ShmSegments {
        let mut ids = ShmSegments(Vec::new());
        for _ in 0..n {
            // SAFETY: plain syscall; the id is removed on drop.
            let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
            assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
            ids.0.push(id);
        }
        ids
    }
}

impl Drop for ShmSegments {
    fn drop(&mut self) {
        for &id in &self.0 {
            // SAFETY: removing our own segment.
            unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        }
    }
}

/// Not a test: the traced command of `a_full_phase_table_keeps_the_run`. Announces
/// `FLOOD_KEYS` phases through the workloads' phase markers (linked into this binary), one
/// after the other, and in each reads /proc/sysvipc/shm 14 times with different sizes.
#[test]
#[ignore = "helper process run under the tracer by a_full_phase_table_keeps_the_run"]
fn helper_sysvipc_read_flood() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let _segments = ShmSegments::create(300);
    let mut buf = vec![0u8; 1 << 17];
    let path = c"/proc/sysvipc/shm";
    let case = 20; // sysvipc-shm
    for n in 1..=FLOOD_KEYS {
        workloads::marker::tracer_phase_begin(case, n);
        // SAFETY: plain syscalls on our own fd and buffer.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
            assert!(fd >= 0);
            let line = 150;
            for lines in FLOOD_READS {
                libc::lseek(fd, 0, libc::SEEK_SET);
                libc::read(fd, buf.as_mut_ptr().cast(), (lines * line).min(buf.len()));
            }
            libc::close(fd);
        }
        workloads::marker::tracer_phase_end(case, n, FLOOD_READS.len() as u64);
    }
}

#[test]
fn a_full_phase_table_keeps_the_run() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    let ipc_before = sysvipc();
    let what = "record of more phases than --max-phases";
    let r = run(
        tracer()
            .args([
                "record",
                "--no-verify",
                "--no-samples",
                "--no-callers",
                "--no-offcpu",
            ])
            .args(["--max-phases", &FLOOD_MAX_PHASES.to_string()])
            .args(["--targets", "sysvipc_find_ipc", "-o"])
            .arg(&out)
            .arg("--")
            .arg(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "helper_sysvipc_read_flood"])
            .args(["--nocapture", "--test-threads=1"])
            .env(HELPER_ENV, "1"),
        Duration::from_secs(180),
        what,
    );
    assert_eq!(
        sysvipc(),
        ipc_before,
        "the helper's segments were not removed"
    );
    // A full table loses the later phases' calls, counted and warned about, not the run.
    r.expect(0, what)
        .stderr_has("aggregate_map_full", what)
        .stderr_has("raise --max-phases", what);
    let runj = read_json(&out.join("run.json"));
    let reads = FLOOD_READS.len() as u64;
    // Row 0 holds calls outside phases: the first FLOOD_MAX_PHASES - 1 phases got rows, in
    // order (one thread announces them), and every call of the others is counted as lost.
    let kept = FLOOD_MAX_PHASES - 1;
    assert_eq!(
        counter(&runj, "aggregate_map_full"),
        (FLOOD_KEYS - kept) * reads,
        "one lost call per read of a phase without a row"
    );
    let spans = runj["spans"].as_array().unwrap();
    let mut ns: Vec<u64> = spans
        .iter()
        .filter(|s| s["case_name"] == "sysvipc-shm")
        .map(|s| {
            assert_eq!(s["calls"].as_u64(), Some(reads), "{s}");
            s["n"].as_u64().unwrap()
        })
        .collect();
    ns.sort_unstable();
    assert_eq!(
        ns,
        (1..=kept).collect::<Vec<_>>(),
        "the phases that got rows"
    );
    // The phases themselves (markers, ops, wall time) are all kept: their map is separate.
    let phases = runj["phases"].as_array().unwrap();
    assert_eq!(
        phases
            .iter()
            .filter(|p| p["case_name"] == "sysvipc-shm")
            .count() as u64,
        FLOOD_KEYS,
        "phase rows"
    );
    let r = run(
        tracer()
            .arg("report")
            .arg(&out)
            .args(["--no-flamegraphs", "-o"])
            .arg(tmp.path().join("rep")),
        Duration::from_secs(120),
        "report of the flood",
    );
    r.expect(0, "report of the flood");
    assert_nothing_loaded(what);
}

// =============================================================================================
// 5. Soak

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The RSS of `pid` in KiB, once a second until it exits (or turns zombie) or `limit`.
fn rss_every_second(pid: u32, limit: Duration) -> Vec<u64> {
    let mut rss = Vec::new();
    let started = Instant::now();
    while let Some(kib) = vm_rss_kib(pid) {
        if proc_stat(pid).is_some_and(|(_, s, _)| s == 'Z') {
            break;
        }
        rss.push(kib);
        std::thread::sleep(Duration::from_secs(1));
        if started.elapsed() > limit {
            break;
        }
    }
    rss
}

/// At least `min_samples` RSS samples (and 4, for two quarters), and the last quarter's median within 10% + 4 MiB of
/// the first quarter's. The final seconds cover detaching and writing: only the steady
/// state is judged.
fn assert_rss_flat(mut rss: Vec<u64>, min_samples: u64, what: &str) {
    rss.truncate(rss.len().saturating_sub(2));
    assert!(
        rss.len() as u64 >= min_samples.max(4),
        "{what}: only {} RSS samples",
        rss.len()
    );
    let q = rss.len() / 4;
    let (first, last) = (median(&rss[..q]), median(&rss[rss.len() - q..]));
    assert!(
        last <= first + first / 10 + 4096,
        "{what}: tracer RSS grew from {first} KiB to {last} KiB: {rss:?}"
    );
}

fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn soak_memory_stays_flat_counts_stay_exact_and_no_map_fills() {
    let _g = serial();
    let secs = soak_secs();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    // A fork loop (unixbench spawn) at thousands of forks per second: new pids, threads and
    // followed processes all the time, with every default probe and stack kind on.
    let per_case = format!("{}", secs as f64 / 2.0);
    let child = spawn(
        tracer()
            .args(["record", "--no-verify", "-o"])
            .arg(&out)
            .arg("--")
            .arg(workloads_bin())
            .args(["spawn", "--variant", "spawn,spawn-wipeonfork", "--n", "1"])
            .args(["--min-time", &per_case]),
    );
    let pid = child.id();
    // Sample from when the workload runs (the tracer releases it once attached), after a
    // short settling: loading and attaching are not the steady state.
    wait_for(Duration::from_secs(60), "the workload to start", || {
        count_workloads_processes() > 0
    });
    std::thread::sleep(Duration::from_secs(2));
    let rss = rss_every_second(pid, Duration::from_secs(secs * 3 + 60));
    let r = finish(child, Duration::from_secs(120), "soak");
    r.expect(0, "soak");
    assert_rss_flat(rss, secs / 2, "soak");

    let runj = read_json(&out.join("run.json"));
    for case in ["spawn", "spawn-wipeonfork"] {
        let ops = ops_of(&runj, case);
        assert!(ops > 1000, "{case}: only {ops} forks");
        assert_eq!(
            calls_of(&runj, "dup_mmap", Some(case)),
            ops,
            "{case}: forks"
        );
        assert_eq!(calls_of(&runj, "do_wait", Some(case)), ops, "{case}: waits");
    }
    for c in [
        "aggregate_map_full",
        "thread_map_full",
        "unpaired_exits",
        "ringbuf_drops",
        "depth_overflow",
    ] {
        assert_eq!(counter(&runj, c), 0, "counter {c}");
    }
    assert_nothing_loaded("soak");
    assert_no_strays("soak");
}

/// The soak's length: `TRACER_SOAK_SECS` (default 60), at least 8 s.
fn soak_secs() -> u64 {
    std::env::var("TRACER_SOAK_SECS")
        .ok()
        .map(|s| s.parse().expect("TRACER_SOAK_SECS is a number of seconds"))
        .unwrap_or(60)
        .max(8)
}

/// `tests/c/NAME.c` compiled statically into `dir`.
fn c_bench(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let bin = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-static", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("precondition: a C compiler (cc) with a static libc is installed");
    assert!(st.success(), "compiling {}", src.display());
    bin
}

/// An external sweep under discover for the soak's length: a new process tree per
/// invocation (fork_vmas: N VMAs, then 50 forks), every one sampled whole, thousands of
/// processes in all. The tracer's memory must stay flat, no map may fill (a full stack
/// aggregate would show as stack errors on most samples), every invocation must be recorded,
/// and nothing may be left behind.
#[test]
fn soak_of_an_external_discover_sweep_keeps_memory_and_maps_flat() {
    let _g = serial();
    let secs = soak_secs();
    let tmp = tmpdir();
    let bench = c_bench("fork_vmas", tmp.path());
    // Repeats enough to last the soak, from the quickest of three untraced rounds of the N
    // list: a round slowed by a load spike (a build beside the test) once made the traced
    // sweep end after 17 s of a 60 s soak. Tracing only lengthens a round, so the soak lasts
    // at least `secs` (the sampling limits below leave room for it taking 4x as long).
    let ns = ["1", "100", "1000"];
    let round = (0..3)
        .map(|_| {
            let t0 = Instant::now();
            for n in ns {
                let st = Command::new(&bench).args([n, "50"]).status().unwrap();
                assert!(st.success(), "fork_vmas {n} 50 untraced");
            }
            t0.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
        .max(0.001);
    let repeat = ((secs as f64 / round) as u64).clamp(3, 5000);
    let out = tmp.path().join("sweep");
    let child = spawn(
        tracer()
            .args(["sweep", "--discover", "--confirm", "0", "--no-report"])
            .args(["--n", &ns.join(","), "--repeat", &repeat.to_string(), "-o"])
            .arg(&out)
            .arg("--")
            .arg(&bench)
            .args(["{n}", "50"]),
    );
    let pid = child.id();
    // Past loading and attaching: the steady state.
    std::thread::sleep(Duration::from_secs(3));
    let rss = rss_every_second(pid, Duration::from_secs(secs * 4 + 60));
    let r = finish(child, Duration::from_secs(300), "discover soak");
    r.expect(0, "discover soak");
    assert_rss_flat(rss, secs / 3, "discover soak");
    let runj = read_json(&out.join("fork_vmas/run.json"));
    let invocations = runj["invocations"].as_array().unwrap();
    assert_eq!(invocations.len() as u64, repeat * ns.len() as u64);
    assert!(
        invocations.iter().all(|i| i["exit"] == 0),
        "every invocation exited 0"
    );
    for c in [
        "aggregate_map_full",
        "thread_map_full",
        "ringbuf_drops",
        "depth_overflow",
    ] {
        assert_eq!(counter(&runj, c), 0, "counter {c}");
    }
    let samples = counter(&runj, "samples_total");
    let taken = counter(&runj, "stacks_taken");
    let lost = counter(&runj, "stack_errors");
    assert!(samples > 100 * secs / 10, "only {samples} samples");
    assert!(
        lost * 1000 <= taken,
        "{lost} of {taken} stacks lost: a stack store filled"
    );
    assert_nothing_loaded("discover soak");
    assert_no_strays("discover soak");
}

// =============================================================================================
// 6. Two tracers at once

#[test]
fn two_tracers_at_once_keep_their_own_exact_counts() {
    let _g = serial();
    let tmp = tmpdir();
    let targets = [
        "--targets",
        "getpid,dup_mmap,do_wait",
        "--no-verify",
        "--no-samples",
    ];
    let a_out = tmp.path().join("a");
    let b_out = tmp.path().join("b");
    // A: getpid calls, no forks in its phases. B: forks, no getpid calls in its phases.
    let a = spawn(
        tracer()
            .arg("record")
            .args(targets)
            .arg("-o")
            .arg(&a_out)
            .arg("--")
            .arg(workloads_bin())
            .args(getpid_syscall("1000,7000"))
            .args(["--min-time", "2"]),
    );
    let b = spawn(
        tracer()
            .arg("record")
            .args(targets)
            .arg("-o")
            .arg(&b_out)
            .arg("--")
            .arg(workloads_bin())
            .args(["spawn", "--variant", "spawn", "--n", "1,100"])
            .args(["--min-time", "2"]),
    );
    let ra = finish(a, Duration::from_secs(120), "tracer A");
    let rb = finish(b, Duration::from_secs(120), "tracer B");
    ra.expect(0, "tracer A");
    rb.expect(0, "tracer B");
    let ja = read_json(&a_out.join("run.json"));
    let jb = read_json(&b_out.join("run.json"));
    // They really ran at the same time.
    let span = |j: &Value| {
        let s = j["started_unix"].as_f64().unwrap();
        (s, s + j["duration_s"].as_f64().unwrap())
    };
    let ((a0, a1), (b0, b1)) = (span(&ja), span(&jb));
    assert!(
        a1.min(b1) - a0.max(b0) > 1.5,
        "precondition: the recordings overlapped only {:.1} s",
        a1.min(b1) - a0.max(b0)
    );
    let a_ops = ops_of(&ja, "getpid-syscall");
    assert!(a_ops > 10_000);
    assert_eq!(
        calls_of(&ja, "getpid", Some("getpid-syscall")),
        a_ops,
        "A: getpid"
    );
    assert_eq!(
        calls_of(&ja, "dup_mmap", Some("getpid-syscall")),
        0,
        "A saw forks"
    );
    assert_eq!(
        calls_of(&ja, "do_wait", Some("getpid-syscall")),
        0,
        "A saw waits"
    );
    let b_ops = ops_of(&jb, "spawn");
    assert!(b_ops > 100);
    assert_eq!(calls_of(&jb, "dup_mmap", Some("spawn")), b_ops, "B: forks");
    assert_eq!(calls_of(&jb, "do_wait", Some("spawn")), b_ops, "B: waits");
    assert_eq!(
        calls_of(&jb, "getpid", Some("spawn")),
        0,
        "B saw getpid calls"
    );
    // Neither saw the other's phases.
    for (j, foreign) in [(&ja, "spawn"), (&jb, "getpid-syscall")] {
        assert!(
            !j["phases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["case_name"] == foreign),
            "phases of the other tracer's workload leaked in"
        );
    }
    for j in [&ja, &jb] {
        for c in ["aggregate_map_full", "thread_map_full", "unpaired_exits"] {
            assert_eq!(counter(j, c), 0, "counter {c}");
        }
    }
    assert_nothing_loaded("two tracers");
    assert_no_strays("two tracers");
}

/// A sweep of one short workload into `out`.
fn short_sweep(workload: &str, out: &Path, min_time: &str) -> Command {
    let mut c = tracer();
    c.args([
        "sweep",
        workload,
        "--no-verify",
        "--no-samples",
        "--no-report",
    ])
    .args(["--n", "10,100", "-o"])
    .arg(out)
    .args(["--", "--min-time", min_time]);
    c
}

/// The output holds exactly the sweep of `workload`: its sweep.json, its run, nothing of the
/// other sweep's, no temporary.
fn assert_sweep_of(out: &Path, workload: &str, other: &str, what: &str) {
    let s = read_json(&out.join("sweep.json"));
    assert_eq!(s["status"], "complete", "{what}: {s}");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{what}: {s}");
    assert_eq!(runs[0]["workload"], workload, "{what}");
    assert_eq!(
        read_json(&out.join(workload).join("run.json"))["status"],
        "complete",
        "{what}"
    );
    assert!(
        !out.join(other).exists(),
        "{what}: the other sweep's run mixed in"
    );
    assert_no_temporaries(out.parent().unwrap(), what);
}

#[test]
fn two_sweeps_into_one_output_one_wins_the_other_exits_5() {
    let _g = serial();
    workloads_bin();
    let tmp = tmpdir();

    // One starts while the other is writing: it is refused at once, before attaching.
    let what = "a second sweep while the first is running";
    let out = tmp.path().join("staggered");
    let mut a = spawn(&mut short_sweep("getpid", &out, "2"));
    let a_pid = a.id();
    wait_for(Duration::from_secs(20), "the first sweep to start", || {
        partial_dir_exists(&out)
    });
    let started = Instant::now();
    let b = run(
        &mut short_sweep("spawn", &out, "2"),
        Duration::from_secs(120),
        what,
    );
    b.expect(5, what).stderr_has("another tracer", what);
    assert!(
        b.stderr.contains(&a_pid.to_string()),
        "{what}: the message should name the running tracer's pid {a_pid}:\n{}",
        b.stderr
    );
    assert!(
        a.try_wait().unwrap().is_none(),
        "{what}: the second sweep ran as long as the first ({:?})",
        started.elapsed()
    );
    finish(a, Duration::from_secs(120), "the first sweep").expect(0, "the first sweep");
    assert_sweep_of(&out, "getpid", "spawn", what);

    // Both start at the same moment: the later one is refused by the early check, or both
    // pass it and the atomic commit decides; either way one wins whole.
    let what = "two sweeps started together";
    let out = tmp.path().join("together");
    let a = spawn(&mut short_sweep("getpid", &out, "0.5"));
    let b = spawn(&mut short_sweep("spawn", &out, "0.5"));
    let ra = finish(a, Duration::from_secs(120), "sweep A");
    let rb = finish(b, Duration::from_secs(120), "sweep B");
    let (winner, loser, lost) = match (ra.code, rb.code) {
        (Some(0), Some(5)) => ("getpid", "spawn", &rb),
        (Some(5), Some(0)) => ("spawn", "getpid", &ra),
        _ => panic!(
            "{what}: exits {:?} and {:?}, want one 0 and one 5\nA:\n{}\nB:\n{}",
            ra.code, rb.code, ra.stderr, rb.stderr
        ),
    };
    assert_no_panic(&ra.stderr, what);
    assert_no_panic(&rb.stderr, what);
    assert!(
        lost.stderr.contains("already exists") || lost.stderr.contains("another tracer"),
        "{what}: the loser's message:\n{}",
        lost.stderr
    );
    assert_sweep_of(&out, winner, loser, what);
    assert_nothing_loaded(what);
    assert_no_strays(what);
}
