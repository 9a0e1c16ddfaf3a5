//! Probes in user binaries that set phases: USDT sites (`tracer:phase_begin/phase_end`) and
//! the `--phase-fn` function.
//!
//! USDT sites are attached with our own `perf_event_open` of the uprobe PMU rather than
//! aya's `UProbe::attach`, because aya 0.14 has no way to pass the uprobe's `ref_ctr_offset`:
//! with it (kernel 4.20+) the kernel itself increments a probe's semaphore in every process
//! that maps the binary, now and later, and decrements it when the probe goes, so
//! semaphore-guarded probes fire for the whole traced tree. Each site has its own program
//! copy (`usdt_i`) whose index selects the site's argument decoding: no BPF cookie (5.15+)
//! is needed.
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use aya::maps::{Array, MapData};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeScope};
use tracer_ebpf::{FLAG_PHASE_FN, USDT_SLOTS, UsdtSpec};

use super::{Engine, EngineError, map_error};
use crate::usdt::PhaseSite;

/// The USDT links of an engine: one perf event per site, closed to detach.
#[derive(Default)]
pub(super) struct UsdtLinks {
    fds: Vec<OwnedFd>,
}

impl UsdtLinks {
    pub(super) fn close(&mut self) {
        self.fds.clear();
    }
}

/// What attaching a binary's USDT phase probes did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtAttached {
    pub sites: usize,
    /// Sites with a semaphore the kernel now maintains.
    pub semaphores: usize,
    /// Something the user should know (a semaphore the kernel cannot maintain).
    pub note: Option<String>,
}

/// The subset of `struct perf_event_attr` up to `config2` (PERF_ATTR_SIZE_VER1): enough for
/// a uprobe, and a size every kernel since 2.6.39 accepts.
#[repr(C)]
#[derive(Default)]
struct PerfAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
}

const PMU_DIR: &str = "/sys/bus/event_source/devices/uprobe";
/// `attr.disabled`: enabled once the program is set.
const ATTR_DISABLED: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// _IOW('$', 8, __u32) and _IO('$', 0).
const PERF_EVENT_IOC_SET_BPF: u32 = 0x4004_2408;
const PERF_EVENT_IOC_ENABLE: u32 = 0x2400;

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> EngineError {
    move |source| EngineError::UserProbe { what, source }
}

/// The uprobe PMU's type, and the bit where `ref_ctr_offset` goes in `config` (None: the
/// kernel predates semaphore support).
fn uprobe_pmu() -> Result<(u32, Option<u32>), EngineError> {
    let ty = std::fs::read_to_string(format!("{PMU_DIR}/type"))
        .map_err(io_err(format!("{PMU_DIR}/type (the uprobe PMU)")))?;
    let ty: u32 = ty.trim().parse().map_err(|_| EngineError::UserProbe {
        what: format!("{PMU_DIR}/type"),
        source: std::io::Error::other(format!("not a number: {ty:?}")),
    })?;
    // "config:32-63"
    let shift = std::fs::read_to_string(format!("{PMU_DIR}/format/ref_ctr_offset"))
        .ok()
        .and_then(|f| {
            f.trim()
                .strip_prefix("config:")?
                .split('-')
                .next()?
                .parse()
                .ok()
        });
    Ok((ty, shift))
}

