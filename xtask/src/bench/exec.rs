//! Running the measured commands: output to files (no pipe can fill and stall a run), wall
//! time, and the child's own resource usage from `wait4` (peak RSS of the tracer or of
//! `tracer report`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

/// What one command did.
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// Nanoseconds since the Unix epoch just before the spawn (for comparing with
    /// timestamps the command prints).
    pub launched_unix_ns: u128,
    /// `ru_maxrss` of the command (its largest descendant's peak when it forks), KiB.
    pub maxrss_kib: u64,
    /// Largest VmRSS seen by the sampler, KiB (0 unless sampling was asked for).
    pub sampled_peak_rss_kib: u64,
}

/// A command to run, with a name for its log files.
pub struct Cmd<'a> {
    pub argv: Vec<String>,
    pub log_dir: &'a Path,
    pub name: String,
    /// Sample the command's VmRSS every this often while it runs.
    pub sample_rss: Option<Duration>,
    /// A non-zero exit is an error (with the stderr tail).
    pub check: bool,
}

impl<'a> Cmd<'a> {
    pub fn new(argv: Vec<String>, log_dir: &'a Path, name: impl Into<String>) -> Self {
        Cmd {
            argv,
            log_dir,
            name: name.into(),
            sample_rss: None,
            check: true,
        }
    }

    pub fn run(&self) -> Result<Output> {
        std::fs::create_dir_all(self.log_dir)?;
        let out_path = self.log_dir.join(format!("{}.stdout", self.name));
        let err_path = self.log_dir.join(format!("{}.stderr", self.name));
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..])
            .stdin(Stdio::null())
            .stdout(File::create(&out_path)?)
            .stderr(File::create(&err_path)?);
        let launched_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let t = Instant::now();
        let child = c
            .spawn()
            .with_context(|| format!("could not start {}", self.argv.join(" ")))?;
        let pid = child.id() as i32;
        let peak = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = self.sample_rss.map(|every| {
            let (peak, done) = (peak.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if let Some(kib) = vm_rss_kib(pid) {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    std::thread::sleep(every);
                }
            })
        });
        let (status, rusage) = wait4(pid)?;
        let wall = t.elapsed();
        done.store(true, Ordering::Relaxed);
        if let Some(s) = sampler {
            let _ = s.join();
        }
        // The child was reaped by wait4; std's handle must not wait again.
        std::mem::forget(child);
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        let out = Output {
            stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
            stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
            wall,
            launched_unix_ns,
            maxrss_kib: rusage.ru_maxrss.max(0) as u64,
            sampled_peak_rss_kib: peak.load(Ordering::Relaxed),
        };
        if self.check && code != 0 {
            bail!(
                "`{}` exited with {code}; stderr ends:\n{}",
                self.argv.join(" "),
                tail(&out.stderr, 15)
            );
        }
        Ok(out)
    }
}

fn wait4(pid: i32) -> Result<(i32, libc::rusage)> {
    loop {
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out-parameter; pid is our child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("wait4");
        }
    }
}

/// VmRSS of a process in KiB, None once it is gone.
pub fn vm_rss_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&s, "VmRSS:")
}

/// A `Name:   123 kB` field of /proc/PID/status.
pub fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The last `n` lines of a text.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// First line of a command's stdout, or None if it cannot run.
pub fn probe_output(argv: &[&str]) -> Option<String> {
    let o = Command::new(argv[0]).args(&argv[1..]).output().ok()?;
    if !o.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Strings for argv.
pub fn argv<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    items.into_iter().map(|s| s.as_ref().to_string()).collect()
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// A fresh, empty directory.
pub fn fresh_dir(p: PathBuf) -> Result<PathBuf> {
    if p.exists() {
        std::fs::remove_dir_all(&p).with_context(|| format!("removing {}", p.display()))?;
    }
    std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields() {
        let s = "Name:\ttracer\nVmHWM:\t   70000 kB\nVmRSS:\t   65536 kB\n";
        assert_eq!(status_field_kib(s, "VmRSS:"), Some(65536));
        assert_eq!(status_field_kib(s, "VmHWM:"), Some(70000));
        assert_eq!(status_field_kib(s, "VmSwap:"), None);
    }

    #[test]
    fn runs_and_reports_failure() {
        let dir = tempfile::tempdir().unwrap();
        let ok = Cmd::new(
            argv(["sh", "-c", "echo hi; echo err >&2"]),
            dir.path(),
            "ok",
        )
        .run()
        .unwrap();
        assert_eq!((ok.stdout.as_str(), ok.stderr.as_str()), ("hi\n", "err\n"));
        assert!(ok.maxrss_kib > 0);
        let err = Cmd::new(
            argv(["sh", "-c", "echo boom >&2; exit 3"]),
            dir.path(),
            "bad",
        )
        .run()
        .unwrap_err();
        assert!(err.to_string().contains("exited with 3") && err.to_string().contains("boom"));
    }
}
