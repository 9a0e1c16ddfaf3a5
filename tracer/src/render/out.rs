//! The output directory: every file is written under a temporary name in its final directory
//! and renamed into place, so a reader never sees a half-written file; SVGs are checked to be
//! well-formed before they are renamed. The staging directory is named and cleaned up like the
//! run writer's (see [`crate::staging`]): one a killed writer left is removed by the next.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::ReportError;
use super::xml::check_well_formed;

/// Signal number of a SIGINT/SIGTERM/SIGHUP caught while writing (0: none).
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    INTERRUPTED.store(sig, std::sync::atomic::Ordering::SeqCst);
}

/// Catch SIGINT, SIGTERM and SIGHUP from now on: the writer stops at the next file, removes its
/// staging directory and reports [`ReportError::Interrupted`].
pub fn catch_interrupts() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { sigaction(s, &act) };
    }
}

fn interrupted() -> Option<String> {
    let s = INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst);
    (s != 0).then(|| {
        nix::sys::signal::Signal::try_from(s)
            .map(|s| s.to_string())
            .unwrap_or_else(|_| format!("signal {s}"))
    })
}

pub struct OutDir {
    root: PathBuf,
    /// Where the staging directory `root` is renamed to by `commit`; None for a nested OutDir.
    dest: Option<PathBuf>,
    committed: bool,
    /// Paths written so far, relative to `root`, in order of writing (deduplicated).
    written: Vec<String>,
    seen: BTreeSet<String>,
}

impl OutDir {
    /// Stage a report for `dest` in a hidden sibling directory; `commit` moves it into place.
    /// Staging directories of dead tracers next to it are removed first.
    pub fn create(dest: &Path) -> Result<OutDir, ReportError> {
        use crate::staging::BeginError;
        let root = crate::staging::begin(dest, false).map_err(|e| {
            let source = match e {
                BeginError::Parent(_, source) | BeginError::Create(_, source) => source,
                // Only an exclusive begin looks for live writers; kept total all the same.
                BeginError::Busy(pid) => std::io::Error::other(format!("pid {pid} writes it")),
            };
            ReportError::Write {
                path: dest.to_path_buf(),
                source,
            }
        })?;
        Ok(OutDir {
            root,
            dest: Some(dest.to_path_buf()),
            committed: false,
            written: Vec::new(),
            seen: BTreeSet::new(),
        })
    }

    /// A directory inside this one's staging area (no staging of its own).
    pub fn nested(&self, sub: &str) -> Result<OutDir, ReportError> {
        let root = self.root.join(sub);
        std::fs::create_dir_all(&root).map_err(|source| ReportError::Write {
            path: root.clone(),
            source,
        })?;
        Ok(OutDir {
            root,
            dest: None,
            committed: false,
            written: Vec::new(),
            seen: BTreeSet::new(),
        })
    }

