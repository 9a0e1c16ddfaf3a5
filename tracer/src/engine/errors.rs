//! The engine's errors, why an attach point could not be used, and the errno of a kernel
//! refusal.
use std::error::Error;
use std::io;

use aya::maps::MapError;
use aya::programs::ProgramError;
use aya::programs::uprobe::UProbeError;
use aya::sys::SyscallError;

use crate::kernel::tracefs::TracefsError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("loading the eBPF object failed: {0}")]
    Load(#[source] aya::EbpfError),
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    #[error("{what}: {source}")]
    Program { what: String, source: ProgramError },
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("listing online CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("no free {kind} attach slot (at most {max} attach points of this kind per run)")]
    NoSlot { kind: &'static str, max: usize },
    #[error("target index {target} is beyond the {targets} targets the maps were sized for")]
    TargetIndex { target: u32, targets: u32 },
    #[error("{what}: {source}")]
    UserProbe {
        what: String,
        source: std::io::Error,
    },
    #[error(
        "{binary}: {sites} USDT phase probe sites, more than the {max} the tracer's probes have room for"
    )]
    UsdtSlots {
        binary: String,
        sites: usize,
        max: usize,
    },
}

impl EngineError {
    /// The errno the kernel (or a file operation) answered with, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            // Neither is a `source`: their Display already says everything.
            EngineError::Cpus(e) => e.raw_os_error(),
            EngineError::Tracefs(TracefsError::Mount(errno)) => Some(*errno as i32),
            _ => errno(self),
        }
    }

    /// EPERM or EACCES: a missing privilege, lockdown or restricted BPF, not a bug.
    pub fn is_refusal(&self) -> bool {
        matches!(self.errno(), Some(libc::EPERM | libc::EACCES))
    }
}

/// The error of a failed operation on map `name`, for `map_err`.
pub(super) fn map_error(name: &'static str) -> impl Fn(MapError) -> EngineError {
    move |source| EngineError::Map { name, source }
}

/// Why one attach point could not be used, classified for the plan report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachFailure {
    /// The kernel refused to load or attach (EPERM/EACCES): lockdown, restricted BPF,
    /// missing capability.
    Refused(String),
    /// The function is not in vmlinux BTF (inlined, not built, or no BTF at all).
    NotInBtf(String),
    /// Anything else (EINVAL on attach, a blacklisted function, ...).
    Failed(String),
}

impl AttachFailure {
    pub fn message(&self) -> &str {
        match self {
            AttachFailure::Refused(m) | AttachFailure::NotInBtf(m) | AttachFailure::Failed(m) => m,
        }
    }
}

/// The OS errno of the first io::Error in `e`'s chain of sources.
fn errno(e: &(dyn Error + 'static)) -> Option<i32> {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(n) = node_errno(e) {
            return Some(n);
        }
        cur = e.source();
    }
    None
}

