//! Calibration: drive a known workload and count what a plan's probes saw, because a symbol
//! in kallsyms does not prove the probe sees the calls (the compiler may have inlined copies
//! into the hot callers).
//!
//! The workload runs in a fresh process (this binary re-executed with a hidden subcommand),
//! so the tracer's own threads never pollute the count. Protocol over the child's stdio:
//! child prints `ready` after its setup (which is not counted), waits for a line on stdin,
//! does the work, prints `done`, then cleans up when stdin closes.
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tracer_ebpf::MAX_TARGETS;

use crate::engine::{Engine, EngineError};
use crate::plan::Calibration;

#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("calibration child: {0}")]
    Child(String),
}

/// Hidden subcommand name.
pub const CHILD_SUBCOMMAND: &str = "__calibrate";

/// Arguments that describe a calibration on the child's command line.
pub fn child_args(cal: Calibration) -> Vec<String> {
    match cal {
        Calibration::ForkWait { count } => vec!["fork-wait".into(), count.to_string()],
        Calibration::SysvipcRead { segments, reads } => {
            vec![
                "sysvipc-read".into(),
                segments.to_string(),
                reads.to_string(),
            ]
        }
        Calibration::TouchPages { pages } => vec!["touch-pages".into(), pages.to_string()],
        Calibration::Getpid { count } => vec!["getpid".into(), count.to_string()],
        Calibration::None => vec!["none".into()],
    }
}

pub fn parse_child_args(args: &[String]) -> Result<Calibration, String> {
    let num = |i: usize| -> Result<u32, String> {
        args.get(i)
            .ok_or_else(|| format!("missing argument {i}"))?
            .parse()
            .map_err(|e| format!("argument {i}: {e}"))
    };
    match args.first().map(String::as_str) {
        Some("fork-wait") => Ok(Calibration::ForkWait { count: num(1)? }),
        Some("sysvipc-read") => Ok(Calibration::SysvipcRead {
            segments: num(1)?,
            reads: num(2)?,
        }),
        Some("touch-pages") => Ok(Calibration::TouchPages { pages: num(1)? }),
        Some("getpid") => Ok(Calibration::Getpid { count: num(1)? }),
        Some("none") => Ok(Calibration::None),
        other => Err(format!("unknown calibration {other:?}")),
    }
}

/// Run one calibration while only its child process is traced; returns calls per target.
/// The engine's aggregates are cleared before and after.
pub fn run(engine: &mut Engine, cal: Calibration) -> Result<[u64; MAX_TARGETS], CalibrateError> {
    engine.clear()?;
    let exe = std::env::current_exe().map_err(|e| CalibrateError::Child(e.to_string()))?;
    let mut child = Command::new(exe)
        .arg(CHILD_SUBCOMMAND)
        .args(child_args(cal))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| CalibrateError::Child(format!("spawning: {e}")))?;
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let result = (|| -> Result<[u64; MAX_TARGETS], CalibrateError> {
        expect_line(&mut stdout, "ready")?;
        engine.follow(pid)?;
        writeln!(stdin, "go").map_err(|e| CalibrateError::Child(e.to_string()))?;
        expect_line(&mut stdout, "done")?;
        engine.unfollow(pid);
        Ok(engine.calls_per_target()?)
    })();
    engine.unfollow(pid);
    drop(stdin);
    // Bounded wait: the child cleans up (IPC segments) and exits when stdin closes.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    engine.clear()?;
    result
}

fn expect_line(r: &mut impl BufRead, want: &str) -> Result<(), CalibrateError> {
    let mut line = String::new();
    let n = r
        .read_line(&mut line)
        .map_err(|e| CalibrateError::Child(e.to_string()))?;
    if n == 0 {
        return Err(CalibrateError::Child(format!(
            "exited before saying {want:?}"
        )));
    }
    if line.trim() != want {
        return Err(CalibrateError::Child(format!(
            "said {:?}, expected {want:?}",
            line.trim()
        )));
    }
    Ok(())
}

/// The child side (runs in the re-executed binary). Returns the process exit code.
pub fn child_main(args: &[String]) -> i32 {
    let cal = match parse_child_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tracer {CHILD_SUBCOMMAND}: {e}");
            return 2;
        }
    };
    match child_work(cal) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tracer calibration ({}): {e}", cal.describe());
            1
        }
    }
}

