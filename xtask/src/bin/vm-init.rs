//! `/init` of the test VMs: PID 1 inside the guest.
//!
//! It mounts the pseudo-filesystems the tracer needs, runs the command the host put in
//! the initramfs (see `xtask::protocol`), reaps every process as PID 1 must, sends the
//! files under `/out` to the host (over the raw NVMe output disk, or the second serial
//! port), prints the exit marker on the console and powers the VM off.
//!
//! A thread reads the console's input meanwhile: when the host cuts the run short (its
//! timeout, an interrupt) it writes a stop request there. Then every process is frozen, the
//! state of `/out` recorded, the command gets SIGTERM and, after the request's grace period,
//! SIGKILL; `/out` is sent as usual with the entries that were complete at the stop (the
//! rule: `xtask::vm::complete`).
//!
//! Built as a static musl binary. If PID 1 exits the kernel panics, so every failure
//! path ends in a message plus an orderly power-off instead.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use xtask::outstream::Encoder;
use xtask::protocol;
use xtask::vm::complete::{self, AtStop, Tree};

fn main() {
    let nonce = fs::read_to_string(protocol::NONCE_PATH)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "missing-nonce".into());
    let (status, sent) = match std::panic::catch_unwind(|| run(&nonce)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("vm-init: internal error (panic); reporting failure");
            (protocol::INIT_FAILURE_STATUS, None)
        }
    };
    // SAFETY: plain syscall wrappers without pointers.
    unsafe { libc::sync() };
    // The leading newline makes the marker start a line even if the command's last
    // output line was unterminated; the host drops that one blank line again.
    let mut out = io::stdout().lock();
    let _ = write!(out, "\n{}\n", protocol::exit_marker(&nonce, status));
    // After the marker: recorded by the host, not shown.
    if let Some((bytes, took)) = sent {
        let _ = writeln!(
            out,
            "{}",
            protocol::send_stats_line(bytes, took.as_micros() as u64)
        );
    }
    let _ = out.flush();
    drop(out);
    power_off();
}

/// Returns the command's status and, if /out was sent, (bytes sent, time taken).
fn run(nonce: &str) -> (i32, Option<(u64, Duration)>) {
    mount_all();
    ensure_console_fds();
    if !serial_transport() {
        start_heartbeat();
    }
    // Before the start marker: the host sends requests only after it.
    watch_console(nonce);

    let argv = match fs::read(protocol::ARGV_PATH) {
        Ok(a) => protocol::decode_nul_list(&a),
        Err(e) => {
            eprintln!("vm-init: cannot read {}: {e}", protocol::ARGV_PATH);
            return (protocol::INIT_FAILURE_STATUS, None);
        }
    };
    let Some((prog, args)) = argv.split_first() else {
        eprintln!("vm-init: empty command");
        return (protocol::INIT_FAILURE_STATUS, None);
    };
    let extra_env = fs::read(protocol::ENV_PATH)
        .map(|e| protocol::decode_nul_list(&e))
        .unwrap_or_default();

    let mut cmd = Command::new(OsString::from_vec(prog.clone()));
    cmd.args(args.iter().map(|a| OsString::from_vec(a.clone())))
        .env_clear()
        .env("PATH", protocol::GUEST_PATH)
        .env("HOME", "/root")
        .env("TERM", "dumb")
        .env("KPT_VM_OUT", protocol::OUT_DIR)
        .current_dir("/")
        .stdin(Stdio::null());
    for kv in &extra_env {
        if let Some(eq) = kv.iter().position(|&b| b == b'=') {
            cmd.env(
                OsString::from_vec(kv[..eq].to_vec()),
                OsString::from_vec(kv[eq + 1..].to_vec()),
            );
        }
    }
    // The command gets its own session so it cannot signal init's process group, and
    // SIGPIPE etc. start at their defaults (Rust ignores SIGPIPE in its own process).
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            Ok(())
        });
    }

    {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "{}", protocol::start_marker(nonce));
        let _ = out.flush();
    }
    let status = match cmd.spawn() {
        Ok(child) => wait_for(child.id() as libc::pid_t),
        Err(e) => {
            let name = String::from_utf8_lossy(prog);
            match e.kind() {
                io::ErrorKind::NotFound => {
                    eprintln!("vm-init: {name}: command not found");
                    127
                }
                io::ErrorKind::PermissionDenied => {
                    eprintln!("vm-init: {name}: permission denied");
                    126
                }
                _ => {
                    eprintln!("vm-init: {name}: cannot run: {e}");
                    protocol::INIT_FAILURE_STATUS
                }
            }
        }
    };
    let stop = command_ended().map(Stop::outlive_grace);
    stop_everything_else();
    let report = stop.map(|s| s.report());
    let t = Instant::now();
    match send_out(status, report.as_ref()) {
        Ok(bytes) => (status, Some((bytes, t.elapsed()))),
        Err(e) => {
            eprintln!(
                "vm-init: sending {} to the host failed: {e}",
                protocol::OUT_DIR
            );
            (status, None)
        }
    }
}

