//! The VM runner against real Debian kernels under qemu (TCG). Each test boots at least
//! one VM, so they are `#[ignore]`d for plain `cargo test` and run by `cargo xtask test`
//! (one at a time: a VM already uses both cores).
//!
//! Every run must leave no qemu behind: each test checks the reaped pid.

use std::fs;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use xtask::guest::{self, GuestBinaries};
use xtask::kernel::Kernel;
use xtask::vm::{self, Flush, Transport, VmConfig, VmReport, VmStatus};

/// The guest binaries, built once per test process (a no-op when up to date).
fn guest() -> GuestBinaries {
    static GUEST: OnceLock<GuestBinaries> = OnceLock::new();
    GUEST
        .get_or_init(|| guest::build().expect("building the guest binaries"))
        .clone()
}

fn config<S: Into<std::ffi::OsString>>(
    kernel: Kernel,
    cmd: impl IntoIterator<Item = S>,
) -> VmConfig {
    VmConfig::new(kernel, cmd).guest(guest()).timeout_secs(180)
}

/// One run, whatever happens in it: for the tests that freeze the guest themselves.
fn run_once(cfg: &VmConfig) -> VmReport {
    let r = vm::run(cfg).expect("the VM should start");
    assert_qemu_gone(r.qemu_pid);
    r
}

/// Whether the guest stopped running by itself: its heartbeat went silent, before or after
/// the stop request. qemu's single-threaded TCG has frozen whole guests on this host (the
/// console silent from then on, no kernel message; see `common::boot`), once in about 300
/// boots here: one `a_timeout_brings_back_what_the_command_finished` run sat silent from
/// before its timeout, so even the stop request was never read.
fn froze(r: &VmReport) -> bool {
    matches!(r.status, VmStatus::Stalled { .. })
        || matches!(&r.flush, Some(Flush::Lost(why)) if why.contains("stopped running"))
}

/// A run of `cfg`, booted again (at most twice) when the guest froze by itself: qemu's
/// fault, not the runner's, which its own tests would otherwise report. Each retry is
/// logged like the other VM tests' (`xtask::bootlog`), so `cargo xtask test` counts it.
fn run(cfg: &VmConfig) -> VmReport {
    let mut r = run_once(cfg);
    let mut retried = Vec::new();
    while froze(&r) && retried.len() < 2 {
        let why = r.failure_message().unwrap_or_default();
        eprintln!("{why}; booting it once more");
        retried.push(why);
        r = run_once(cfg);
    }
    if !retried.is_empty() {
        xtask::bootlog::record(&xtask::bootlog::Entry {
            name: format!("runner-{}", cfg.kernel.version()),
            secs: r.elapsed.as_secs_f64(),
            retried,
        });
    }
    r
}

/// qemu was reaped by the runner: its pid is gone (or reused by something else).
fn assert_qemu_gone(pid: u32) {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert!(
        !comm.starts_with("qemu-system"),
        "qemu (pid {pid}) is still there after the run"
    );
}

fn exited(r: &VmReport) -> i32 {
    match r.status {
        VmStatus::Exited(s) => s,
        ref other => panic!(
            "expected a normal exit, got {other:?}: {:?}\nconsole:\n{}",
            r.failure_message(),
            r.console
        ),
    }
}

