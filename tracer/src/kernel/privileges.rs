//! Can this process load and attach eBPF tracing programs? Checked up front so the user gets
//! one sentence instead of an EPERM from the middle of a load.
use std::path::Path;

/// Capability numbers from linux/capability.h.
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Privileges {
    pub euid: u32,
    pub effective_caps: u64,
}

impl Privileges {
    pub fn current() -> Privileges {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Privileges {
            euid: nix::unistd::geteuid().as_raw(),
            effective_caps: parse_cap_eff(&status).unwrap_or(0),
        }
    }

    fn has(&self, cap: u32) -> bool {
        self.effective_caps & (1u64 << cap) != 0
    }

    /// Root, CAP_SYS_ADMIN, or CAP_BPF + CAP_PERFMON (5.8+) are enough to load tracing
    /// programs and open perf events on all CPUs.
    pub fn sufficient(&self) -> bool {
        self.has(CAP_SYS_ADMIN) || (self.has(CAP_BPF) && self.has(CAP_PERFMON))
    }

    /// What is missing, for the error message.
    pub fn missing(&self) -> String {
        let mut m = Vec::new();
        if !self.has(CAP_BPF) {
            m.push("CAP_BPF");
        }
        if !self.has(CAP_PERFMON) {
            m.push("CAP_PERFMON");
        }
        format!(
            "euid {}, missing {} (and no CAP_SYS_ADMIN)",
            self.euid,
            m.join(" and ")
        )
    }
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// Kernel lockdown mode ("none", "integrity", "confidentiality"), when the LSM is present.
/// "confidentiality" forbids reading kernel memory, which breaks kprobe-based tracing.
pub fn lockdown() -> Option<String> {
    let text = std::fs::read_to_string(Path::new("/sys/kernel/security/lockdown")).ok()?;
    // The active mode is bracketed: "none [integrity] confidentiality".
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// The inode of the initial PID namespace (PROC_PID_INIT_INO in include/linux/proc_ns.h,
/// fixed since 3.8).
const INITIAL_PID_NS_INO: u64 = 0xEFFF_FFFC;

/// A PID namespace as `bpf_get_ns_current_pid_tgid` names it: the nsfs device (the kernel's
/// own `dev_t` encoding, major << 20 | minor) and the inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidNamespace {
    pub dev: u64,
    pub ino: u64,
}

/// This process's PID namespace when it is not the initial one (a container, `unshare -p`),
/// from `/proc/self/ns/pid`; None in the initial one or when unreadable.
pub fn pid_namespace() -> Option<PidNamespace> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/self/ns/pid").ok()?;
    (m.ino() != INITIAL_PID_NS_INO).then_some(PidNamespace {
        dev: kernel_dev(m.dev()),
        ino: m.ino(),
    })
}

/// A `st_dev` as the kernel holds it internally (MKDEV: 12-bit major, 20-bit minor), which is
/// what the helper compares with.
fn kernel_dev(st_dev: u64) -> u64 {
    let (major, minor) = (libc::major(st_dev) as u64, libc::minor(st_dev) as u64);
    (major << 20) | minor
}

/// Whether `/proc` shows this process's PID namespace (it does when the namespace mounted
/// its own, as `unshare --mount-proc` and containers do): `/proc/self` names our own pid.
pub fn proc_matches_pid_namespace() -> bool {
    std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str()?.parse::<u32>().ok())
        == Some(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_take_the_kernels_encoding() {
        // nsfs is an anonymous device (major 0): small minors encode alike.
        assert_eq!(kernel_dev(libc::makedev(0, 4)), 4);
        // A large minor spreads over both halves of the user encoding.
        assert_eq!(kernel_dev(libc::makedev(0, 0x12345)), 0x12345);
        assert_eq!(kernel_dev(libc::makedev(8, 1)), (8 << 20) | 1);
        // On this host (the initial namespace) nothing is reported, and /proc is ours.
        assert!(proc_matches_pid_namespace());
    }

    #[test]
    fn cap_parsing_and_sufficiency() {
        let root = Privileges {
            euid: 0,
            effective_caps: parse_cap_eff("CapEff:\t000001ffffffffff\n").unwrap(),
        };
        assert!(root.sufficient());
        let bpf_only = Privileges {
            euid: 1000,
            effective_caps: 1 << CAP_BPF,
        };
        assert!(!bpf_only.sufficient());
        assert!(bpf_only.missing().contains("CAP_PERFMON"));
        assert!(!bpf_only.missing().contains("CAP_BPF "));
        let both = Privileges {
            euid: 1000,
            effective_caps: (1 << CAP_BPF) | (1 << CAP_PERFMON),
        };
        assert!(both.sufficient());
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }
}
