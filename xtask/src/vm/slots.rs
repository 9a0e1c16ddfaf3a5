//! How many guests run at once on this host, across every process that boots one.
//!
//! Under single-threaded TCG (the default) a guest keeps exactly one host core busy, so as
//! many guests as there are cores run side by side at full speed, and one more only slows
//! them all down. Every [`super::run`] takes a slot before it starts qemu and gives it back
//! when qemu is gone. The slots are files under `target/vm/slots/` locked with `flock`, so
//! concurrent test binaries, `cargo xtask run`'s kernels and a `cargo xtask vm` by hand all
//! share one limit, and a process that dies releases its slot with its file descriptors.
//!
//! The limit: [`JOBS_ENV`] when set (`cargo xtask run -j N` and `cargo xtask test -j N` set
//! it for what they start), else [`default_jobs`]: the host's cores, fewer when memory
//! cannot hold that many guests.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::paths;

/// The environment variable that sets how many guests may run at once.
pub const JOBS_ENV: &str = "XTASK_VM_JOBS";

/// What a guest costs the host beyond its RAM: qemu's own code, TCG's translation cache
/// (32 MiB by default under system emulation), the NVMe backing file's page cache.
const HOST_OVERHEAD_MB: u64 = 256;

/// A slot held until dropped.
#[derive(Debug)]
pub struct Slot {
    _file: fs::File,
    /// Which slot (0-based), for messages.
    pub index: usize,
    /// How long this run waited for it.
    pub waited: Duration,
}

/// Guests that fit this host: one per core (single-threaded TCG uses one host thread per
/// guest), and no more than available memory holds at `guest_mb` each.
pub fn default_jobs(guest_mb: u32) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let by_memory = mem_available_mb()
        .map(|mb| (mb / (u64::from(guest_mb) + HOST_OVERHEAD_MB)) as usize)
        .unwrap_or(cores);
    cores.min(by_memory).max(1)
}

/// The limit in force: [`JOBS_ENV`] when it is a positive number, else [`default_jobs`].
pub fn jobs(guest_mb: u32) -> usize {
    std::env::var(JOBS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&j| j > 0)
        .unwrap_or_else(|| default_jobs(guest_mb))
}

fn mem_available_mb() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available_mb(&meminfo)
}

/// `MemAvailable:   24391236 kB` → MiB.
fn parse_mem_available_mb(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// `target/vm/slots`.
pub fn slots_dir() -> PathBuf {
    paths::vm_dir().join("slots")
}

/// Take one of `jobs` slots in `dir`, waiting as long as they are all held. `on_wait` is
/// called once, when the first try finds every slot taken.
pub fn acquire_in(dir: &Path, jobs: usize, on_wait: impl FnOnce()) -> io::Result<Slot> {
    fs::create_dir_all(dir)?;
    let started = Instant::now();
    let mut on_wait = Some(on_wait);
    loop {
        for index in 0..jobs.max(1) {
            let file = fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("slot-{index}")))?;
            // SAFETY: flock on a valid fd; LOCK_NB makes it return at once.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Slot {
                    _file: file,
                    index,
                    waited: started.elapsed(),
                });
            }
            let e = io::Error::last_os_error();
            if !matches!(
                e.raw_os_error(),
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR)
            ) {
                return Err(e);
            }
        }
        if let Some(f) = on_wait.take() {
            f();
        }
        if super::interrupted() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "interrupted while waiting for a VM slot",
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Take a slot under `target/vm/slots` for a guest of `guest_mb`.
pub fn acquire(guest_mb: u32, on_wait: impl FnOnce()) -> io::Result<Slot> {
    acquire_in(&slots_dir(), jobs(guest_mb), on_wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_available_memory() {
        let m = "MemTotal:       24558640 kB\nMemFree:        1 kB\nMemAvailable:   2097152 kB\n";
        assert_eq!(parse_mem_available_mb(m), Some(2048));
        assert_eq!(parse_mem_available_mb("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn slots_are_exclusive_and_released_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let a = acquire_in(d.path(), 2, || panic!("a must not wait")).unwrap();
        let b = acquire_in(d.path(), 2, || panic!("b must not wait")).unwrap();
        assert_ne!(a.index, b.index);
        // Both held: a third waits until one is dropped.
        let dir = d.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let mut waited = false;
            let s = acquire_in(&dir, 2, || waited = true).unwrap();
            (s.index, waited)
        });
        std::thread::sleep(Duration::from_millis(500));
        assert!(!waiter.is_finished(), "a third guest ran beside two");
        let freed = a.index;
        drop(a);
        let (index, waited) = waiter.join().unwrap();
        assert!(waited);
        assert_eq!(index, freed);
        drop(b);
    }

    #[test]
    fn a_limit_from_the_environment_wins_and_zero_is_ignored() {
        // Only this test touches the variable in this process.
        // SAFETY: no other thread of this test binary reads or writes JOBS_ENV.
        unsafe { std::env::set_var(JOBS_ENV, "3") };
        assert_eq!(jobs(1024), 3);
        unsafe { std::env::set_var(JOBS_ENV, "0") };
        assert_eq!(jobs(1024), default_jobs(1024));
        unsafe { std::env::remove_var(JOBS_ENV) };
        assert!(default_jobs(1024) >= 1);
        // A guest larger than memory still gets one slot.
        assert_eq!(default_jobs(u32::MAX), 1);
    }
}
