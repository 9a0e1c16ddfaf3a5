//! Small wrappers over libc that several workloads share: clocks, uname, page size, and a
//! reader that does exactly open + read-until-EOF + close with a caller-owned buffer.

use std::ffi::CStr;

use super::error::{Error, Result};

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time (CLOCK_MONOTONIC), in ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// On-CPU time of the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `uname -r`.
pub fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".to_string())
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 { v as u64 } else { 4096 }
}

/// Reads `path` to EOF in `buf`-sized read() calls; returns (bytes, newlines), counting
/// newlines only when asked (a measured phase should time the kernel, not our scan). No
/// allocation, so it is safe in a helper thread.
pub fn read_whole(path: &CStr, buf: &mut [u8], count_lines: bool) -> Result<(u64, u64)> {
    // SAFETY: path is NUL-terminated; buf is valid for buf.len() bytes.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(Error::last_os(format!("open({})", path.to_string_lossy())));
    }
    let mut bytes = 0u64;
    let mut lines = 0u64;
    let result = loop {
        // SAFETY: as above.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break Err(Error::io(format!("read({})", path.to_string_lossy()), e));
        }
        if r == 0 {
            break Ok((bytes, lines));
        }
        bytes += r as u64;
        if count_lines {
            lines += buf[..r as usize].iter().filter(|&&b| b == b'\n').count() as u64;
        }
    };
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    result
}

/// Counts `/proc/self/maps` lines (this process's VMAs).
pub fn count_own_vmas() -> u64 {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count() as u64)
        .unwrap_or(0)
}

/// Pins the calling process (and the children it forks from now on) to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let allowed =
        sched_getaffinity(Pid::from_raw(0)).map_err(|e| Error::sys("sched_getaffinity", e))?;
    let usable: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    if !usable.contains(&cpu) {
        return Err(Error::Failed(format!(
            "--cpu {cpu}: this process may only run on CPUs {usable:?}"
        )));
    }
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|e| Error::sys(format!("CpuSet::set({cpu})"), e))?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| Error::sys(format!("sched_setaffinity(CPU {cpu})"), e))
}
