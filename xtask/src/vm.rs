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

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::console::{ConsoleFilter, Event};
use crate::guest::{self, GuestBinaries, GuestError};
use crate::initramfs::{self, InitramfsError, RunFiles};
use crate::kernel::{self, Kernel, KernelError, KernelImage};
use crate::outstream;
use crate::paths;
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

/// How qemu executes the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM if a short, cached probe boot under KVM works on this host, else TCG.
    Auto,
    /// Software emulation: slower (absolute times ~3-20x bare metal) but always works.
    Tcg,
    Kvm,
}

impl std::str::FromStr for Accel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Accel::Auto),
            "tcg" => Ok(Accel::Tcg),
            "kvm" => Ok(Accel::Kvm),
            _ => Err(format!(
                "unknown accelerator {s:?}: expected auto, tcg or kvm"
            )),
        }
    }
}

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Accel::Auto => "auto",
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        })
    }
}

/// How the guest's `/out` files travel to the host. Both carry the same checksummed
/// [`outstream`]; both need only drivers the Debian cloud kernels build in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A raw NVMe disk backed by a sparse host file (~15-20 MB/s under TCG). Default.
    Disk,
    /// The second UART, in raw mode, into a host file (~0.3 MB/s under TCG).
    Serial,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Disk => "disk",
            Transport::Serial => "serial",
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "disk" => Ok(Transport::Disk),
            "serial" => Ok(Transport::Serial),
            _ => Err(format!("unknown transport {s:?}: expected disk or serial")),
        }
    }
}

/// One VM run. Build with [`VmConfig::new`] and the builder methods.
#[derive(Debug, Clone)]
pub struct VmConfig {
    pub kernel: Kernel,
    /// argv of the command; `argv[0]` is looked up in the guest's PATH.
    pub command: Vec<OsString>,
    /// Absolute host paths (files, directories, symlinks), placed at the same path in the
    /// guest.
    pub includes: Vec<PathBuf>,
    /// Extra environment for the command.
    pub env: Vec<(String, String)>,
    /// Where the guest's `/out` arrives; default `target/vm/runs/<run>/out`. An existing
    /// directory is not emptied first.
    pub out_dir: Option<PathBuf>,
    /// Whole-run limit, boot included. Default 300 s.
    pub timeout: Duration,
    /// Guest memory. Default 1024 MiB.
    pub mem_mb: u32,
    /// Guest CPUs. Default 2.
    pub cpus: u32,
    /// Default [`Accel::Tcg`].
    pub accel: Accel,
    /// Default [`Transport::Disk`].
    pub transport: Transport,
    /// The guest programs; `None` uses [`guest::locate`] (already built, not rebuilt).
    pub guest: Option<GuestBinaries>,
    /// Copy the console to stdout as it arrives (markers removed). Default true.
    pub echo: bool,
    /// Show the kernel's boot messages (no `quiet` on the command line). Default false.
    pub kernel_log: bool,
    /// Appended to the kernel command line.
    pub extra_cmdline: Vec<String>,
    /// Appended to qemu's arguments (extra devices, say).
    pub extra_qemu_args: Vec<OsString>,
    /// Keep the initramfs and the raw output stream in the run directory. Default false.
    pub keep_run_files: bool,
    /// Called with each complete line of the command's output as it arrives (progress).
    pub on_line: Option<LineSink>,
}

/// A callback for the command's output lines, run on the console reader's thread.
#[derive(Clone)]
pub struct LineSink(pub std::sync::Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for LineSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineSink")
    }
}

