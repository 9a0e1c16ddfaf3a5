//! The output directory: every file is written under a temporary name in its final directory
//! and renamed into place, so a reader never sees a half-written file; SVGs are checked to be
//! well-formed before they are renamed.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::ReportError;
use super::xml::check_well_formed;

pub struct OutDir {
    root: PathBuf,
    /// Paths written so far, relative to `root`, in order of writing (deduplicated).
    written: Vec<String>,
    seen: BTreeSet<String>,
}

impl OutDir {
    pub fn create(root: &Path) -> Result<OutDir, ReportError> {
        std::fs::create_dir_all(root).map_err(|source| ReportError::Write {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(OutDir {
            root: root.to_path_buf(),
            written: Vec::new(),
            seen: BTreeSet::new(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Write `rel` (a relative path with `/` separators) atomically.
    pub fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<(), ReportError> {
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
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
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
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(source) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(ReportError::Write { path, source });
        }
        if self.seen.insert(rel.to_string()) {
            self.written.push(rel.to_string());
        }
        Ok(())
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

/// A file-name component made of safe characters only.
pub fn safe(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.starts_with('.') {
        format!("_{cleaned}")
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_and_refuses_bad_svg() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = OutDir::create(dir.path()).unwrap();
        out.write("a/b.txt", b"hello").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b.txt")).unwrap(),
            "hello"
        );
        let err = out.write("a/c.svg", b"<svg><g></svg>").unwrap_err();
        assert!(matches!(err, ReportError::Malformed { .. }), "{err}");
        assert!(!dir.path().join("a/c.svg").exists());
        // No temporary files are left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path().join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["b.txt"]);
        assert_eq!(out.written(), ["a/b.txt"]);
        assert_eq!(safe("../x y"), "_.._x_y");
    }
}
