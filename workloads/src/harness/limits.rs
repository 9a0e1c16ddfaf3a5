//! Limits a workload can run into, read before it starts, so that it refuses with one clear
//! message naming the limit instead of failing halfway through a sweep.
//!
//! Every reader takes a filesystem root ([`ProcFs`]), so tests feed fake `/proc` trees.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use serde_json::Value;

/// Tasks kept free beyond what a workload needs (shells, the tracer, kernel threads).
const TASK_MARGIN: u64 = 64;
/// Mappings kept free beyond what a workload maps (libc, stacks, the reader thread).
const MAP_MARGIN: u64 = 128;
/// Share of MemAvailable a workload may plan to use.
const MEM_SHARE: f64 = 0.8;

/// A limit that would make the run fail, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LimitError {
    /// The limit's name (`kernel.pid_max`, `RLIMIT_NPROC`, `MemAvailable`, ...).
    pub limit: String,
    pub message: String,
}

/// A resource limit from /proc/self/limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlim {
    Unlimited,
    Value(u64),
}

/// Where /proc and /sys are: `/` normally, a fake tree in tests.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
}

impl ProcFs {
    pub fn real() -> Self {
        ProcFs {
            root: PathBuf::from("/"),
        }
    }

    #[cfg(test)]
    pub fn at(root: impl Into<PathBuf>) -> Self {
        ProcFs { root: root.into() }
    }

    /// `rel` is relative to the root, e.g. `proc/sys/kernel/pid_max`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel)).ok()
    }

    pub fn read_i64(&self, rel: &str) -> Option<i64> {
        self.read(rel)?.trim().parse().ok()
    }

    pub fn read_u64(&self, rel: &str) -> Option<u64> {
        self.read(rel)?.trim().parse().ok()
    }
}

/// Everything the workloads check, as read at start-up. `None` means unknown (file absent),
/// in which case the corresponding check is skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
    /// Tasks (threads) on the system now, from /proc/loadavg.
    pub tasks_now: Option<u64>,
    pub nproc: Option<Rlim>,
    pub data: Option<Rlim>,
    /// Real uid: RLIMIT_NPROC is not enforced for uid 0.
    pub uid: Option<u32>,
    /// Tasks owned by `uid` (counted only when not root).
    pub user_tasks: Option<u64>,
    pub max_map_count: Option<u64>,
    /// Mappings of this process now.
    pub maps_now: Option<u64>,
    pub mem_available_kib: Option<u64>,
    pub shmmni: Option<u64>,
    pub shmall: Option<u64>,
    pub shmmax: Option<u64>,
    pub msgmni: Option<u64>,
    pub shm_in_use: Option<u64>,
    /// Pages held by existing shm segments (counted against shmall).
    pub shm_pages_in_use: Option<u64>,
    pub msg_in_use: Option<u64>,
    pub shm_next_id: Option<i64>,
    pub msg_next_id: Option<i64>,
    pub page_size: u64,
}

