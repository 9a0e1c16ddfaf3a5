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

mod mounts;
mod send;
mod stop;

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xtask::protocol;

use mounts::mount_all;
use send::{send_out, serial_transport, start_heartbeat};
use stop::{Stop, command_ended, watch_console};

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
