//! The hidden directories both output writers stage their work in, next to the destination:
//! `.NAME.partial-PID` while writing, `.NAME.partial-PID.old` for an earlier output being
//! replaced. A writer that is stopped by a signal it can catch removes them; one killed by
//! SIGKILL or a crash cannot, so every writer first removes those of dead tracers in the
//! directory it writes to, and refuses to race a live tracer for the same destination.
use std::io;
use std::path::{Path, PathBuf};

const PARTIAL: &str = ".partial-";
const OLD: &str = ".old";

/// This process's staging directory for `parent/name`.
pub fn staging_path(parent: &Path, name: &str) -> PathBuf {
    parent.join(format!(".{name}{PARTIAL}{}", std::process::id()))
}

/// Where the output being replaced waits while the new one moves into place. It carries the
/// writer's pid, so a writer killed between the two renames can be recognized and undone.
pub fn old_path(staging: &Path) -> PathBuf {
    let mut s = staging.as_os_str().to_owned();
    s.push(OLD);
    PathBuf::from(s)
}

/// A staging entry's (NAME, PID, is_old), or None for any other name.
fn parse(file_name: &str) -> Option<(&str, u32, bool)> {
    let rest = file_name.strip_prefix('.')?;
    let (rest, old) = match rest.strip_suffix(OLD) {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let (name, pid) = rest.rsplit_once(PARTIAL)?;
    if name.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, pid.parse().ok()?, old))
}

/// (comm, state) from the text of /proc/PID/stat; comm may hold spaces and parentheses.
fn comm_and_state(stat: &str) -> Option<(&str, char)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let state = stat
        .get(close + 1..)?
        .split_whitespace()
        .next()?
        .chars()
        .next()?;
    Some((stat.get(open + 1..close)?, state))
}

fn own_comm() -> Option<String> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    comm_and_state(&stat).map(|(c, _)| c.to_string())
}

/// Whether the process that created a staging entry may still be writing it. Its pid may
/// have been reused since it died: a live process with another name than ours (another
/// program) is not the writer. A zombie is dead. When /proc cannot tell, assume alive: a
/// leftover costs disk space, removing a live writer's work would lose its run.
fn writer_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    let Some((comm, state)) = comm_and_state(&stat) else {
        return true;
    };
    if matches!(state, 'Z' | 'X' | 'x') {
        return false;
    }
    // A tracer of another build or path still has our name (the binary's file name); a
    // reused pid held by another tracer keeps the entry until that one exits, which errs on
    // the safe side.
    own_comm().is_none_or(|ours| ours == comm)
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Remove the staging entries in `parent` left by tracers that are gone. An output that was
/// being replaced when its writer died (`.NAME.partial-PID.old` without NAME) is moved back,
/// as it is the last complete one. Best effort: what cannot be removed now is left for a later
/// run. Returns the entries cleaned up.
pub fn remove_stale(parent: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut cleaned = Vec::new();
    for e in rd.flatten() {
        let file_name = e.file_name();
        let Some((name, pid, old)) = file_name.to_str().and_then(parse) else {
            continue;
        };
        let path = e.path();
        if !is_real_dir(&path) || writer_alive(pid) {
            continue;
        }
        let dest = parent.join(name);
        let done = if old && std::fs::symlink_metadata(&dest).is_err() {
            rename_noreplace(&path, &dest).is_ok()
        } else {
            std::fs::remove_dir_all(&path).is_ok()
        };
        if done {
            cleaned.push(path);
        }
    }
    cleaned
}

/// The pid of another live tracer staging `parent/name` right now, if any.
pub fn live_writer(parent: &Path, name: &str) -> Option<u32> {
    std::fs::read_dir(parent).ok()?.flatten().find_map(|e| {
        let file_name = e.file_name();
        let (n, pid, old) = parse(file_name.to_str()?)?;
        (n == name && !old && pid != std::process::id() && writer_alive(pid)).then_some(pid)
    })
}

/// The directory a writer of `dest` works in (`.` for a bare name) and dest's file name.
fn parent_and_name(dest: &Path) -> (PathBuf, String) {
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (parent, name)
}

/// Why [`begin`] could not stage.
#[derive(Debug)]
pub enum BeginError {
    /// The destination's parent directory could not be created.
    Parent(PathBuf, io::Error),
    /// Another live tracer is staging the same destination (its pid).
    Busy(u32),
    /// The staging directory could not be created in the parent.
    Create(PathBuf, io::Error),
}

/// Start writing `dest`: create its parent, remove what dead tracers left there, and create
/// this process's empty staging directory, which is returned. With `exclusive`, refuse while
/// another live tracer stages the same destination; two that start at the same moment both
/// pass, and [`move_into_place`]'s rename lets exactly one win.
pub fn begin(dest: &Path, exclusive: bool) -> Result<PathBuf, BeginError> {
    let (parent, name) = parent_and_name(dest);
    crate::owner::create_dir_all(&parent).map_err(|e| BeginError::Parent(parent.clone(), e))?;
    remove_stale(&parent);
    if exclusive && let Some(pid) = live_writer(&parent, &name) {
        return Err(BeginError::Busy(pid));
    }
    let staging = staging_path(&parent, &name);
    if staging.exists() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    std::fs::create_dir(&staging).map_err(|e| BeginError::Create(parent, e))?;
    Ok(staging)
}

/// Why [`move_into_place`] failed; the destination then holds what it held before, or what
/// another writer put there meanwhile.
#[derive(Debug)]
pub enum PlaceError {
    /// The existing destination could not be moved aside.
    Aside(io::Error),
    /// The staging directory could not be renamed to the destination (`AlreadyExists`:
    /// another writer's output took the place).
    Place(io::Error),
}

