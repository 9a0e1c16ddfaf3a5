//! What one VM run is asked to do: the accelerator, the output transport and the
//! [`VmConfig`] builder.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::parse_choice;
use crate::guest::GuestBinaries;
use crate::kernel::Kernel;

/// How qemu executes the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM if a short, cached probe boot under KVM works on this host, else TCG.
    Auto,
    /// Software emulation: slower (absolute times ~3-20x bare metal) but always works.
    Tcg,
    Kvm,
}

const ACCELS: [(&str, Accel); 3] = [
    ("auto", Accel::Auto),
    ("tcg", Accel::Tcg),
    ("kvm", Accel::Kvm),
];

impl std::str::FromStr for Accel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_choice(s, &ACCELS, "unknown accelerator ")
    }
}

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, _) = ACCELS
            .iter()
            .find(|(_, a)| a == self)
            .expect("every accelerator is named");
        f.write_str(name)
    }
}

/// How TCG runs a guest's vCPUs. Single-threaded by default: every attach and detach of a
/// tracepoint or probe patches live kernel text (int3, then IPIs to the other CPUs), and qemu's
/// multi-threaded TCG fails at that on the hosts measured here: a guest toggling tracepoints
/// under a fork load, with no tracer at all, locked a vCPU within 24 s, and tracer runs stalled
/// or trapped on a half-patched instruction ("Oops: int3"). One thread for all vCPUs executes
/// them in turn, so no vCPU ever sees another's half-written instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcgThreads {
    Single,
    Multi,
}

const TCG_THREADS: [(&str, TcgThreads); 2] =
    [("single", TcgThreads::Single), ("multi", TcgThreads::Multi)];

/// The environment variable that changes the default for every VM this process boots (the VM
/// tests, `cargo xtask run`, the bench): `single` or `multi`.
pub const TCG_THREADS_ENV: &str = "XTASK_TCG_THREADS";

impl TcgThreads {
    pub fn as_str(self) -> &'static str {
        let (name, _) = TCG_THREADS
            .iter()
            .find(|(_, t)| *t == self)
            .expect("every mode is named");
        name
    }

    /// [`TCG_THREADS_ENV`] if set (a bad value is a panic: a measurement must not silently
    /// run in the other mode), else single.
    pub fn from_env() -> Self {
        match std::env::var(TCG_THREADS_ENV) {
            Ok(v) => v
                .parse()
                .unwrap_or_else(|e| panic!("{TCG_THREADS_ENV}={v:?}: {e}")),
            Err(_) => TcgThreads::Single,
        }
    }
}

impl std::str::FromStr for TcgThreads {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_choice(s, &TCG_THREADS, "unknown TCG threading ")
    }
}

/// How the guest's `/out` files travel to the host. Both carry the same checksummed
/// [`crate::outstream`]; both need only drivers the Debian cloud kernels build in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A raw NVMe disk backed by a sparse host file (~15-20 MB/s under TCG). Default.
    Disk,
    /// The second UART, in raw mode, into a host file (~0.3 MB/s under TCG).
    Serial,
}

const TRANSPORTS: [(&str, Transport); 2] =
    [("disk", Transport::Disk), ("serial", Transport::Serial)];

impl Transport {
    pub(super) fn as_str(self) -> &'static str {
        let (name, _) = TRANSPORTS
            .iter()
            .find(|(_, t)| *t == self)
            .expect("every transport is named");
        name
    }
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_choice(s, &TRANSPORTS, "unknown transport ")
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
    /// Whole-run limit, boot included. Default 300 s. When it passes while the command
    /// runs, the guest is asked to stop it and send what it finished (see `flush_timeout`).
    pub timeout: Duration,
    /// A run cut short (the timeout, an interrupt): how long the command's processes get
    /// between SIGTERM and SIGKILL to finish up (whole seconds). Default 30 s: the tracer,
    /// stopped mid-sweep under TCG, took 25 s to end its workload and write the sweep out as
    /// partial.
    pub stop_grace: Duration,
    /// A run cut short: how long the guest gets from the stop request to the end of sending
    /// /out (grace period included) before qemu is killed and nothing comes back (a guest
    /// that no longer runs cannot send). Default 180 s: the grace period and a full /out of
    /// the default 1 GiB guest over the disk (~11 MB/s).
    pub flush_timeout: Duration,
    /// How long the guest's heartbeat may stay silent before the run counts as
    /// [`super::VmStatus::Stalled`] (disk transport only). Default 60 s: twelve beats.
    pub stall_after: Duration,
    /// Guest memory. Default 1024 MiB.
    pub mem_mb: u32,
    /// Guest CPUs. Default 2.
    pub cpus: u32,
    /// Default [`Accel::Tcg`].
    pub accel: Accel,
    /// TCG's threading (ignored under KVM). Default [`TcgThreads::from_env`].
    pub tcg_threads: TcgThreads,
    /// Default [`Transport::Disk`].
    pub transport: Transport,
    /// The guest programs; `None` uses [`crate::guest::locate`] (already built, not rebuilt).
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
    /// The guest sleeps once booted (or is stopped): it runs without a VM slot, which is a
    /// host core kept for a guest that computes (see `slots`). For runs that wait out a
    /// timeout or a stall limit, the runner's own tests: holding a core idle for it would
    /// leave that core unused. Default false.
    pub idle: bool,
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
    /// Guest memory unless [`VmConfig::mem_mb`] says otherwise.
    pub const DEFAULT_MEM_MB: u32 = 1024;

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
            stop_grace: Duration::from_secs(30),
            flush_timeout: Duration::from_secs(180),
            stall_after: Duration::from_secs(60),
            mem_mb: Self::DEFAULT_MEM_MB,
            cpus: 2,
            accel: Accel::Tcg,
            tcg_threads: TcgThreads::from_env(),
            transport: Transport::Disk,
            guest: None,
            echo: true,
            kernel_log: false,
            extra_cmdline: Vec::new(),
            extra_qemu_args: Vec::new(),
            keep_run_files: false,
            on_line: None,
            idle: false,
        }
    }
    /// One more word on the kernel command line.
    pub fn extra_cmdline(mut self, arg: impl Into<String>) -> Self {
        self.extra_cmdline.push(arg.into());
        self
    }
    pub fn idle(mut self, idle: bool) -> Self {
        self.idle = idle;
        self
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
    pub fn stop_grace_secs(mut self, secs: u64) -> Self {
        self.stop_grace = Duration::from_secs(secs);
        self
    }
    pub fn flush_timeout_secs(mut self, secs: u64) -> Self {
        self.flush_timeout = Duration::from_secs(secs);
        self
    }
    pub fn stall_after_secs(mut self, secs: u64) -> Self {
        self.stall_after = Duration::from_secs(secs);
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
    pub fn tcg_threads(mut self, t: TcgThreads) -> Self {
        self.tcg_threads = t;
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
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accel_parses() {
        assert_eq!("auto".parse::<Accel>().unwrap(), Accel::Auto);
        assert_eq!("kvm".parse::<Accel>().unwrap(), Accel::Kvm);
        assert!("hvf".parse::<Accel>().is_err());
        assert_eq!("serial".parse::<Transport>().unwrap(), Transport::Serial);
        assert!("9p".parse::<Transport>().is_err());
    }
}
