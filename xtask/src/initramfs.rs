//! Assembles the guest's initramfs: `/init` (vm-init), busybox with its applet links,
//! the guest binaries under `/bin`, the run's command files (see [`crate::protocol`]),
//! and every `--include` at its own absolute path.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cpio::{Archive, CpioError};
use crate::guest::GuestBinaries;
use crate::protocol;

/// Debian's busybox-static.
pub const BUSYBOX: &str = "/bin/busybox";

#[derive(Debug, thiserror::Error)]
pub enum InitramfsError {
    #[error(transparent)]
    Cpio(#[from] CpioError),
    #[error("{0} not found: install busybox-static (`cargo xtask setup`)")]
    NoBusybox(PathBuf),
    #[error("{path} is not a static executable (interpreter {interp}); the guest has no libc")]
    NotStatic { path: PathBuf, interp: String },
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("--include {0}: must be an absolute path")]
    RelativeInclude(PathBuf),
    #[error("empty command")]
    EmptyCommand,
}

/// What one run puts into the image besides the fixed userland.
#[derive(Debug, Clone, Default)]
pub struct RunFiles {
    pub argv: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub nonce: String,
    pub includes: Vec<PathBuf>,
    /// `disk` or `serial`: how vm-init sends /out back.
    pub transport: String,
}

/// The ELF interpreter (`PT_INTERP`) of an executable, `None` for a static one.
pub fn elf_interpreter(path: &Path) -> std::io::Result<Option<String>> {
    let mut f = fs::File::open(path)?;
    let mut head = vec![0u8; 64];
    f.read_exact(&mut head)?;
    let bad = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a 64-bit little-endian ELF",
        )
    };
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return Err(bad());
    }
    let data = fs::read(path)?;
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if ph + 0x38 > data.len() {
            return Err(bad());
        }
        let p_type = u32::from_le_bytes(data[ph..ph + 4].try_into().unwrap());
        if p_type == 3 {
            let (off, size) = (u64_at(ph + 8), u64_at(ph + 0x20));
            let s = data.get(off..off + size).ok_or_else(bad)?;
            return Ok(Some(
                String::from_utf8_lossy(s)
                    .trim_end_matches('\0')
                    .to_string(),
            ));
        }
    }
    Ok(None)
}

fn require_static(path: &Path) -> Result<(), InitramfsError> {
    match elf_interpreter(path) {
        Ok(None) => Ok(()),
        Ok(Some(interp)) => Err(InitramfsError::NotStatic {
            path: path.to_path_buf(),
            interp,
        }),
        Err(e) => Err(InitramfsError::Io(path.to_path_buf(), e)),
    }
}

/// busybox's applets as paths relative to `/` (`bin/sh`, `usr/bin/awk`, ...).
fn busybox_applets(busybox: &Path) -> Result<Vec<String>, InitramfsError> {
    let out = Command::new(busybox)
        .arg("--list-full")
        .output()
        .map_err(|e| InitramfsError::Io(busybox.to_path_buf(), e))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        // `linuxrc` would sit at the root beside our /init; it is useless here.
        .filter(|l| !l.is_empty() && *l != "linuxrc")
        .map(str::to_string)
        .collect())
}

/// Builds the archive (nothing is read from the host files yet: see [`Archive::write_to`]).
pub fn assemble(
    guest: &GuestBinaries,
    run: &RunFiles,
    busybox: &Path,
) -> Result<Archive, InitramfsError> {
    if run.argv.is_empty() {
        return Err(InitramfsError::EmptyCommand);
    }
    if !busybox.is_file() {
        return Err(InitramfsError::NoBusybox(busybox.to_path_buf()));
    }
    require_static(busybox)?;
    require_static(&guest.init)?;
    for p in guest.bins.values() {
        require_static(p)?;
    }

    let mut a = Archive::new();
    for d in [
        "proc", "sys", "dev", "tmp", "run", "out", "root", "etc", "mnt", "var/tmp",
    ] {
        let perm = if d.ends_with("tmp") { 0o1777 } else { 0o755 };
        a.add_dir(d, perm)?;
    }
    // The kernel opens /dev/console for init's stdio before init could mount devtmpfs.
    a.add_char_dev("dev/console", 0o600, 5, 1)?;
    a.add_bytes(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\n".to_vec(),
    )?;
    a.add_bytes("etc/group", 0o644, b"root:x:0:\n".to_vec())?;
    a.add_bytes("etc/hostname", 0o644, b"kpt-vm\n".to_vec())?;

    a.add_host_file("bin/busybox", busybox)?;
    for applet in busybox_applets(busybox)? {
        if applet != "bin/busybox" {
            a.add_symlink(&applet, "/bin/busybox")?;
        }
    }
    for (name, path) in &guest.bins {
        a.add_host_file(&format!("bin/{name}"), path)?;
    }
    a.add_host_file("init", &guest.init)?;

    a.add_bytes(
        protocol::ARGV_PATH,
        0o644,
        protocol::encode_nul_list(&run.argv.iter().map(|s| s.as_bytes()).collect::<Vec<_>>()),
    )?;
    let env: Vec<String> = run.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    a.add_bytes(protocol::ENV_PATH, 0o644, protocol::encode_nul_list(&env))?;
    a.add_bytes(protocol::NONCE_PATH, 0o644, run.nonce.clone().into_bytes())?;
    a.add_bytes(
        protocol::TRANSPORT_PATH,
        0o644,
        run.transport.clone().into_bytes(),
    )?;

    // Last, so an include may deliberately replace a built-in file.
    for inc in &run.includes {
        if !inc.is_absolute() {
            return Err(InitramfsError::RelativeInclude(inc.clone()));
        }
        let guest_path = inc
            .to_str()
            .ok_or_else(|| CpioError::BadPath(inc.display().to_string()))?;
        a.add_host_path(guest_path, inc)?;
    }
    Ok(a)
}