/// Mounts are best-effort: a kernel without, say, tracefs still runs the command, and
/// the warning on the console explains a later failure.
fn mount_all() {
    const NOSUID: libc::c_ulong = libc::MS_NOSUID;
    const NODEV: libc::c_ulong = libc::MS_NODEV;
    const NOEXEC: libc::c_ulong = libc::MS_NOEXEC;
    let mounts: &[(&str, &str, &str, libc::c_ulong, &str)] = &[
        ("proc", "/proc", "proc", NOSUID | NODEV | NOEXEC, ""),
        ("sysfs", "/sys", "sysfs", NOSUID | NODEV | NOEXEC, ""),
        ("devtmpfs", "/dev", "devtmpfs", NOSUID, "mode=0755"),
        (
            "devpts",
            "/dev/pts",
            "devpts",
            NOSUID | NOEXEC,
            "ptmxmode=0666",
        ),
        ("tmpfs", "/dev/shm", "tmpfs", NOSUID | NODEV, "mode=1777"),
        (
            "tracefs",
            "/sys/kernel/tracing",
            "tracefs",
            NOSUID | NODEV | NOEXEC,
            "",
        ),
        (
            "debugfs",
            "/sys/kernel/debug",
            "debugfs",
            NOSUID | NODEV | NOEXEC,
            "",
        ),
        (
            "bpf",
            "/sys/fs/bpf",
            "bpf",
            NOSUID | NODEV | NOEXEC,
            "mode=0700",
        ),
        (
            "cgroup2",
            "/sys/fs/cgroup",
            "cgroup2",
            NOSUID | NODEV | NOEXEC,
            "",
        ),
        ("tmpfs", "/tmp", "tmpfs", NOSUID | NODEV, "mode=1777"),
        ("tmpfs", "/run", "tmpfs", NOSUID | NODEV, "mode=0755"),
        (
            "tmpfs",
            protocol::OUT_DIR,
            "tmpfs",
            NOSUID | NODEV,
            "mode=0755",
        ),
    ];
    for &(src, target, fstype, flags, data) in mounts {
        let _ = fs::create_dir_all(target);
        let r = if fstype == "tmpfs" {
            mount_tmpfs_keeping_contents(target, flags, data)
        } else {
            mount(src, target, fstype, flags, data)
        };
        if let Err(e) = r {
            eprintln!("vm-init: warning: mount {fstype} on {target}: {e}");
        }
    }
}

