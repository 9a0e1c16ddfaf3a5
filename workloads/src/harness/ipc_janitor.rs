//! A helper process that removes the workload's SysV IPC objects when the workload dies
//! without removing them itself: killed by SIGKILL (the tracer's parent-death signal when the
//! tracer is killed), or by the OOM killer. Every other exit path removes them through `Drop`.
//!
//! SysV objects belong to no process: an IPC_PRIVATE segment or queue stays in the kernel
//! until someone removes it. Of the ways to clean up after a SIGKILL this one was chosen
//! because it changes nothing that is measured:
//! - IPC_RMID right after creating: a shm segment nobody has attached vanishes at once, also
//!   from /proc/sysvipc/shm, which is what the workload reads; keeping each one attached costs
//!   a VMA per segment, and message queues cannot be kept at all.
//! - the next tracer run removing them: it cannot tell the workload's objects from other
//!   programs' (/proc/sysvipc/msg does not even say which process created a queue).
//! - a private IPC namespace, freed with its last process: the objects would no longer show in
//!   `ipcs` or /proc/sysvipc on the host, where users and tests look for them.
//!
//! The janitor blocks reading a pipe whose write end only the workload holds; the kernel
//! closes it however the workload ends. It then removes every id still listed in a page
//! shared with the workload, and exits. The workload lists an id right after creating it and
//! unlists it before removing it, so the janitor never removes an id the kernel may already
//! have given to someone else (a SIGKILL between creating and listing leaks that one object).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, fork};

use super::error::{Error, Result};
use super::signals;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpcKind {
    Shm,
    Msg,
}

/// A slot holds 0 (empty) or the kind's tag in the high half and the id in the low half.
fn encode(kind: IpcKind, id: i32) -> u64 {
    let tag: u64 = match kind {
        IpcKind::Shm => 1,
        IpcKind::Msg => 2,
    };
    (tag << 32) | u64::from(id as u32)
}

/// Remove the object a non-empty slot names. Async-signal-safe (one syscall).
fn remove(slot: u64) {
    let id = slot as u32 as i32;
    // SAFETY: IPC_RMID with no buffer on an id this workload created.
    unsafe {
        match slot >> 32 {
            1 => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
            2 => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
            _ => 0,
        };
    }
}

pub struct IpcJanitor {
    slots: *mut AtomicU64,
    len: usize,
    /// The write end of the janitor's pipe; closing it tells the janitor to clean up and go.
    release: Option<OwnedFd>,
    pid: Option<Pid>,
}

impl IpcJanitor {
    /// Start a janitor for up to `capacity` objects alive at once.
    pub fn start(capacity: usize) -> Result<IpcJanitor> {
        let len = capacity.max(1);
        let bytes = len * std::mem::size_of::<AtomicU64>();
        // SAFETY: a fresh anonymous mapping; zero-filled, so every slot starts empty.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::last_os(format!(
                "mmap ({bytes} bytes for the IPC janitor)"
            )));
        }
        let unmap = || {
            // SAFETY: the mapping made above, unused from here on.
            unsafe { libc::munmap(map, bytes) };
        };
        let (read, write) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(p) => p,
            Err(e) => {
                unmap();
                return Err(Error::sys("pipe2 (IPC janitor)", e));
            }
        };
        let slots = map.cast::<AtomicU64>();
        // SAFETY: the child makes only async-signal-safe calls (close, signal, read, shmctl,
        // msgctl, _exit) and atomic loads on the shared mapping.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => unsafe {
                libc::close(write.as_raw_fd());
                // A terminal's Ctrl-C reaches the whole process group; the workload handles it.
                signals::child_ignore_stop_signals();
                let mut byte = 0u8;
                loop {
                    let n = libc::read(read.as_raw_fd(), (&raw mut byte).cast(), 1);
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                for i in 0..len {
                    let slot = (*slots.add(i)).load(Ordering::SeqCst);
                    if slot != 0 {
                        remove(slot);
                    }
                }
                libc::_exit(0)
            },
            Ok(ForkResult::Parent { child }) => {
                drop(read);
                Ok(IpcJanitor {
                    slots,
                    len,
                    release: Some(write),
                    pid: Some(child),
                })
            }
            Err(e) => {
                unmap();
                Err(Error::sys("fork (IPC janitor)", e))
            }
        }
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len, "IPC janitor slot {i} of {}", self.len);
        // SAFETY: in bounds of the mapping, which lives as long as self.
        unsafe { &*self.slots.add(i) }
    }

    /// List object `id` in slot `i`, right after creating it.
    pub fn record(&self, i: usize, kind: IpcKind, id: i32) {
        self.slot(i).store(encode(kind, id), Ordering::SeqCst);
    }

    /// Unlist slot `i`, right before removing its object.
    pub fn forget(&self, i: usize) {
        self.slot(i).store(0, Ordering::SeqCst);
    }
}

