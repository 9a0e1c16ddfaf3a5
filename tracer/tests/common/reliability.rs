//! What the reliability tests (`reliability_*.rs`) share: the root check and the lock that
//! runs them one at a time, running the tracer with a time limit, and the checks that nothing
//! is left behind (programs loaded, temporaries, stray processes, SysV objects).
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::loaded_tracer_programs;

pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    assert!(
        nix::unistd::geteuid().is_root(),
        "reliability tests need root (run them with sudo or through `cargo xtask test`)"
    );
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A failed test must not make the next one fail for its leftovers.
    wait_until_nothing_loaded();
    g
}

pub const TRACER: &str = env!("CARGO_BIN_EXE_tracer");
pub const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sweep-5.10");

pub fn tracer() -> Command {
    let mut c = Command::new(TRACER);
    c.env("RUST_BACKTRACE", "1").stdin(Stdio::null());
    c
}

/// What a finished tracer run printed and returned.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Assert the exit code and that the tracer did not panic.
    pub fn expect(&self, code: i32, what: &str) -> &Ran {
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

    pub fn stderr_has(&self, needle: &str, what: &str) -> &Ran {
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
pub fn each_case<T>(cases: impl IntoIterator<Item = (String, T)>, mut f: impl FnMut(&str, T)) {
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

pub fn assert_no_panic(stderr: &str, what: &str) {
    for bad in ["panicked", "stack backtrace", "RUST_BACKTRACE"] {
        assert!(
            !stderr.contains(bad),
            "{what}: {bad:?} in stderr:\n{stderr}"
        );
    }
}

/// Collect a spawned child's output, killing it (and failing) after `limit`.
pub fn finish(mut child: std::process::Child, limit: Duration, what: &str) -> Ran {
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

pub fn run(cmd: &mut Command, limit: Duration, what: &str) -> Ran {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    finish(child, limit, what)
}

pub fn spawn(cmd: &mut Command) -> std::process::Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tracer")
}

/// Programs are freed once their last fd closes; allow the kernel a moment after exit.
pub fn wait_until_nothing_loaded() -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = loaded_tracer_programs();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn assert_nothing_loaded(what: &str) {
    let left = wait_until_nothing_loaded();
    assert!(left.is_empty(), "{what}: programs left loaded: {left:?}");
}

pub fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Every file and directory under `dir` with its content (None for directories).
pub fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    pub fn walk(root: &Path, p: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
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
pub fn restore(snap: &BTreeMap<String, Option<Vec<u8>>>, dir: &Path) {
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

pub fn assert_same_tree(before: &BTreeMap<String, Option<Vec<u8>>>, dir: &Path, what: &str) {
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
pub fn temporaries(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .into_keys()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap_or(k);
            name.contains(".partial-") || name.contains(".tmp-") || name.ends_with(".old")
        })
        .collect()
}

pub fn assert_no_temporaries(dir: &Path, what: &str) {
    let t = temporaries(dir);
    assert!(
        t.is_empty(),
        "{what}: temporary output left in {}: {t:?}",
        dir.display()
    );
}

/// /proc/<pid>/stat fields: (comm, state, ppid).
pub fn proc_stat(pid: u32) -> Option<(String, char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let mut rest = stat[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((comm, state, ppid))
}

pub fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// Processes (zombies included) of the workloads binary and of the tracer's calibration
/// children: none may outlive a tracer run.
pub fn stray_processes() -> Vec<String> {
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

pub fn assert_no_strays(what: &str) {
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

/// SysV IPC objects now, by kind (header lines dropped): this IPC namespace's, and those of
/// every other namespace a `workloads` process is in (the sysvipc workload makes one per
/// size where it may), read there through nsenter and tagged with the namespace.
pub fn sysvipc() -> BTreeMap<&'static str, Vec<String>> {
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/ipc")).ok();
    let own = ns("self");
    let mut others: BTreeMap<PathBuf, u32> = BTreeMap::new();
    for p in all_pids() {
        if proc_stat(p).is_some_and(|(c, _, _)| c == "workloads")
            && let Some(link) = ns(&p.to_string())
            && Some(&link) != own.as_ref()
        {
            others.entry(link).or_insert(p);
        }
    }
    ["shm", "msg", "sem"]
        .into_iter()
        .map(|k| {
            let file = format!("/proc/sysvipc/{k}");
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let mut lines: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
            for (link, pid) in &others {
                // A process gone meanwhile took its namespace with it: nothing to list.
                let out = Command::new("nsenter")
                    .arg(format!("--ipc=/proc/{pid}/ns/ipc"))
                    .args(["cat", &file])
                    .stderr(Stdio::null())
                    .output()
                    .expect("nsenter (util-linux) runs");
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                lines.extend(
                    text.lines()
                        .skip(1)
                        .map(|l| format!("{}: {l}", link.display())),
                );
            }
            (k, lines)
        })
        .collect()
}

pub fn count_shm() -> usize {
    sysvipc()["shm"].len()
}

/// Wait until `cond` holds (polling), failing with `what` after `limit`.
pub fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Calls of `target` summed over every N of `case_name` (every row when None).
pub fn calls_of(run: &Value, target: &str, case_name: Option<&str>) -> u64 {
    run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["target"] == target)
        .filter(|r| case_name.is_none_or(|c| r["case_name"] == c))
        .map(|r| r["calls"].as_u64().unwrap())
        .sum()
}

pub fn ops_of(run: &Value, case_name: &str) -> u64 {
    run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["case_name"] == case_name)
        .map(|p| p["ops"].as_u64().unwrap())
        .sum()
}

pub fn counter(run: &Value, name: &str) -> u64 {
    run["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("counter {name} missing: {}", run["counters"]))
}

/// A temporary directory others (an unprivileged child) may enter and write.
pub fn world_writable_tmpdir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("tracer-rel-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// A mounted filesystem that is unmounted (lazily) when dropped.
pub struct Mount(pub PathBuf);

impl Mount {
    pub fn tmpfs(dir: &Path, size: &str) -> Mount {
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

    pub fn read_only_bind(dir: &Path) -> Mount {
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
pub fn free_bytes(p: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(p).unwrap();
    s.blocks_available() as u64 * s.fragment_size() as u64
}

/// Fill the filesystem holding `dir` until about `leave` bytes are free.
pub fn fill_leaving(dir: &Path, leave: u64) -> PathBuf {
    let filler = dir.join("filler");
    let free = free_bytes(dir);
    assert!(free > leave, "precondition: only {free} bytes free");
    std::fs::write(&filler, vec![0u8; (free - leave) as usize]).unwrap();
    filler
}

pub fn copy_tree(from: &Path, to: &Path) {
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

/// The hidden temporary directory a writer creates next to `dest` while working.
pub fn partial_dir_exists(dest: &Path) -> bool {
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

/// Count processes of the workloads binary (the waitpid workload's idle children).
pub fn count_workloads_processes() -> usize {
    all_pids()
        .into_iter()
        .filter(|&p| proc_stat(p).is_some_and(|(c, _, _)| c == "workloads"))
        .count()
}

/// `tracer report DATA --no-flamegraphs -o OUT`, killed (and failing) after `limit`.
pub fn report_without_flamegraphs(
    data: impl AsRef<std::ffi::OsStr>,
    out: impl AsRef<std::ffi::OsStr>,
    limit: Duration,
    what: &str,
) -> Ran {
    run(
        tracer()
            .arg("report")
            .arg(data)
            .args(["--no-flamegraphs", "-o"])
            .arg(out),
        limit,
        what,
    )
}
