//! qemu itself: its command line, and starting it so that it cannot outlive the runner.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{Accel, TcgThreads, Transport, VmConfig, VmError};
use crate::protocol;

/// Where qemu writes the guest's heartbeat bytes (disk transport only): beside the stream.
pub fn heartbeat_file(out_stream: &Path) -> PathBuf {
    out_stream.with_file_name("heartbeat")
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
    let (accel_arg, cpu) = match (accel, cfg.tcg_threads) {
        (Accel::Kvm, _) => ("kvm", "host"),
        (_, TcgThreads::Single) => ("tcg,thread=single", "max"),
        (_, TcgThreads::Multi) => ("tcg,thread=multi", "max"),
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
            // ttyS1: the guest's heartbeat (protocol::HEARTBEAT_TTY).
            a.push("-chardev".into());
            let mut beat = OsString::from("file,id=beat,path=");
            beat.push(heartbeat_file(out_stream));
            a.push(beat);
            a.push("-serial".into());
            a.push("chardev:beat".into());
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
pub(super) struct QemuGuard(pub(super) Option<Child>);

impl QemuGuard {
    pub(super) fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present until reaped")
    }
    pub(super) fn kill_and_reap(&mut self) -> Option<std::process::ExitStatus> {
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

/// Starts qemu with its stdin (the console's input: stop requests), stdout and stderr
/// piped; the guard kills it however the caller returns.
pub(super) fn spawn(args: &[OsString]) -> Result<QemuGuard, VmError> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(args)
        .stdin(Stdio::piped())
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
    let child = cmd.spawn().map_err(|source| VmError::Spawn {
        cmd: format!("qemu-system-x86_64 {}", join_args(args)),
        source,
    })?;
    Ok(QemuGuard(Some(child)))
}

fn join_args(args: &[OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Kernel;

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
        let cfg = VmConfig::new(Kernel::V6_1, ["true"])
            .mem_mb(512)
            .cpus(1)
            .tcg_threads(TcgThreads::Single);
        let a = args_of(&cfg, Accel::Tcg);
        let joined = a.join(" ");
        assert!(
            joined.starts_with("-accel tcg,thread=single -cpu max -m 512 -smp 1 "),
            "{joined}"
        );
        let multi = args_of(&cfg.clone().tcg_threads(TcgThreads::Multi), Accel::Tcg);
        assert_eq!(&multi[..2], ["-accel", "tcg,thread=multi"]);
        assert!(joined.contains("-no-reboot"));
        assert!(joined.contains("-nodefaults"));
        assert!(joined.contains("-chardev stdio,id=con,signal=off -serial chardev:con"));
        // Disk transport by default; qemu's option syntax needs the comma doubled.
        assert!(
            joined.contains("-drive file=/r,,x/o,if=none,id=out,format=raw,cache=unsafe -device nvme,serial=kptout,drive=out"),
            "{joined}"
        );
        assert!(!joined.contains("chardev:out"));
        // The heartbeat on the second serial port, after the console.
        assert!(joined.contains("-chardev file,id=beat,path=/r,x/heartbeat -serial chardev:beat"));
        let con = a.iter().position(|x| x == "chardev:con").unwrap();
        assert!(con < a.iter().position(|x| x == "chardev:beat").unwrap());
        assert!(joined.contains("-kernel /k/vmlinuz -initrd /r,x/i.cpio"));
        assert_eq!(
            a.last().unwrap(),
            "console=ttyS0 panic=-1 rdinit=/init no_timer_check quiet"
        );

        let serial = args_of(&cfg.clone().transport(Transport::Serial), Accel::Tcg);
        let joined = serial.join(" ");
        assert!(joined.contains("-chardev file,id=out,path=/r,x/o -serial chardev:out"));
        assert!(!joined.contains("nvme"));
        assert!(!joined.contains("chardev:beat"));
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
}