fn wait_for_go() -> std::io::Result<()> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(())
}

fn say(word: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{word}")?;
    out.flush()
}

fn wait_for_eof() {
    let mut sink = String::new();
    let _ = std::io::stdin().lock().read_line(&mut sink);
}

fn child_work(cal: Calibration) -> Result<(), String> {
    match cal {
        Calibration::None => {
            say("ready").map_err(|e| e.to_string())?;
            wait_for_go().map_err(|e| e.to_string())?;
            say("done").map_err(|e| e.to_string())?;
            wait_for_eof();
            Ok(())
        }
        Calibration::ForkWait { count } => {
            say("ready").map_err(|e| e.to_string())?;
            wait_for_go().map_err(|e| e.to_string())?;
            for _ in 0..count {
                // SAFETY: single-threaded process; the child only calls _exit.
                match unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))? {
                    nix::unistd::ForkResult::Child => unsafe { libc::_exit(0) },
                    nix::unistd::ForkResult::Parent { child } => {
                        nix::sys::wait::waitpid(child, None)
                            .map_err(|e| format!("waitpid: {e}"))?;
                    }
                }
            }
            say("done").map_err(|e| e.to_string())?;
            wait_for_eof();
            Ok(())
        }
        Calibration::SysvipcRead { segments, reads } => {
            let mut ids = Vec::new();
            let res = (|| -> Result<(), String> {
                for _ in 0..segments {
                    // SAFETY: plain syscall wrapper.
                    let id =
                        unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
                    if id < 0 {
                        return Err(format!("shmget: {}", std::io::Error::last_os_error()));
                    }
                    ids.push(id);
                }
                say("ready").map_err(|e| e.to_string())?;
                wait_for_go().map_err(|e| e.to_string())?;
                for _ in 0..reads {
                    read_fully("/proc/sysvipc/shm")?;
                }
                say("done").map_err(|e| e.to_string())?;
                wait_for_eof();
                Ok(())
            })();
            for id in ids {
                // SAFETY: removing segments this process created.
                unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
            }
            res
        }
        Calibration::Getpid { count } => {
            say("ready").map_err(|e| e.to_string())?;
            wait_for_go().map_err(|e| e.to_string())?;
            for _ in 0..count {
                // The raw syscall: libc may cache getpid.
                // SAFETY: getpid has no arguments and cannot fail.
                unsafe { libc::syscall(libc::SYS_getpid) };
            }
            say("done").map_err(|e| e.to_string())?;
            wait_for_eof();
            Ok(())
        }
        Calibration::TouchPages { pages } => {
            let page = 4096usize;
            let len = pages as usize * page;
            // Unmapped below.
            let p = workloads::mem::map_anonymous(len).map_err(|e| format!("mmap: {e}"))?;
            // One fault per page: no transparent huge pages.
            unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
            let res = (|| -> Result<(), String> {
                say("ready").map_err(|e| e.to_string())?;
                wait_for_go().map_err(|e| e.to_string())?;
                for i in 0..pages as usize {
                    // SAFETY: within the mapping.
                    unsafe { std::ptr::write_volatile((p as *mut u8).add(i * page), 1) };
                }
                say("done").map_err(|e| e.to_string())?;
                wait_for_eof();
                Ok(())
            })();
            unsafe { libc::munmap(p, len) };
            res
        }
    }
}

/// open + read until EOF with a fixed buffer + close, like `cat`.
fn read_fully(path: &str) -> Result<(), String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut buf = [0u8; 4096];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(format!("{path}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_args_round_trip() {
        for cal in [
            Calibration::ForkWait { count: 3 },
            Calibration::SysvipcRead {
                segments: 2,
                reads: 5,
            },
            Calibration::TouchPages { pages: 9 },
            Calibration::Getpid { count: 4 },
        ] {
            assert_eq!(parse_child_args(&child_args(cal)).unwrap(), cal);
        }
        assert!(parse_child_args(&["nope".into()]).is_err());
        assert!(parse_child_args(&["fork-wait".into(), "x".into()]).is_err());
    }
}