impl Limits {
    pub fn read(fs: &ProcFs, page_size: u64) -> Self {
        let uid = fs
            .read("proc/self/status")
            .and_then(|s| status_field(&s, "Uid:"));
        let (shm_in_use, shm_pages_in_use) = match fs.read("proc/sysvipc/shm") {
            Some(text) => {
                let (count, bytes) = sysvipc_shm_usage(&text);
                (Some(count), Some(bytes.div_ceil(page_size.max(1))))
            }
            None => (None, None),
        };
        let limits_text = fs.read("proc/self/limits");
        Limits {
            pid_max: fs.read_u64("proc/sys/kernel/pid_max"),
            threads_max: fs.read_u64("proc/sys/kernel/threads-max"),
            tasks_now: fs.read("proc/loadavg").and_then(|s| loadavg_tasks(&s)),
            nproc: limits_text
                .as_deref()
                .and_then(|s| rlimit(s, "Max processes")),
            data: limits_text
                .as_deref()
                .and_then(|s| rlimit(s, "Max data size")),
            uid,
            user_tasks: match uid {
                Some(0) | None => None,
                Some(u) => Some(count_user_tasks(fs, u)),
            },
            max_map_count: fs.read_u64("proc/sys/vm/max_map_count"),
            maps_now: fs.read("proc/self/maps").map(|s| s.lines().count() as u64),
            mem_available_kib: fs
                .read("proc/meminfo")
                .and_then(|s| meminfo_kib(&s, "MemAvailable:")),
            shmmni: fs.read_u64("proc/sys/kernel/shmmni"),
            shmall: fs.read_u64("proc/sys/kernel/shmall"),
            shmmax: fs.read_u64("proc/sys/kernel/shmmax"),
            msgmni: fs.read_u64("proc/sys/kernel/msgmni"),
            shm_in_use,
            shm_pages_in_use,
            msg_in_use: fs
                .read("proc/sysvipc/msg")
                .map(|s| s.lines().skip(1).filter(|l| !l.trim().is_empty()).count() as u64),
            shm_next_id: fs.read_i64("proc/sys/kernel/shm_next_id"),
            msg_next_id: fs.read_i64("proc/sys/kernel/msg_next_id"),
            page_size,
        }
    }

    /// The values for the report's `limits` object.
    pub fn to_json(&self) -> BTreeMap<String, Value> {
        let num = |v: Option<u64>| v.map_or(Value::Null, Value::from);
        let int = |v: Option<i64>| v.map_or(Value::Null, Value::from);
        let rl = |v: Option<Rlim>| match v {
            None => Value::Null,
            Some(Rlim::Unlimited) => Value::from("unlimited"),
            Some(Rlim::Value(x)) => Value::from(x),
        };
        let mut m = BTreeMap::new();
        m.insert("kernel.pid_max".into(), num(self.pid_max));
        m.insert("kernel.threads-max".into(), num(self.threads_max));
        m.insert("tasks_now".into(), num(self.tasks_now));
        m.insert("RLIMIT_NPROC".into(), rl(self.nproc));
        m.insert("RLIMIT_DATA".into(), rl(self.data));
        m.insert("uid".into(), num(self.uid.map(u64::from)));
        m.insert("user_tasks".into(), num(self.user_tasks));
        m.insert("vm.max_map_count".into(), num(self.max_map_count));
        m.insert("maps_now".into(), num(self.maps_now));
        m.insert("MemAvailable_kib".into(), num(self.mem_available_kib));
        m.insert("kernel.shmmni".into(), num(self.shmmni));
        m.insert("kernel.shmall".into(), num(self.shmall));
        m.insert("kernel.shmmax".into(), num(self.shmmax));
        m.insert("kernel.msgmni".into(), num(self.msgmni));
        m.insert("shm_in_use".into(), num(self.shm_in_use));
        m.insert("msg_in_use".into(), num(self.msg_in_use));
        m.insert("kernel.shm_next_id".into(), int(self.shm_next_id));
        m.insert("kernel.msg_next_id".into(), int(self.msg_next_id));
        m.insert("page_size".into(), Value::from(self.page_size));
        m
    }

