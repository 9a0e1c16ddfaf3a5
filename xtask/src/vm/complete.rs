//! Which of a stopped command's output entries are complete. Used by `vm-init` in the guest
//! when a run is cut short (the timeout, an interrupt): it stops the command, but what the
//! command had finished must still come back, told apart from what it was in the middle of.
//!
//! # The rule
//! At the stop every process but init is frozen (SIGSTOP) and `vm-init` records [`AtStop`]:
//! every entry under `/out` ([`Tree`]: inode, type and mode, size, mtime, ctime) and every
//! path there that some process has open for writing or mapped shared-writable
//! ([`open_for_writing`]). Then the command gets SIGTERM (it may finish up: the tracer turns
//! an interrupted sweep into a partial one), later SIGKILL. Once nothing runs any more the
//! tree is recorded again. An entry, at any depth, is **complete** when
//!
//! - no component of its path is hidden (starts with `.`): work in progress lives there by
//!   convention, as in the tracer's staging directories, which are renamed into place when
//!   finished;
//! - nothing at or under it was open for writing (or mapped shared-writable) at the stop;
//! - it and everything under it is the same after the command ended as at the stop: nothing
//!   added, removed, written, truncated, renamed or chmod-ed by the command's last breath.
//!
//! [`complete_entries`] lists the largest complete entries (a complete directory, not its
//! files). "Complete" means every file in it had been closed and left alone: whether a
//! directory of several files was a finished *result* only its writer knows, so a writer that
//! builds results of several files publishes each one atomically (a hidden directory renamed
//! into place), as the tracer does with its sweeps and runs. Entries that appeared after the
//! stop (an interrupted sweep written out as partial) are not complete.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a writer can change about one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    ino: u64,
    /// File type and permission bits.
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Every entry under a root, by its path relative to the root (the root itself excluded).
/// Symlinks are recorded, never followed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree(BTreeMap<PathBuf, Stamp>);

impl Tree {
    pub fn capture(root: &Path) -> io::Result<Tree> {
        let mut t = BTreeMap::new();
        walk(root, Path::new(""), &mut t)?;
        Ok(Tree(t))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn walk(root: &Path, rel: &Path, into: &mut BTreeMap<PathBuf, Stamp>) -> io::Result<()> {
    for e in fs::read_dir(root.join(rel))? {
        let e = e?;
        let rel = rel.join(e.file_name());
        let m = match fs::symlink_metadata(root.join(&rel)) {
            Ok(m) => m,
            // Removed since the directory was read (only possible while something runs).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        into.insert(
            rel.clone(),
            Stamp {
                ino: m.ino(),
                mode: m.mode(),
                size: m.size(),
                mtime: (m.mtime(), m.mtime_nsec()),
                ctime: (m.ctime(), m.ctime_nsec()),
            },
        );
        if m.file_type().is_dir() {
            walk(root, &rel, into)?;
        }
    }
    Ok(())
}

/// The output directory as the stop found it.
#[derive(Debug, Clone, Default)]
pub struct AtStop {
    pub tree: Tree,
    /// Paths (relative to the root) open for writing or mapped shared-writable.
    pub writing: BTreeSet<PathBuf>,
}

impl AtStop {
    /// Call with every writer frozen, or the two parts may disagree.
    pub fn capture(root: &Path) -> io::Result<AtStop> {
        Ok(AtStop {
            writing: open_for_writing(root)?,
            tree: Tree::capture(root)?,
        })
    }
}

/// Paths under `root` (relative to it) that a process has open for writing (an fd opened
/// write-only or read-write) or mapped shared and writable, from `/proc`. Processes that go
/// away during the scan, or whose files cannot be read, are skipped.
pub fn open_for_writing(root: &Path) -> io::Result<BTreeSet<PathBuf>> {
    let root = root.canonicalize()?;
    let mut found = BTreeSet::new();
    let mut add = |target: &Path| {
        if let Ok(rel) = target.strip_prefix(&root)
            && !rel.as_os_str().is_empty()
        {
            found.insert(rel.to_path_buf());
        }
    };
    for p in fs::read_dir("/proc")?.flatten() {
        let name = p.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let proc_dir = p.path();
        if let Ok(fds) = fs::read_dir(proc_dir.join("fd")) {
            for fd in fds.flatten() {
                let Ok(target) = fs::read_link(fd.path()) else {
                    continue;
                };
                let info = fs::read_to_string(proc_dir.join("fdinfo").join(fd.file_name()))
                    .unwrap_or_default();
                if fd_flags(&info).is_some_and(|f| f & libc::O_ACCMODE as u32 != 0) {
                    add(&target);
                }
            }
        }
        if let Ok(maps) = fs::read_to_string(proc_dir.join("maps")) {
            for (perms, path) in maps.lines().filter_map(mapping) {
                // rw-s / -w-s: written through the mapping, into the file.
                if perms.as_bytes().get(1) == Some(&b'w') && perms.as_bytes().get(3) == Some(&b's')
                {
                    add(Path::new(path));
                }
            }
        }
    }
    Ok(found)
}

/// The open flags (octal) from a `/proc/PID/fdinfo/FD` text.
fn fd_flags(fdinfo: &str) -> Option<u32> {
    let v = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))?
        .trim();
    u32::from_str_radix(v, 8).ok()
}