impl VmConfig {
    pub fn new<I, S>(kernel: Kernel, command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        VmConfig {
            kernel,
            command: command.into_iter().map(Into::into).collect(),
            includes: Vec::new(),
            env: Vec::new(),
            out_dir: None,
            timeout: Duration::from_secs(300),
            mem_mb: 1024,
            cpus: 2,
            accel: Accel::Tcg,
            transport: Transport::Disk,
            guest: None,
            echo: true,
            kernel_log: false,
            extra_cmdline: Vec::new(),
            extra_qemu_args: Vec::new(),
            keep_run_files: false,
            on_line: None,
        }
    }
    pub fn include(mut self, host_path: impl Into<PathBuf>) -> Self {
        self.includes.push(host_path.into());
        self
    }
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }
    pub fn timeout_secs(mut self, secs: u64) -> Self {
        self.timeout = Duration::from_secs(secs);
        self
    }
    pub fn mem_mb(mut self, mb: u32) -> Self {
        self.mem_mb = mb;
        self
    }
    pub fn cpus(mut self, n: u32) -> Self {
        self.cpus = n;
        self
    }
    pub fn accel(mut self, accel: Accel) -> Self {
        self.accel = accel;
        self
    }
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }
    pub fn guest(mut self, guest: GuestBinaries) -> Self {
        self.guest = Some(guest);
        self
    }
    pub fn echo(mut self, echo: bool) -> Self {
        self.echo = echo;
        self
    }
    pub fn kernel_log(mut self, on: bool) -> Self {
        self.kernel_log = on;
        self
    }
    pub fn on_line(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_line = Some(LineSink(std::sync::Arc::new(f)));
        self
    }
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
    /// qemu stopped without the exit marker and without a recognisable panic.
    NoExitMarker { qemu_status: String },
    /// The command finished with `status`, but the output stream was damaged.
    OutputCorrupt { status: i32, error: String },
    /// SIGINT/SIGTERM reached the runner; qemu was killed.
    Interrupted,
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
    /// Paths of the received entries, relative to `out_dir`.
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
    /// From starting qemu to the command's start marker.
    pub boot_time: Option<Duration>,
    /// The accelerator actually used.
    pub accel: Accel,
    pub transport: Transport,
    pub kernel: KernelImage,
    pub initramfs_bytes: u64,
    /// What qemu itself printed on stderr.
    pub qemu_stderr: String,
}

impl VmReport {
    /// The process exit code that represents this run: the command's status for
    /// [`VmStatus::Exited`], else one of [`exit_code`].
    pub fn exit_code(&self) -> i32 {
        match &self.status {
            VmStatus::Exited(s) => *s,
            VmStatus::KernelPanic { .. } => exit_code::KERNEL_PANIC,
            VmStatus::Timeout { .. } => exit_code::TIMEOUT,
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
                "the VM ({k}) hung: no exit after {} s (timeout); qemu was killed",
                after.as_secs()
            )),
            VmStatus::NoExitMarker { qemu_status } => Some(format!(
                "the VM ({k}) stopped without reporting an exit status (qemu: {qemu_status}); see {}",
                self.run_dir.join("console.log").display()
            )),
            VmStatus::OutputCorrupt { status, error } => Some(format!(
                "the command exited with {status}, but its /out files did not arrive intact: {error}"
            )),
            VmStatus::Interrupted => Some("interrupted; qemu was killed".into()),
        }
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

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP end a running VM cleanly ([`VmStatus::Interrupted`])
/// instead of killing the process. For command-line tools; tests need not call it.
pub fn install_interrupt_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// True once an interrupt arrived (after [`install_interrupt_handler`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// qemu command line (without the program name). Pure, for tests and `--dry-run`.
pub fn qemu_args(
    cfg: &VmConfig,
    vmlinuz: &Path,
    initramfs: &Path,
    out_stream: &Path,
    accel: Accel,
) -> Vec<OsString> {
    // no_timer_check: under a loaded TCG host the IO-APIC timer check misfires
    // ("MP-BIOS bug: 8254 timer not connected") and takes a slower fallback.
    let mut cmdline = vec![
        "console=ttyS0",
        "panic=-1",
        "rdinit=/init",
        "no_timer_check",
    ];
    if !cfg.kernel_log {
        cmdline.push("quiet");
    }
    let mut cmdline: Vec<String> = cmdline.into_iter().map(String::from).collect();
    cmdline.extend(cfg.extra_cmdline.iter().cloned());
    let (accel_arg, cpu) = match accel {
        Accel::Kvm => ("kvm", "host"),
        _ => ("tcg", "max"),
    };
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |s: &str| a.push(s.into());
    for s in [
        "-accel",
        accel_arg,
        "-cpu",
        cpu,
        "-m",
        &cfg.mem_mb.to_string(),
        "-smp",
        &cfg.cpus.to_string(),
        // No default NIC, VGA, floppy, CD: nothing to probe, faster boot.
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        // ttyS0: the console, on qemu's stdout. `signal=off`: ^C is ours, not qemu's.
        "-chardev",
        "stdio,id=con,signal=off",
        "-serial",
        "chardev:con",
    ] {
        push(s);
    }
    match cfg.transport {
        Transport::Serial => {
            a.push("-chardev".into());
            let mut out = OsString::from("file,id=out,path=");
            out.push(out_stream);
            a.push(out);
            a.push("-serial".into());
            a.push("chardev:out".into());
        }
        Transport::Disk => {
            // qemu splits -drive options on commas; a comma in the path is doubled.
            let mut drive = OsString::from("file=");
            drive.push(out_stream.to_string_lossy().replace(',', ",,"));
            drive.push(",if=none,id=out,format=raw,cache=unsafe");
            a.push("-drive".into());
            a.push(drive);
            a.push("-device".into());
            a.push(format!("nvme,serial={},drive=out", protocol::OUT_DISK_SERIAL).into());
        }
    }
    a.push("-kernel".into());
    a.push(vmlinuz.into());
    a.push("-initrd".into());
    a.push(initramfs.into());
    a.push("-append".into());
    a.push(cmdline.join(" ").into());
    a.extend(cfg.extra_qemu_args.iter().cloned());
    a
}

