//! Process helpers: start a command held before exec until the probes are attached, list a
//! process's descendants, and account for reaped children.
use std::os::fd::{AsRawFd, OwnedFd};

use crate::error::TracerError;

/// Hidden subcommand that holds a command until the tracer is ready, then execs it.
pub const EXEC_HELD: &str = "__exec-held";

/// A wait status as one exit code: the code, or 128 + the signal.
pub(super) fn exit_code_of(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// (user, system) CPU seconds of the reaped children of this process so far: the difference
/// around one command run is that command's tree (its descendants count once reaped).
pub(super) fn children_rusage() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// Start `command` held before exec: the child is this binary waiting on a pipe; writing a
/// byte to the returned fd lets it exec the command (same pid, so it is already followed).
/// If the tracer dies first, the pipe closes and the command never runs untraced; if it dies
/// later (SIGKILL, a crash), the command gets SIGKILL, so it never runs on untraced either.
///
/// Returns once the child has started up and is about to wait: following it from then on
/// counts the command and the child's last read and exec, the same at every run. Following it
/// while it starts (this binary's loader and runtime, some 300 page faults) raced with that
/// start-up, and a sweep's first run could count 89 of them where the next counted 375: more
/// calls that no size of the command made.
pub(super) fn spawn_held(
    command: &[String],
    env: &[(String, String)],
) -> Result<(tokio::process::Child, OwnedFd), TracerError> {
    let pipe = || nix::unistd::pipe().map_err(|e| TracerError::Other(format!("pipe: {e}")));
    let (r, w) = pipe()?;
    let (ready_r, ready_w) = pipe()?;
    // Only the child's ends may be inherited.
    for parents in [&w, &ready_r] {
        nix::fcntl::fcntl(
            parents,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .map_err(|e| TracerError::Other(format!("fcntl: {e}")))?;
    }
    let me = std::env::current_exe().map_err(|e| TracerError::Other(e.to_string()))?;
    let mut cmd = tokio::process::Command::new(me);
    cmd.arg(EXEC_HELD)
        .arg(r.as_raw_fd().to_string())
        .arg(ready_w.as_raw_fd().to_string())
        .arg("--")
        .args(command)
        .envs(env.iter().map(|(k, v)| (k, v)));
    let parent = nix::unistd::getpid().as_raw();
    // The parent-death signal goes with the command through both execs (the held child's and
    // the command's), except into a set-user-ID or file-capability program, whose exec clears
    // it. It fires when the *thread* that forked dies: this runs on the thread that drives the
    // runtime (the main thread, for record and sweep), which lives as long as the process.
    // SAFETY: between fork and exec the child only makes async-signal-safe calls (prctl,
    // getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The tracer died before prctl took effect: the signal will never come.
            if libc::getppid() != parent {
                libc::_exit(125);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| TracerError::Other(format!("starting {}: {e}", command[0])))?;
    drop(r);
    drop(ready_w);
    // Its byte, or the end of the pipe if it died first (its exit is then the command's).
    let mut byte = [0u8; 1];
    let _ = nix::unistd::read(&ready_r, &mut byte);
    Ok((child, w))
}

/// Child side of `spawn_held`. Never returns on success.
pub fn exec_held_main(args: &[String]) -> i32 {
    use std::os::unix::process::CommandExt;
    let (Some(fd), Some(ready), Some(sep)) = (args.first(), args.get(1), args.get(2)) else {
        return 125;
    };
    if sep != "--" || args.len() < 4 {
        return 125;
    }
    let (Ok(fd), Ok(ready)) = (fd.parse::<i32>(), ready.parse::<i32>()) else {
        return 125;
    };
    // Started: the tracer follows this process from here on.
    // SAFETY: the fd was inherited for exactly this purpose.
    unsafe {
        libc::write(ready, b"r".as_ptr().cast(), 1);
        libc::close(ready);
    }
    let mut byte = [0u8; 1];
    // SAFETY: the fd was inherited for exactly this purpose.
    let n = unsafe { libc::read(fd, byte.as_mut_ptr().cast(), 1) };
    unsafe { libc::close(fd) };
    if n != 1 {
        // The tracer went away before releasing us: do not run untraced.
        return 125;
    }
    let err = std::process::Command::new(&args[3]).args(&args[4..]).exec();
    eprintln!("tracer: cannot run {}: {err}", args[3]);
    127
}

/// All descendants of `pid` now (children of children ...), from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
                // The comm field may contain spaces and parens: parse after the last ')'.
                if let Some(rest) = stat.rsplit_once(')').map(|x| x.1)
                    && let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok())
                {
                    parent_of.push((p, ppid));
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_include_our_children() {
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let d = descendants(std::process::id());
        let _ = c.kill();
        let _ = c.wait();
        assert!(d.contains(&c.id()), "{d:?}");
    }
}
