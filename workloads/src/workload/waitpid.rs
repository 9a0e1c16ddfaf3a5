//! do_wait: with N idle children alive, time fork + an immediate wait for the new child.
//!
//! `waitpid(pid)` walked the whole children list until Linux 5.13 (Jim Newsome, "do_wait:
//! make PIDTYPE_PID case O(1) instead of O(n)"); since then it looks the pid up directly.
//! `waitpid(-1)` and `waitpid(-1, WNOHANG)` still scan every child on every kernel.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use clap::{Args, ValueEnum};
use nix::unistd::Pid;
use workloads::cases;

use crate::harness::children::{self, IdlePool};
use crate::harness::error::{Error, Result};
use crate::harness::options::Common;
use crate::harness::session::{PhaseSpec, Session};

pub const DEFAULT_N: &str = workloads::catalog::WAITPID.default_n;

/// Memory planned per idle child (task, kernel stack, page tables, a few COW pages): about
/// 45 KiB measured on 6.18 (MemAvailable before/after 4000 children), plus headroom. Kept
/// modest so 8000 children still pass the check in a 1 GiB VM.
const BYTES_PER_IDLE_CHILD: u64 = 64 << 10;

#[derive(Args, Debug)]
pub struct WaitpidArgs {
    #[command(flatten)]
    pub common: Common,

    /// Variants to measure, comma-separated [default: all the kernel supports]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANT")]
    pub variant: Vec<Variant>,
}

/// The wait cases: which wait call, beside N idle children.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// fork, then waitpid(child): O(1) in N since Linux 5.13, O(N) before
    #[value(name = cases::WAITPID_PID)]
    Pid,
    /// fork, then waitpid(-1): do_wait scans all N+1 children, O(N) on every kernel
    #[value(name = cases::WAITPID_ANY)]
    Any,
    /// fork, pidfd_open(child), waitid(P_PIDFD): O(1); needs Linux >= 5.4
    #[value(name = cases::WAITID_PIDFD)]
    Pidfd,
    /// waitpid(-1, WNOHANG) with nothing to reap (no fork): O(N) on every kernel
    #[value(name = cases::WAITPID_WNOHANG)]
    Wnohang,
}

impl Variant {
    const ALL: [Variant; 4] = [Variant::Pid, Variant::Any, Variant::Pidfd, Variant::Wnohang];

    pub fn case(self) -> &'static str {
        match self {
            Variant::Pid => cases::WAITPID_PID,
            Variant::Any => cases::WAITPID_ANY,
            Variant::Pidfd => cases::WAITID_PIDFD,
            Variant::Wnohang => cases::WAITPID_WNOHANG,
        }
    }
}

pub fn run(args: &WaitpidArgs, s: &mut Session) -> Result<()> {
    let ns = super::n_list(&args.common, DEFAULT_N);
    let explicit = !args.variant.is_empty();
    let mut variants = super::dedup(if explicit {
        args.variant.clone()
    } else {
        Variant::ALL.to_vec()
    });
    if variants.contains(&Variant::Pidfd)
        && let Err(why) = probe_pidfd()
    {
        if explicit {
            return Err(Error::Unsupported(format!("waitid-pidfd: {why}")));
        }
        s.note(format!("waitid-pidfd skipped: {why}"));
        variants.retain(|v| *v != Variant::Pidfd);
    }
    let max = *ns.last().expect("n list is never empty");
    let what = format!("{max} idle children");
    s.limits.check_tasks(max + 2, &what)?;
    s.limits.check_memory(max * BYTES_PER_IDLE_CHILD, &what)?;
    s.config("n", ns.clone());
    s.config(
        "variants",
        variants.iter().map(|v| v.case()).collect::<Vec<_>>(),
    );
    s.start_table("waits: one fork + one wait, or one WNOHANG poll");

    let mut pool = IdlePool::new();
    for (i, &n) in ns.iter().enumerate() {
        s.progress(format!(
            "N={n} ({}/{}): forking {} more idle children",
            i + 1,
            ns.len(),
            n as usize - pool.len()
        ));
        pool.grow_to(n as usize)?;
        for &v in &variants {
            s.progress(format!("N={n}: measuring {}", v.case()));
            let spec = PhaseSpec {
                case: v.case(),
                n,
                unit: "waits",
            };
            let rows = s.measure(&spec, &mut || wait_once(v, &pool))?;
            s.commit(
                rows,
                &BTreeMap::from([("idle_children".to_string(), pool.len() as f64)]),
            );
        }
    }
    s.progress(format!("killing and reaping {} idle children", pool.len()));
    pool.shutdown();
    Ok(())
}

fn wait_once(v: Variant, pool: &IdlePool) -> Result<u64> {
    match v {
        Variant::Pid => children::fork_exit()?.wait()?,
        Variant::Any => {
            let child = children::fork_exit()?;
            let got = children::wait_any()?;
            if got != child.pid() {
                return Err(unexpected_reap(got, pool));
            }
            child.reaped();
        }
        Variant::Pidfd => {
            let child = children::fork_exit()?;
            let fd = pidfd_open(child.pid())?;
            waitid_pidfd(&fd, libc::WEXITED)?;
            child.reaped();
        }
        Variant::Wnohang => {
            if let Some(got) = children::poll_any()? {
                return Err(unexpected_reap(got, pool));
            }
        }
    }
    Ok(1)
}

fn unexpected_reap(got: Pid, pool: &IdlePool) -> Error {
    if pool.contains(got) {
        Error::Failed(format!(
            "idle child {got} died during the measurement (killed from outside?)"
        ))
    } else {
        Error::Failed(format!("reaped an unknown child {got}"))
    }
}

fn pidfd_open(pid: Pid) -> Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return Err(Error::last_os(format!("pidfd_open({pid})")));
    }
    // SAFETY: the fd was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `waitid(P_PIDFD, fd, options)`, retrying EINTR.
fn waitid_pidfd(fd: &OwnedFd, options: libc::c_int) -> Result<()> {
    loop {
        // SAFETY: info is a valid out-pointer; the fd stays open for the call.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                fd.as_raw_fd() as libc::id_t,
                &mut info,
                options,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(Error::io("waitid(P_PIDFD)", e));
        }
    }
}

/// Whether pidfd_open (5.3) and waitid(P_PIDFD) (5.4) work here; the reason if not.
pub fn probe_pidfd() -> Result<(), String> {
    let fd = match pidfd_open(nix::unistd::getpid()) {
        Ok(fd) => fd,
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOSYS) => {
            return Err("pidfd_open(2) is missing (ENOSYS): it needs Linux >= 5.3".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    // Waiting on ourselves: ECHILD means P_PIDFD is understood, EINVAL that it is not (< 5.4).
    match waitid_pidfd(&fd, libc::WEXITED | libc::WNOHANG) {
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ECHILD) => Ok(()),
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {
            Err("waitid(P_PIDFD) is not supported (EINVAL): it needs Linux >= 5.4".into())
        }
        Err(e) => Err(e.to_string()),
        Ok(()) => Err("waitid(P_PIDFD) on our own pidfd unexpectedly succeeded".into()),
    }
}