/// Kills and reaps qemu when dropped, whichever way `run` is left (including a panic).
struct QemuGuard(Option<Child>);

impl QemuGuard {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present until reaped")
    }
    fn kill_and_reap(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.0.take()?;
        let _ = c.kill();
        c.wait().ok()
    }
}

impl Drop for QemuGuard {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

fn nonce() -> String {
    let mut b = [0u8; 8];
    if fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        b = (t ^ ((std::process::id() as u64) << 32)).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A fresh `target/vm/runs/<time>-<pid>-<n>` directory.
fn new_run_dir() -> Result<PathBuf, VmError> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let runs = paths::vm_dir().join("runs");
    prune_runs(&runs, 40);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let dir = runs.join(format!(
        "{t}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    fs::create_dir_all(&dir).map_err(|e| VmError::Io(dir.clone(), e))?;
    Ok(dir)
}

/// Keeps the newest `keep` run directories (names start with a millisecond timestamp).
fn prune_runs(runs: &Path, keep: usize) {
    let Ok(rd) = fs::read_dir(runs) else { return };
    let mut dirs: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    if dirs.len() <= keep {
        return;
    }
    dirs.sort();
    for d in &dirs[..dirs.len() - keep] {
        let _ = fs::remove_dir_all(d);
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
    let run_dir = new_run_dir()?;
    let out_dir = cfg.out_dir.clone().unwrap_or_else(|| run_dir.join("out"));
    fs::create_dir_all(&out_dir).map_err(|e| VmError::Io(out_dir.clone(), e))?;

    let nonce = nonce();
    let initrd = run_dir.join("initramfs.cpio");
    let initramfs_bytes = initramfs::write(
        &guest,
        &RunFiles {
            argv: cfg.command.clone(),
            env: cfg.env.clone(),
            nonce: nonce.clone(),
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

    let args = qemu_args(cfg, &kernel.vmlinuz, &initrd, &stream_path, accel);
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls (prctl, getppid, setpgid) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Die with the runner even if it is SIGKILLed.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The runner may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("runner exited during spawn"));
            }
            // Own process group: a terminal's ^C goes to the runner, which then kills
            // qemu itself and reports it, instead of qemu dying unreported.
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let started = Instant::now();
    let child = cmd.spawn().map_err(|source| VmError::Spawn {
        cmd: format!("qemu-system-x86_64 {}", join_args(&args)),
        source,
    })?;
    let qemu_pid = child.id();
    let mut guard = QemuGuard(Some(child));

    let (tx, rx) = mpsc::channel::<Event>();
    let stdout = guard.child().stdout.take().expect("piped");
    let stderr = guard.child().stderr.take().expect("piped");
    let echo = cfg.echo;
    let console_log = run_dir.join("console.log");
    let nonce2 = nonce.clone();
    let on_line = cfg.on_line.clone();
    let console_thread =
        std::thread::spawn(move || pump_console(stdout, &nonce2, echo, on_line, &console_log, tx));
    let stderr_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = { stderr }.read_to_string(&mut s);
        s
    });

    let deadline = started + cfg.timeout;
    let mut seen = Seen::default();
    let mut timed_out = false;
    let mut was_interrupted = false;
    let qemu_status = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(ev) => {
                seen.apply(ev, started);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The console reader is done (qemu closed its stdout): just poll.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(20))
            }
        }
        if let Ok(Some(st)) = guard.child().try_wait() {
            guard.0 = None; // reaped
            break Some(st);
        }
        let now = Instant::now();
        if interrupted() {
            was_interrupted = true;
            break guard.kill_and_reap();
        }
        if now >= deadline {
            timed_out = true;
            break guard.kill_and_reap();
        }
        // panic=-1 reboots at once and -no-reboot turns that into an exit; this only
        // covers a kernel that hangs after the panic message.
        if seen
            .panic_at
            .is_some_and(|t| now - t > Duration::from_secs(10))
        {
            break guard.kill_and_reap();
        }
        // The marker comes after the files were sent; power-off should follow at once.
        if seen
            .exit_at
            .is_some_and(|t| now - t > Duration::from_secs(15))
        {
            break guard.kill_and_reap();
        }
    };
    let elapsed = started.elapsed();
    drop(guard);
    let (console, command_output) = console_thread.join().unwrap_or_default();
    let qemu_stderr = stderr_thread.join().unwrap_or_default();
    for ev in rx.try_iter() {
        seen.apply(ev, started);
    }
    if cfg.echo && !qemu_stderr.trim().is_empty() {
        eprint!("{qemu_stderr}");
    }

    let mut out_files = Vec::new();
    let mut out_bytes = 0;
    let decode = || {
        read_stream(cfg.transport, &stream_path)
            .and_then(|data| outstream::decode_bytes(&data, &out_dir).map_err(|e| e.to_string()))
    };
    let status = if was_interrupted {
        VmStatus::Interrupted
    } else if let Some(status) = seen.exit_status {
        match decode() {
            Ok(r) if r.status == status => {
                out_files = r.entries;
                out_bytes = r.bytes;
                VmStatus::Exited(status)
            }
            Ok(r) => VmStatus::OutputCorrupt {
                status,
                error: format!(
                    "the stream recorded status {}, the console {status}",
                    r.status
                ),
            },
            Err(error) => VmStatus::OutputCorrupt { status, error },
        }
    } else if timed_out {
        VmStatus::Timeout { after: cfg.timeout }
    } else if let Some(message) = seen.panic {
        VmStatus::KernelPanic { message }
    } else {
        VmStatus::NoExitMarker {
            qemu_status: qemu_status.map_or("unknown".into(), |s| s.to_string()),
        }
    };
    let out_send =
        protocol::parse_send_stats(&console).map(|(bytes, us)| (bytes, Duration::from_micros(us)));
    if !cfg.keep_run_files {
        let _ = fs::remove_file(&initrd);
        let _ = fs::remove_file(&stream_path);
    }
    Ok(VmReport {
        status,
        console,
        command_output,
        out_dir,
        out_files,
        out_bytes,
        out_send,
        run_dir,
        qemu_pid,
        elapsed,
        boot_time: seen.boot_time,
        accel,
        transport: cfg.transport,
        kernel,
        initramfs_bytes,
        qemu_stderr,
    })
}

