//! The real-kernel VM runner: boots a Debian cloud kernel under qemu with an initramfs
//! of our own, runs one command in it, and brings back its exit status, its console
//! output and the files it wrote under `/out`.
//!
//! ```no_run
//! use xtask::kernel::Kernel;
//! use xtask::vm::{self, VmConfig, VmStatus};
//!
//! let guest = xtask::guest::build()?; // static musl tracer, workloads, vm-init
//! let report = vm::run(
//!     &VmConfig::new(Kernel::V6_1, ["sh", "-c", "uname -r > /out/release"])
//!         .guest(guest)
//!         .timeout_secs(120),
//! )?;
//! assert_eq!(report.status, VmStatus::Exited(0));
//! let release = std::fs::read_to_string(report.out_dir.join("release"))?;
//! assert!(release.starts_with("6.1."));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guest environment
//! `/init` is `vm-init` (PID 1). Mounted: proc, sysfs, devtmpfs, devpts, tracefs at
//! `/sys/kernel/tracing`, debugfs at `/sys/kernel/debug`, bpffs at `/sys/fs/bpf`, cgroup2
//! at `/sys/fs/cgroup`, tmpfs on `/tmp`, `/run`, `/dev/shm` and `/out`. `PATH` is
//! `/bin:/sbin:/usr/bin:/usr/sbin`; busybox provides the usual tools; the guest packages'
//! binaries are `/bin/tracer`, `/bin/workloads`, ...; `$KPT_VM_OUT` is `/out`. The
//! command runs as root in `/`, with stdin `/dev/null` and stdout/stderr on the console.
//! There is no network and no kernel modules are available.
//!
//! # Files out
//! Everything under the guest's `/out` when the command ends arrives in
//! [`VmReport::out_dir`] (default `target/vm/runs/<run>/out`), checksummed end to end
//! ([`crate::outstream`]). Transport: a raw NVMe disk by default (~11 MB/s end to end
//! under TCG), or the second serial port ([`Transport::Serial`], ~0.3 MB/s); the Debian
//! cloud kernels build both drivers in but virtio only as modules.
//!
//! # What ends a run
//! The command exits → [`VmStatus::Exited`]; the kernel panics →
//! [`VmStatus::KernelPanic`]; nothing ends before the timeout → [`VmStatus::Timeout`];
//! qemu stops without the exit marker and without a panic message →
//! [`VmStatus::NoExitMarker`]; the files could not be brought back intact →
//! [`VmStatus::OutputCorrupt`]; the runner got SIGINT/SIGTERM (after
//! [`install_interrupt_handler`]) → [`VmStatus::Interrupted`]. In every case qemu has
//! been killed and reaped before [`run`] returns; qemu also gets `PR_SET_PDEATHSIG`
//! (SIGKILL) so it dies with the thread that called [`run`] if the runner is killed.
//!
//! # Cut short: nothing finished is lost
//! When the timeout passes or an interrupt comes while the command runs, the runner writes
//! a stop request ([`protocol::stop_request`]) on the guest console's input (qemu's stdin).
//! vm-init freezes every process, records the state of `/out`, sends them SIGTERM and
//! SIGKILLs what is still there after [`VmConfig::stop_grace`] (30 s); then it sends
//! `/out` as usual, with the entries that were complete at the stop ([`complete`] has the
//! rule: nothing in them open for writing at the stop, nothing changed after it, no hidden
//! name, as in the tracer's staging directories). The status is still
//! [`VmStatus::Timeout`] or [`VmStatus::Interrupted`] (same exit codes); the files are in
//! [`VmReport::out_files`] and [`VmReport::flush`] says which are complete
//! ([`Flush::Sent`]). A guest that cannot send (a kernel lockup, a frozen qemu, a panic, a
//! command that had not started) or has not finished within [`VmConfig::flush_timeout`]
//! (180 s) from the request, or a second interrupt, gets qemu killed: [`Flush::Lost`] says
//! nothing came back and why. Stalls, lockups and panics before the timeout end the run at
//! once, as before: the guest cannot send then.

