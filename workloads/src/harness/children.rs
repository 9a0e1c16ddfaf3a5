//! Child processes: a pool of idle children that stays alive across phases, and transient
//! children forked for one measured operation. Both are killed and reaped on drop, so no
//! exit path (error, panic, signal) leaves a zombie or an orphan behind.
//!
//! Code that runs in a forked child only makes async-signal-safe calls (`prctl`, `signal`,
//! `pause`, `execve`, `_exit`): the parent may have a helper thread holding a libc lock.

use std::ffi::{CStr, CString};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use super::error::{Error, Result};
use super::signals;

/// Makes the calling (just forked) child die with its parent, and ignore the stop signals.
/// Exits at once if the parent is already gone. Async-signal-safe.
fn child_prologue(parent: libc::pid_t) {
    // SAFETY: plain syscalls on the calling process.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
    signals::child_ignore_stop_signals();
}

/// Waits for `pid` to terminate, retrying `EINTR`: a child we forked is always reaped, even
/// when a stop signal interrupts the wait.
fn reap(pid: Pid) -> Result<WaitStatus> {
    loop {
        match waitpid(pid, None) {
            Ok(status) => return Ok(status),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Error::sys(format!("waitpid({pid})"), e)),
        }
    }
}

fn kill_and_reap(pid: Pid) {
    let _ = kill(pid, Signal::SIGKILL);
    let _ = reap(pid);
}

/// Children that block in `pause()` until killed; they make the parent's children list long.
pub struct IdlePool {
    pids: Vec<Pid>,
}

impl IdlePool {
    pub fn new() -> Self {
        IdlePool { pids: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.pids.len()
    }

    /// Forks idle children until there are `n`; stops early (with `Interrupted`) on a signal.
    pub fn grow_to(&mut self, n: usize) -> Result<()> {
        let parent = nix::unistd::getpid().as_raw();
        while self.pids.len() < n {
            signals::check()?;
            // SAFETY: the child branch only makes async-signal-safe calls and never returns.
            match unsafe { fork() } {
                Ok(ForkResult::Child) => {
                    child_prologue(parent);
                    loop {
                        // SAFETY: pause(2) just sleeps until a signal; SIGKILL ends us.
                        unsafe { libc::pause() };
                    }
                }
                Ok(ForkResult::Parent { child }) => self.pids.push(child),
                Err(e) => {
                    return Err(Error::sys(
                        format!("fork (idle child {} of {n})", self.pids.len() + 1),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether `pid` belongs to the pool (used to explain an unexpected `waitpid(-1)` result).
    pub fn contains(&self, pid: Pid) -> bool {
        self.pids.contains(&pid)
    }

    /// Kills every idle child and reaps it.
    pub fn shutdown(&mut self) {
        for &pid in &self.pids {
            let _ = kill(pid, Signal::SIGKILL);
        }
        for pid in self.pids.drain(..) {
            let _ = reap(pid);
        }
    }
}

impl Drop for IdlePool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A child forked for one operation. Reap it with [`Transient::wait`] (or hand it to
/// another wait call and then [`Transient::reaped`]); if dropped unreaped it is killed and
/// reaped.
pub struct Transient {
    pid: Option<Pid>,
}

impl Transient {
    pub fn pid(&self) -> Pid {
        self.pid.expect("transient child already reaped")
    }

    /// `waitpid(pid, 0)`; fails unless the child exited with status 0.
    pub fn wait(mut self) -> Result<()> {
        let pid = self.pid.take().expect("transient child already reaped");
        match reap(pid)? {
            WaitStatus::Exited(_, 0) => Ok(()),
            WaitStatus::Exited(_, 127) => Err(Error::Failed(format!(
                "child {pid} could not exec (status 127)"
            ))),
            other => Err(Error::Failed(format!(
                "child {pid} ended abnormally: {other:?}"
            ))),
        }
    }

    /// Records that another wait call (waitpid(-1), waitid) reaped the child.
    pub fn reaped(mut self) {
        self.pid = None;
    }
}

impl Drop for Transient {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            kill_and_reap(pid);
        }
    }
}

/// Forks a child that `_exit(0)`s at once.
pub fn fork_exit() -> Result<Transient> {
    // SAFETY: the child only calls _exit.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => unsafe { libc::_exit(0) },
        Ok(ForkResult::Parent { child }) => Ok(Transient { pid: Some(child) }),
        Err(e) => Err(Error::sys("fork", e)),
    }
}

/// A program and argv prepared before forking, so the child allocates nothing.
pub struct ExecSpec {
    path: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp_ptrs: Vec<*const libc::c_char>,
}

impl ExecSpec {
    pub fn new(path: &str, argv: &[&str]) -> Self {
        let path = CString::new(path).expect("path without NUL");
        let argv: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(*a).expect("arg without NUL"))
            .collect();
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        ExecSpec {
            path,
            _argv: argv,
            argv_ptrs,
            envp_ptrs: vec![std::ptr::null()],
        }
    }

    pub fn path(&self) -> &CStr {
        &self.path
    }
}

/// Forks a child that execs `spec` with an empty environment (`_exit(127)` if exec fails).
pub fn fork_exec(spec: &ExecSpec) -> Result<Transient> {
    let parent = nix::unistd::getpid().as_raw();
    // SAFETY: the child only makes async-signal-safe calls on memory prepared before fork.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => unsafe {
            child_prologue(parent);
            libc::execve(
                spec.path.as_ptr(),
                spec.argv_ptrs.as_ptr(),
                spec.envp_ptrs.as_ptr(),
            );
            libc::_exit(127)
        },
        Ok(ForkResult::Parent { child }) => Ok(Transient { pid: Some(child) }),
        Err(e) => Err(Error::sys("fork", e)),
    }
}

/// Forks a long-running helper child that runs `body` (which must be async-signal-safe; the
/// child exits if it returns); killed and reaped when the returned guard drops.
pub fn fork_helper(body: impl FnOnce()) -> Result<Transient> {
    let parent = nix::unistd::getpid().as_raw();
    // SAFETY: the child runs `body`, which the caller guarantees is async-signal-safe.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            child_prologue(parent);
            body();
            // SAFETY: leaving the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
        Ok(ForkResult::Parent { child }) => Ok(Transient { pid: Some(child) }),
        Err(e) => Err(Error::sys("fork (helper)", e)),
    }
}

/// `waitpid(-1, WNOHANG)` once; returns the pid reaped, if any.
pub fn poll_any() -> Result<Option<Pid>> {
    match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => Ok(None),
        Ok(status) => Ok(status.pid()),
        Err(Errno::EINTR) => Ok(None),
        Err(e) => Err(Error::sys("waitpid(-1, WNOHANG)", e)),
    }
}

/// `waitpid(-1, 0)`, retrying `EINTR`; returns the pid reaped.
pub fn wait_any() -> Result<Pid> {
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(status) => {
                return status
                    .pid()
                    .ok_or_else(|| Error::Failed(format!("waitpid(-1) returned {status:?}")));
            }
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Error::sys("waitpid(-1)", e)),
        }
    }
}
