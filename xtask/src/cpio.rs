//! A writer for the "newc" cpio format (magic `070701`), the format the Linux kernel
//! unpacks as an initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
//!
//! The archive is assembled in memory as a sorted map of paths, so that every parent
//! directory is emitted before its children (the kernel's unpacker does not create
//! missing parents) and the output is deterministic for the same input.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

const MAGIC: &[u8; 6] = b"070701";
const TRAILER: &str = "TRAILER!!!";

/// File type bits of `st_mode`.
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

#[derive(Debug, thiserror::Error)]
pub enum CpioError {
    #[error("invalid archive path {0:?}: must be non-empty and contain no `..`")]
    BadPath(String),
    #[error("{path:?} is a directory in the archive and cannot also be a {kind}")]
    DirConflict { path: String, kind: &'static str },
    #[error("{path:?} has a non-directory parent {parent:?} in the archive")]
    ParentNotDir { path: String, parent: String },
    #[error("reading host path {path}: {source}")]
    Host { path: PathBuf, source: io::Error },
    #[error("{path}: unsupported file type on the host (only files, directories, symlinks)")]
    Unsupported { path: PathBuf },
    #[error("{0}: field value exceeds 32 bits (newc cannot store files over 4 GiB)")]
    TooLarge(String),
}

/// Where a regular file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    Bytes(Vec<u8>),
    /// Read from the host when the archive is written (keeps large binaries out of memory
    /// until then).
    Host(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Data),
    Symlink(String),
    CharDev { major: u32, minor: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Permission bits only (the type bits come from `kind`).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: u32,
}

/// An initramfs under construction. Paths are absolute guest paths (`/bin/sh`) or
/// relative ones (`bin/sh`); both mean the same entry.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

/// Canonical archive name: no leading slash, no empty or `.` components, no `..`.
fn normalize(path: &str) -> Result<String, CpioError> {
    let mut parts = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(s) => parts.push(
                s.to_str()
                    .ok_or_else(|| CpioError::BadPath(path.to_string()))?,
            ),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(CpioError::BadPath(path.to_string()));
            }
        }
    }
    if parts.is_empty() {
        return Err(CpioError::BadPath(path.to_string()));
    }
    Ok(parts.join("/"))
}

