//! Each run's directory under `target/vm/runs/` (pruned to the newest 40) and the nonce
//! that tells the guest's markers from anything the command prints.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::VmError;
use crate::paths;

pub(super) fn nonce() -> String {
    let mut b = [0u8; 8];
    if fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        b = (t ^ ((std::process::id() as u64) << 32)).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A fresh `target/vm/runs/<time>-<pid>-<n>` directory.
pub(super) fn new_run_dir() -> Result<PathBuf, VmError> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let runs = paths::vm_dir().join("runs");
    prune_runs(&runs, 40);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let dir = runs.join(format!(
        "{t}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    fs::create_dir_all(&dir).map_err(|e| VmError::Io(dir.clone(), e))?;
    Ok(dir)
}

/// Keeps the newest `keep` run directories (names start with a millisecond timestamp).
fn prune_runs(runs: &Path, keep: usize) {
    let Ok(rd) = fs::read_dir(runs) else { return };
    let mut dirs: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    if dirs.len() <= keep {
        return;
    }
    dirs.sort();
    for d in &dirs[..dirs.len() - keep] {
        let _ = fs::remove_dir_all(d);
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_the_newest() {
        let d = tempfile::tempdir().unwrap();
        for n in ["100-1-0", "200-1-0", "300-1-0"] {
            fs::create_dir(d.path().join(n)).unwrap();
        }
        prune_runs(d.path(), 2);
        let mut left: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["200-1-0", "300-1-0"]);
    }
}