fn open_uprobe(
    pmu: u32,
    path: &CString,
    offset: u64,
    ref_ctr: Option<(u32, u64)>,
) -> std::io::Result<OwnedFd> {
    let attr = PerfAttr {
        type_: pmu,
        size: std::mem::size_of::<PerfAttr>() as u32,
        config: ref_ctr.map_or(0, |(shift, off)| off << shift),
        flags: ATTR_DISABLED,
        config1: path.as_ptr() as u64,
        config2: offset,
        ..PerfAttr::default()
    };
    // Every process (pid -1) on any CPU: for uprobes the kernel takes cpu 0 to mean that.
    // SAFETY: attr is a valid perf_event_attr prefix of the size it declares; the path
    // outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfAttr,
            -1i32,
            0i32,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn set_bpf(event: &OwnedFd, prog: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    // SAFETY: plain ioctls on fds we own, with the argument types the kernel expects.
    unsafe {
        if libc::ioctl(
            event.as_raw_fd(),
            PERF_EVENT_IOC_SET_BPF as libc::Ioctl,
            prog.as_raw_fd(),
        ) != 0
            || libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as libc::Ioctl, 0) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Engine {
    /// Attach the USDT phase probes of `binary` (its sites from `crate::usdt::phase_sites`).
    pub fn attach_usdt(
        &mut self,
        binary: &Path,
        sites: &[PhaseSite],
    ) -> Result<UsdtAttached, EngineError> {
        let first = self.usdt.fds.len();
        if first + sites.len() > USDT_SLOTS {
            return Err(EngineError::UsdtSlots {
                binary: binary.display().to_string(),
                sites: first + sites.len(),
                max: USDT_SLOTS,
            });
        }
        let (pmu, shift) = uprobe_pmu()?;
        let path =
            CString::new(binary.as_os_str().as_bytes()).map_err(|_| EngineError::UserProbe {
                what: binary.display().to_string(),
                source: std::io::Error::other("a path with a NUL byte"),
            })?;
        let mut semaphores = 0;
        let mut unmaintained = 0;
        for (k, site) in sites.iter().enumerate() {
            let slot = first + k;
            let what = format!(
                "USDT {}:{} at {}+{:#x}",
                site.probe.provider,
                site.probe.name,
                binary.display(),
                site.probe.file_offset
            );
            {
                let mut specs: Array<&mut MapData, UsdtSpec> =
                    Array::try_from(self.bpf.map_mut("USDT_SPECS").expect("USDT_SPECS"))
                        .map_err(map_error("USDT_SPECS"))?;
                specs
                    .set(slot as u32, site.spec, 0)
                    .map_err(map_error("USDT_SPECS"))?;
            }
            let name = format!("usdt_{slot}");
            let p = self.loaded_uprobe(&name, &what)?;
            let ref_ctr = match (site.probe.semaphore_offset, shift) {
                (Some(off), Some(s)) => {
                    semaphores += 1;
                    Some((s, off))
                }
                (Some(_), None) => {
                    unmaintained += 1;
                    None
                }
                (None, _) => None,
            };
            let event = open_uprobe(pmu, &path, site.probe.file_offset, ref_ctr)
                .map_err(io_err(format!("{what}: perf_event_open")))?;
            let prog = p.fd().map_err(|source| EngineError::Program {
                what: what.clone(),
                source,
            })?;
            set_bpf(&event, prog.as_fd()).map_err(io_err(format!("{what}: attaching")))?;
            self.usdt.fds.push(event);
        }
        let note = (unmaintained > 0).then(|| {
            format!(
                "{}: {unmaintained} USDT site(s) have a semaphore this kernel cannot maintain \
                 (no uprobe ref_ctr_offset before 4.20): probes the program guards with it \
                 will not fire",
                binary.display()
            )
        });
        Ok(UsdtAttached {
            sites: sites.len(),
            semaphores,
            note,
        })
    }

    /// Bracket the phase function: its entry puts the calling process in the run's default
    /// phase, its return ends that phase with `ops` operations. Outside it, processes without
    /// a phase of their own are unphased.
    pub fn attach_phase_fn(&mut self, binary: &Path, file_offset: u64) -> Result<(), EngineError> {
        // The return probe first, so a call in flight at attach yields at most an end
        // without a beginning (ignored), never a phase left open.
        for prog in ["phase_fn_exit", "phase_fn_entry"] {
            let what = format!("uprobe {prog} on {}+{file_offset:#x}", binary.display());
            let p = self.loaded_uprobe(prog, &what)?;
            p.attach(
                UProbeAttachLocation::AbsoluteOffset(file_offset),
                binary,
                UProbeScope::AllProcesses,
            )
            .map_err(|source| EngineError::Program { what, source })?;
        }
        self.config.flags |= FLAG_PHASE_FN;
        self.write_config()
    }

    /// Operations one call of the phase function counts for (at the current N).
    pub fn set_phase_fn_ops(&mut self, ops: u64) -> Result<(), EngineError> {
        self.config.fn_ops = ops;
        self.write_config()
    }
}