/// A tmpfs mounted over a directory would hide what the initramfs put there (an
/// `--include` of a host /tmp path, say). So: mount it on a staging directory, copy the
/// old contents in, and move the mount into place.
fn mount_tmpfs_keeping_contents(target: &str, flags: libc::c_ulong, data: &str) -> io::Result<()> {
    let empty = fs::read_dir(target)?.next().is_none();
    if empty {
        return mount("tmpfs", target, "tmpfs", flags, data);
    }
    let staging = "/.vm-init-staging";
    fs::create_dir_all(staging)?;
    mount("tmpfs", staging, "tmpfs", flags, data)?;
    copy_tree(Path::new(target), Path::new(staging))?;
    // The originals would only waste memory under the mount.
    for e in fs::read_dir(target)? {
        let p = e?.path();
        let _ = if p.is_dir() && !p.is_symlink() {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
    }
    mount(staging, target, "", libc::MS_MOVE, "")?;
    let _ = fs::remove_dir(staging);
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    for e in fs::read_dir(from)? {
        let e = e?;
        let src = e.path();
        let dst = to.join(e.file_name());
        let meta = fs::symlink_metadata(&src)?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            fs::create_dir(&dst)?;
            copy_tree(&src, &dst)?;
            fs::set_permissions(&dst, meta.permissions())?;
        } else {
            // fs::copy keeps the permission bits.
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn mount(
    src: &str,
    target: &str,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in mount arguments");
    let (src, target, fstype, data) = (c(src), c(target), c(fstype), c(data));
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The kernel opens /dev/console as fds 0-2 for init only if the node exists in the
/// initramfs; if it did not, reopen it now that devtmpfs is mounted.
fn ensure_console_fds() {
    // SAFETY: fcntl/open/dup2 on small integer fds, no memory involved.
    unsafe {
        if libc::fcntl(1, libc::F_GETFD) != -1 {
            return;
        }
        let fd = libc::open(c"/dev/console".as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        if fd < 0 {
            return;
        }
        for target in 0..3 {
            libc::dup2(fd, target);
        }
        if fd > 2 {
            libc::close(fd);
        }
    }
}

/// Waits for `pid`, reaping every other child that exits meanwhile (orphans are
/// re-parented to PID 1). Returns a shell-style status: the exit code, or 128 + signal.
fn wait_for(pid: libc::pid_t) -> i32 {
    loop {
        let mut st = 0;
        // SAFETY: st is a valid out-pointer.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == -1 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            eprintln!("vm-init: waitpid: {e}");
            return protocol::INIT_FAILURE_STATUS;
        }
        if r != pid {
            continue;
        }
        if libc::WIFEXITED(st) {
            return libc::WEXITSTATUS(st);
        }
        if libc::WIFSIGNALED(st) {
            let sig = libc::WTERMSIG(st);
            eprintln!("vm-init: command killed by signal {sig}");
            return 128 + sig;
        }
    }
}

/// Background processes the command left behind could still be writing to /out; stop
/// them (TERM, a short grace period, then KILL) and reap them before sending.
fn stop_everything_else() {
    // SAFETY: kill(-1) signals every process but init itself; waitpid with an out-pointer.
    unsafe {
        if libc::kill(-1, libc::SIGTERM) == -1 {
            return; // ESRCH: nothing else is running.
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut st = 0;
        while Instant::now() < deadline {
            match libc::waitpid(-1, &mut st, libc::WNOHANG) {
                -1 => return, // ECHILD: all gone
                0 => std::thread::sleep(Duration::from_millis(20)),
                _ => {}
            }
        }
        libc::kill(-1, libc::SIGKILL);
        while libc::waitpid(-1, &mut st, 0) > 0 {}
    }
}

/// Where the command stands with respect to a stop request.
enum StopState {
    Running,
    /// The host asked to stop; /out as the stop found it (or why it could not be read),
    /// and when the grace period ends.
    Stopping {
        at_stop: Result<AtStop, String>,
        grace_ends: Instant,
        killed: bool,
    },
    /// The command ended (by itself or stopped); later requests are ignored.
    Ended,
}

static STOP: Mutex<StopState> = Mutex::new(StopState::Running);

fn stop_state() -> std::sync::MutexGuard<'static, StopState> {
    STOP.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a stopped command left: taken once the command ended.
struct Stop {
    at_stop: Result<AtStop, String>,
    grace_ends: Instant,
    killed: bool,
}

/// The stop report that goes into the stream.
struct StopReport {
    killed: bool,
    complete: Vec<std::path::PathBuf>,
}

impl Stop {
    /// The command's other processes (a tracer still writing its partial output after the
    /// shell that started it died of SIGTERM) get the rest of the grace period too: reaps
    /// until none is left, SIGKILLs what is still there when the period ends.
    fn outlive_grace(mut self) -> Stop {
        loop {
            let mut st = 0;
            // SAFETY: st is a valid out-pointer.
            match unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) } {
                -1 if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
                -1 => return self, // ECHILD: nothing left
                0 if Instant::now() >= self.grace_ends => break,
                0 => std::thread::sleep(Duration::from_millis(20)),
                _ => {}
            }
        }
        eprintln!("vm-init: processes of the command outlived the grace period; killing them");
        self.killed = true;
        // SAFETY: kill(-1) signals every process but init itself; waitpid as above.
        unsafe {
            libc::kill(-1, libc::SIGKILL);
            let mut st = 0;
            while libc::waitpid(-1, &mut st, 0) > 0 {}
        }
        self
    }

    /// Call once nothing runs any more: compares /out with what the stop found.
    fn report(self) -> StopReport {
        let after = Tree::capture(Path::new(protocol::OUT_DIR)).map_err(|e| e.to_string());
        let complete = match (self.at_stop, after) {
            (Ok(at_stop), Ok(after)) => complete::complete_entries(&at_stop, &after),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!(
                    "vm-init: cannot tell which {} entries are complete ({e}); reporting none",
                    protocol::OUT_DIR
                );
                Vec::new()
            }
        };
        StopReport {
            killed: self.killed,
            complete,
        }
    }
}

/// Called when the command has been reaped: ends the watch for stop requests and returns
/// the stop, if the command was stopped.
fn command_ended() -> Option<Stop> {
    let mut st = stop_state();
    match std::mem::replace(&mut *st, StopState::Ended) {
        StopState::Stopping {
            at_stop,
            grace_ends,
            killed,
        } => Some(Stop {
            at_stop,
            grace_ends,
            killed,
        }),
        _ => None,
    }
}

/// Reads the console's input on a thread; a stop request with this run's nonce stops the
/// command. The console stops echoing input (a request would show up as console output)
/// and stops interpreting it (no signal keys, no line editing, no flow control).
fn watch_console(nonce: &str) {
    let console = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY)
        .open(protocol::CONSOLE_IN)
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "vm-init: warning: cannot read {} ({e}): a run cut short will bring nothing back",
                protocol::CONSOLE_IN
            );
            return;
        }
    };
    if let Err(e) = quiet_input(&console) {
        eprintln!(
            "vm-init: warning: cannot configure {}: {e}",
            protocol::CONSOLE_IN
        );
    }
    let nonce = nonce.to_string();
    std::thread::spawn(move || {
        let mut console = console;
        let mut line = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            let n = match io::Read::read(&mut console, &mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            for &b in &buf[..n] {
                if b != b'\n' {
                    // Requests are short; anything longer is not one.
                    if line.len() < 256 {
                        line.push(b);
                    }
                    continue;
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                if let Some(grace) = protocol::parse_stop_request(&text, &nonce) {
                    stop_command(Duration::from_secs(grace));
                }
            }
        }
    });
}

