//! Writing a run directory atomically: everything goes into a hidden temporary directory next
//! to the destination, which is renamed into place only when every file was written. A crash,
//! a full disk or a signal leaves the destination untouched (absent, or the previous run when
//! `--force` replaces one). A SIGKILL or a crash leaves the temporary directory: the next
//! writer in the same directory removes it (see [`crate::staging`]).
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::staging;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0} already exists (choose another -o, or pass --force to replace it)")]
    Exists(PathBuf),
    #[error(
        "{path} is being written by another tracer right now (pid {pid}); wait for it to finish or choose another -o"
    )]
    Busy { path: PathBuf, pid: u32 },
    #[error("cannot write to {dir}: {source}")]
    NotWritable {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("moving the finished run into place at {path}: {source}")]
    Commit {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub struct DirWriter {
    dest: PathBuf,
    tmp: PathBuf,
    replace: bool,
    committed: bool,
}

impl DirWriter {
    /// Check the destination and create the temporary directory now, so an unwritable or
    /// existing output, or one another tracer is writing, fails before a long recording, not
    /// after it. Temporary directories of dead tracers next to it are removed first.
    pub fn prepare(dest: &Path, replace: bool) -> Result<DirWriter, OutputError> {
        if dest.exists() && !replace {
            return Err(OutputError::Exists(dest.to_path_buf()));
        }
        let tmp = staging::begin(dest, true).map_err(|e| match e {
            staging::BeginError::Parent(dir, source) | staging::BeginError::Create(dir, source) => {
                OutputError::NotWritable { dir, source }
            }
            staging::BeginError::Busy(pid) => OutputError::Busy {
                path: dest.to_path_buf(),
                pid,
            },
        })?;
        Ok(DirWriter {
            dest: dest.to_path_buf(),
            tmp,
            replace,
            committed: false,
        })
    }

    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The temporary directory being filled (for writers of nested outputs).
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Write `rel` (a relative path inside the run) with `bytes`.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), OutputError> {
        let path = self.tmp.join(rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|source| OutputError::Write {
                path: path.clone(),
                source,
            })?;
        }
        let mut f = fs::File::create(&path).map_err(|source| OutputError::Write {
            path: path.clone(),
            source,
        })?;
        f.write_all(bytes).map_err(|source| OutputError::Write {
            path: path.clone(),
            source,
        })?;
        // Errors like ENOSPC can surface only at flush/sync time on some filesystems.
        f.sync_all()
            .map_err(|source| OutputError::Write { path, source })?;
        Ok(())
    }

    /// Move the finished directory into place. The final rename never replaces anything:
    /// when another tracer put its output at the destination first, this one fails with
    /// `Exists` and the other's output stays whole.
    pub fn commit(mut self) -> Result<PathBuf, OutputError> {
        // Under sudo, the finished run is the invoking user's (before it becomes visible).
        crate::owner::hand_over(&self.tmp);
        let failed = |source: std::io::Error| match source.kind() {
            std::io::ErrorKind::AlreadyExists => OutputError::Exists(self.dest.clone()),
            _ => OutputError::Commit {
                path: self.dest.clone(),
                source,
            },
        };
        if self.dest.exists() && !self.replace {
            return Err(OutputError::Exists(self.dest.clone()));
        }
        staging::move_into_place(&self.tmp, &self.dest).map_err(|e| match e {
            staging::PlaceError::Aside(source) => OutputError::Commit {
                path: self.dest.clone(),
                source,
            },
            staging::PlaceError::Place(source) => failed(source),
        })?;
        self.committed = true;
        Ok(self.dest.clone())
    }
}

impl Drop for DirWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Run-data file names and output names are made safe the same way.
pub use crate::rundata::safe_component;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_is_all_or_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dest = root.path().join("run");
        {
            let w = DirWriter::prepare(&dest, false).unwrap();
            w.write("a/b.txt", b"x").unwrap();
            // dropped without commit
        }
        assert!(!dest.exists());
        assert_eq!(
            fs::read_dir(root.path()).unwrap().count(),
            0,
            "temporary dir left behind"
        );
        let w = DirWriter::prepare(&dest, false).unwrap();
        w.write("a/b.txt", b"x").unwrap();
        w.commit().unwrap();
        assert_eq!(fs::read(dest.join("a/b.txt")).unwrap(), b"x");
        assert!(matches!(
            DirWriter::prepare(&dest, false),
            Err(OutputError::Exists(_))
        ));
        let w = DirWriter::prepare(&dest, true).unwrap();
        w.write("c.txt", b"y").unwrap();
        w.commit().unwrap();
        assert!(dest.join("c.txt").exists());
        assert!(
            !dest.join("a/b.txt").exists(),
            "replaced run must not mix with the old one"
        );
    }

    #[test]
    fn unwritable_parent_fails_early() {
        let err = DirWriter::prepare(Path::new("/proc/definitely/not/here"), false);
        assert!(
            matches!(err, Err(OutputError::NotWritable { .. })),
            "{:?}",
            err.err()
        );
    }
}