mod accel;
mod collect;
pub mod complete;
mod config;
mod qemu;
mod rundir;
pub mod slots;
mod watch;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use accel::resolve_accel;
pub use config::{Accel, LineSink, TCG_THREADS_ENV, TcgThreads, Transport, VmConfig};
pub use qemu::qemu_args;
pub use watch::{install_interrupt_handler, interrupted};

use crate::console::Event;
use crate::guest::{self, GuestError};
use crate::initramfs::{self, InitramfsError, RunFiles};
use crate::kernel::{self, KernelError, KernelImage};
use crate::protocol;

/// Exit codes of `cargo xtask vm` besides the command's own 0-255 (see [`VmReport::exit_code`]).
pub mod exit_code {
    /// The VM could not be started (kernel fetch, guest build, initramfs, qemu spawn).
    pub const SETUP_FAILED: i32 = 250;
    /// The guest kernel panicked.
    pub const KERNEL_PANIC: i32 = 251;
    /// The run hit its timeout (a hang).
    pub const TIMEOUT: i32 = 252;
    /// qemu stopped without the exit marker and without a panic message.
    pub const NO_EXIT_MARKER: i32 = 253;
    /// The command finished but its /out files did not arrive intact.
    pub const OUTPUT_CORRUPT: i32 = 254;
    /// The runner was interrupted (SIGINT/SIGTERM), as a shell reports 128 + SIGINT.
    pub const INTERRUPTED: i32 = 130;
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmStatus {
    /// The command ran; its shell-style status (exit code, or 128 + signal; 127 when the
    /// command was not found) and its /out files arrived intact.
    Exited(i32),
    /// The console showed a kernel panic and the exit marker never came.
    KernelPanic { message: String },
    /// The run did not end within the timeout; qemu was killed.
    Timeout { after: Duration },
    /// The guest stopped running `after` into the run: its heartbeat had been silent for
    /// `silent` (qemu TCG has frozen whole guests); qemu was killed. A command that is
    /// only slow keeps the heartbeat going and ends in [`VmStatus::Timeout`] instead.
    Stalled { after: Duration, silent: Duration },
    /// A guest CPU stayed stuck in the kernel (the soft-lockup watchdog's `message`, 75 s or
    /// more) `after` into the run; qemu was killed. Seen under qemu TCG with the other CPU
    /// still running, so the heartbeat alone does not catch it.
    LockedUp { after: Duration, message: String },
    /// qemu stopped without the exit marker and without a recognisable panic.
    NoExitMarker { qemu_status: String },
    /// The command finished with `status`, but the output stream was damaged.
    OutputCorrupt { status: i32, error: String },
    /// SIGINT/SIGTERM reached the runner; qemu was killed.
    Interrupted,
}

/// What came back from a run cut short by the timeout or an interrupt
/// ([`VmReport::flush`]; see "Cut short" in the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flush {
    /// The guest stopped the command and sent /out: every entry is in
    /// [`VmReport::out_files`], intact.
    Sent {
        /// The entries (relative to [`VmReport::out_dir`]) that were complete when the
        /// command was stopped, largest first: a directory stands for everything under it.
        /// All of /out when the command had ended by itself just before the stop.
        complete: Vec<PathBuf>,
        /// The rest of what came back, largest first: what was open for writing at the stop,
        /// changed or appeared after it (a sweep written out as partial on SIGTERM), or has a
        /// hidden name (work in progress). Kept, not trusted.
        incomplete: Vec<PathBuf>,
        /// The command's shell-style status after the stop (143: SIGTERM ended it).
        command_status: i32,
        /// A process of the command was still there after the grace period and was killed
        /// (SIGKILL).
        killed: bool,
    },
    /// Nothing came back: why.
    Lost(String),
}