/// No echo, no line discipline on the console's input; output is left as it is.
fn quiet_input(tty: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            return Err(io::Error::last_os_error());
        }
        t.c_lflag &= !(libc::ECHO | libc::ECHONL | libc::ICANON | libc::ISIG | libc::IEXTEN);
        t.c_iflag &= !(libc::IXON | libc::IXOFF | libc::ICRNL | libc::INLCR | libc::IGNCR);
        t.c_cc[libc::VMIN] = 1;
        t.c_cc[libc::VTIME] = 0;
        if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The host's stop request: freeze every process, record /out, then SIGTERM and, if the
/// command is still there after `grace`, SIGKILL to everything. The main thread reaps the
/// command as usual, gives its other processes the rest of the grace period
/// ([`Stop::outlive_grace`]) and sends /out.
fn stop_command(grace: Duration) {
    let grace_ends;
    {
        let mut st = stop_state();
        if !matches!(*st, StopState::Running) {
            return;
        }
        // SAFETY: kill(-1) signals every process but init itself.
        unsafe { libc::kill(-1, libc::SIGSTOP) };
        if !wait_until_all_stopped(Duration::from_secs(2)) {
            eprintln!("vm-init: warning: not every process stopped within 2 s");
        }
        let at_stop = AtStop::capture(Path::new(protocol::OUT_DIR)).map_err(|e| e.to_string());
        grace_ends = Instant::now() + grace;
        *st = StopState::Stopping {
            at_stop,
            grace_ends,
            killed: false,
        };
        eprintln!(
            "vm-init: the host cut the run short: stopping the command (SIGTERM, SIGKILL after {} s) and sending {}",
            grace.as_secs(),
            protocol::OUT_DIR
        );
        // SAFETY: as above; the pending SIGTERM is delivered as the processes continue.
        unsafe {
            libc::kill(-1, libc::SIGTERM);
            libc::kill(-1, libc::SIGCONT);
        }
    }
    while Instant::now() < grace_ends {
        std::thread::sleep(Duration::from_millis(50));
        if matches!(*stop_state(), StopState::Ended) {
            return;
        }
    }
    let mut st = stop_state();
    if let StopState::Stopping { killed, .. } = &mut *st {
        *killed = true;
        eprintln!(
            "vm-init: the command did not stop within {} s; killing it",
            grace.as_secs()
        );
        // SAFETY: as above.
        unsafe { libc::kill(-1, libc::SIGKILL) };
    }
}

