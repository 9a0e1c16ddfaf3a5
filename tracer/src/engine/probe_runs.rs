//! What a function's attached probes cost: the kernel's own run counts and run times of
//! their programs over a window.
use super::{Engine, Slot};

/// What a function's probes did during a counting window (`Engine::probe_runs`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeRuns {
    /// Entry-program runs: calls of the function, by every task.
    pub calls: u64,
    pub elapsed: std::time::Duration,
    /// Mean run time of each program, measured by the kernel (None: it never ran).
    pub entry_ns_per_run: Option<f64>,
    pub exit_ns_per_run: Option<f64>,
}

impl Engine {
    /// Runs of the programs of `slot` for `window`, system-wide, with what they cost: the
    /// kernel counts every run and its time while BPF statistics are enabled (5.8+). An entry
    /// program runs for every call of its function by any task (the task filter is applied
    /// inside it), so its run count is the function's call rate (a call site's: the calls
    /// made from that instruction, where the function is counted at its calls). Nothing is recorded and no
    /// filter changes: this is exactly what the attached probes cost everyone else.
    /// The counts are read every 10 ms and the window ends early once `enough` says so: a
    /// probe on a very hot function must not stay attached longer than it takes to see that
    /// it is.
    pub fn probe_runs(
        &self,
        slot: &Slot,
        window: std::time::Duration,
        mut enough: impl FnMut(&ProbeRuns) -> bool,
    ) -> Result<ProbeRuns, String> {
        let names = match slot {
            Slot::Fentry(_) | Slot::Kprobe(_) | Slot::Site(_) => slot.programs(),
            _ => return Err("only function probes are counted".into()),
        };
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .map_err(|e| format!("enabling BPF run-time statistics: {e}"))?;
        let read = |name: &str| -> Result<(u64, u64), String> {
            let info = self
                .bpf
                .program(name)
                .ok_or_else(|| format!("no program {name}"))?
                .info()
                .map_err(|e| format!("{name}: {e}"))?;
            Ok((info.run_count(), info.run_time().as_nanos() as u64))
        };
        let before = [read(&names[0])?, read(&names[1])?];
        let t0 = std::time::Instant::now();
        let step = std::time::Duration::from_millis(10);
        loop {
            std::thread::sleep(step.min(window.saturating_sub(t0.elapsed())));
            let after = [read(&names[0])?, read(&names[1])?];
            let elapsed = t0.elapsed();
            let d = |i: usize| {
                (
                    after[i].0.saturating_sub(before[i].0),
                    after[i].1.saturating_sub(before[i].1),
                )
            };
            let ((entry_runs, entry_ns), (exit_runs, exit_ns)) = (d(0), d(1));
            let runs = ProbeRuns {
                calls: entry_runs,
                elapsed,
                entry_ns_per_run: (entry_runs > 0).then(|| entry_ns as f64 / entry_runs as f64),
                exit_ns_per_run: (exit_runs > 0).then(|| exit_ns as f64 / exit_runs as f64),
            };
            if elapsed >= window || enough(&runs) {
                drop(stats);
                return Ok(runs);
            }
        }
    }
}
