//! Choosing the accelerator: KVM when asked for, or when a cached probe boot shows that
//! it works on this host; TCG otherwise.

use std::fs;

use super::{Accel, VmConfig, VmError, VmStatus, run};
use crate::guest::GuestBinaries;
use crate::kernel::KernelImage;
use crate::paths;

/// Picks the accelerator. `Auto` means KVM only if /dev/kvm opens and a probe boot of
/// this kernel under KVM finished; the verdict is cached per host kernel, qemu binary
/// and guest kernel in `target/vm/kvm-probe/`, so only the first run pays for it.
pub fn resolve_accel(
    accel: Accel,
    kernel: &KernelImage,
    guest: &GuestBinaries,
) -> Result<Accel, VmError> {
    match accel {
        Accel::Tcg => Ok(Accel::Tcg),
        Accel::Kvm => {
            kvm_device().map_err(VmError::NoKvm)?;
            Ok(Accel::Kvm)
        }
        Accel::Auto => {
            if kvm_device().is_err() {
                return Ok(Accel::Tcg);
            }
            let key = format!("{}-{}-{}", host_release(), qemu_identity(), kernel.release);
            let dir = paths::vm_dir().join("kvm-probe");
            let file = dir.join(key.replace('/', "_"));
            let _lock = paths::FileLock::exclusive(&dir.join(".lock"))
                .map_err(|e| VmError::Io(dir.clone(), e))?;
            if let Ok(v) = fs::read_to_string(&file) {
                return Ok(if v.starts_with("kvm-works") {
                    Accel::Kvm
                } else {
                    Accel::Tcg
                });
            }
            eprintln!(
                "xtask: probing whether KVM boots the {} kernel (cached in {})",
                kernel.release,
                file.display()
            );
            // A working KVM boots in a second or two; TCG needs ~5 s. A KVM that
            // hangs (as on some nested hosts) is given 20 s.
            let probe = VmConfig::new(kernel.kernel, ["true"])
                .guest(guest.clone())
                .accel(Accel::Kvm)
                .echo(false)
                .timeout_secs(20);
            let verdict = match run(&probe) {
                Ok(r) if r.status == VmStatus::Exited(0) => {
                    format!("kvm-works in {:.1} s\n", r.elapsed.as_secs_f64())
                }
                Ok(r) => format!("kvm-fails: {:?}\n", r.status),
                Err(e) => format!("kvm-fails: {e}\n"),
            };
            eprintln!("xtask: KVM probe: {}", verdict.trim());
            let _ = fs::write(&file, &verdict);
            Ok(if verdict.starts_with("kvm-works") {
                Accel::Kvm
            } else {
                Accel::Tcg
            })
        }
    }
}

fn kvm_device() -> std::io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
}

fn host_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Identifies the qemu binary by size and mtime (cheap; changes on upgrade).
fn qemu_identity() -> String {
    let path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("qemu-system-x86_64"))
            .find(|p| p.is_file())
    });
    path.and_then(|p| fs::metadata(p).ok())
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            format!("qemu{}.{}", m.size(), m.mtime())
        })
        .unwrap_or_else(|| "qemu".into())
}