impl Archive {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries, including implied parent directories.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        normalize(path).ok().and_then(|p| self.entries.get(&p))
    }

    /// Inserts `entry`, creating missing parent directories (mode 0755). A later insert
    /// of the same non-directory path replaces the earlier one, so `--include` can
    /// override a built-in file.
    pub fn insert(&mut self, path: &str, entry: Entry) -> Result<(), CpioError> {
        let name = normalize(path)?;
        let mut parent = String::new();
        let components: Vec<&str> = name.split('/').collect();
        for c in &components[..components.len() - 1] {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(c);
            match self.entries.get(&parent) {
                Some(e) if e.kind == Kind::Dir => {}
                Some(_) => {
                    return Err(CpioError::ParentNotDir { path: name, parent });
                }
                None => {
                    self.entries.insert(parent.clone(), Entry::dir(0o755));
                }
            }
        }
        match self.entries.get(&name) {
            // Re-adding a directory only updates its metadata.
            Some(old) if old.kind == Kind::Dir && entry.kind != Kind::Dir => {
                let kind = match entry.kind {
                    Kind::File(_) => "file",
                    Kind::Symlink(_) => "symlink",
                    _ => "device",
                };
                Err(CpioError::DirConflict { path: name, kind })
            }
            _ => {
                self.entries.insert(name, entry);
                Ok(())
            }
        }
    }

    pub fn add_dir(&mut self, path: &str, perm: u32) -> Result<(), CpioError> {
        self.insert(path, Entry::dir(perm))
    }

    pub fn add_bytes(&mut self, path: &str, perm: u32, bytes: Vec<u8>) -> Result<(), CpioError> {
        self.insert(path, Entry::new(Kind::File(Data::Bytes(bytes)), perm))
    }

    pub fn add_symlink(&mut self, path: &str, target: &str) -> Result<(), CpioError> {
        self.insert(path, Entry::new(Kind::Symlink(target.to_string()), 0o777))
    }

    pub fn add_char_dev(
        &mut self,
        path: &str,
        perm: u32,
        major: u32,
        minor: u32,
    ) -> Result<(), CpioError> {
        self.insert(path, Entry::new(Kind::CharDev { major, minor }, perm))
    }

    /// Adds a host file (its bytes read at write time) with the given guest path and the
    /// host file's permission bits.
    pub fn add_host_file(&mut self, guest: &str, host: &Path) -> Result<(), CpioError> {
        let meta = fs::metadata(host).map_err(|source| CpioError::Host {
            path: host.to_path_buf(),
            source,
        })?;
        let mut e = Entry::new(
            Kind::File(Data::Host(host.to_path_buf())),
            meta.permissions().mode() & 0o7777,
        );
        e.mtime = clamp_mtime(meta.mtime());
        self.insert(guest, e)
    }

    /// Adds a host path at `guest`: a file, a symlink (kept as a link) or a directory
    /// (recursively). Ownership becomes root's: the guest runs everything as root.
    pub fn add_host_path(&mut self, guest: &str, host: &Path) -> Result<(), CpioError> {
        let err = |source| CpioError::Host {
            path: host.to_path_buf(),
            source,
        };
        let meta = fs::symlink_metadata(host).map_err(err)?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = fs::read_link(host).map_err(err)?;
            let mut e = Entry::new(Kind::Symlink(target.to_string_lossy().into_owned()), 0o777);
            e.mtime = clamp_mtime(meta.mtime());
            self.insert(guest, e)
        } else if ft.is_file() {
            self.add_host_file(guest, host)
        } else if ft.is_dir() {
            let mut e = Entry::dir(meta.permissions().mode() & 0o7777);
            e.mtime = clamp_mtime(meta.mtime());
            self.insert(guest, e)?;
            let mut children: Vec<_> = fs::read_dir(host)
                .map_err(err)?
                .collect::<Result<_, _>>()
                .map_err(err)?;
            children.sort_by_key(|c| c.file_name());
            for child in children {
                let name = child.file_name();
                let name = name.to_string_lossy();
                self.add_host_path(&format!("{guest}/{name}"), &child.path())?;
            }
            Ok(())
        } else {
            Err(CpioError::Unsupported {
                path: host.to_path_buf(),
            })
        }
    }

    /// Writes the archive, trailer included, padded to a 512-byte multiple as GNU cpio
    /// does. Returns the number of bytes written.
    pub fn write_to<W: Write>(&self, w: W) -> Result<u64, CpioError> {
        let mut w = CountingWriter { inner: w, count: 0 };
        let io = |source| CpioError::Host {
            path: PathBuf::from("<archive output>"),
            source,
        };
        for (ino, (name, entry)) in self.entries.iter().enumerate() {
            // Inode 0 is avoided: some readers treat it as "no inode".
            let ino = ino as u32 + 1;
            match &entry.kind {
                Kind::File(Data::Host(path)) => {
                    let mut f = fs::File::open(path).map_err(|source| CpioError::Host {
                        path: path.clone(),
                        source,
                    })?;
                    let len = f
                        .metadata()
                        .map_err(|source| CpioError::Host {
                            path: path.clone(),
                            source,
                        })?
                        .len();
                    let len32 =
                        u32::try_from(len).map_err(|_| CpioError::TooLarge(name.clone()))?;
                    write_header(&mut w, ino, name, entry, len32).map_err(io)?;
                    // Copy exactly `len` bytes so a file growing meanwhile cannot corrupt
                    // the framing.
                    let copied = io::copy(&mut (&mut f).take(len), &mut w).map_err(|source| {
                        CpioError::Host {
                            path: path.clone(),
                            source,
                        }
                    })?;
                    if copied != len {
                        return Err(CpioError::Host {
                            path: path.clone(),
                            source: io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "file shrank while being archived",
                            ),
                        });
                    }
                    pad4(&mut w).map_err(io)?;
                }
                Kind::File(Data::Bytes(b)) => {
                    let len =
                        u32::try_from(b.len()).map_err(|_| CpioError::TooLarge(name.clone()))?;
                    write_header(&mut w, ino, name, entry, len).map_err(io)?;
                    w.write_all(b).map_err(io)?;
                    pad4(&mut w).map_err(io)?;
                }
                Kind::Symlink(target) => {
                    let len = u32::try_from(target.len())
                        .map_err(|_| CpioError::TooLarge(name.clone()))?;
                    write_header(&mut w, ino, name, entry, len).map_err(io)?;
                    w.write_all(target.as_bytes()).map_err(io)?;
                    pad4(&mut w).map_err(io)?;
                }
                Kind::Dir | Kind::CharDev { .. } => {
                    write_header(&mut w, ino, name, entry, 0).map_err(io)?;
                }
            }
        }
        let trailer = Entry {
            kind: Kind::File(Data::Bytes(Vec::new())),
            perm: 0,
            uid: 0,
            gid: 0,
            mtime: 0,
        };
        write_raw_header(&mut w, 0, 0, &trailer, 1, 0, (0, 0), TRAILER).map_err(io)?;
        let rem = (w.count % 512) as usize;
        if rem != 0 {
            w.write_all(&vec![0u8; 512 - rem]).map_err(io)?;
        }
        w.flush().map_err(io)?;
        Ok(w.count)
    }

    /// Convenience: the whole archive as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, CpioError> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }
}