    /// Move the staged report into place, replacing an earlier one as a whole.
    pub fn commit(mut self) -> Result<(), ReportError> {
        let Some(dest) = self.dest.clone() else {
            return Ok(());
        };
        if let Some(sig) = interrupted() {
            return Err(ReportError::Interrupted(sig));
        }
        // Under sudo, the report is the invoking user's (before it becomes visible).
        crate::owner::hand_over(&self.root);
        crate::staging::move_into_place(&self.root, &dest).map_err(|e| {
            let (crate::staging::PlaceError::Aside(source)
            | crate::staging::PlaceError::Place(source)) = e;
            ReportError::Write { path: dest, source }
        })?;
        self.committed = true;
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Write `rel` (a relative path with `/` separators) atomically.
    pub fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<(), ReportError> {
        if let Some(sig) = interrupted() {
            return Err(ReportError::Interrupted(sig));
        }
        let path = self.root.join(rel);
        if rel.ends_with(".svg") {
            let text = std::str::from_utf8(bytes).map_err(|e| ReportError::Malformed {
                path: path.clone(),
                what: e.to_string(),
            })?;
            check_well_formed(text).map_err(|what| ReportError::Malformed {
                path: path.clone(),
                what,
            })?;
        }
        self.write_with(rel, |w| w.write_all(bytes))
    }

    /// Write `rel` atomically from a writer, for files too large to hold in memory (traces);
    /// returns what `fill` returned.
    pub fn write_with<T>(
        &mut self,
        rel: &str,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
    ) -> Result<T, ReportError> {
        if let Some(sig) = interrupted() {
            return Err(ReportError::Interrupted(sig));
        }
        let v = write_file_atomic(&self.root.join(rel), fill)?;
        if self.seen.insert(rel.to_string()) {
            self.written.push(rel.to_string());
        }
        Ok(v)
    }

    /// Absorb the files another renderer wrote under `sub/`.
    pub fn adopt(&mut self, sub: &str, files: &[String]) {
        for f in files {
            let rel = format!("{sub}/{f}");
            if self.seen.insert(rel.clone()) {
                self.written.push(rel);
            }
        }
    }

    pub fn written(&self) -> &[String] {
        &self.written
    }

    pub fn has(&self, rel: &str) -> bool {
        self.seen.contains(rel)
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if self.dest.is_some() && !self.committed {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// Write `path` under a temporary name in its directory (created if missing), synced, then
/// renamed into place: the file is either the old one or the complete new one. Nothing is
/// left behind on failure.
pub fn write_file_atomic<T>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
) -> Result<T, ReportError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|source| ReportError::Write {
        path: dir.clone(),
        source,
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        let v = fill(&mut f)?;
        f.sync_all()?;
        Ok(v)
    })();
    let v = match result {
        Ok(v) => v,
        Err(source) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(ReportError::Write {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    // A long write (a trace) may have been interrupted: keep the old file then.
    if let Some(sig) = interrupted() {
        let _ = std::fs::remove_file(&tmp);
        return Err(ReportError::Interrupted(sig));
    }
    std::fs::rename(&tmp, path).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        ReportError::Write {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok(v)
}

pub use crate::rundata::safe_component as safe;

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_atomically_and_refuses_bad_svg() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("report");
        let mut out = OutDir::create(&dest).unwrap();
        out.write("a/b.txt", b"hello").unwrap();
        let err = out.write("a/c.svg", b"<svg><g></svg>").unwrap_err();
        assert!(matches!(err, ReportError::Malformed { .. }), "{err}");
        assert!(!dest.exists(), "nothing is visible before commit");
        assert_eq!(out.written(), ["a/b.txt"]);
        out.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("a/b.txt")).unwrap(),
            "hello"
        );
        // No temporary files or staging directories are left behind.
        assert_eq!(names(&dest.join("a")), vec!["b.txt"]);
        assert_eq!(names(dir.path()), vec!["report"]);
        assert_eq!(safe("../x y"), "_.._x_y");
    }

    #[test]
    fn a_report_replaces_the_old_one_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("report");
        let mut out = OutDir::create(&dest).unwrap();
        out.write("old.txt", b"old").unwrap();
        out.commit().unwrap();
        // Abandoned (an error or a signal): the old report stays, the staging goes.
        let mut out = OutDir::create(&dest).unwrap();
        out.write("new.txt", b"new").unwrap();
        drop(out);
        assert_eq!(names(&dest), vec!["old.txt"]);
        assert_eq!(names(dir.path()), vec!["report"]);
        // Committed: the new report replaces the old one as a whole.
        let mut out = OutDir::create(&dest).unwrap();
        let mut side = out.nested("a").unwrap();
        side.write("x.txt", b"x").unwrap();
        out.adopt("a", side.written());
        out.write("new.txt", b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(names(&dest), vec!["a", "new.txt"]);
        assert_eq!(names(dir.path()), vec!["report"]);
    }
}