/// Rename a finished staging directory to `dest`, never over anything. An existing `dest` is
/// moved aside first and removed after, so a failure leaves one complete copy (a crash
/// between the renames leaves it under a name the next writer restores).
pub fn move_into_place(staging: &Path, dest: &Path) -> Result<(), PlaceError> {
    if !dest.exists() {
        return rename_noreplace(staging, dest).map_err(PlaceError::Place);
    }
    let old = old_path(staging);
    std::fs::rename(dest, &old).map_err(PlaceError::Aside)?;
    if let Err(e) = rename_noreplace(staging, dest) {
        if rename_noreplace(&old, dest).is_err() && dest.exists() {
            // Another writer's output took the place meanwhile: it stays.
            let _ = std::fs::remove_dir_all(&old);
        }
        return Err(PlaceError::Place(e));
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// Rename `from` to `to` unless `to` exists, in one step (renameat2 RENAME_NOREPLACE), so two
/// writers racing for one destination cannot both win: the second gets `AlreadyExists`. Where
/// the kernel or filesystem lacks the flag, check and rename (a narrow window remains).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // RENAME_NOREPLACE (linux/fs.h); called through syscall(2) so no libc version matters.
    const RENAME_NOREPLACE: libc::c_uint = 1;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            std::fs::rename(from, to)
        }
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn names_parse_back() {
        assert_eq!(parse(".run.partial-12"), Some(("run", 12, false)));
        assert_eq!(
            parse(".sweep-6.1.partial-7.old"),
            Some(("sweep-6.1", 7, true))
        );
        assert_eq!(
            parse(".a.partial-b.partial-9"),
            Some(("a.partial-b", 9, false))
        );
        for bad in [
            "run.partial-1",
            ".partial-1",
            ".run.partial-",
            ".run.partial-1x",
            ".run",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let s = staging_path(Path::new("/x"), "run");
        let name = s.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse(name), Some(("run", std::process::id(), false)));
        let o = old_path(&s);
        let name = o.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse(name), Some(("run", std::process::id(), true)));
    }

    /// A pid that was just used and is now free.
    fn dead_pid() -> u32 {
        let mut c = Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        c.id()
    }

    #[test]
    fn only_dead_writers_entries_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        let dead = dead_pid();
        // A live process of another program holds a pid that a dead writer once had.
        let mut other = Command::new("sleep").arg("30").spawn().unwrap();
        // A live process with our name: the entry is kept even though its owner is not us.
        let ours = own_comm().unwrap();
        let twin_bin = dir.join(&ours);
        std::fs::copy("/bin/sleep", &twin_bin).unwrap();
        // ETXTBSY while another test thread's fork still holds the copy open for writing.
        let mut twin = (0..50)
            .find_map(|_| match Command::new(&twin_bin).arg("30").spawn() {
                Ok(c) => Some(c),
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    None
                }
                Err(e) => panic!("starting {}: {e}", twin_bin.display()),
            })
            .expect("the copy stayed busy");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let entry = |name: &str, pid: u32| {
            let p = dir.join(format!(".{name}.partial-{pid}"));
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("run.json"), b"{}").unwrap();
            p
        };
        let stale_dead = entry("a", dead);
        let stale_reused = entry("b", other.id());
        let live_twin = entry("c", twin.id());
        let live_self = entry("d", std::process::id());
        // A replace interrupted between its two renames: the old output comes back.
        let old = old_path(&dir.join(format!(".e.partial-{dead}")));
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("run.json"), b"old").unwrap();
        // An old output whose replacement made it into place: removed.
        let old_done = old_path(&entry("f", dead));
        std::fs::rename(dir.join(format!(".f.partial-{dead}")), dir.join("f")).unwrap();
        std::fs::create_dir(&old_done).unwrap();
        // Not ours: a file, an unrelated hidden directory.
        std::fs::write(dir.join(format!(".g.partial-{dead}")), b"").unwrap();
        std::fs::create_dir(dir.join(".h.cache")).unwrap();

        assert_eq!(live_writer(dir, "c"), Some(twin.id()));
        assert_eq!(live_writer(dir, "a"), None, "a dead writer is not live");
        assert_eq!(live_writer(dir, "b"), None, "a reused pid is not a writer");
        assert_eq!(live_writer(dir, "d"), None, "we do not race ourselves");

        let mut cleaned = remove_stale(dir);
        cleaned.sort();
        let mut want = vec![
            stale_dead.clone(),
            stale_reused.clone(),
            old.clone(),
            old_done,
        ];
        want.sort();
        assert_eq!(cleaned, want);
        assert!(!stale_dead.exists() && !stale_reused.exists());
        assert!(live_twin.exists() && live_self.exists());
        assert_eq!(std::fs::read(dir.join("e/run.json")).unwrap(), b"old");
        assert!(dir.join("f").is_dir());
        assert!(dir.join(format!(".g.partial-{dead}")).is_file());
        assert!(dir.join(".h.cache").is_dir());
        for c in [&mut other, &mut twin] {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Once the twin is gone (and reaped), its entry is stale too.
        assert_eq!(remove_stale(dir), vec![live_twin]);
    }

    #[test]
    fn rename_noreplace_never_replaces() {
        let root = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            root.path().join("a"),
            root.path().join("b"),
            root.path().join("c"),
        );
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        // Even an empty directory, which rename(2) would silently replace.
        let err = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(a.is_dir());
        rename_noreplace(&a, &c).unwrap();
        assert!(!a.exists() && c.is_dir());
    }
}