impl Entry {
    pub fn new(kind: Kind, perm: u32) -> Self {
        Entry {
            kind,
            perm: perm & 0o7777,
            uid: 0,
            gid: 0,
            mtime: 0,
        }
    }

    pub fn dir(perm: u32) -> Self {
        Self::new(Kind::Dir, perm)
    }

    fn mode(&self) -> u32 {
        let ty = match self.kind {
            Kind::Dir => S_IFDIR,
            Kind::File(_) => S_IFREG,
            Kind::Symlink(_) => S_IFLNK,
            Kind::CharDev { .. } => S_IFCHR,
        };
        ty | self.perm
    }
}

fn clamp_mtime(t: i64) -> u32 {
    t.clamp(0, u32::MAX as i64) as u32
}

fn write_header<W: Write>(
    w: &mut CountingWriter<W>,
    ino: u32,
    name: &str,
    e: &Entry,
    filesize: u32,
) -> io::Result<()> {
    let nlink = if e.kind == Kind::Dir { 2 } else { 1 };
    let rdev = match e.kind {
        Kind::CharDev { major, minor } => (major, minor),
        _ => (0, 0),
    };
    write_raw_header(w, ino, e.mode(), e, nlink, filesize, rdev, name)
}

#[allow(clippy::too_many_arguments)]
fn write_raw_header<W: Write>(
    w: &mut CountingWriter<W>,
    ino: u32,
    mode: u32,
    e: &Entry,
    nlink: u32,
    filesize: u32,
    rdev: (u32, u32),
    name: &str,
) -> io::Result<()> {
    // namesize counts the terminating NUL.
    let namesize = name.len() as u32 + 1;
    let fields = [
        ino, mode, e.uid, e.gid, nlink, e.mtime, filesize, 0, // devmajor
        0, // devminor
        rdev.0, rdev.1, namesize, 0, // check (only used by the crc format)
    ];
    let mut header = Vec::with_capacity(110 + name.len() + 4);
    header.extend_from_slice(MAGIC);
    for f in fields {
        header.extend_from_slice(format!("{f:08X}").as_bytes());
    }
    header.extend_from_slice(name.as_bytes());
    header.push(0);
    w.write_all(&header)?;
    pad4(w)
}

