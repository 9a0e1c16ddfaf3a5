//! Helpers shared by the integration tests: run the built binary with a timeout, read its
//! JSON, fit log-log slopes, and look at /proc for children and SysV IPC objects.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use workloads::report::Report;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_workloads")
}

pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or_else(|| {
            panic!(
                "killed by a signal: {:?}\nstderr:\n{}",
                self.status, self.stderr
            )
        })
    }
}

/// Runs `workloads ARGS` to completion, failing the test after `timeout`.
pub fn run(args: &[&str], timeout: Duration) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn workloads");
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let status = wait_timeout(&mut child, timeout).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("workloads {args:?} did not finish within {timeout:?}");
    });
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A workload running in the background whose stderr lines arrive on a channel.
pub struct Running {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Running {
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn workloads");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for a stderr line containing `needle`.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "no stderr line with {needle:?} within {timeout:?}; saw:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    pub fn stderr_so_far(&mut self) -> String {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        self.seen.join("\n")
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "workloads-it-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .expect("list temp dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn read_report(path: &Path) -> Report {
    Report::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (n, median time_ns_per_op over the repeats) of `case`, ascending in n.
pub fn medians(r: &Report, case: &str) -> Vec<(u64, f64)> {
    let ns: BTreeSet<u64> = r
        .results
        .iter()
        .filter(|m| m.case == case)
        .map(|m| m.n)
        .collect();
    ns.into_iter()
        .map(|n| {
            let mut xs: Vec<f64> = r
                .results
                .iter()
                .filter(|m| m.case == case && m.n == n)
                .map(|m| m.time_ns_per_op)
                .collect();
            xs.sort_by(f64::total_cmp);
            let k = xs.len();
            let med = if k % 2 == 1 {
                xs[k / 2]
            } else {
                (xs[k / 2 - 1] + xs[k / 2]) / 2.0
            };
            (n, med)
        })
        .collect()
}

/// Least-squares slope of ln(time) against ln(n).
pub fn loglog_slope(points: &[(u64, f64)]) -> f64 {
    assert!(
        points.len() >= 3,
        "need at least 3 sizes to fit, got {points:?}"
    );
    let xs: Vec<f64> = points.iter().map(|(n, _)| (*n as f64).ln()).collect();
    let ys: Vec<f64> = points.iter().map(|(_, t)| t.ln()).collect();
    let k = xs.len() as f64;
    let mx = xs.iter().sum::<f64>() / k;
    let my = ys.iter().sum::<f64>() / k;
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    sxy / sxx
}

/// Pids of the processes whose parent is `ppid`.
pub fn children_of(ppid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if stat_fields(pid).is_some_and(|(_, pp)| pp == ppid) {
            out.push(pid);
        }
    }
    out
}

/// (state, ppid) from /proc/PID/stat.
pub fn stat_fields(pid: i32) -> Option<(char, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Ids (2nd column) listed in /proc/sysvipc/{shm,msg}.
pub fn ipc_ids(kind: &str) -> BTreeSet<i64> {
    parse_ipc_ids(&std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default())
}

/// The ids of `kind` that process `pid` sees: in its own IPC namespace when it has one (the
/// sysvipc workload makes one per size where it may), read there through nsenter.
pub fn ipc_ids_of(pid: i32, kind: &str) -> BTreeSet<i64> {
    if !own_ipc_namespace(pid) {
        return ipc_ids(kind);
    }
    let out = std::process::Command::new("nsenter")
        .arg(format!("--ipc=/proc/{pid}/ns/ipc"))
        .args(["cat", &format!("/proc/sysvipc/{kind}")])
        .output()
        .expect("nsenter (util-linux) runs");
    assert!(out.status.success(), "nsenter: {out:?}");
    parse_ipc_ids(&String::from_utf8_lossy(&out.stdout))
}

/// Whether process `pid` is in another IPC namespace than this one.
pub fn own_ipc_namespace(pid: i32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/ipc")).ok();
    ns(&pid.to_string()) != ns("self")
}

fn parse_ipc_ids(text: &str) -> BTreeSet<i64> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

/// The highest CPU this process may run on (the tests pin workloads there).
pub fn last_allowed_cpu() -> String {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim();
    let last = list.rsplit([',', '-']).next().expect("a cpu");
    last.to_string()
}

pub fn read_sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .ok()?
        .trim()
        .parse()
        .ok()
}
