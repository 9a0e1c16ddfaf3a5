//! Where things live. Guest binaries and VM caches always go under the workspace's own
//! `target/` (not `$CARGO_TARGET_DIR`), so tests and tools find them at fixed paths:
//! `target/x86_64-unknown-linux-musl/release/` and `target/vm/`.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    workspace_root().join("target")
}

/// `<workspace>/target/vm`: kernels, per-run directories, probe results.
pub fn vm_dir() -> PathBuf {
    target_dir().join("vm")
}

/// An advisory lock (flock) held until dropped; serialises work on a shared cache
/// between processes, e.g. two test binaries fetching the same kernel.
#[derive(Debug)]
pub struct FileLock {
    _file: fs::File,
}

impl FileLock {
    pub fn exclusive(path: &Path) -> io::Result<Self> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        loop {
            // SAFETY: flock on a valid fd.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(FileLock { _file: file });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}
