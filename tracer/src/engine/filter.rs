//! Which tasks are traced: the whole system, a followed process tree, a comm or a cgroup.
use std::path::PathBuf;

use aya::maps::{HashMap, MapData};
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
                // The last pid is the command's (or the --pid given): the hot one.
                self.config.root_tgid = pids.last().copied().unwrap_or(0);
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

    /// Add a process (and, through sched_process_fork, its future children) to the traced set.
    pub fn follow(&mut self, pid: u32) -> Result<(), EngineError> {
        let map = self.bpf.map_mut("FOLLOW").expect("FOLLOW map");
        let mut m: HashMap<&mut MapData, u32, u8> =
            HashMap::try_from(map).map_err(map_error("FOLLOW"))?;
        m.insert(pid, 1, 0).map_err(map_error("FOLLOW"))
    }

    pub fn unfollow(&mut self, pid: u32) {
        if let Some(map) = self.bpf.map_mut("FOLLOW")
            && let Ok(mut m) = HashMap::<&mut MapData, u32, u8>::try_from(map)
        {
            let _ = m.remove(&pid);
        }
    }

    /// Pids currently followed (the traced process tree).
    pub fn followed(&self) -> Vec<u32> {
        let Some(map) = self.bpf.map("FOLLOW") else {
            return Vec::new();
        };
        let Ok(m) = HashMap::<&MapData, u32, u8>::try_from(map) else {
            return Vec::new();
        };
        m.keys().filter_map(Result::ok).collect()
    }
}
