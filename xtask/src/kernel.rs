//! Debian cloud kernels for the VM runner: which suite gives which kernel, and fetching
//! one (through a private apt root, see [`crate::apt`]) into a cache under
//! `target/vm/kernels/<suite>/`.
//!
//! The cloud flavour is small, boots fast under TCG and has the 8250 UART, BTF and the
//! tracing filesystems built in; it builds virtio as modules, which is why the runner
//! moves files over a serial port rather than 9p or a disk.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Instant;

use crate::apt::{self, AptError, AptRoot};
use crate::paths;

/// The kernels the project tests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kernel {
    /// Debian 11 bullseye.
    V5_10,
    /// Debian 12 bookworm.
    V6_1,
    /// Debian 13 trixie.
    V6_12,
}

impl Kernel {
    pub const ALL: [Kernel; 3] = [Kernel::V5_10, Kernel::V6_1, Kernel::V6_12];

    pub fn suite(self) -> &'static str {
        match self {
            Kernel::V5_10 => "bullseye",
            Kernel::V6_1 => "bookworm",
            Kernel::V6_12 => "trixie",
        }
    }

    /// The `major.minor` the kernel release starts with.
    pub fn version(self) -> &'static str {
        match self {
            Kernel::V5_10 => "5.10",
            Kernel::V6_1 => "6.1",
            Kernel::V6_12 => "6.12",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

impl FromStr for Kernel {
    type Err = String;
    /// Accepts the version (`6.1`) or the suite (`bookworm`).
    fn from_str(s: &str) -> Result<Self, String> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.version() == s || k.suite() == s)
            .ok_or_else(|| format!("unknown kernel {s:?}: expected one of 5.10, 6.1, 6.12"))
    }
}

/// A kernel ready to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelImage {
    pub kernel: Kernel,
    /// The bzImage to pass to qemu's `-kernel`.
    pub vmlinuz: PathBuf,
    /// The kernel's build configuration (`/boot/config-*`), if the package shipped it.
    pub config: Option<PathBuf>,
    /// `/boot/System.map-*` if shipped. Debian's is a stub pointing at the -dbg package:
    /// use the guest's `/proc/kallsyms` for addresses.
    pub system_map: Option<PathBuf>,
    /// `uname -r` of this kernel, e.g. `6.1.0-41-cloud-amd64`.
    pub release: String,
    /// The binary package and version it came from.
    pub package: String,
    pub package_version: String,
    /// Where it was fetched from.
    pub mirror: String,
}

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("fetching the {kernel} kernel ({suite}) failed on every mirror:\n{details}")]
    AllMirrorsFailed {
        kernel: Kernel,
        suite: &'static str,
        details: String,
    },
    #[error(transparent)]
    Apt(#[from] AptError),
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] io::Error),
    #[error("dpkg-deb -x {deb}: {msg}")]
    Extract { deb: PathBuf, msg: String },
    #[error("{deb} contains no /boot/vmlinuz-*")]
    NoVmlinuz { deb: PathBuf },
    #[error("cache file {0} is damaged; delete that directory to fetch again")]
    BadCache(PathBuf),
}

const METAPACKAGE: &str = "linux-image-cloud-amd64";
const INFO_FILE: &str = "kernel.info";

/// The cache directory of one kernel.
pub fn cache_dir(kernel: Kernel) -> PathBuf {
    paths::vm_dir().join("kernels").join(kernel.suite())
}

/// Returns the cached kernel, fetching it first if needed. Safe to call from several
/// processes at once (an exclusive lock serialises fetches of the same suite).
pub fn fetch(kernel: Kernel) -> Result<KernelImage, KernelError> {
    let dir = cache_dir(kernel);
    fs::create_dir_all(&dir).map_err(|e| KernelError::Io(dir.clone(), e))?;
    let _lock = paths::FileLock::exclusive(&dir.join(".lock"))
        .map_err(|e| KernelError::Io(dir.join(".lock"), e))?;
    if let Some(img) = load_cached(kernel, &dir)? {
        return Ok(img);
    }
    eprintln!(
        "xtask: fetching the {kernel} kernel (Debian {}, {METAPACKAGE}) into {}",
        kernel.suite(),
        dir.display()
    );
    let started = Instant::now();
    let mut failures = Vec::new();
    for mirror in apt::MIRRORS {
        let root = AptRoot::new(dir.join("apt"), kernel.suite(), mirror);
        match fetch_from(&root, kernel, &dir) {
            Ok((img, deb_size)) => {
                let secs = started.elapsed().as_secs_f64();
                eprintln!(
                    "xtask: got {} {} ({:.1} MB .deb) from {} in {secs:.1} s",
                    img.package,
                    img.package_version,
                    deb_size as f64 / 1e6,
                    mirror.uri
                );
                write_info(&dir, &img, deb_size, secs)?;
                // The lists and the .deb are only needed to fetch; keep the cache small.
                let _ = fs::remove_dir_all(dir.join("apt"));
                return Ok(img);
            }
            Err(e) => failures.push(format!("- {}: {e}", mirror.uri)),
        }
    }
    Err(KernelError::AllMirrorsFailed {
        kernel,
        suite: kernel.suite(),
        details: failures.join("\n"),
    })
}