    /// Room for `extra` more tasks (processes or threads): pid_max, threads-max, RLIMIT_NPROC.
    pub fn check_tasks(&self, extra: u64, what: &str) -> Result<(), LimitError> {
        let now = self.tasks_now.unwrap_or(0);
        let need = now + extra + TASK_MARGIN;
        if let Some(max) = self.pid_max
            && need > max
        {
            return Err(sysctl_error(
                "kernel.pid_max",
                max,
                need,
                what,
                &format!("{now} tasks already exist"),
            ));
        }
        if let Some(max) = self.threads_max
            && need > max
        {
            return Err(sysctl_error(
                "kernel.threads-max",
                max,
                need,
                what,
                &format!("{now} tasks already exist"),
            ));
        }
        if let (Some(Rlim::Value(max)), Some(mine)) = (self.nproc, self.user_tasks) {
            let need = mine + extra + TASK_MARGIN;
            if need > max {
                return Err(LimitError {
                    limit: "RLIMIT_NPROC".into(),
                    message: format!(
                        "RLIMIT_NPROC (ulimit -u) is {max}, but {what} needs about {need} processes for this user \
                         ({mine} exist already); raise it with `ulimit -u {need}` or run as root, or use a smaller --n"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Room for `extra` more mappings in this process: vm.max_map_count.
    pub fn check_maps(&self, extra: u64, what: &str) -> Result<(), LimitError> {
        let (Some(max), now) = (self.max_map_count, self.maps_now.unwrap_or(0)) else {
            return Ok(());
        };
        let need = now + extra + MAP_MARGIN;
        if need > max {
            return Err(sysctl_error(
                "vm.max_map_count",
                max,
                need,
                what,
                &format!("this process has {now} mappings"),
            ));
        }
        Ok(())
    }

    /// `bytes` of memory must fit comfortably in MemAvailable.
    pub fn check_memory(&self, bytes: u64, what: &str) -> Result<(), LimitError> {
        let Some(avail_kib) = self.mem_available_kib else {
            return Ok(());
        };
        let usable = (avail_kib as f64 * 1024.0 * MEM_SHARE) as u64;
        if bytes > usable {
            return Err(LimitError {
                limit: "MemAvailable".into(),
                message: format!(
                    "not enough memory: {what} needs about {} MiB, but MemAvailable in /proc/meminfo is {} MiB \
                     (at most {:.0}% of it is used); use a smaller --n or free memory",
                    bytes.div_ceil(1 << 20),
                    avail_kib / 1024,
                    MEM_SHARE * 100.0
                ),
            });
        }
        Ok(())
    }

    /// Room to grow the data segment (brk) by `bytes`: RLIMIT_DATA.
    pub fn check_data(&self, bytes: u64, what: &str) -> Result<(), LimitError> {
        if let Some(Rlim::Value(max)) = self.data
            && bytes > max
        {
            return Err(LimitError {
                limit: "RLIMIT_DATA".into(),
                message: format!(
                    "RLIMIT_DATA (ulimit -d) is {max} bytes, but {what} grows the heap by {bytes} bytes; \
                     raise it with `ulimit -d unlimited` or use a smaller --n"
                ),
            });
        }
        Ok(())
    }

    /// Room for `n` more shm segments of `bytes` each: kernel.shmmni, shmmax, shmall.
    pub fn check_shm(&self, n: u64, bytes: u64, what: &str) -> Result<(), LimitError> {
        let used = self.shm_in_use.unwrap_or(0);
        if let Some(max) = self.shmmni
            && used + n > max
        {
            return Err(sysctl_error(
                "kernel.shmmni",
                max,
                used + n,
                what,
                &format!("{used} segments exist already"),
            ));
        }
        if let Some(max) = self.shmmax
            && bytes > max
        {
            return Err(sysctl_error(
                "kernel.shmmax",
                max,
                bytes,
                what,
                "that is the size of one segment",
            ));
        }
        let pages = bytes.div_ceil(self.page_size.max(1)) * n;
        let used_pages = self.shm_pages_in_use.unwrap_or(0);
        if let Some(max) = self.shmall
            && used_pages.saturating_add(pages) > max
        {
            let need = used_pages + pages;
            return Err(sysctl_error(
                "kernel.shmall",
                max,
                need,
                what,
                &format!("counted in pages; {used_pages} pages are in use"),
            ));
        }
        Ok(())
    }

    /// Room for `n` more message queues: kernel.msgmni.
    pub fn check_msg(&self, n: u64, what: &str) -> Result<(), LimitError> {
        let used = self.msg_in_use.unwrap_or(0);
        if let Some(max) = self.msgmni
            && used + n > max
        {
            return Err(sysctl_error(
                "kernel.msgmni",
                max,
                used + n,
                what,
                &format!("{used} queues exist already"),
            ));
        }
        Ok(())
    }
}

fn sysctl_error(name: &str, have: u64, need: u64, what: &str, context: &str) -> LimitError {
    let file = format!("/proc/sys/{}", name.replace('.', "/"));
    LimitError {
        limit: name.to_string(),
        message: format!(
            "{name} ({file}) is {have}, but {what} needs at least {need} ({context}); \
             raise it with `sysctl -w {name}={need}` or use a smaller --n"
        ),
    }
}

/// First number after `key` in /proc/PID/status (the real uid for `Uid:`).
fn status_field(status: &str, key: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The total after the '/' in the 4th field of /proc/loadavg ("1/123").
fn loadavg_tasks(text: &str) -> Option<u64> {
    text.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Soft limit of the /proc/self/limits row starting with `name`.
fn rlimit(text: &str, name: &str) -> Option<Rlim> {
    let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
    match rest.split_whitespace().next()? {
        "unlimited" => Some(Rlim::Unlimited),
        v => v.parse().ok().map(Rlim::Value),
    }
}

/// (segments, bytes) listed in /proc/sysvipc/shm; the size is the 4th column.
fn sysvipc_shm_usage(text: &str) -> (u64, u64) {
    let mut count = 0;
    let mut bytes = 0u64;
    for line in text.lines().skip(1) {
        if let Some(size) = line
            .split_whitespace()
            .nth(3)
            .and_then(|v| v.parse::<u64>().ok())
        {
            count += 1;
            bytes = bytes.saturating_add(size);
        }
    }
    (count, bytes)
}

/// Threads of every process whose real uid is `uid` (RLIMIT_NPROC counts those).
fn count_user_tasks(fs: &ProcFs, uid: u32) -> u64 {
    let Ok(dir) = fs::read_dir(fs.path("proc")) else {
        return 0;
    };
    let mut total = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(status) = fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        if status_field(&status, "Uid:") == Some(uid) {
            total += u64::from(status_field(&status, "Threads:").unwrap_or(1));
        }
    }
    total
}

/// Online NUMA nodes from /sys/devices/system/node/online ("0", "0-3,5"); `None` when the
/// kernel has no NUMA support (the directory is absent).
pub fn online_nodes(fs: &ProcFs) -> Option<Vec<u32>> {
    let text = fs.read("sys/devices/system/node/online")?;
    let mut nodes = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => nodes.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => nodes.push(part.parse().ok()?),
        }
    }
    Some(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root with the given files (relative path -> content); removed on drop.
    struct FakeRoot(PathBuf);

    impl FakeRoot {
        fn new(tag: &str, files: &[(&str, &str)]) -> Self {
            let dir =
                std::env::temp_dir().join(format!("workloads-limits-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            for (rel, content) in files {
                let p = dir.join(rel);
                fs::create_dir_all(p.parent().expect("has parent")).expect("mkdir");
                fs::write(p, content).expect("write");
            }
            FakeRoot(dir)
        }

        fn fs(&self) -> ProcFs {
            ProcFs::at(&self.0)
        }
    }

    impl Drop for FakeRoot {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max data size             unlimited            unlimited            bytes     \n\
        Max processes             500                  1000                 processes \n";

    fn base_files() -> Vec<(&'static str, &'static str)> {
        vec![
            ("proc/sys/kernel/pid_max", "32768\n"),
            ("proc/sys/kernel/threads-max", "100000\n"),
            ("proc/loadavg", "0.10 0.20 0.30 2/300 12345\n"),
            ("proc/self/limits", LIMITS),
            (
                "proc/self/status",
                "Name:\tworkloads\nUid:\t0\t0\t0\t0\nThreads:\t1\n",
            ),
            ("proc/self/maps", "a\nb\nc\n"),
            ("proc/sys/vm/max_map_count", "65530\n"),
            (
                "proc/meminfo",
                "MemTotal:  2048000 kB\nMemAvailable:    1024000 kB\n",
            ),
            ("proc/sys/kernel/shmmni", "4096\n"),
            ("proc/sys/kernel/shmall", "1000\n"),
            ("proc/sys/kernel/shmmax", "18446744073692774399\n"),
            ("proc/sys/kernel/msgmni", "32000\n"),
            (
                "proc/sysvipc/shm",
                "key shmid perms size cpid\n0 1 600 8192 5\n0 2 600 4096 5\n",
            ),
            ("proc/sysvipc/msg", "key msqid perms\n0 7 600\n"),
            ("proc/sys/kernel/shm_next_id", "-1\n"),
            ("sys/devices/system/node/online", "0-2,4\n"),
        ]
    }

    fn read(tag: &str, overrides: &[(&'static str, &'static str)]) -> Limits {
        let mut files = base_files();
        for (k, v) in overrides {
            files.retain(|(k2, _)| k2 != k);
            files.push((k, v));
        }
        let root = FakeRoot::new(tag, &files);
        Limits::read(&root.fs(), 4096)
    }

    #[test]
    fn reads_every_value_from_the_given_root() {
        let l = read("all", &[]);
        assert_eq!(l.pid_max, Some(32768));
        assert_eq!(l.threads_max, Some(100000));
        assert_eq!(l.tasks_now, Some(300));
        assert_eq!(l.nproc, Some(Rlim::Value(500)));
        assert_eq!(l.data, Some(Rlim::Unlimited));
        assert_eq!(l.uid, Some(0));
        assert_eq!(
            l.user_tasks, None,
            "root is exempt from RLIMIT_NPROC, so nobody counts"
        );
        assert_eq!(l.maps_now, Some(3));
        assert_eq!(l.mem_available_kib, Some(1024000));
        assert_eq!(l.shm_in_use, Some(2));
        assert_eq!(l.shm_pages_in_use, Some(3));
        assert_eq!(l.msg_in_use, Some(1));
        assert_eq!(l.shm_next_id, Some(-1));
        assert_eq!(l.msg_next_id, None);
        let j = l.to_json();
        assert_eq!(j["kernel.pid_max"], Value::from(32768u64));
        assert_eq!(j["RLIMIT_DATA"], Value::from("unlimited"));
        assert_eq!(j["kernel.msg_next_id"], Value::Null);
    }

    #[test]
    fn missing_files_are_unknown_and_skip_their_checks() {
        let root = FakeRoot::new("empty", &[]);
        let l = Limits::read(&root.fs(), 4096);
        assert_eq!(l.pid_max, None);
        assert!(l.check_tasks(1 << 40, "x").is_ok());
        assert!(l.check_shm(1 << 20, 4096, "x").is_ok());
        assert!(l.check_memory(u64::MAX, "x").is_ok());
    }

    #[test]
    fn pid_max_refuses_and_names_the_sysctl() {
        let l = read("pid", &[]);
        assert!(l.check_tasks(8000, "8000 idle children").is_ok());
        let e = l
            .check_tasks(32500, "32500 idle children")
            .expect_err("over pid_max");
        assert_eq!(e.limit, "kernel.pid_max");
        assert!(
            e.message.contains("/proc/sys/kernel/pid_max")
                && e.message.contains("sysctl -w kernel.pid_max="),
            "{}",
            e.message
        );
    }

    #[test]
    fn threads_max_is_checked_too() {
        let l = read("threads", &[("proc/sys/kernel/threads-max", "5000\n")]);
        let e = l
            .check_tasks(8000, "8000 idle children")
            .expect_err("over threads-max");
        assert_eq!(e.limit, "kernel.threads-max");
    }

    #[test]
    fn nproc_applies_only_to_non_root() {
        let l = read(
            "nproc",
            &[("proc/self/status", "Uid:\t1000\t1000\t1000\t1000\n")],
        );
        assert_eq!(l.uid, Some(1000));
        assert_eq!(
            l.user_tasks,
            Some(0),
            "no /proc/<pid> entries in the fake root"
        );
        assert!(l.check_tasks(400, "400 children").is_ok());
        let e = l
            .check_tasks(1000, "1000 children")
            .expect_err("over RLIMIT_NPROC");
        assert_eq!(e.limit, "RLIMIT_NPROC");
        assert!(e.message.contains("ulimit -u"), "{}", e.message);
        let root = read("nproc-root", &[]);
        assert!(root.check_tasks(1000, "1000 children").is_ok());
    }

    #[test]
    fn user_tasks_counts_threads_of_that_uid() {
        let root = FakeRoot::new(
            "users",
            &[
                ("proc/self/status", "Uid:\t1000\t1000\t1000\t1000\n"),
                (
                    "proc/10/status",
                    "Uid:\t1000\t1000\t1000\t1000\nThreads:\t3\n",
                ),
                ("proc/11/status", "Uid:\t0\t0\t0\t0\nThreads:\t7\n"),
                ("proc/12/status", "Uid:\t1000\t0\t0\t0\nThreads:\t2\n"),
            ],
        );
        assert_eq!(Limits::read(&root.fs(), 4096).user_tasks, Some(5));
    }

    #[test]
    fn map_count_refuses_and_names_the_sysctl() {
        let l = read("maps", &[]);
        assert!(l.check_maps(64000, "64000 VMAs").is_ok());
        let e = l
            .check_maps(65500, "65500 VMAs")
            .expect_err("over max_map_count");
        assert_eq!(e.limit, "vm.max_map_count");
        assert!(
            e.message.contains("sysctl -w vm.max_map_count="),
            "{}",
            e.message
        );
    }

    #[test]
    fn memory_refuses_and_names_memavailable() {
        let l = read("mem", &[]);
        assert!(l.check_memory(500 << 20, "x").is_ok());
        let e = l
            .check_memory(900 << 20, "8000 idle children")
            .expect_err("over MemAvailable");
        assert_eq!(e.limit, "MemAvailable");
        assert!(
            e.message.contains("MemAvailable") && e.message.contains("8000 idle children"),
            "{}",
            e.message
        );
    }

    #[test]
    fn shm_limits_count_existing_segments() {
        let l = read("shm", &[]);
        assert!(
            l.check_shm(4094, 4096, "x")
                .is_err_and(|e| e.limit == "kernel.shmall"),
            "3 + 4094 pages > shmall 1000"
        );
        let l = read(
            "shm2",
            &[("proc/sys/kernel/shmall", "18446744073692774399\n")],
        );
        assert!(l.check_shm(4094, 4096, "x").is_ok());
        let e = l
            .check_shm(4095, 4096, "4095 segments")
            .expect_err("2 exist, shmmni 4096");
        assert_eq!(e.limit, "kernel.shmmni");
        assert!(
            e.message.contains("2 segments exist already")
                && e.message.contains("sysctl -w kernel.shmmni=4097"),
            "{}",
            e.message
        );
        let l = read("shm3", &[("proc/sys/kernel/shmmax", "1024\n")]);
        assert_eq!(
            l.check_shm(1, 4096, "x")
                .expect_err("segment > shmmax")
                .limit,
            "kernel.shmmax"
        );
    }

    #[test]
    fn msg_limit_counts_existing_queues() {
        let l = read("msg", &[("proc/sys/kernel/msgmni", "100\n")]);
        assert!(l.check_msg(99, "x").is_ok());
        let e = l.check_msg(100, "100 queues").expect_err("1 exists");
        assert_eq!(e.limit, "kernel.msgmni");
    }

    #[test]
    fn data_limit_applies_to_brk() {
        let l = read(
            "data",
            &[(
                "proc/self/limits",
                "Max data size             1048576              unlimited            bytes\n",
            )],
        );
        assert!(l.check_data(4096, "x").is_ok());
        assert_eq!(
            l.check_data(2 << 20, "x").expect_err("over").limit,
            "RLIMIT_DATA"
        );
    }

    #[test]
    fn parses_online_nodes() {
        let root = FakeRoot::new("nodes", &base_files());
        assert_eq!(online_nodes(&root.fs()), Some(vec![0, 1, 2, 4]));
        let none = FakeRoot::new("nonuma", &[]);
        assert_eq!(online_nodes(&none.fs()), None);
    }
}
