//! getpid: the raw syscall versus a pid cached in a MADV_WIPEONFORK page.
//!
//! Rik van Riel's "mm,fork: introduce MADV_WIPEONFORK" (Linux 4.14) gave caches of
//! per-process values (a pid, PRNG state) a way to be correct across fork: the child sees
//! the page zeroed and recomputes. The cached call costs a load; the price is one mmap +
//! madvise + munmap, so caching pays off after `setup / (syscall - cached)` calls (the
//! break-even count). Also a calibration workload for the tracer's probe overhead.

use std::collections::BTreeMap;

use clap::{Args, ValueEnum};
use workloads::cases;

use crate::harness::error::{Error, Result};
use crate::harness::options::Common;
use crate::harness::session::{PhaseSpec, Session};
use crate::harness::{signals, sys};

pub const DEFAULT_N: &str = workloads::catalog::GETPID.default_n;

/// How many cache setups are timed to estimate the setup cost.
const SETUP_SAMPLES: u32 = 200;

/// Calls between two looks at the stop flag within one iteration.
const CHUNK: u64 = 1 << 16;

#[derive(Args, Debug)]
pub struct GetpidArgs {
    #[command(flatten)]
    pub common: Common,

    /// Variants to measure, comma-separated [default: both; the break-even count needs both]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANT")]
    pub variant: Vec<Variant>,
}

/// The getpid cases: the raw syscall against a cached pid.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// N raw syscall(SYS_getpid) calls per iteration
    #[value(name = cases::GETPID_SYSCALL)]
    Syscall,
    /// N reads of the pid cached in a MADV_WIPEONFORK page per iteration
    #[value(name = cases::GETPID_CACHED)]
    Cached,
    /// N one-byte read() calls from a pipe kept full per iteration (only when named): a
    /// syscall that does a little work, for the cost of tracing a read-heavy loop
    #[value(name = cases::PIPE_READ)]
    PipeRead,
}

impl Variant {
    pub fn case(self) -> &'static str {
        match self {
            Variant::Syscall => cases::GETPID_SYSCALL,
            Variant::Cached => cases::GETPID_CACHED,
            Variant::PipeRead => cases::PIPE_READ,
        }
    }
}

/// The raw getpid system call (never a libc cache).
pub fn raw_getpid() -> libc::pid_t {
    // SAFETY: getpid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getpid) as libc::pid_t }
}

/// A pid cache in its own MADV_WIPEONFORK page: a forked child finds it zeroed and
/// recomputes its own pid instead of inheriting the parent's.
pub struct PidCache {
    page: *mut libc::pid_t,
}

impl PidCache {
    pub fn new() -> Result<Self> {
        // SAFETY: a fresh private anonymous page, checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap(pid cache)"));
        }
        let cache = PidCache { page: p.cast() };
        // SAFETY: our page.
        if unsafe { libc::madvise(p, 4096, libc::MADV_WIPEONFORK) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                return Err(Error::Unsupported(
                    "MADV_WIPEONFORK is not supported (EINVAL): it needs Linux >= 4.14".into(),
                ));
            }
            return Err(Error::io("madvise(MADV_WIPEONFORK)", e));
        }
        Ok(cache)
    }

    /// The cached pid, filled by one syscall when the page is (or was wiped to) zero.
    #[inline]
    pub fn get(&self) -> libc::pid_t {
        // SAFETY: the page is mapped for self's lifetime; volatile keeps one load per call.
        unsafe {
            let v = self.page.read_volatile();
            if v != 0 {
                return v;
            }
            let pid = raw_getpid();
            self.page.write_volatile(pid);
            pid
        }
    }

    /// What the page holds right now (0 = empty or wiped).
    pub fn raw(&self) -> libc::pid_t {
        // SAFETY: as in get().
        unsafe { self.page.read_volatile() }
    }
}

impl Drop for PidCache {
    fn drop(&mut self) {
        // SAFETY: unmapping the page new() mapped.
        unsafe { libc::munmap(self.page.cast(), 4096) };
    }
}

/// A pipe whose read end always has a byte for a one-byte read: filled to its capacity,
/// refilled when a read finds it empty (one write per 4 KiB of reads, so a read loop's
/// calls are reads).
pub struct FullPipe {
    read: libc::c_int,
    write: libc::c_int,
    chunk: Vec<u8>,
}