impl Flush {
    /// One clause for the failure message: what came back.
    fn describe(&self) -> String {
        match self {
            Flush::Sent {
                complete,
                incomplete,
                command_status,
                killed,
            } => format!(
                "the command was stopped ({}, status {command_status}) and its /out came back: \
                 {} complete ({}), {} incomplete ({})",
                if *killed {
                    "SIGKILL after the grace period"
                } else {
                    "SIGTERM"
                },
                complete.len(),
                name_list(complete),
                incomplete.len(),
                name_list(incomplete)
            ),
            Flush::Lost(why) => format!("nothing came back from /out: {why}; qemu was killed"),
        }
    }
}

/// Up to eight paths, comma-separated, and how many more.
fn name_list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "none".into();
    }
    const SHOWN: usize = 8;
    let mut s: Vec<String> = paths
        .iter()
        .take(SHOWN)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > SHOWN {
        s.push(format!("and {} more", paths.len() - SHOWN));
    }
    s.join(", ")
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct VmReport {
    pub status: VmStatus,
    /// The whole console (kernel messages and the command's output), markers removed,
    /// `\r\n` turned into `\n`.
    pub console: String,
    /// Only what the console showed while the command ran (kernel messages printed
    /// meanwhile included); `None` if the command never started.
    pub command_output: Option<String>,
    /// Where the guest's `/out` files are.
    pub out_dir: PathBuf,
    /// Paths of the received entries, relative to `out_dir`. After the timeout or an
    /// interrupt, whatever the stopped command left: see `flush`.
    pub out_files: Vec<PathBuf>,
    pub out_bytes: u64,
    /// Size of the output stream and the guest-side time to send it, as vm-init
    /// reported them (for throughput figures).
    pub out_send: Option<(u64, Duration)>,
    /// `target/vm/runs/<run>`: `console.log` (raw), and with `keep_run_files` the
    /// initramfs and the raw output stream.
    pub run_dir: PathBuf,
    /// qemu's pid (already reaped when the report exists).
    pub qemu_pid: u32,
    /// From starting qemu to its exit.
    pub elapsed: Duration,
    /// How long the run waited for a VM slot before qemu started ([`slots`]).
    pub waited_for_slot: Duration,
    /// From starting qemu to the command's start marker.
    pub boot_time: Option<Duration>,
    /// The accelerator actually used.
    pub accel: Accel,
    /// TCG's threading (meaningless under KVM).
    pub tcg_threads: TcgThreads,
    pub transport: Transport,
    pub kernel: KernelImage,
    pub initramfs_bytes: u64,
    /// What qemu itself printed on stderr.
    pub qemu_stderr: String,
    /// For a run cut short ([`VmStatus::Timeout`], [`VmStatus::Interrupted`]): what came
    /// back of /out and which parts of it are complete. `None` for every other ending.
    pub flush: Option<Flush>,
}

impl VmReport {
    /// The process exit code that represents this run: the command's status for
    /// [`VmStatus::Exited`], else one of [`exit_code`].
    pub fn exit_code(&self) -> i32 {
        match &self.status {
            VmStatus::Exited(s) => *s,
            VmStatus::KernelPanic { .. } => exit_code::KERNEL_PANIC,
            VmStatus::Timeout { .. } | VmStatus::Stalled { .. } | VmStatus::LockedUp { .. } => {
                exit_code::TIMEOUT
            }
            VmStatus::NoExitMarker { .. } => exit_code::NO_EXIT_MARKER,
            VmStatus::OutputCorrupt { .. } => exit_code::OUTPUT_CORRUPT,
            VmStatus::Interrupted => exit_code::INTERRUPTED,
        }
    }