/// Whether every process but init (and the kernel's threads) is stopped or dead, polled
/// until `limit` passes.
fn wait_until_all_stopped(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if all_stopped() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn all_stopped() -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(procs) = fs::read_dir("/proc") else {
        return true;
    };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == 1 {
            continue;
        }
        let Ok(stat) = fs::read_to_string(p.path().join("stat")) else {
            continue; // gone
        };
        // Fields after the ")" that ends the command name: state ppid pgrp session tty_nr
        // tpgid flags ...
        let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let flags: u64 = f.get(6).and_then(|x| x.parse().ok()).unwrap_or(0);
        if flags & PF_KTHREAD != 0 {
            continue;
        }
        if !matches!(f.first(), Some(&("T" | "t" | "Z" | "X"))) {
            return false;
        }
    }
    true
}

/// Sends everything under /out as an `outstream`, on the transport the host chose.
fn serial_transport() -> bool {
    fs::read_to_string(protocol::TRANSPORT_PATH).is_ok_and(|t| t.trim() == "serial")
}

fn send_out(status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    if serial_transport() {
        send_out_serial(status, stop)
    } else {
        send_out_disk(status, stop)
    }
}

/// A thread that writes a byte to the heartbeat port every few seconds until power-off
/// (see [`protocol::HEARTBEAT_TTY`]). It runs at the highest priority so that a busy command
/// cannot starve it into a false stall. Without the port it just ends: the host then falls
/// back to its overall timeout.
fn start_heartbeat() {
    let tty = match fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(protocol::HEARTBEAT_TTY)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("vm-init: no heartbeat ({}: {e})", protocol::HEARTBEAT_TTY);
            return;
        }
    };
    std::thread::spawn(move || {
        // SAFETY: plain syscalls without pointers; a failure only leaves the default nice.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, -20);
        }
        let mut tty = tty;
        loop {
            if tty.write_all(b".").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(protocol::HEARTBEAT_SECS));
        }
    });
}

