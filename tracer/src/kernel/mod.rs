//! Facts about the running kernel that decide how each target can be measured: symbols
//! (kallsyms), BTF, tracefs events and their record layouts, privileges.
pub mod kallsyms;
pub mod privileges;
pub mod tracefs;

use crate::rundata::KernelInfo;

/// `uname` of the running kernel.
pub fn kernel_info() -> KernelInfo {
    match nix::sys::utsname::uname() {
        Ok(u) => KernelInfo {
            release: u.release().to_string_lossy().into_owned(),
            version: u.version().to_string_lossy().into_owned(),
            machine: u.machine().to_string_lossy().into_owned(),
        },
        Err(_) => KernelInfo::default(),
    }
}

/// Hostname, for run metadata.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Is there a kprobe PMU (CONFIG_KPROBES with perf support)? Aya attaches kprobes through it,
/// falling back to tracefs `kprobe_events` on old kernels.
pub fn has_kprobe_pmu() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists()
}

/// Does the kernel expose its own BTF (needed by fentry/fexit)?
pub fn has_vmlinux_btf() -> bool {
    std::path::Path::new("/sys/kernel/btf/vmlinux").exists()
}