    /// A one-line explanation for anything but a clean exit.
    pub fn failure_message(&self) -> Option<String> {
        let k = &self.kernel.release;
        match &self.status {
            VmStatus::Exited(_) => None,
            VmStatus::KernelPanic { message } => {
                Some(format!("kernel panic in the VM ({k}): {message}"))
            }
            VmStatus::Timeout { after } => Some(format!(
                "the VM ({k}) hung: no exit after {} s (timeout); {}",
                after.as_secs(),
                self.flush_clause()
            )),
            VmStatus::Stalled { after, silent } => Some(format!(
                "the VM ({k}) stopped running {} s into the run: no heartbeat from the guest for {} s; qemu was killed",
                after.as_secs(),
                silent.as_secs()
            )),
            VmStatus::LockedUp { after, message } => Some(format!(
                "the VM ({k}) locked up {} s into the run: {message}; qemu was killed",
                after.as_secs()
            )),
            VmStatus::NoExitMarker { qemu_status } => Some(format!(
                "the VM ({k}) stopped without reporting an exit status (qemu: {qemu_status}); see {}",
                self.run_dir.join("console.log").display()
            )),
            VmStatus::OutputCorrupt { status, error } => Some(format!(
                "the command exited with {status}, but its /out files did not arrive intact: {error}"
            )),
            VmStatus::Interrupted => Some(format!("interrupted; {}", self.flush_clause())),
        }
    }

    fn flush_clause(&self) -> String {
        self.flush
            .as_ref()
            .map_or("qemu was killed".into(), Flush::describe)
    }
}

/// Failures before the guest could run.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Guest(#[from] GuestError),
    #[error(transparent)]
    Initramfs(#[from] InitramfsError),
    #[error("starting qemu ({cmd}): {source}; is qemu-system-x86 installed? (`cargo xtask setup`)")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("--accel kvm: /dev/kvm cannot be opened: {0}")]
    NoKvm(std::io::Error),
    #[error("empty command")]
    EmptyCommand,
}

impl VmError {
    pub fn exit_code(&self) -> i32 {
        exit_code::SETUP_FAILED
    }
}

/// Boots the VM, runs the command and returns what happened. `Err` only when the VM
/// could not be started; everything after qemu started is a [`VmStatus`].
pub fn run(cfg: &VmConfig) -> Result<VmReport, VmError> {
    if cfg.command.is_empty() {
        return Err(VmError::EmptyCommand);
    }
    let kernel = kernel::fetch(cfg.kernel)?;
    let guest = match &cfg.guest {
        Some(g) => g.clone(),
        None => guest::locate()?,
    };
    let accel = resolve_accel(cfg.accel, &kernel, &guest)?;
    let run_dir = rundir::new_run_dir()?;
    let out_dir = cfg.out_dir.clone().unwrap_or_else(|| run_dir.join("out"));
    fs::create_dir_all(&out_dir).map_err(|e| VmError::Io(out_dir.clone(), e))?;

    let nonce = rundir::nonce();
    let (initrd, stream_path, initramfs_bytes) = write_run_files(cfg, &guest, &run_dir, &nonce)?;

    let args = qemu_args(cfg, &kernel.vmlinuz, &initrd, &stream_path, accel);
    let slot = vm_slot(cfg)?;
    let started = Instant::now();
    let mut guard = qemu::spawn(&args)?;
    let qemu_pid = guard.child().id();
    let stop = guard.child().stdin.take().map(|input| watch::StopLine {
        input,
        request: protocol::stop_request(&nonce, cfg.stop_grace.as_secs()),
    });

    let (tx, rx) = mpsc::channel::<Event>();
    let stdout = guard.child().stdout.take().expect("piped");
    let stderr = guard.child().stderr.take().expect("piped");
    let echo = cfg.echo;
    let console_log = run_dir.join("console.log");
    let nonce2 = nonce.clone();
    let on_line = cfg.on_line.clone();
    let console_thread = std::thread::spawn(move || {
        watch::pump_console(stdout, &nonce2, echo, on_line, &console_log, tx)
    });
    let stderr_thread =
        std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());

    let mut seen = watch::Seen::default();
    let heartbeat = qemu::heartbeat_file(&stream_path);
    let limits = watch::Limits {
        timeout: cfg.timeout,
        heartbeat: (cfg.transport == Transport::Disk)
            .then_some((heartbeat.as_path(), cfg.stall_after)),
        flush_timeout: cfg.flush_timeout,
    };
    let ending = watch::wait(&mut guard, &rx, &mut seen, started, &limits, stop);
    let elapsed = started.elapsed();
    drop(guard);
    let waited_for_slot = slot.as_ref().map_or(Duration::ZERO, |s| s.waited);
    drop(slot);
    let (console, command_output) = console_thread.join().unwrap_or_default();
    let qemu_stderr = stderr_thread.join().unwrap_or_default();
    for ev in rx.try_iter() {
        seen.apply(ev, started);
    }
    if cfg.echo && !qemu_stderr.trim().is_empty() {
        eprint!("{qemu_stderr}");
    }

    let collected = collect::collect(
        &ending,
        &seen,
        cfg.timeout,
        cfg.transport,
        &stream_path,
        &out_dir,
    );
    let out_send =
        protocol::parse_send_stats(&console).map(|(bytes, us)| (bytes, Duration::from_micros(us)));
    if !cfg.keep_run_files {
        for f in [&initrd, &stream_path, &heartbeat] {
            let _ = fs::remove_file(f);
        }
    }
    Ok(VmReport {
        status: collected.status,
        console,
        command_output,
        out_dir,
        out_files: collected.out_files,
        out_bytes: collected.out_bytes,
        out_send,
        run_dir,
        qemu_pid,
        elapsed,
        waited_for_slot,
        boot_time: seen.boot_time,
        accel,
        tcg_threads: cfg.tcg_threads,
        transport: cfg.transport,
        kernel,
        initramfs_bytes,
        qemu_stderr,
        flush: collected.flush,
    })
}