/// Raw NVMe disk: the stream at `DISK_DATA_OFFSET`, made durable, then the header.
fn send_out_disk(status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    let dev = find_out_disk()?;
    let mut disk = fs::OpenOptions::new().write(true).open(&dev)?;
    disk.seek(SeekFrom::Start(protocol::DISK_DATA_OFFSET))?;
    let len = encode_out(io::BufWriter::with_capacity(1 << 20, &disk), status, stop)?;
    disk.sync_all()?;
    disk.seek(SeekFrom::Start(0))?;
    disk.write_all(&protocol::disk_header(len))?;
    disk.sync_all()?;
    Ok(len)
}

/// The NVMe namespace whose controller has our serial number. The driver probes
/// asynchronously, so give it a little time to appear.
fn find_out_disk() -> io::Result<std::path::PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(ctrls) = fs::read_dir("/sys/class/nvme") {
            for c in ctrls.flatten() {
                let serial = fs::read_to_string(c.path().join("serial")).unwrap_or_default();
                if serial.trim() != protocol::OUT_DISK_SERIAL {
                    continue;
                }
                let name = c.file_name().to_string_lossy().into_owned();
                let dev = Path::new("/dev").join(format!("{name}n1"));
                if dev.exists() {
                    return Ok(dev);
                }
            }
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no NVMe disk with serial {} appeared",
                    protocol::OUT_DISK_SERIAL
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes /out as an `outstream` ending with `status` (and the stop report of a command
/// that was stopped) and flushes it; returns its length.
fn encode_out<W: Write>(w: W, status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    let mut counted = Counting { inner: w, n: 0 };
    let mut enc = Encoder::new(&mut counted)?;
    let root = Path::new(protocol::OUT_DIR);
    send_tree(&mut enc, root, root)?;
    if let Some(stop) = stop {
        let complete: Vec<String> = stop
            .complete
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let complete: Vec<&str> = complete.iter().map(String::as_str).collect();
        enc.stopped(stop.killed, &complete)?;
    }
    enc.finish(status)?;
    counted.inner.flush()?;
    Ok(counted.n)
}

struct Counting<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The second UART in raw mode: slower (~0.3 MB/s under TCG) but needs no block driver.
fn send_out_serial(status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    let tty = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(protocol::OUT_TTY)?;
    set_raw(&tty)?;
    let len = encode_out(io::BufWriter::with_capacity(1 << 16, &tty), status, stop)?;
    // Everything must have left the UART before the power goes off.
    use std::os::fd::AsRawFd;
    // SAFETY: valid fd.
    if unsafe { libc::tcdrain(tty.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len)
}

fn send_tree<W: Write>(enc: &mut Encoder<W>, root: &Path, dir: &Path) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .expect("walk stays under root")
            .to_string_lossy()
            .into_owned();
        let meta = fs::symlink_metadata(&path)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            enc.dir(&rel, meta.mode() & 0o7777)?;
            send_tree(enc, root, &path)?;
        } else if ft.is_file() {
            enc.file(&rel, meta.mode() & 0o7777, fs::File::open(&path)?)?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&path)?;
            enc.symlink(
                &rel,
                &String::from_utf8_lossy(target.as_os_str().as_bytes()),
            )?;
        } else {
            eprintln!(
                "vm-init: not sending {} (not a file, directory or symlink)",
                path.display()
            );
        }
    }
    Ok(())
}

/// Raw mode: no newline translation, no echo, 8-bit clean, so binary passes unchanged.
fn set_raw(tty: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, libc::B115200);
        libc::cfsetospeed(&mut t, libc::B115200);
        if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn power_off() -> ! {
    loop {
        // SAFETY: reboot(2) with a valid command; on success it does not return.
        unsafe {
            libc::sync();
            libc::reboot(libc::RB_POWER_OFF);
        }
        eprintln!("vm-init: power-off failed: {}", io::Error::last_os_error());
        std::thread::sleep(Duration::from_secs(5));
    }
}
