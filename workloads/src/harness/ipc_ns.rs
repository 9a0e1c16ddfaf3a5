//! A fresh IPC namespace for each set of SysV objects a workload creates.
//!
//! The kernel hands out IPC ids cyclically (`idr_alloc_cyclic` below a bound that grows with
//! the objects in use), so in a long-lived namespace a new set's ids, and with them how far
//! 5.10's sysvipc_find_ipc scans to find each one, depend on every set created before it: a
//! loop count of the scan read 16.2, 71.5 and 202 `idr_find` calls per call at N = 10, 100
//! and 400, not the N/2 + 1 of ids packed from 0. In a namespace of its own a set's ids start
//! at 0 as on a fresh system, no other program's objects are listed beside them, and the
//! kernel frees them when the namespace ends, however the process ends.
//!
//! unshare(CLONE_NEWIPC) needs CAP_SYS_ADMIN; without it the objects stay in the caller's
//! namespace (watched by `ipc_janitor`).

use super::error::{Error, Result};
use super::limits::Limits;

/// The IPC limits a new namespace starts from its defaults (kernel.shmmni 4096, ...), copied
/// from the namespace the workload was started in, which its checks were made against.
const COPIED: [&str; 4] = ["shmmni", "shmall", "shmmax", "msgmni"];

/// Move this process into a new IPC namespace with the limits of `host` (the limits read at
/// start). Err: the kernel refused the namespace (no CAP_SYS_ADMIN, or a kernel without
/// CONFIG_IPC_NS); the process is then still where it was.
pub fn enter_fresh(host: &Limits) -> Result<()> {
    // SAFETY: unshare with one flag; no memory is passed.
    if unsafe { libc::unshare(libc::CLONE_NEWIPC) } != 0 {
        return Err(Error::last_os("unshare(CLONE_NEWIPC)"));
    }
    let values = [host.shmmni, host.shmall, host.shmmax, host.msgmni];
    for (name, value) in COPIED.iter().zip(values) {
        let Some(v) = value else { continue };
        let path = format!("/proc/sys/kernel/{name}");
        let now = std::fs::read_to_string(&path).ok();
        if now.as_deref().map(str::trim) != Some(v.to_string().as_str()) {
            std::fs::write(&path, v.to_string())
                .map_err(|e| Error::io(format!("writing {path} in a new IPC namespace"), e))?;
        }
    }
    Ok(())
}