impl FullPipe {
    pub fn new() -> Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid out-array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(Error::last_os("pipe2"));
        }
        let p = FullPipe {
            read: fds[0],
            write: fds[1],
            chunk: vec![b'x'; 4096],
        };
        p.fill()?;
        Ok(p)
    }

    /// Writes until the pipe is full (the write end is non-blocking).
    fn fill(&self) -> Result<()> {
        loop {
            // SAFETY: writing from our own buffer to our own pipe.
            let w =
                unsafe { libc::write(self.write, self.chunk.as_ptr().cast(), self.chunk.len()) };
            if w < 0 {
                let e = std::io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(()),
                    _ => Err(Error::io("write(pipe)", e)),
                };
            }
        }
    }

    /// One one-byte read, refilling the pipe first when it is empty.
    #[inline]
    pub fn read_byte(&self) -> Result<u8> {
        let mut b = 0u8;
        loop {
            // SAFETY: reading one byte into a local from our own pipe.
            let r = unsafe { libc::read(self.read, (&raw mut b).cast(), 1) };
            if r == 1 {
                return Ok(b);
            }
            let e = std::io::Error::last_os_error();
            if r < 0 && e.raw_os_error() != Some(libc::EAGAIN) {
                return Err(Error::io("read(pipe)", e));
            }
            self.fill()?;
        }
    }
}

impl Drop for FullPipe {
    fn drop(&mut self) {
        // SAFETY: closing the fds new() opened.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// Forks a child that reports (the cache page as it finds it, the pid get() gives it, its
/// real pid) through a pipe. Used at start-up and by the tests.
pub fn child_view(cache: &PidCache) -> Result<(libc::pid_t, libc::pid_t, libc::pid_t)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::last_os("pipe2"));
    }
    let child = match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            // Async-signal-safe only: volatile loads, syscalls, write, _exit.
            let report = [cache.raw(), cache.get(), raw_getpid()];
            // SAFETY: writing 12 bytes from a local array to the pipe, then leaving.
            unsafe {
                libc::write(
                    fds[1],
                    report.as_ptr().cast(),
                    std::mem::size_of_val(&report),
                );
                libc::_exit(0)
            }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => child,
        Err(e) => {
            // SAFETY: closing our own pipe fds.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return Err(Error::sys("fork", e));
        }
    };
    // SAFETY: our own pipe fds.
    unsafe { libc::close(fds[1]) };
    let mut report = [0 as libc::pid_t; 3];
    let want = std::mem::size_of_val(&report);
    // SAFETY: reading at most `want` bytes into the local array.
    let got = unsafe { libc::read(fds[0], report.as_mut_ptr().cast(), want) };
    // SAFETY: our own fd.
    unsafe { libc::close(fds[0]) };
    let _ = nix::sys::wait::waitpid(child, None);
    if got != want as isize {
        return Err(Error::Failed(format!(
            "the fork-check child reported {got} bytes instead of {want}"
        )));
    }
    Ok((report[0], report[1], report[2]))
}

/// Checks that the cache is wiped in a forked child and keeps its value in the parent.
pub fn verify_wipe_on_fork() -> Result<()> {
    let cache = PidCache::new()?;
    let parent = cache.get();
    let (seen, got, real) = child_view(&cache)?;
    if seen != 0 || got != real || got == parent || cache.raw() != parent {
        return Err(Error::Failed(format!(
            "MADV_WIPEONFORK check failed: child saw {seen} (want 0), its cache gave {got} for pid {real}, parent {parent}"
        )));
    }
    Ok(())
}

/// Mean cost of a cache's whole life (mmap + madvise + first get + munmap), in ns.
fn setup_cost_ns() -> Result<f64> {
    let t0 = sys::monotonic_ns();
    for _ in 0..SETUP_SAMPLES {
        let c = PidCache::new()?;
        std::hint::black_box(c.get());
    }
    Ok((sys::monotonic_ns() - t0) as f64 / f64::from(SETUP_SAMPLES))
}

