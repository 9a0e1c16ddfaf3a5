//! The machine's CPU time from `/proc/stat`: how much of it the hypervisor took (steal).
//!
//! On a virtual machine whose kernel accounts steal time (`CONFIG_PARAVIRT_TIME_ACCOUNTING`,
//! as on the KVM and Firecracker guests CI and cloud users run on), a task's run time excludes
//! the moments its vCPU was not running, so rusage leaves them out; the cpu-clock sampler
//! counts wall time on the CPU and keeps sampling whatever task was current through them. A
//! run's sampled on-CPU time then exceeds its rusage by about the share of busy time stolen.

/// Cumulative CPU time of all CPUs, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    /// Time the hypervisor ran something else while a vCPU wanted to run.
    pub steal_s: f64,
    /// Time the CPUs were not idle: user, nice, system, irq, softirq and steal (idle and
    /// iowait are not busy; guest time is inside user).
    pub busy_s: f64,
}

impl CpuTimes {
    /// The times now; None where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        parse(&text, if hz > 0 { hz as f64 } else { 100.0 })
    }

    /// What passed from `before` to `self` (never negative).
    pub fn since(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            steal_s: (self.steal_s - before.steal_s).max(0.0),
            busy_s: (self.busy_s - before.busy_s).max(0.0),
        }
    }
}

/// The `cpu` line of `/proc/stat` text, in clock ticks of `hz` per second.
fn parse(text: &str, hz: f64) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<f64>().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    if v.len() < 4 {
        return None;
    }
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some(CpuTimes {
        steal_s: at(7) / hz,
        busy_s: busy / hz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_everything_but_idle_and_iowait() {
        let text = "cpu  400 10 100 9000 50 5 5 30 20 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        let t = parse(text, 100.0).unwrap();
        assert!((t.steal_s - 0.30).abs() < 1e-9, "{t:?}");
        assert!((t.busy_s - 5.50).abs() < 1e-9, "{t:?}");
        let later = CpuTimes {
            steal_s: 0.5,
            busy_s: 7.5,
        };
        let d = later.since(t);
        assert!(
            (d.steal_s - 0.2).abs() < 1e-9 && (d.busy_s - 2.0).abs() < 1e-9,
            "{d:?}"
        );
        assert_eq!(t.since(later), CpuTimes::default(), "never negative");
        assert!(parse("intr 1 2\n", 100.0).is_none());
        assert!(parse("cpu  1 x 3 4\n", 100.0).is_none());
    }
}