/// What the console has told the runner so far.
#[derive(Debug, Default)]
struct Seen {
    exit_status: Option<i32>,
    exit_at: Option<Instant>,
    panic: Option<String>,
    panic_at: Option<Instant>,
    boot_time: Option<Duration>,
}

impl Seen {
    fn apply(&mut self, ev: Event, started: Instant) {
        match ev {
            Event::Started => self.boot_time = Some(started.elapsed()),
            Event::Exited(s) => {
                self.exit_status = Some(s);
                self.exit_at = Some(Instant::now());
            }
            // The first panic line is the one that names the cause.
            Event::Panic(m) if self.panic.is_none() => {
                self.panic = Some(m);
                self.panic_at = Some(Instant::now());
            }
            Event::Panic(_) => {}
        }
    }
}

/// The raw output stream as the transport left it on the host.
fn read_stream(transport: Transport, path: &Path) -> Result<Vec<u8>, String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    match transport {
        Transport::Serial => fs::read(path).map_err(err),
        Transport::Disk => {
            use std::io::{Seek, SeekFrom};
            let mut f = fs::File::open(path).map_err(err)?;
            let mut head = [0u8; protocol::DISK_HEADER_LEN];
            f.read_exact(&mut head).map_err(err)?;
            let Some(len) = protocol::parse_disk_header(&head) else {
                return Err(
                    "the output disk has no valid header: the guest did not finish \
                            sending its /out files (see the console)"
                        .into(),
                );
            };
            let size = f.metadata().map_err(err)?.len();
            if protocol::DISK_DATA_OFFSET + len > size {
                return Err(format!(
                    "the output disk header claims {len} bytes, more than the disk holds"
                ));
            }
            f.seek(SeekFrom::Start(protocol::DISK_DATA_OFFSET))
                .map_err(err)?;
            let mut data = vec![0u8; len as usize];
            f.read_exact(&mut data).map_err(err)?;
            Ok(data)
        }
    }
}

