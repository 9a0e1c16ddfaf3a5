//! Which tasks are traced: the whole system, a followed process tree, a comm or a cgroup.
use std::path::PathBuf;

use aya::maps::{Array, HashMap, MapData};
use tracer_ebpf::{FILTER_ALL, FILTER_CGROUP, FILTER_COMM, FILTER_FOLLOW};

use super::{Engine, EngineError, map_error};

/// The traced set of tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Every task on the system.
    System,
    /// These processes and everything they fork from now on.
    Follow(Vec<u32>),
    /// Tasks whose comm (first 15 bytes of the name) is this.
    Comm(String),
    /// Tasks in this cgroup v2 (by id = inode number of its directory).
    Cgroup { path: PathBuf, id: u64 },
}

impl Filter {
    pub fn describe(&self) -> String {
        match self {
            Filter::System => "system-wide".into(),
            Filter::Follow(pids) => format!(
                "process tree of pid {}",
                pids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Filter::Comm(c) => format!("tasks named {c:?}"),
            Filter::Cgroup { path, id } => format!("cgroup {} (id {id})", path.display()),
        }
    }
}

impl Engine {
    /// Set which tasks are traced.
    pub fn set_filter(&mut self, filter: &Filter) -> Result<(), EngineError> {
        self.config.filter = match filter {
            Filter::System => FILTER_ALL,
            Filter::Follow(pids) => {
                for &pid in pids {
                    self.follow(pid)?;
                }
                // The last pid is the command's (or the --pid given): the hot one. Inside a
                // PID namespace it is not the pid the probes see (they find it themselves).
                self.config.root_tgid = if self.in_pid_namespace() {
                    0
                } else {
                    pids.last().copied().unwrap_or(0)
                };
                FILTER_FOLLOW
            }
            Filter::Comm(c) => {
                let mut comm = [0u8; 16];
                for (d, s) in comm.iter_mut().zip(c.bytes().take(15)) {
                    *d = s;
                }
                self.config.comm = comm;
                FILTER_COMM
            }
            Filter::Cgroup { id, .. } => {
                self.config.cgroup_id = *id;
                FILTER_CGROUP
            }
        };
        self.write_config()
    }

    /// Whether the tracer runs inside a PID namespace, where the pids it knows (its command's,
    /// `--pid`s, /proc's) are not the ones the probes see.
    pub fn in_pid_namespace(&self) -> bool {
        self.config.pidns_ino != 0
    }

    /// Add a process (and, through sched_process_fork, its future children) to the traced set.
    /// `pid` is as this process sees it: inside a PID namespace it becomes a seed the probes
    /// follow from the first event it makes (see `NS_SEEDS` in the eBPF crate).
    pub fn follow(&mut self, pid: u32) -> Result<(), EngineError> {
        if self.in_pid_namespace() {
            let map = self.bpf.map_mut("NS_SEEDS").expect("NS_SEEDS map");
            let mut m: HashMap<&mut MapData, u32, u32> =
                HashMap::try_from(map).map_err(map_error("NS_SEEDS"))?;
            return m.insert(pid, 0, 0).map_err(map_error("NS_SEEDS"));
        }
        let map = self.bpf.map_mut("FOLLOW").expect("FOLLOW map");
        let mut m: HashMap<&mut MapData, u32, u8> =
            HashMap::try_from(map).map_err(map_error("FOLLOW"))?;
        m.insert(pid, 1, 0).map_err(map_error("FOLLOW"))
    }

    /// Stop following a process given by its pid as this process sees it.
    pub fn unfollow(&mut self, pid: u32) {
        let kernel_pid = if self.in_pid_namespace() {
            let Some(map) = self.bpf.map_mut("NS_SEEDS") else {
                return;
            };
            let Ok(mut seeds) = HashMap::<&mut MapData, u32, u32>::try_from(map) else {
                return;
            };
            let found = seeds.get(&pid, 0).ok();
            let _ = seeds.remove(&pid);
            match found {
                Some(k) if k != 0 => k,
                _ => return,
            }
        } else {
            pid
        };
        if let Some(map) = self.bpf.map_mut("FOLLOW")
            && let Ok(mut m) = HashMap::<&mut MapData, u32, u8>::try_from(map)
        {
            let _ = m.remove(&kernel_pid);
        }
        // The probes' per-CPU memory of followed processes is no longer good.
        if let Some(map) = self.bpf.map_mut("FOLLOW_GEN")
            && let Ok(mut g) = Array::<&mut MapData, u64>::try_from(map)
            && let Ok(v) = g.get(&0, 0)
        {
            let _ = g.set(0, v.wrapping_add(1), 0);
        }
    }

    /// Processes currently followed (the traced process tree), by the pids the probes see.
    /// Inside a PID namespace these are not this process's pids; [`Engine::followed_here`]
    /// gives those.
    pub fn followed(&self) -> Vec<u32> {
        let Some(map) = self.bpf.map("FOLLOW") else {
            return Vec::new();
        };
        let Ok(m) = HashMap::<&MapData, u32, u8>::try_from(map) else {
            return Vec::new();
        };
        m.keys().filter_map(Result::ok).collect()
    }

    /// Followed processes by the pids this process sees (for reading /proc). Inside a PID
    /// namespace the probes know children only by their kernel pids, so this lists the
    /// namespace's processes instead (its /proc; the followed tree is among them).
    pub fn followed_here(&self) -> Vec<u32> {
        if !self.in_pid_namespace() {
            return self.followed();
        }
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let me = std::process::id();
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&p| p != me)
            .collect()
    }

    /// Whether the traced set is empty: nothing followed and, inside a PID namespace, no seed
    /// still waiting for its first event.
    pub fn nothing_followed(&self) -> bool {
        if !self.followed().is_empty() {
            return false;
        }
        if !self.in_pid_namespace() {
            return true;
        }
        let Some(map) = self.bpf.map("NS_SEEDS") else {
            return true;
        };
        let Ok(seeds) = HashMap::<&MapData, u32, u32>::try_from(map) else {
            return true;
        };
        // A seed not yet seen, whose process still exists, is still to be followed.
        let waiting = seeds
            .iter()
            .filter_map(Result::ok)
            .any(|(ns_pid, kernel_pid)| {
                kernel_pid == 0 && std::path::Path::new(&format!("/proc/{ns_pid}")).exists()
            });
        !waiting
    }
}