fn fetch_from(
    root: &AptRoot,
    kernel: Kernel,
    dir: &Path,
) -> Result<(KernelImage, u64), KernelError> {
    root.update()?;
    let depends = root.depends(METAPACKAGE)?;
    let package = apt::pick_dependency(&depends, |n| {
        n.starts_with("linux-image-") && n.ends_with("-cloud-amd64")
    })
    .ok_or_else(|| AptError::Package {
        package: METAPACKAGE.into(),
        suite: kernel.suite().into(),
        what: format!("no linux-image-*-cloud-amd64 in Depends: {depends}"),
    })?;
    let version = root.version(&package)?;
    let dl = dir.join("apt/download");
    let _ = fs::remove_dir_all(&dl);
    let deb = root.download(&package, &dl)?;
    let deb_size = fs::metadata(&deb)
        .map_err(|e| KernelError::Io(deb.clone(), e))?
        .len();

    let x = dir.join("apt/extract");
    let _ = fs::remove_dir_all(&x);
    fs::create_dir_all(&x).map_err(|e| KernelError::Io(x.clone(), e))?;
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&x)
        .output()
        .map_err(|e| KernelError::Io(PathBuf::from("dpkg-deb"), e))?;
    if !out.status.success() {
        return Err(KernelError::Extract {
            deb,
            msg: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let boot = x.join("boot");
    let find = |prefix: &str| -> Option<(PathBuf, String)> {
        fs::read_dir(&boot)
            .ok()?
            .filter_map(Result::ok)
            .find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix(prefix)
                    .map(|release| (e.path(), release.to_string()))
            })
    };
    let (vmlinuz, release) = find("vmlinuz-").ok_or(KernelError::NoVmlinuz { deb: deb.clone() })?;
    let keep = |src: PathBuf, name: &str| -> Result<PathBuf, KernelError> {
        let dst = dir.join(name);
        fs::copy(&src, &dst).map_err(|e| KernelError::Io(dst.clone(), e))?;
        Ok(dst)
    };
    let vmlinuz = keep(vmlinuz, "vmlinuz")?;
    let config = find("config-")
        .map(|(p, _)| keep(p, "config"))
        .transpose()?;
    let system_map = find("System.map-")
        .map(|(p, _)| keep(p, "System.map"))
        .transpose()?;
    Ok((
        KernelImage {
            kernel,
            vmlinuz,
            config,
            system_map,
            release,
            package,
            package_version: version,
            mirror: root.mirror.uri.to_string(),
        },
        deb_size,
    ))
}

fn write_info(dir: &Path, img: &KernelImage, deb_size: u64, secs: f64) -> Result<(), KernelError> {
    let info = format!(
        "release={}\npackage={}\nversion={}\nmirror={}\ndeb_bytes={deb_size}\nfetch_seconds={secs:.1}\n",
        img.release, img.package, img.package_version, img.mirror
    );
    // Written last and atomically: its presence marks a complete cache entry.
    let tmp = dir.join(format!("{INFO_FILE}.tmp"));
    fs::write(&tmp, info).map_err(|e| KernelError::Io(tmp.clone(), e))?;
    fs::rename(&tmp, dir.join(INFO_FILE)).map_err(|e| KernelError::Io(dir.join(INFO_FILE), e))
}

fn load_cached(kernel: Kernel, dir: &Path) -> Result<Option<KernelImage>, KernelError> {
    let info_path = dir.join(INFO_FILE);
    let Ok(info) = fs::read_to_string(&info_path) else {
        return Ok(None);
    };
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::to_string))
    };
    let vmlinuz = dir.join("vmlinuz");
    let (Some(release), Some(package), Some(version), Some(mirror)) = (
        field("release"),
        field("package"),
        field("version"),
        field("mirror"),
    ) else {
        return Err(KernelError::BadCache(info_path));
    };
    if !vmlinuz.is_file() {
        return Ok(None);
    }
    let opt = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
    Ok(Some(KernelImage {
        kernel,
        vmlinuz,
        config: opt("config"),
        system_map: opt("System.map"),
        release,
        package,
        package_version: version,
        mirror,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_parse() {
        assert_eq!("5.10".parse::<Kernel>().unwrap(), Kernel::V5_10);
        assert_eq!("6.1".parse::<Kernel>().unwrap(), Kernel::V6_1);
        assert_eq!("trixie".parse::<Kernel>().unwrap(), Kernel::V6_12);
        assert!("6.2".parse::<Kernel>().is_err());
        assert_eq!(Kernel::V6_12.suite(), "trixie");
        assert_eq!(Kernel::V6_1.to_string(), "6.1");
    }

    #[test]
    fn cache_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("vmlinuz"), b"bz").unwrap();
        fs::write(dir.path().join("config"), b"CONFIG_X=y").unwrap();
        let img = KernelImage {
            kernel: Kernel::V6_1,
            vmlinuz: dir.path().join("vmlinuz"),
            config: Some(dir.path().join("config")),
            system_map: None,
            release: "6.1.0-41-cloud-amd64".into(),
            package: "linux-image-6.1.0-41-cloud-amd64".into(),
            package_version: "6.1.158-1".into(),
            mirror: "http://deb.debian.org/debian".into(),
        };
        assert_eq!(load_cached(Kernel::V6_1, dir.path()).unwrap(), None);
        write_info(dir.path(), &img, 1, 0.5).unwrap();
        assert_eq!(load_cached(Kernel::V6_1, dir.path()).unwrap(), Some(img));
    }
}