/// The guest's initramfs (its binaries, the command, the nonce) and the file the output
/// stream arrives in (serial: written by qemu; disk: the NVMe backing file, sparse, large
/// enough for anything the guest's RAM-backed /out can hold), under `run_dir`; with the
/// initramfs's size.
fn write_run_files(
    cfg: &VmConfig,
    guest: &guest::GuestBinaries,
    run_dir: &Path,
    nonce: &str,
) -> Result<(PathBuf, PathBuf, u64), VmError> {
    let initrd = run_dir.join("initramfs.cpio");
    let initramfs_bytes = initramfs::write(
        guest,
        &RunFiles {
            argv: cfg.command.clone(),
            env: cfg.env.clone(),
            nonce: nonce.to_string(),
            includes: cfg.includes.clone(),
            transport: cfg.transport.as_str().to_string(),
        },
        Path::new(initramfs::BUSYBOX),
        &initrd,
    )?;
    // Serial: qemu writes the stream here. Disk: the NVMe backing file, sparse, large
    // enough for anything the guest's RAM-backed /out can hold.
    let stream_path = run_dir.join(match cfg.transport {
        Transport::Serial => "out.stream",
        Transport::Disk => "out.disk",
    });
    if cfg.transport == Transport::Disk {
        let f = fs::File::create(&stream_path).map_err(|e| VmError::Io(stream_path.clone(), e))?;
        f.set_len((u64::from(cfg.mem_mb) + 64) << 20)
            .map_err(|e| VmError::Io(stream_path.clone(), e))?;
    }
    Ok((initrd, stream_path, initramfs_bytes))
}

/// A VM slot: one computing guest per host core at most (see `slots`); the wait is not part
/// of the timeout. An idle guest needs no core of its own.
fn vm_slot(cfg: &VmConfig) -> Result<Option<slots::Slot>, VmError> {
    let slot = match cfg.idle {
        true => None,
        false => Some(
            slots::acquire(cfg.mem_mb, || {
                eprintln!(
                    "vm: every VM slot is taken ({} guests at once; {} sets it): waiting for one",
                    slots::jobs(cfg.mem_mb),
                    slots::JOBS_ENV
                )
            })
            .map_err(|e| VmError::Io(slots::slots_dir(), e))?,
        ),
    };
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct() {
        let codes = [
            exit_code::SETUP_FAILED,
            exit_code::KERNEL_PANIC,
            exit_code::TIMEOUT,
            exit_code::NO_EXIT_MARKER,
            exit_code::OUTPUT_CORRUPT,
            exit_code::INTERRUPTED,
        ];
        let mut sorted = codes.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), codes.len());
    }
}
