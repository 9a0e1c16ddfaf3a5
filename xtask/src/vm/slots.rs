//! How many guests run at once on this host, across every process that boots one.
//!
//! Under single-threaded TCG (the default) a guest keeps exactly one host core busy, so as
//! many guests as there are cores run side by side at full speed, and one more only slows
//! them all down. Every [`super::run`] takes a slot before it starts qemu and gives it back
//! when qemu is gone. The slots are files under `target/vm/slots/` locked with `flock`, so
//! concurrent test binaries, `cargo xtask run`'s kernels and a `cargo xtask vm` by hand all
//! share one limit, and a process that dies releases its slot with its file descriptors.
//!
//! Who gets a slot that frees: the waiting guest with the largest expected run
//! ([`super::VmConfig::expected_secs`]), the earliest to ask among equals. Waiters register
//! as files under `target/vm/slots/queue/`, each locked by its owner while it waits, so one
//! that died is seen as gone. Longest first is what keeps a batch of guests of uneven length
//! from ending on its longest one alone: in the suite, a three-minute boot that got its slot
//! last was the last minutes of the whole run on one core.
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

/// A waiter's entry in the queue: its file (locked while it waits), removed when dropped.
struct Waiting {
    /// Held for its lock, which goes with the descriptor.
    _file: fs::File,
    path: PathBuf,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// `<ns since the epoch>-<pid>-<seq>`: names that sort by when they were made.
fn waiter_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{ns:024}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn lock(file: &fs::File, how: libc::c_int) -> bool {
    // SAFETY: flock on a valid fd; LOCK_NB makes it return at once.
    unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) == 0 }
}

/// Join the queue under `queue` with `priority`.
fn enqueue(queue: &Path, priority: u64) -> io::Result<Waiting> {
    fs::create_dir_all(queue)?;
    let path = queue.join(waiter_name());
    let file = fs::File::create(&path)?;
    if !lock(&file, libc::LOCK_EX) {
        return Err(io::Error::last_os_error());
    }
    fs::write(&path, priority.to_string())?;
    Ok(Waiting { _file: file, path })
}

/// Whether a live waiter in `queue` goes before `me` (a larger priority, or the same and an
/// earlier name). Entries whose owner is gone (their lock is free) are removed.
fn someone_before(queue: &Path, me: &Waiting, priority: u64) -> bool {
    let Ok(entries) = fs::read_dir(queue) else {
        return false;
    };
    let mine = me.path.file_name();
    entries.flatten().any(|e| {
        let path = e.path();
        if path.file_name() == mine {
            return false;
        }
        let Ok(file) = fs::File::open(&path) else {
            return false;
        };
        if lock(&file, libc::LOCK_SH) {
            // Its owner died waiting, or is just leaving.
            let _ = fs::remove_file(&path);
            return false;
        }
        let theirs: u64 = fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        theirs > priority || (theirs == priority && path.file_name() < mine)
    })
}

/// Take one free slot of `jobs` in `dir`, if any.
fn try_take(dir: &Path, jobs: usize) -> io::Result<Option<(fs::File, usize)>> {
    for index in 0..jobs.max(1) {
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("slot-{index}")))?;
        if lock(&file, libc::LOCK_EX) {
            return Ok(Some((file, index)));
        }
        let e = io::Error::last_os_error();
        if !matches!(
            e.raw_os_error(),
            Some(libc::EWOULDBLOCK) | Some(libc::EINTR)
        ) {
            return Err(e);
        }
    }
    Ok(None)
}

/// Take one of `jobs` slots in `dir`, waiting as long as they are all held or a waiter with
/// a larger `priority` (its expected seconds) is queued. `on_wait` is called once, when the
/// first try finds no slot for this run.
pub fn acquire_in(
    dir: &Path,
    jobs: usize,
    priority: u64,
    on_wait: impl FnOnce(),
) -> io::Result<Slot> {
    fs::create_dir_all(dir)?;
    let queue = dir.join("queue");
    let started = Instant::now();
    let mut on_wait = Some(on_wait);
    // In the queue from the first try: a slot that frees goes to the longest run waiting,
    // not to whichever polls first.
    let me = enqueue(&queue, priority)?;
    loop {
        if !someone_before(&queue, &me, priority)
            && let Some((file, index)) = try_take(dir, jobs)?
        {
            return Ok(Slot {
                _file: file,
                index,
                waited: started.elapsed(),
            });
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

/// Take a slot under `target/vm/slots` for a guest of `guest_mb` expected to run
/// `priority` seconds.
pub fn acquire(guest_mb: u32, priority: u64, on_wait: impl FnOnce()) -> io::Result<Slot> {
    acquire_in(&slots_dir(), jobs(guest_mb), priority, on_wait)
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
        let a = acquire_in(d.path(), 2, 0, || panic!("a must not wait")).unwrap();
        let b = acquire_in(d.path(), 2, 0, || panic!("b must not wait")).unwrap();
        assert_ne!(a.index, b.index);
        // Both held: a third waits until one is dropped.
        let dir = d.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let mut waited = false;
            let s = acquire_in(&dir, 2, 0, || waited = true).unwrap();
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

    /// Three runs wait for one held slot, the shortest first: as it frees, the slot goes to
    /// the longest (then the next), not to the first to ask.
    #[test]
    fn a_freed_slot_goes_to_the_longest_run_waiting() {
        let d = tempfile::tempdir().unwrap();
        let held = acquire_in(d.path(), 1, 0, || panic!("must not wait")).unwrap();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for priority in [10, 300, 60] {
            let (dir, order) = (d.path().to_path_buf(), order.clone());
            waiters.push(std::thread::spawn(move || {
                let s = acquire_in(&dir, 1, priority, || {}).unwrap();
                order.lock().unwrap().push(priority);
                // Held a moment, as a guest would, so the next one waits for it.
                std::thread::sleep(Duration::from_millis(300));
                drop(s);
            }));
            // Each in the queue before the next asks.
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            order.lock().unwrap().is_empty(),
            "a waiter took a held slot"
        );
        drop(held);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![300, 60, 10]);
        // Nothing left queued.
        assert_eq!(fs::read_dir(d.path().join("queue")).unwrap().count(), 0);
    }

    /// A waiter whose process died (its file left unlocked) holds nobody up.
    #[test]
    fn a_dead_waiter_is_skipped_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let queue = d.path().join("queue");
        fs::create_dir_all(&queue).unwrap();
        let stale = queue.join("000000000000000000000001-1-0");
        fs::write(&stale, "999999").unwrap();
        let s = acquire_in(d.path(), 1, 0, || panic!("must not wait")).unwrap();
        assert!(!stale.exists());
        drop(s);
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
