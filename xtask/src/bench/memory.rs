//! Memory: the tracer's peak RSS and its maps' locked kernel memory during a long,
//! high-rate record with default options (caller stacks, sampling, off-CPU all on).

use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::exec::Cmd;
use super::measure::{Tools, TracerRun, Workload, record_argv};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Memory {
    pub seconds: u64,
    pub command: String,
    pub calls: u64,
    pub rate_per_s: f64,
    /// run.json: the tracer's VmHWM when the run was written.
    pub peak_rss_kib: u64,
    /// Largest VmRSS seen by sampling /proc every 250 ms.
    pub sampled_peak_rss_kib: u64,
    /// wait4's ru_maxrss of the tracer process tree (the workload is a child: its own peak
    /// can be the larger one, so this is an upper bound).
    pub maxrss_tree_kib: u64,
    pub map_memlock_bytes: u64,
    pub exact: bool,
}

pub fn measure(tools: &Tools, seconds: u64) -> Result<Memory> {
    let dir = tools.scratch.join("memory");
    std::fs::create_dir_all(&dir)?;
    let json = dir.join("memory.json");
    let out = dir.join("run");
    let w = Workload::getpid_for(200_000, seconds);
    let mut a = record_argv(tools, "getpid", &out, Some(&json));
    a.push("--".into());
    let cmd = w.command(&tools.workloads, &json);
    a.extend(cmd.iter().cloned());
    eprintln!("xtask bench: memory: {seconds} s record at the highest getpid rate");
    let mut c = Cmd::new(a, &dir, "memory");
    c.sample_rss = Some(Duration::from_millis(250));
    let o = c.run()?;
    let run = TracerRun::read(&out, "getpid")?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(Memory {
        seconds,
        command: format!(
            "tracer record --targets getpid --no-verify -- workloads {}",
            w.args.join(" ")
        ),
        calls: run.calls_in_case,
        rate_per_s: run.phase_ops as f64 / (run.phase_wall_ns as f64 / 1e9),
        peak_rss_kib: run.peak_rss_kib,
        sampled_peak_rss_kib: o.sampled_peak_rss_kib,
        maxrss_tree_kib: o.maxrss_kib,
        map_memlock_bytes: run.map_memlock_bytes,
        exact: run.check_exact("getpid").is_ok(),
    })
}