fn node_errno(e: &(dyn Error + 'static)) -> Option<i32> {
    if let Some(io) = e.downcast_ref::<io::Error>() {
        return io.raw_os_error();
    }
    // `#[error(transparent)]` variants hand on their io::Error's source, not the io::Error
    // itself, so walking `source()` skips it: look inside them.
    match e.downcast_ref::<ProgramError>() {
        Some(ProgramError::IOError(io)) => return io.raw_os_error(),
        Some(ProgramError::UProbeError(UProbeError::SymbolError { error, .. })) => {
            return symbol_error_errno(error.as_ref());
        }
        _ => {}
    }
    match e.downcast_ref::<MapError>() {
        Some(MapError::IoError(io)) => io.raw_os_error(),
        _ => None,
    }
}

/// A uprobe's symbol lookup wraps the io::Error of reading the binary in aya's private,
/// transparent `ResolveSymbolError`: neither a downcast nor `source()` reaches it, so its
/// message (std's text for the errno) is all there is to go by.
fn symbol_error_errno(e: &(dyn Error + Send + Sync + 'static)) -> Option<i32> {
    let text = e.to_string().to_lowercase();
    if text.contains("permission denied") {
        Some(libc::EACCES)
    } else if text.contains("operation not permitted") {
        Some(libc::EPERM)
    } else {
        errno(e)
    }
}

/// Turn a load/attach error into the reason shown in plan reports.
pub(super) fn classify(what: &str, e: &ProgramError) -> AttachFailure {
    // The full verifier log is long; keep it for -v.
    log::debug!("{what}: {e}");
    let text = error_chain(e);
    let errno = match errno(e) {
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        _ => return AttachFailure::Failed(format!("{what}: {text}")),
    };
    let loading = matches!(
        e,
        ProgramError::LoadError { .. }
            | ProgramError::SyscallError(SyscallError {
                call: "bpf_prog_load",
                ..
            })
    );
    let stage = if loading { "loading" } else { "attaching" };
    AttachFailure::Refused(format!("{what}: the kernel refused {stage} it ({errno})"))
}

/// Flatten an error and its sources, dropping multi-kilobyte verifier logs to their last line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![shorten(&e.to_string())];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = shorten(&s.to_string());
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

fn shorten(s: &str) -> String {
    if let Some(idx) = s.find("Verifier output:") {
        let (head, log) = s.split_at(idx);
        let last = log
            .lines()
            .map(str::trim)
            .rev()
            .find(|l| !l.is_empty() && !l.starts_with("Verifier output:"))
            .unwrap_or("");
        if last.is_empty() {
            return head.trim_end_matches([' ', '.']).to_string();
        }
        return format!("{head}verifier: {last}");
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_logs_are_shortened() {
        let s = shorten(
            "BPF_PROG_LOAD failed. Verifier output: 0: r1 = 0\n1: exit\ninvalid mem access\n",
        );
        assert!(s.ends_with("verifier: invalid mem access"), "{s}");
    }

    fn load_error(errno: i32) -> ProgramError {
        ProgramError::LoadError {
            io_error: io::Error::from_raw_os_error(errno),
            verifier_log: aya_obj::VerifierLog::new("0: exit\n".into()),
        }
    }

    fn syscall_error(call: &'static str, errno: i32) -> ProgramError {
        ProgramError::SyscallError(SyscallError {
            call,
            io_error: io::Error::from_raw_os_error(errno),
        })
    }

    #[test]
    fn refusals_are_told_by_errno_and_stage() {
        let cases = [
            (load_error(libc::EPERM), "loading it (EPERM)"),
            (load_error(libc::EACCES), "loading it (EACCES)"),
            (
                syscall_error("bpf_prog_load", libc::EPERM),
                "loading it (EPERM)",
            ),
            (
                syscall_error("bpf_link_create", libc::EACCES),
                "attaching it (EACCES)",
            ),
            (
                ProgramError::IOError(io::Error::from_raw_os_error(libc::EPERM)),
                "attaching it (EPERM)",
            ),
        ];
        for (e, tail) in cases {
            let f = classify("kprobe/kretprobe on f", &e);
            assert_eq!(
                f,
                AttachFailure::Refused(format!("kprobe/kretprobe on f: the kernel refused {tail}")),
                "{e:?}"
            );
        }
    }

    #[test]
    fn other_errnos_fail_with_the_whole_chain() {
        let f = classify(
            "tracepoint a:b",
            &syscall_error("perf_event_open", libc::EINVAL),
        );
        let AttachFailure::Failed(m) = f else {
            panic!("EINVAL is not a refusal: {f:?}")
        };
        assert!(
            m.starts_with("tracepoint a:b: `perf_event_open` failed: "),
            "{m}"
        );
        let f = classify("x", &ProgramError::NotLoaded);
        assert_eq!(
            f,
            AttachFailure::Failed("x: the program is not loaded".into())
        );
    }

    #[test]
    fn engine_errors_know_their_errno() {
        let program = |e| EngineError::Program {
            what: "w".into(),
            source: e,
        };
        assert!(program(load_error(libc::EACCES)).is_refusal());
        assert!(!program(load_error(libc::EINVAL)).is_refusal());
        assert!(EngineError::Cpus(io::Error::from_raw_os_error(libc::EPERM)).is_refusal());
        assert!(EngineError::Tracefs(TracefsError::Mount(nix::errno::Errno::EPERM)).is_refusal());
        let tracefs = EngineError::Tracefs(TracefsError::Io {
            path: "/sys/kernel/tracing/events".into(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        });
        assert!(tracefs.is_refusal());
        assert!(
            !EngineError::NoSlot {
                kind: "fentry",
                max: 1
            }
            .is_refusal()
        );
    }
}