fn pad4<W: Write>(w: &mut CountingWriter<W>) -> io::Result<()> {
    let rem = (w.count % 4) as usize;
    if rem != 0 {
        w.write_all(&[0u8; 3][..4 - rem])?;
    }
    Ok(())
}

struct CountingWriter<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::process::{Command, Stdio};

    /// A hand-assembled archive for a single file, checked byte for byte: it pins the
    /// header layout, hex case, name NUL, and 4-byte padding independently of any tool.
    #[test]
    fn single_file_matches_hand_assembled_bytes() {
        let mut a = Archive::new();
        let mut e = Entry::new(Kind::File(Data::Bytes(b"hi\n".to_vec())), 0o644);
        e.mtime = 0x5F5E100;
        a.insert("/a", e).unwrap();
        let out = a.to_bytes().unwrap();

        let mut want = Vec::new();
        // ino=1 mode=0100644 uid gid nlink=1 mtime filesize=3 dev 0 0 rdev 0 0 namesize=2 check
        want.extend_from_slice(
            b"070701\
              00000001000081A4000000000000000000000001\
              05F5E10000000003000000000000000000000000\
              000000000000000200000000",
        );
        want.extend_from_slice(b"a\0"); // 110 + 2 = 112, already aligned
        want.extend_from_slice(b"hi\n\0"); // data + 1 byte padding
        want.extend_from_slice(
            b"070701\
              00000000000000000000000000000000000000010000000000000000000000000000000000000000\
              000000000000000B00000000",
        );
        want.extend_from_slice(b"TRAILER!!!\0");
        // 116 + 110 + 11 = 237 -> pad to 240, then to 512 overall.
        want.resize(240, 0);
        want.resize(512, 0);
        assert_eq!(
            String::from_utf8_lossy(&out[..want.len().min(out.len())]),
            String::from_utf8_lossy(&want)
        );
        assert_eq!(out, want);
    }

    #[test]
    fn parents_are_created_and_sorted_before_children() {
        let mut a = Archive::new();
        a.add_bytes("/usr/bin/x", 0o755, vec![1]).unwrap();
        a.add_bytes("/usr-local", 0o644, vec![2]).unwrap();
        let names: Vec<_> = a.entries.keys().cloned().collect();
        assert_eq!(names, ["usr", "usr-local", "usr/bin", "usr/bin/x"]);
        assert_eq!(a.get("/usr/bin").unwrap().kind, Kind::Dir);
    }

    #[test]
    fn rejects_dotdot_and_conflicts() {
        let mut a = Archive::new();
        assert!(matches!(
            a.add_bytes("/a/../b", 0o644, vec![]),
            Err(CpioError::BadPath(_))
        ));
        assert!(matches!(
            a.add_bytes("/", 0o644, vec![]),
            Err(CpioError::BadPath(_))
        ));
        a.add_dir("/d", 0o755).unwrap();
        assert!(matches!(
            a.add_bytes("/d", 0o644, vec![]),
            Err(CpioError::DirConflict { .. })
        ));
        a.add_bytes("/f", 0o644, vec![]).unwrap();
        assert!(matches!(
            a.add_bytes("/f/g", 0o644, vec![]),
            Err(CpioError::ParentNotDir { .. })
        ));
        // Replacing a file is allowed: the later one wins.
        a.add_bytes("/f", 0o600, vec![9]).unwrap();
        assert_eq!(a.get("f").unwrap().perm, 0o600);
    }

    fn gnu_cpio(args: &[&str], input: &[u8], cwd: &Path) -> String {
        let mut child = Command::new("cpio")
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("GNU cpio is needed for this test (cargo xtask setup installs it)");
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "cpio {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// GNU cpio is the reference reader: it must list exactly our entries, with our
    /// types, modes and link targets, and extract byte-identical contents.
    #[test]
    fn gnu_cpio_lists_and_extracts_what_we_wrote() {
        let host = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..70_001u32).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(host.path().join("big.bin"), &big).unwrap();
        fs::set_permissions(
            host.path().join("big.bin"),
            fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        fs::create_dir(host.path().join("tree")).unwrap();
        fs::write(host.path().join("tree/odd name"), b"x").unwrap();
        symlink("odd name", host.path().join("tree/link")).unwrap();

        let mut a = Archive::new();
        a.add_bytes("/etc/hello", 0o644, b"hello\n".to_vec())
            .unwrap();
        a.add_bytes("/empty", 0o600, Vec::new()).unwrap();
        a.add_bytes("/three", 0o644, b"abc".to_vec()).unwrap();
        a.add_symlink("/bin/sh", "busybox").unwrap();
        a.add_char_dev("/dev/console", 0o600, 5, 1).unwrap();
        a.add_host_file("/opt/big.bin", &host.path().join("big.bin"))
            .unwrap();
        a.add_host_path("/data", &host.path().join("tree")).unwrap();
        let bytes = a.to_bytes().unwrap();
        assert_eq!(bytes.len() % 512, 0);

        let listing = gnu_cpio(&["-t", "--quiet"], &bytes, host.path());
        let listed: Vec<&str> = listing.lines().collect();
        assert_eq!(
            listed,
            [
                "bin",
                "bin/sh",
                "data",
                "data/link",
                "data/odd name",
                "dev",
                "dev/console",
                "empty",
                "etc",
                "etc/hello",
                "opt",
                "opt/big.bin",
                "three"
            ]
        );

        let verbose = gnu_cpio(&["-tv", "--quiet"], &bytes, host.path());
        let line = |name: &str| {
            verbose
                .lines()
                .find(|l| l.ends_with(name) || l.contains(&format!("{name} ->")))
                .unwrap_or_else(|| panic!("{name} not in listing:\n{verbose}"))
                .to_string()
        };
        assert!(
            line("bin/sh").starts_with("lrwxrwxrwx"),
            "{}",
            line("bin/sh")
        );
        assert!(line("bin/sh").ends_with("bin/sh -> busybox"));
        assert!(line("dev/console").starts_with("crw-------"));
        assert!(line("dev/console").contains("5,"));
        assert!(line("opt/big.bin").starts_with("-rwxr-x--x"));
        assert!(line("opt/big.bin").contains("70001"));
        assert!(line("etc").starts_with("drwxr-xr-x"));

        // Extract (without device nodes, which need privileges we may not have).
        let mut no_dev = a.clone();
        no_dev.entries.remove("dev/console");
        no_dev.entries.remove("dev");
        let out = tempfile::tempdir().unwrap();
        gnu_cpio(
            &[
                "-i",
                "--quiet",
                "--make-directories",
                "--no-absolute-filenames",
            ],
            &no_dev.to_bytes().unwrap(),
            out.path(),
        );
        let root = out.path();
        assert_eq!(fs::read(root.join("etc/hello")).unwrap(), b"hello\n");
        assert_eq!(fs::read(root.join("empty")).unwrap(), b"");
        assert_eq!(fs::read(root.join("three")).unwrap(), b"abc");
        assert_eq!(fs::read(root.join("opt/big.bin")).unwrap(), big);
        assert_eq!(fs::read(root.join("data/odd name")).unwrap(), b"x");
        assert_eq!(
            fs::read_link(root.join("data/link")).unwrap(),
            Path::new("odd name")
        );
        assert_eq!(
            fs::read_link(root.join("bin/sh")).unwrap(),
            Path::new("busybox")
        );
        let mode = fs::metadata(root.join("opt/big.bin"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o751);
    }
}
