//! Facts about the running kernel that decide how each target can be measured: symbols
//! (kallsyms), BTF, tracefs events and their record layouts, privileges; and the symbolization
//! of kernel stack addresses.
pub mod btf;
pub mod callsites;
pub mod cpustat;
pub mod kallsyms;
pub mod privileges;
pub mod symbolize;
pub mod syscalls;
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

/// The kernel's current limit on perf sampling rates (Hz), which it lowers by itself while
/// perf interrupts take more than `kernel.perf_cpu_time_max_percent` of the CPU; None where
/// the file cannot be read.
pub fn perf_max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
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

/// This process's peak resident set size (VmHWM), in KiB.
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Kernel memory locked by this process's BPF maps: the sum of `memlock` over its
/// bpf-map file descriptors.
pub fn bpf_map_memlock_bytes() -> u64 {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut total = 0;
    for fd in fds.flatten() {
        let is_map = std::fs::read_link(fd.path())
            .map(|t| t.to_string_lossy() == "anon_inode:bpf-map")
            .unwrap_or(false);
        if !is_map {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        total += info
            .lines()
            .find_map(|l| l.strip_prefix("memlock:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}
