//! Who owns what the tracer writes. `sudo tracer record` runs as root, but the run directory
//! is the invoking user's data: they re-render it with `tracer report` (no root needed), which
//! writes `report/` inside it, and delete it when done. So when the process runs as root under
//! sudo (`SUDO_UID`/`SUDO_GID` set to someone else), every directory and file the tracer
//! creates is given to that user; both output writers ([`crate::dir_writer::DirWriter`] and
//! [`crate::render::OutDir`]) go through [`create_dir_all`] and [`give_tree`] here.
//!
//! A failure to change ownership (a filesystem without owners, such as vfat, or an NFS export
//! that squashes root) does not lose the run: the caller logs it as a warning and keeps the
//! files, which stay root's.
use std::io;
use std::path::{Path, PathBuf};

/// The user to give outputs to, from sudo's environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot give {path} to uid {uid} gid {gid} (the user who ran sudo): {source}")]
pub struct OwnerError {
    pub path: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub source: io::Error,
}

/// The invoking user when this process is root under sudo; None otherwise (not root, not
/// under sudo, sudo from root itself, or variables that are not numbers).
pub fn invoking_user() -> Option<Owner> {
    from_env(
        nix::unistd::geteuid().is_root(),
        std::env::var("SUDO_UID").ok().as_deref(),
        std::env::var("SUDO_GID").ok().as_deref(),
    )
}

/// The decision of [`invoking_user`], separated from the process's state for tests.
fn from_env(euid_is_root: bool, sudo_uid: Option<&str>, sudo_gid: Option<&str>) -> Option<Owner> {
    // Only root can give files away; a non-root process's files are its user's already.
    if !euid_is_root {
        return None;
    }
    let uid: u32 = sudo_uid?.trim().parse().ok()?;
    let gid: u32 = sudo_gid?.trim().parse().ok()?;
    // `sudo` run by root: the files are root's either way.
    (uid != 0).then_some(Owner { uid, gid })
}

/// `std::fs::create_dir_all`, giving every directory it had to create to the invoking user.
/// Directories that existed keep their owner.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    // The missing ancestors, outermost first.
    let mut missing: Vec<&Path> = Vec::new();
    let mut p = Some(dir);
    while let Some(d) = p {
        if d.as_os_str().is_empty() || d.symlink_metadata().is_ok() {
            break;
        }
        missing.push(d);
        p = d.parent();
    }
    std::fs::create_dir_all(dir)?;
    if let Some(owner) = invoking_user() {
        for d in missing.iter().rev() {
            if let Err(e) = give(d, owner) {
                log::warn!("{e}");
            }
        }
    }
    Ok(())
}

/// Give `root` and everything under it to the invoking user (no-op when there is none).
/// Symbolic links are changed themselves, never followed.
pub fn give_tree(root: &Path) -> Result<(), OwnerError> {
    match invoking_user() {
        Some(owner) => give_tree_to(root, owner),
        None => Ok(()),
    }
}

/// [`give_tree`] for the output writers: a failure is a warning, since the run itself is
/// complete and only its owner is wrong (the message names the path and the user).
pub fn hand_over(root: &Path) {
    if let Err(e) = give_tree(root) {
        log::warn!("{e}; it stays root's (sudo chown -R it)");
    }
}

/// [`give_tree`] for an explicit owner.
pub fn give_tree_to(root: &Path, owner: Owner) -> Result<(), OwnerError> {
    let err = |path: &Path, source| OwnerError {
        path: path.to_path_buf(),
        uid: owner.uid,
        gid: owner.gid,
        source,
    };
    // An explicit stack: output trees (stacks/<kind>/<target>/<case>/...) are shallow, but a
    // stack costs nothing and cannot overflow.
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        give(&p, owner)?;
        let meta = p.symlink_metadata().map_err(|e| err(&p, e))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p).map_err(|e| err(&p, e))? {
                todo.push(entry.map_err(|e| err(&p, e))?.path());
            }
        }
    }
    Ok(())
}

fn give(path: &Path, owner: Owner) -> Result<(), OwnerError> {
    std::os::unix::fs::lchown(path, Some(owner.uid), Some(owner.gid)).map_err(|source| OwnerError {
        path: path.to_path_buf(),
        uid: owner.uid,
        gid: owner.gid,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn only_root_under_sudo_from_another_user_gives_files_away() {
        let o = Some(Owner {
            uid: 1000,
            gid: 100,
        });
        assert_eq!(from_env(true, Some("1000"), Some("100")), o);
        assert_eq!(from_env(true, Some(" 1000\n"), Some("100")), o);
        assert_eq!(from_env(false, Some("1000"), Some("100")), None);
        assert_eq!(from_env(true, None, Some("100")), None);
        assert_eq!(from_env(true, Some("1000"), None), None);
        assert_eq!(from_env(true, Some("0"), Some("0")), None);
        assert_eq!(from_env(true, Some("bob"), Some("100")), None);
        assert_eq!(from_env(true, Some("-1"), Some("100")), None);
    }

    /// Chowning to another user needs root; as anyone else, giving files to oneself must still
    /// walk the whole tree and succeed, and a missing path must fail with its name.
    #[test]
    fn gives_a_whole_tree_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("run");
        std::fs::create_dir_all(root.join("stacks/oncpu/t")).unwrap();
        std::fs::write(root.join("run.json"), b"{}").unwrap();
        std::fs::write(root.join("stacks/oncpu/t/n1.folded"), b"a 1\n").unwrap();
        // A link to a file outside the tree: its target must keep its owner.
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let (uid, gid) = if me == 0 {
            (65534, 65534)
        } else {
            (me, nix::unistd::getegid().as_raw())
        };
        give_tree_to(&root, Owner { uid, gid }).unwrap();
        for p in [
            "",
            "run.json",
            "stacks",
            "stacks/oncpu",
            "stacks/oncpu/t",
            "stacks/oncpu/t/n1.folded",
            "link",
        ] {
            let m = root.join(p).symlink_metadata().unwrap();
            assert_eq!((m.uid(), m.gid()), (uid, gid), "{p}");
        }
        let m = outside.metadata().unwrap();
        assert_eq!(m.uid(), me, "a link's target is not the tree's");
        let e = give_tree_to(&root.join("missing"), Owner { uid, gid }).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