impl Drop for IpcJanitor {
    fn drop(&mut self) {
        // The janitor wakes up, finds nothing listed (every set removed its objects) and exits.
        drop(self.release.take());
        if let Some(pid) = self.pid.take() {
            while let Err(Errno::EINTR) = waitpid(pid, None) {}
        }
        // SAFETY: the mapping made in start; the janitor that shared it has exited.
        unsafe {
            libc::munmap(
                self.slots.cast(),
                self.len * std::mem::size_of::<AtomicU64>(),
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shm_exists(id: i32) -> bool {
        let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
        // SAFETY: IPC_STAT into a buffer of the right type.
        unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) == 0 }
    }

    fn new_shm() -> i32 {
        // SAFETY: plain syscall.
        let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
        assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
        id
    }

    #[test]
    fn listed_objects_are_removed_when_the_owner_dies_and_unlisted_ones_are_not() {
        // Play the workload in a forked child that the test kills with SIGKILL; the ids come
        // back through a pipe.
        let (r, w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child only runs the janitor and shmget, then waits to be killed.
        let child = match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                let j = IpcJanitor::start(4).unwrap();
                let (listed, unlisted) = (new_shm(), new_shm());
                j.record(0, IpcKind::Shm, listed);
                j.record(1, IpcKind::Shm, unlisted);
                j.forget(1);
                // No allocation after fork in a threaded test binary.
                let mut ids = [0u8; 8];
                ids[..4].copy_from_slice(&listed.to_ne_bytes());
                ids[4..].copy_from_slice(&unlisted.to_ne_bytes());
                nix::unistd::write(&w, &ids).unwrap();
                std::mem::forget(j);
                loop {
                    // SAFETY: sleep until killed.
                    unsafe { libc::pause() };
                }
            }
            ForkResult::Parent { child } => child,
        };
        drop(w);
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            got += nix::unistd::read(&r, &mut buf[got..]).unwrap();
        }
        let listed = i32::from_ne_bytes(buf[..4].try_into().unwrap());
        let unlisted = i32::from_ne_bytes(buf[4..].try_into().unwrap());
        assert!(shm_exists(listed) && shm_exists(unlisted));
        nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL).unwrap();
        waitpid(child, None).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while shm_exists(listed) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let unlisted_left = shm_exists(unlisted);
        // SAFETY: removing the test's own segments.
        unsafe {
            libc::shmctl(unlisted, libc::IPC_RMID, std::ptr::null_mut());
            libc::shmctl(listed, libc::IPC_RMID, std::ptr::null_mut());
        }
        assert!(
            !shm_exists(listed),
            "the janitor did not remove the listed segment"
        );
        assert!(unlisted_left, "the janitor removed an unlisted segment");
    }

    #[test]
    fn a_normal_end_reaps_the_janitor_and_removes_nothing() {
        let id = new_shm();
        let j = IpcJanitor::start(1).unwrap();
        let pid = j.pid.unwrap();
        j.record(0, IpcKind::Shm, id);
        j.forget(0);
        drop(j);
        assert!(
            nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)).is_err(),
            "the janitor was not reaped"
        );
        let left = shm_exists(id);
        // SAFETY: removing the test's own segment.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        assert!(left, "an unlisted segment was removed");
    }
}