/// (permissions, path) of a `/proc/PID/maps` line that maps a file.
fn mapping(line: &str) -> Option<(&str, &str)> {
    // address perms offset dev inode pathname; the pathname may hold spaces.
    let mut rest = line;
    let mut fields = [""; 5];
    for f in &mut fields {
        rest = rest.trim_start();
        let end = rest.find(' ').unwrap_or(rest.len());
        *f = &rest[..end];
        rest = &rest[end..];
    }
    let path = rest.trim_start();
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    path.starts_with('/').then_some((fields[1], path))
}

fn hidden(rel: &Path) -> bool {
    rel.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

/// The largest complete entries (see the module doc), in walk order: complete directories
/// stand for everything under them.
pub fn complete_entries(at_stop: &AtStop, after: &Tree) -> Vec<PathBuf> {
    let before = &at_stop.tree.0;
    let after = &after.0;
    // Everything that disqualifies an entry disqualifies every directory above it too.
    let mut spoilt: BTreeSet<&Path> = BTreeSet::new();
    let changed = before
        .keys()
        .chain(after.keys())
        .filter(|p| hidden(p) || before.get(*p) != after.get(*p));
    for p in changed.chain(&at_stop.writing) {
        for a in p.ancestors() {
            if a.as_os_str().is_empty() || !spoilt.insert(a) {
                break;
            }
        }
    }
    let mut complete: Vec<PathBuf> = Vec::new();
    for p in after.keys() {
        if spoilt.contains(p.as_path()) || complete.last().is_some_and(|c| p.starts_with(c)) {
            continue;
        }
        complete.push(p.clone());
    }
    complete
}

/// What is not complete among `entries` (everything that came back, parents before
/// children), given the largest complete entries: the largest parts with nothing complete
/// in them.
pub fn incomplete_entries(entries: &[PathBuf], complete: &[PathBuf]) -> Vec<PathBuf> {
    let mut incomplete: Vec<PathBuf> = Vec::new();
    for e in entries {
        let covered = complete.iter().any(|c| e.starts_with(c));
        let holds_complete = complete.iter().any(|c| c.starts_with(e));
        let under_incomplete = incomplete.iter().any(|i| e.starts_with(i));
        if !covered && !holds_complete && !under_incomplete {
            incomplete.push(e.clone());
        }
    }
    incomplete
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn paths(v: &[PathBuf]) -> Vec<String> {
        v.iter().map(|p| p.display().to_string()).collect()
    }

    /// A command's /out as the stop finds it and as it ends: a finished result, a log
    /// still open, a staging directory in progress, a directory with one finished file and
    /// one rewritten after the stop, and a result that appears only after the stop.
    #[test]
    fn the_rule_tells_finished_entries_from_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        fs::create_dir_all(root.join("sweep-a/run")).unwrap();
        fs::write(root.join("sweep-a/sweep.json"), "{}").unwrap();
        fs::write(root.join("sweep-a/run/run.json"), "{}").unwrap();
        let mut log = fs::File::create(root.join("log")).unwrap();
        log.write_all(b"started\n").unwrap();
        fs::create_dir_all(root.join(".sweep-b.partial-42")).unwrap();
        fs::write(root.join(".sweep-b.partial-42/x"), "x").unwrap();
        fs::create_dir(root.join("results")).unwrap();
        fs::write(root.join("results/1.txt"), "one").unwrap();
        fs::write(root.join("results/2.txt"), "tw").unwrap();
        fs::write(root.join("mapped"), [0u8; 4096]).unwrap();
        let map_file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(root.join("mapped"))
            .unwrap();
        // SAFETY: a fresh shared mapping of a file this test owns, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&map_file),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        drop(map_file);

        let at_stop = AtStop::capture(root).unwrap();
        assert_eq!(
            at_stop.writing,
            ["log", "mapped"].into_iter().map(PathBuf::from).collect()
        );
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(map, 4096) };
        // The command's last breath: a line more in the log, a file finished, a new result.
        log.write_all(b"stopping\n").unwrap();
        drop(log);
        // (Timestamps must be able to differ.)
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(root.join("results/2.txt"), "two").unwrap();
        fs::create_dir(root.join("sweep-c")).unwrap();
        fs::write(root.join("sweep-c/sweep.json"), "{\"partial\":true}").unwrap();
        let after = Tree::capture(root).unwrap();

        let complete = complete_entries(&at_stop, &after);
        assert_eq!(paths(&complete), ["results/1.txt", "sweep-a"]);
        let entries: Vec<PathBuf> = after.0.keys().cloned().collect();
        assert_eq!(
            paths(&incomplete_entries(&entries, &complete)),
            [
                ".sweep-b.partial-42",
                "log",
                "mapped",
                "results/2.txt",
                "sweep-c"
            ]
        );
    }

    #[test]
    fn an_untouched_tree_is_complete_at_the_top() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("a/b")).unwrap();
        fs::write(d.path().join("a/b/f"), "f").unwrap();
        fs::write(d.path().join("g"), "g").unwrap();
        let at_stop = AtStop::capture(d.path()).unwrap();
        let after = Tree::capture(d.path()).unwrap();
        assert_eq!(after.len(), 4);
        assert_eq!(paths(&complete_entries(&at_stop, &after)), ["a", "g"]);
        // A file removed after the stop spoils its directory, not its siblings.
        fs::remove_file(d.path().join("a/b/f")).unwrap();
        fs::write(d.path().join("a/h"), "h").unwrap();
        let after = Tree::capture(d.path()).unwrap();
        assert_eq!(paths(&complete_entries(&at_stop, &after)), ["g"]);
    }

    #[test]
    fn proc_texts_parse() {
        assert_eq!(
            fd_flags("pos:\t0\nflags:\t0100001\nmnt_id:\t25\n"),
            Some(0o100001)
        );
        assert_eq!(fd_flags("pos: 0\n"), None);
        assert_eq!(
            mapping("7f0000-7f1000 rw-s 00000000 00:1a 12  /out/a b (deleted)"),
            Some(("rw-s", "/out/a b"))
        );
        assert_eq!(mapping("7f0000-7f1000 rw-p 00000000 00:00 0 "), None);
        assert_eq!(mapping("7ffd-7ffe rw-p 00000000 00:00 0  [stack]"), None);
    }
}
