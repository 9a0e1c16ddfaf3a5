//! The guest's pseudo-filesystems, mounted before the command runs.

use std::fs;
use std::io;
use std::path::Path;

use xtask::protocol;

/// Mounts are best-effort: a kernel without, say, tracefs still runs the command, and
/// the warning on the console explains a later failure.
pub(crate) fn mount_all() {
    const NOSUID: libc::c_ulong = libc::MS_NOSUID;
    const NODEV: libc::c_ulong = libc::MS_NODEV;
    const NOEXEC: libc::c_ulong = libc::MS_NOEXEC;
    let mounts: &[(&str, &str, &str, libc::c_ulong, &str)] = &[
        ("proc", "/proc", "proc", NOSUID | NODEV | NOEXEC, ""),
        ("sysfs", "/sys", "sysfs", NOSUID | NODEV | NOEXEC, ""),
        ("devtmpfs", "/dev", "devtmpfs", NOSUID, "mode=0755"),
        (
            "devpts",
            "/dev/pts",
            "devpts",
            NOSUID | NOEXEC,
            "ptmxmode=0666",
        ),
        ("tmpfs", "/dev/shm", "tmpfs", NOSUID | NODEV, "mode=1777"),
        (
            "tracefs",
            "/sys/kernel/tracing",
            "tracefs",
            NOSUID | NODEV | NOEXEC,
            "",
        ),
        (
            "debugfs",
            "/sys/kernel/debug",
            "debugfs",
            NOSUID | NODEV | NOEXEC,
            "",
        ),
        (
            "bpf",
            "/sys/fs/bpf",
            "bpf",
            NOSUID | NODEV | NOEXEC,
            "mode=0700",
        ),
        (
            "cgroup2",
            "/sys/fs/cgroup",
            "cgroup2",
            NOSUID | NODEV | NOEXEC,
            "",
        ),
        ("tmpfs", "/tmp", "tmpfs", NOSUID | NODEV, "mode=1777"),
        ("tmpfs", "/run", "tmpfs", NOSUID | NODEV, "mode=0755"),
        (
            "tmpfs",
            protocol::OUT_DIR,
            "tmpfs",
            NOSUID | NODEV,
            "mode=0755",
        ),
    ];
    for &(src, target, fstype, flags, data) in mounts {
        let _ = fs::create_dir_all(target);
        let r = if fstype == "tmpfs" {
            mount_tmpfs_keeping_contents(target, flags, data)
        } else {
            mount(src, target, fstype, flags, data)
        };
        if let Err(e) = r {
            eprintln!("vm-init: warning: mount {fstype} on {target}: {e}");
        }
    }
}

/// A tmpfs mounted over a directory would hide what the initramfs put there (an
/// `--include` of a host /tmp path, say). So: mount it on a staging directory, copy the
/// old contents in, and move the mount into place.
fn mount_tmpfs_keeping_contents(target: &str, flags: libc::c_ulong, data: &str) -> io::Result<()> {
    let empty = fs::read_dir(target)?.next().is_none();
    if empty {
        return mount("tmpfs", target, "tmpfs", flags, data);
    }
    let staging = "/.vm-init-staging";
    fs::create_dir_all(staging)?;
    mount("tmpfs", staging, "tmpfs", flags, data)?;
    copy_tree(Path::new(target), Path::new(staging))?;
    // The originals would only waste memory under the mount.
    for e in fs::read_dir(target)? {
        let p = e?.path();
        let _ = if p.is_dir() && !p.is_symlink() {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
    }
    mount(staging, target, "", libc::MS_MOVE, "")?;
    let _ = fs::remove_dir(staging);
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    for e in fs::read_dir(from)? {
        let e = e?;
        let src = e.path();
        let dst = to.join(e.file_name());
        let meta = fs::symlink_metadata(&src)?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            fs::create_dir(&dst)?;
            copy_tree(&src, &dst)?;
            fs::set_permissions(&dst, meta.permissions())?;
        } else {
            // fs::copy keeps the permission bits.
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn mount(
    src: &str,
    target: &str,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in mount arguments");
    let (src, target, fstype, data) = (c(src), c(target), c(fstype), c(data));
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