pub fn run(args: &GetpidArgs, s: &mut Session) -> Result<()> {
    let ns = super::n_list(&args.common, DEFAULT_N);
    let variants = super::dedup(if args.variant.is_empty() {
        vec![Variant::Syscall, Variant::Cached]
    } else {
        args.variant.clone()
    });
    s.config("n", ns.clone());
    s.config(
        "variants",
        variants.iter().map(|v| v.case()).collect::<Vec<_>>(),
    );
    verify_wipe_on_fork()?;
    s.summary("wipe_on_fork_verified", true);
    s.start_table("calls");

    let cache = PidCache::new()?;
    let pipe = FullPipe::new()?;
    for (i, &n) in ns.iter().enumerate() {
        for &v in &variants {
            s.progress(format!("N={n} ({}/{}): {}", i + 1, ns.len(), v.case()));
            let spec = PhaseSpec {
                case: v.case(),
                n,
                unit: "calls",
            };
            let rows = s.measure(&spec, &mut || {
                // In chunks, so a huge N still notices a stop signal promptly.
                let mut left = n;
                while left > 0 {
                    let k = left.min(CHUNK);
                    match v {
                        Variant::Syscall => {
                            for _ in 0..k {
                                std::hint::black_box(raw_getpid());
                            }
                        }
                        Variant::Cached => {
                            for _ in 0..k {
                                std::hint::black_box(cache.get());
                            }
                        }
                        Variant::PipeRead => {
                            for _ in 0..k {
                                std::hint::black_box(pipe.read_byte()?);
                            }
                        }
                    }
                    left -= k;
                    if left > 0 {
                        signals::check()?;
                    }
                }
                Ok(n)
            })?;
            s.commit(rows, &BTreeMap::new());
        }
    }

    if variants.contains(&Variant::Syscall) && variants.contains(&Variant::Cached) {
        let top = *ns.last().expect("n list is never empty");
        let setup = setup_cost_ns()?;
        let sys_ns = s
            .median_ns_per_op(Variant::Syscall.case(), top)
            .unwrap_or(f64::NAN);
        let cached_ns = s
            .median_ns_per_op(Variant::Cached.case(), top)
            .unwrap_or(f64::NAN);
        s.summary("cache_setup_ns", setup);
        s.summary("syscall_ns_per_call", sys_ns);
        s.summary("cached_ns_per_call", cached_ns);
        if sys_ns > cached_ns {
            let even = (setup / (sys_ns - cached_ns)).ceil();
            s.summary("break_even_calls", even);
            crate::harness::table::print(&[format!(
                "break-even: the MADV_WIPEONFORK cache pays for its setup ({setup:.0} ns) after {even:.0} calls \
                 (syscall {sys_ns:.1} ns, cached {cached_ns:.2} ns per call at N={top})"
            )]);
        } else {
            s.note(format!("the cached getpid was not faster than the syscall ({cached_ns:.1} vs {sys_ns:.1} ns): no break-even"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_is_wiped_in_a_forked_child() {
        let cache = PidCache::new().expect("MADV_WIPEONFORK page");
        assert_eq!(cache.raw(), 0, "a fresh cache is empty");
        let parent = cache.get();
        assert_eq!(parent, raw_getpid());
        let (seen, got, real) = child_view(&cache).expect("fork check");
        assert_eq!(
            seen, 0,
            "the child must find the cache page wiped, not the parent's pid {parent}"
        );
        assert_eq!(
            got, real,
            "the child's cache must recompute the child's own pid"
        );
        assert_ne!(got, parent);
        assert_eq!(cache.raw(), parent, "the parent keeps its cached value");
        verify_wipe_on_fork().expect("the start-up check agrees");
    }

    /// Every read gets its byte, across refills (more reads than the pipe holds).
    #[test]
    fn a_full_pipe_serves_more_one_byte_reads_than_it_holds() {
        let p = FullPipe::new().expect("pipe");
        // SAFETY: asking our own pipe its capacity.
        let cap = unsafe { libc::fcntl(p.read, libc::F_GETPIPE_SZ) };
        assert!(cap >= 4096, "{cap}");
        for _ in 0..3 * cap as usize + 7 {
            assert_eq!(p.read_byte().expect("a byte"), b'x');
        }
    }

    /// The control: without MADV_WIPEONFORK a child inherits the stale pid, which is the bug
    /// the wipe prevents, so the test above could fail.
    #[test]
    fn without_wipeonfork_the_child_inherits_a_stale_pid() {
        let cache = PidCache::new().expect("page");
        // SAFETY: the page is ours; MADV_KEEPONFORK undoes MADV_WIPEONFORK.
        assert_eq!(
            unsafe { libc::madvise(cache.page.cast(), 4096, libc::MADV_KEEPONFORK) },
            0
        );
        let parent = cache.get();
        let (seen, got, real) = child_view(&cache).expect("fork check");
        assert_eq!(seen, parent);
        assert_eq!(got, parent);
        assert_ne!(got, real);
    }
}