fn join_args(args: &[OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads qemu's stdout (the guest console) until EOF: logs it raw, echoes the filtered
/// text, forwards events. Returns (console text, command output).
fn pump_console(
    mut stdout: impl Read,
    nonce: &str,
    echo: bool,
    on_line: Option<LineSink>,
    log: &Path,
    tx: mpsc::Sender<Event>,
) -> (String, Option<String>) {
    let mut filter = ConsoleFilter::new(nonce);
    let mut log = fs::File::create(log).ok();
    let mut buf = [0u8; 8192];
    let mut echo = echo;
    let mut partial = String::new();
    let mut show = |s: &crate::console::Shown| {
        if echo && !s.is_empty() {
            // print!/eprint! (not raw handles) so that test harnesses capture them. They
            // panic when the stream is gone (`| head`); then stop echoing but keep
            // reading, or qemu would block on a full console pipe.
            let shown = std::panic::catch_unwind(|| {
                if !s.boot.is_empty() {
                    eprint!("{}", s.boot);
                }
                if !s.command.is_empty() {
                    print!("{}", s.command);
                    let _ = std::io::stdout().flush();
                }
            });
            if shown.is_err() {
                echo = false;
            }
        }
        // After the echo, so what the sink prints follows the completed line.
        if let Some(sink) = &on_line {
            partial.push_str(&s.command);
            while let Some(i) = partial.find('\n') {
                (sink.0)(partial[..i].trim_end_matches('\r'));
                partial.drain(..=i);
            }
        }
    };
    loop {
        let n = match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if let Some(l) = &mut log {
            let _ = l.write_all(&buf[..n]);
        }
        let s = filter.push(&buf[..n]);
        show(&s);
        for ev in filter.take_events() {
            let _ = tx.send(ev);
        }
    }
    let s = filter.finish();
    show(&s);
    for ev in filter.take_events() {
        let _ = tx.send(ev);
    }
    (
        filter.text().to_string(),
        filter.command_output().map(str::to_string),
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(cfg: &VmConfig, accel: Accel) -> Vec<String> {
        qemu_args(
            cfg,
            Path::new("/k/vmlinuz"),
            Path::new("/r,x/i.cpio"),
            Path::new("/r,x/o"),
            accel,
        )
        .into_iter()
        .map(|s| s.into_string().unwrap())
        .collect()
    }

    #[test]
    fn qemu_command_line() {
        let cfg = VmConfig::new(Kernel::V6_1, ["true"]).mem_mb(512).cpus(1);
        let a = args_of(&cfg, Accel::Tcg);
        let joined = a.join(" ");
        assert!(
            joined.starts_with("-accel tcg -cpu max -m 512 -smp 1 "),
            "{joined}"
        );
        assert!(joined.contains("-no-reboot"));
        assert!(joined.contains("-nodefaults"));
        assert!(joined.contains("-chardev stdio,id=con,signal=off -serial chardev:con"));
        // Disk transport by default; qemu's option syntax needs the comma doubled.
        assert!(
            joined.contains("-drive file=/r,,x/o,if=none,id=out,format=raw,cache=unsafe -device nvme,serial=kptout,drive=out"),
            "{joined}"
        );
        assert!(!joined.contains("chardev:out"));
        assert!(joined.contains("-kernel /k/vmlinuz -initrd /r,x/i.cpio"));
        assert_eq!(
            a.last().unwrap(),
            "console=ttyS0 panic=-1 rdinit=/init no_timer_check quiet"
        );

        let serial = args_of(&cfg.clone().transport(Transport::Serial), Accel::Tcg);
        let joined = serial.join(" ");
        assert!(joined.contains("-chardev file,id=out,path=/r,x/o -serial chardev:out"));
        assert!(!joined.contains("nvme"));
        // The console must be the first serial port (ttyS0), the stream the second.
        let first = serial.iter().position(|x| x == "chardev:con").unwrap();
        let second = serial.iter().position(|x| x == "chardev:out").unwrap();
        assert!(first < second);

        let mut extra = cfg.clone().kernel_log(true);
        extra.extra_qemu_args = vec!["-s".into()];
        let kvm = args_of(&extra, Accel::Kvm);
        assert_eq!(&kvm[..4], ["-accel", "kvm", "-cpu", "host"]);
        assert_eq!(kvm.last().unwrap(), "-s");
        assert!(!kvm[kvm.len() - 2].contains("quiet"));
    }

    /// The guard kills and reaps its child when a panic unwinds through it.
    #[test]
    fn guard_kills_the_child_on_panic() {
        let child = Command::new("sleep").arg("1000").spawn().unwrap();
        let pid = child.id();
        let r = std::panic::catch_unwind(move || {
            let _guard = QemuGuard(Some(child));
            panic!("runner bug");
        });
        assert!(r.is_err());
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "child {pid} survived the panic"
        );
    }

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

    #[test]
    fn accel_parses() {
        assert_eq!("auto".parse::<Accel>().unwrap(), Accel::Auto);
        assert_eq!("kvm".parse::<Accel>().unwrap(), Accel::Kvm);
        assert!("hvf".parse::<Accel>().is_err());
        assert_eq!("serial".parse::<Transport>().unwrap(), Transport::Serial);
        assert!("9p".parse::<Transport>().is_err());
    }

    #[test]
    fn pruning_keeps_the_newest() {
        let d = tempfile::tempdir().unwrap();
        for n in ["100-1-0", "200-1-0", "300-1-0"] {
            fs::create_dir(d.path().join(n)).unwrap();
        }
        prune_runs(d.path(), 2);
        let mut left: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["200-1-0", "300-1-0"]);
    }
}