/// Assembles and writes the image to `dest`; returns its size in bytes.
pub fn write(
    guest: &GuestBinaries,
    run: &RunFiles,
    busybox: &Path,
    dest: &Path,
) -> Result<u64, InitramfsError> {
    let a = assemble(guest, run, busybox)?;
    let f = fs::File::create(dest).map_err(|e| InitramfsError::Io(dest.to_path_buf(), e))?;
    let n = a.write_to(std::io::BufWriter::with_capacity(1 << 20, f))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpio::{Data, Kind};
    use std::collections::BTreeMap;

    #[test]
    fn detects_dynamic_and_static_executables() {
        // The test binary itself is dynamically linked (glibc host target).
        let me = std::env::current_exe().unwrap();
        let interp = elf_interpreter(&me).unwrap();
        assert!(interp.is_some_and(|i| i.contains("ld-linux")));
        let dir = tempfile::tempdir().unwrap();
        let not_elf = dir.path().join("x");
        fs::write(&not_elf, vec![0u8; 100]).unwrap();
        assert!(elf_interpreter(&not_elf).is_err());
    }

    #[test]
    fn refuses_a_dynamic_guest_binary() {
        let me = std::env::current_exe().unwrap();
        let guest = GuestBinaries {
            init: me.clone(),
            bins: BTreeMap::new(),
        };
        let run = RunFiles {
            argv: vec!["true".into()],
            nonce: "n".into(),
            ..Default::default()
        };
        // Whatever busybox is (or is not) on this host, a dynamic /init must be refused.
        let err = assemble(&guest, &run, &me).unwrap_err();
        assert!(matches!(err, InitramfsError::NotStatic { .. }), "{err}");
    }

    /// With a static stand-in for every binary, the layout is what vm-init expects.
    #[test]
    fn layout_has_init_command_and_includes() {
        let busybox = Path::new(BUSYBOX);
        assert!(
            busybox.is_file(),
            "busybox-static is needed (cargo xtask setup)"
        );
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("data.txt");
        fs::write(&inc, b"payload").unwrap();
        let guest = GuestBinaries {
            init: busybox.to_path_buf(),
            bins: [("tracer".to_string(), busybox.to_path_buf())].into(),
        };
        let run = RunFiles {
            argv: vec!["sh".into(), "-c".into(), "exit 7".into()],
            env: vec![("A".into(), "b".into())],
            nonce: "abc".into(),
            includes: vec![inc.clone()],
            transport: "disk".into(),
        };
        let a = assemble(&guest, &run, busybox).unwrap();
        assert_eq!(a.get("/init").unwrap().perm & 0o111, 0o111);
        assert!(
            matches!(a.get("/bin/sh").unwrap().kind, Kind::Symlink(ref t) if t == "/bin/busybox")
        );
        assert!(matches!(
            a.get("/dev/console").unwrap().kind,
            Kind::CharDev { major: 5, minor: 1 }
        ));
        assert_eq!(
            a.get(protocol::ARGV_PATH).unwrap().kind,
            Kind::File(Data::Bytes(b"sh\0-c\0exit 7\0".to_vec()))
        );
        assert_eq!(
            a.get(inc.to_str().unwrap()).unwrap().kind,
            Kind::File(Data::Host(inc.clone()))
        );
        assert!(a.get("/bin/tracer").is_some());
        assert!(a.get("/linuxrc").is_none());
    }
}