fn uname_reports(kernel: Kernel) {
    let r = run(&config(kernel, ["uname", "-r"]));
    assert_eq!(exited(&r), 0);
    let out = r.command_output.as_deref().expect("the command started");
    assert_eq!(out.trim(), r.kernel.release, "console: {}", r.console);
    assert!(
        out.starts_with(&format!("{}.", kernel.version())),
        "{kernel}: uname -r printed {out:?}"
    );
    eprintln!(
        "{kernel}: {} booted to the command in {:.1} s, exited after {:.1} s ({})",
        r.kernel.release,
        r.boot_time.unwrap().as_secs_f64(),
        r.elapsed.as_secs_f64(),
        r.accel
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn uname_on_5_10() {
    uname_reports(Kernel::V5_10);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn uname_on_6_1() {
    uname_reports(Kernel::V6_1);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn uname_on_6_12() {
    uname_reports(Kernel::V6_12);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn include_puts_host_files_at_the_same_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hello.txt");
    fs::write(&file, "included from the host\n").unwrap();
    let tree = dir.path().join("tree");
    fs::create_dir_all(tree.join("sub")).unwrap();
    fs::write(tree.join("sub/deep"), "deep\n").unwrap();
    let script = format!(
        "cat {} {}/sub/deep; test -x /bin/tracer && test -x /bin/workloads && echo bins-ok",
        file.display(),
        tree.display()
    );
    let r = run(&config(Kernel::V6_1, ["sh", "-c", &script])
        .include(&file)
        .include(&tree));
    assert_eq!(exited(&r), 0, "{}", r.console);
    assert_eq!(
        r.command_output.as_deref(),
        Some("included from the host\ndeep\nbins-ok\n")
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn nonzero_exit_status_comes_back() {
    let r = run(&config(Kernel::V6_1, ["sh", "-c", "echo bye; exit 7"]));
    assert_eq!(r.status, VmStatus::Exited(7));
    assert_eq!(r.exit_code(), 7);
    assert_eq!(r.command_output.as_deref(), Some("bye\n"));

    // A command that does not exist is 127, as in a shell.
    let r = run(&config(Kernel::V6_1, ["no-such-command"]));
    assert_eq!(r.status, VmStatus::Exited(127), "{}", r.console);
}

/// All 256 byte values and a few hundred KB of varied data.
fn binary_payload() -> Vec<u8> {
    let mut v: Vec<u8> = (0..=255u8).collect();
    let mut x: u32 = 0x1234_5678;
    while v.len() < 400_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push((x >> 11) as u8);
    }
    v
}

fn out_files_come_back(transport: Transport) -> VmReport {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("payload.bin");
    let payload = binary_payload();
    fs::write(&src, &payload).unwrap();
    let script = format!(
        "mkdir -p /out/sub && cp {} /out/sub/copy.bin && uname -r > /out/release \
         && printf 'no newline' > /out/sub/text && chmod 750 /out/sub/copy.bin",
        src.display()
    );
    let r = run(&config(Kernel::V6_1, ["sh", "-c", &script])
        .include(&src)
        .transport(transport));
    assert_eq!(exited(&r), 0, "{}", r.console);
    let got = fs::read(r.out_dir.join("sub/copy.bin")).unwrap();
    assert!(
        got == payload,
        "copy.bin differs from what went in ({} vs {} bytes)",
        got.len(),
        payload.len()
    );
    assert_eq!(
        fs::read_to_string(r.out_dir.join("release"))
            .unwrap()
            .trim(),
        r.kernel.release
    );
    assert_eq!(fs::read(r.out_dir.join("sub/text")).unwrap(), b"no newline");
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(r.out_dir.join("sub/copy.bin"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    let mut names: Vec<_> = r
        .out_files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["release", "sub", "sub/copy.bin", "sub/text"]);
    let (bytes, took) = r.out_send.expect("vm-init reports what it sent");
    assert!(bytes > payload.len() as u64);
    eprintln!(
        "{transport:?}: {bytes} bytes sent in {:.2} s ({:.2} MB/s guest side)",
        took.as_secs_f64(),
        bytes as f64 / took.as_secs_f64() / 1e6
    );
    r
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn out_files_come_back_byte_identical_over_the_disk() {
    out_files_come_back(Transport::Disk);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn out_files_come_back_byte_identical_over_the_serial_port() {
    out_files_come_back(Transport::Serial);
}

/// The environment the tracer depends on is there on the oldest kernel.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn guest_has_tracing_filesystems_mounted() {
    let r = run(&config(
        Kernel::V5_10,
        [
            "sh",
            "-c",
            "cat /proc/mounts > /out/mounts; echo $PATH $KPT_VM_OUT; echo $FOO",
        ],
    )
    .env("FOO", "bar baz"));
    assert_eq!(exited(&r), 0, "{}", r.console);
    let mounts = fs::read_to_string(r.out_dir.join("mounts")).unwrap();
    for (fs_type, at) in [
        ("proc", "/proc"),
        ("sysfs", "/sys"),
        ("devtmpfs", "/dev"),
        ("tracefs", "/sys/kernel/tracing"),
        ("debugfs", "/sys/kernel/debug"),
        ("bpf", "/sys/fs/bpf"),
        ("cgroup2", "/sys/fs/cgroup"),
        ("tmpfs", "/tmp"),
        ("tmpfs", "/out"),
    ] {
        assert!(
            mounts.lines().any(|l| {
                let f: Vec<_> = l.split_whitespace().collect();
                f.get(1) == Some(&at) && f.get(2) == Some(&fs_type)
            }),
            "{fs_type} not mounted on {at}:\n{mounts}"
        );
    }
    assert_eq!(
        r.command_output.as_deref(),
        Some("/bin:/sbin:/usr/bin:/usr/sbin /out\nbar baz\n")
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn kernel_panic_ends_the_run_with_the_panic_error() {
    let timeout = Duration::from_secs(120);
    let r = run(&config(
        Kernel::V6_1,
        ["sh", "-c", "echo c > /proc/sysrq-trigger; sleep 1000"],
    )
    .timeout_secs(timeout.as_secs()));
    match &r.status {
        VmStatus::KernelPanic { message } => assert!(message.contains("Kernel panic"), "{message}"),
        other => panic!("expected a kernel panic, got {other:?}\n{}", r.console),
    }
    assert_eq!(r.exit_code(), vm::exit_code::KERNEL_PANIC);
    // From qemu's start: the wait for a VM slot before it is no part of the run.
    assert!(
        r.elapsed < timeout,
        "the panic was only noticed at the timeout"
    );
    assert!(r.failure_message().unwrap().contains("kernel panic"));
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn hang_ends_the_run_with_the_timeout_error() {
    let r = run(&config(Kernel::V6_1, ["sleep", "100000"])
        .timeout_secs(30)
        .idle(true));
    assert_eq!(
        r.status,
        VmStatus::Timeout {
            after: Duration::from_secs(30)
        }
    );
    assert_eq!(r.exit_code(), vm::exit_code::TIMEOUT);
    assert!(
        r.elapsed >= Duration::from_secs(30) && r.elapsed < Duration::from_secs(40),
        "ended after {:?}",
        r.elapsed
    );
    assert!(r.failure_message().unwrap().contains("hung"));
}

/// A guest script that publishes one finished result the way the tracer publishes a sweep
/// (built under a hidden name, renamed into place), leaves a result in progress under a
/// hidden name and a log open for writing, then runs `then` (which must not end).
fn script_with_one_finished_result(payload: &std::path::Path, then: &str) -> String {
    format!(
        "mkdir /out/.result.partial-1 && cp {} /out/.result.partial-1/payload.bin \
         && echo '{{\"status\":\"complete\"}}' > /out/.result.partial-1/sweep.json \
         && mv /out/.result.partial-1 /out/result \
         && mkdir /out/.next.partial-2 && echo half > /out/.next.partial-2/payload.bin \
         && exec 3>/out/log && echo started >&3 && {{ {then}; }}",
        payload.display()
    )
}

fn paths(v: &[&str]) -> Vec<std::path::PathBuf> {
    v.iter().map(std::path::PathBuf::from).collect()
}

/// A command still running at the timeout is stopped, and what it had finished comes back
/// byte-identical and reported complete; what it was in the middle of comes back reported
/// incomplete. This one ignores SIGTERM, so it is killed after the grace period.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn a_timeout_brings_back_what_the_command_finished() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("payload.bin");
    let payload = binary_payload();
    fs::write(&src, &payload).unwrap();
    let timeout = Duration::from_secs(35);
    let script = script_with_one_finished_result(&src, "trap '' TERM; sleep 100000");
    let r = run(&config(Kernel::V6_1, ["sh", "-c", &script])
        .include(&src)
        .timeout_secs(timeout.as_secs())
        .stop_grace_secs(3)
        .idle(true));
    assert_eq!(
        r.status,
        VmStatus::Timeout { after: timeout },
        "{}",
        r.console
    );
    assert_eq!(r.exit_code(), vm::exit_code::TIMEOUT);
    assert_eq!(
        r.flush,
        Some(Flush::Sent {
            complete: paths(&["result"]),
            incomplete: paths(&[".next.partial-2", "log"]),
            command_status: 128 + 9,
            killed: true,
        }),
        "{}",
        r.console
    );
    let got = fs::read(r.out_dir.join("result/payload.bin")).unwrap();
    assert!(
        got == payload,
        "result/payload.bin differs from what went in"
    );
    assert_eq!(
        fs::read_to_string(r.out_dir.join("result/sweep.json")).unwrap(),
        "{\"status\":\"complete\"}\n"
    );
    assert_eq!(
        fs::read_to_string(r.out_dir.join("log")).unwrap(),
        "started\n"
    );
    let mut names: Vec<_> = r
        .out_files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".next.partial-2",
            ".next.partial-2/payload.bin",
            "log",
            "result",
            "result/payload.bin",
            "result/sweep.json"
        ]
    );
    let msg = r.failure_message().unwrap();
    assert!(msg.contains("hung"), "{msg}");
    assert!(msg.contains("1 complete (result)"), "{msg}");
    // The grace period and a few seconds to send, not the flush limit.
    assert!(
        r.elapsed < timeout + Duration::from_secs(15),
        "ended after {:?}",
        r.elapsed
    );
}

/// A guest that can no longer run cannot send its files: the runner gives up after the
/// flush limit and says nothing came back. The guest is frozen by stopping qemu.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn a_frozen_guest_at_the_timeout_brings_nothing_back_after_the_flush_limit() {
    let token = freeze_token();
    let timeout = Duration::from_secs(30);
    let cfg = config(
        Kernel::V6_1,
        ["sh", "-c", "echo x > /out/x; echo freeze-now; sleep 100000"],
    )
    .timeout_secs(timeout.as_secs())
    .stall_after_secs(300)
    .flush_timeout_secs(8)
    .idle(true)
    .extra_cmdline(token.clone())
    .on_line(move |line| {
        if line.contains("freeze-now") {
            freeze(&token);
        }
    });
    let r = run_once(&cfg);
    assert_eq!(
        r.status,
        VmStatus::Timeout { after: timeout },
        "{}",
        r.console
    );
    match &r.flush {
        Some(Flush::Lost(why)) => assert!(
            why.contains("had not sent them 8 s after the stop request"),
            "{why}"
        ),
        other => panic!("expected nothing back, got {other:?}\n{}", r.console),
    }
    assert!(r.out_files.is_empty(), "{:?}", r.out_files);
    assert!(
        r.elapsed >= timeout + Duration::from_secs(8)
            && r.elapsed < timeout + Duration::from_secs(14),
        "ended after {:?}",
        r.elapsed
    );
    assert!(
        r.failure_message()
            .unwrap()
            .contains("nothing came back from /out")
    );
}

/// A guest that stops running altogether (qemu TCG has frozen whole guests on this host, the
/// console silent until the timeout) ends the run as soon as its heartbeat has been silent
/// for the stall limit, long before the timeout. Here the guest is frozen by stopping qemu
/// once the command says so; a guest that only sleeps keeps beating (the test above).
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn a_frozen_guest_ends_the_run_as_stalled_long_before_the_timeout() {
    let token = freeze_token();
    let cfg = config(
        Kernel::V6_1,
        ["sh", "-c", "sleep 12; echo freeze-now; sleep 100000"],
    )
    .timeout_secs(400)
    .stall_after_secs(15)
    .idle(true)
    .extra_cmdline(token.clone())
    .on_line(move |line| {
        if line.contains("freeze-now") {
            freeze(&token);
        }
    });
    let r = run_once(&cfg);
    let VmStatus::Stalled { after, silent } = r.status else {
        panic!("expected a stall, got {:?}\n{}", r.status, r.console);
    };
    assert!(
        silent > Duration::from_secs(15) && silent < Duration::from_secs(25),
        "silent for {silent:?}"
    );
    assert!(after < Duration::from_secs(200), "stalled after {after:?}");
    assert!(
        r.elapsed < Duration::from_secs(200),
        "ended after {:?}",
        r.elapsed
    );
    assert_eq!(r.exit_code(), vm::exit_code::TIMEOUT);
    assert!(r.failure_message().unwrap().contains("no heartbeat"));
}

/// A word for one run's kernel command line: [`freeze`] finds that
/// run's qemu by it. The tests of this binary run at once in one process, so "every qemu
/// child" would freeze the others' guests too (one such stop failed a timeout test's flush
/// as a frozen guest).
fn freeze_token() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!(
        "xtask_freeze={}.{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Stop (SIGSTOP) the qemu child of this process whose command line holds `token`.
fn freeze(token: &str) {
    let mine: Vec<u32> = children_named(std::process::id(), "qemu")
        .into_iter()
        .filter(|p| {
            fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| contains(a, token.as_bytes())))
        })
        .collect();
    assert_eq!(mine.len(), 1, "one qemu with {token}: {mine:?}");
    // SAFETY: a signal to a child process of this test.
    unsafe { libc::kill(mine[0] as libc::pid_t, libc::SIGSTOP) };
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Children of `pid` whose command name starts with `prefix`.
fn children_named(pid: u32, prefix: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Fields after the ")" that ends the command name: state, ppid, ...
        let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
            continue;
        };
        let ppid: u32 = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let comm = fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        if ppid == pid && comm.starts_with(prefix) {
            found.push(p);
        }
    }
    found
}

fn xtask_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.args(["vm", "--no-build", "--kernel"]);
    c
}

/// The command line as the README shows it: the command's stdout and status pass
/// through, and nothing but the command's output reaches stdout.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn cli_prints_the_command_output_and_returns_its_status() {
    guest();
    let out = xtask_bin()
        .args(["6.1", "--", "uname", "-r"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("6.1."), "stdout: {stdout:?}");
    assert!(!stdout.contains("KPT-VM"), "a marker leaked: {stdout:?}");

    let st = xtask_bin()
        .args(["6.1", "--", "sh", "-c", "exit 7"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(7));
}

/// Reads the runner's output until its guest command said "up"; returns its one qemu's pid
/// and the rest of the output.
fn qemu_once_up(child: &mut std::process::Child) -> (u32, std::process::ChildStdout) {
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("up") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "runner ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    let qemus = children_named(child.id(), "qemu-system");
    assert_eq!(qemus.len(), 1, "expected one qemu child");
    (qemus[0], stdout)
}

/// Starts `xtask vm` with a command that never ends; returns it once the command runs,
/// with its qemu's pid.
fn start_runner_with_sleeping_guest() -> (std::process::Child, u32) {
    guest();
    let mut child = xtask_bin()
        .args(["6.1", "--", "sh", "-c", "echo up; sleep 1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (qemu, _) = qemu_once_up(&mut child);
    (child, qemu)
}

/// A runner killed outright (no chance to clean up) still takes qemu down with it,
/// through PR_SET_PDEATHSIG.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn cli_sigkill_takes_qemu_down() {
    let (mut child, qemu) = start_runner_with_sleeping_guest();
    child.kill().unwrap();
    child.wait().unwrap();
    // qemu is now an orphan; whoever adopts it may reap it late, so "dead" means gone
    // or a zombie.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = fs::read_to_string(format!("/proc/{qemu}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|x| x.1.trim().chars().next().unwrap_or('?'))
            });
        match state {
            None | Some('Z') | Some('X') => break,
            Some(s) => assert!(
                Instant::now() < deadline,
                "qemu {qemu} still running (state {s})"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERM to the runner ends the VM: qemu is killed and reaped, exit status 130.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn cli_sigterm_kills_qemu() {
    let (mut child, qemu) = start_runner_with_sleeping_guest();
    // SAFETY: signalling our own child by pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(vm::exit_code::INTERRUPTED));
    assert_qemu_gone(qemu);
}

/// SIGINT to `cargo xtask vm` while the command runs: the command is stopped and what it had
/// finished comes back, byte-identical, the status is 130 and stderr names the complete
/// parts. A process of the command that takes 3 s to finish up after SIGTERM (as the tracer
/// does, writing an interrupted sweep out) gets that time, though the shell that started it
/// died at once; what it writes then comes back as incomplete.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn cli_sigint_brings_back_what_the_command_finished() {
    guest();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("payload.bin");
    let payload = binary_payload();
    fs::write(&src, &payload).unwrap();
    let out = dir.path().join("out");
    let finishing_up = "(trap 'sleep 3; echo bye > /out/late; exit 0' TERM; echo up; \
                        while :; do sleep 1; done) & sleep 1000";
    let script = script_with_one_finished_result(&src, finishing_up);
    let mut child = xtask_bin()
        .args(["6.1", "--include", src.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap(), "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (qemu, mut stdout) = qemu_once_up(&mut child);
    let asked = Instant::now();
    // SAFETY: signalling our own child by pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let _ = stdout.read_to_end(&mut Vec::new());
    let st = child.wait().unwrap();
    let stderr = stderr_reader.join().unwrap();
    assert_eq!(st.code(), Some(vm::exit_code::INTERRUPTED), "{stderr}");
    assert_qemu_gone(qemu);
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "the runner took {:?} to stop",
        asked.elapsed()
    );
    let got = fs::read(out.join("result/payload.bin")).unwrap();
    assert!(
        got == payload,
        "result/payload.bin differs from what went in"
    );
    assert!(
        stderr.contains("interrupted; the command was stopped (SIGTERM, status 143)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 complete (result), 3 incomplete (.next.partial-2, late, log)"),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(out.join("late")).unwrap(), "bye\n");
}
