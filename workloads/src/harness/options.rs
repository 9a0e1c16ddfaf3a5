//! Options every workload takes (clap), and the measuring plan derived from them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use workloads::nlist::NList;

/// Default for --min-time when neither it nor --iterations is given.
pub const DEFAULT_MIN_TIME: f64 = 0.2;

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Sizes N to sweep, as a comma list and/or ranges. START..END*F multiplies by F
    /// (1..8000*4 = 1,4,16,64,256,1024,4096,8000); START..END+S adds S (1k..4k+1k =
    /// 1000,2000,3000,4000). Both ends of a range are included; F may be a decimal (1.5);
    /// k = x1000, m = x1000000, '_' may separate digits. Values are sorted and de-duplicated.
    /// [default: see the workload's description]
    #[arg(short = 'n', long = "n", value_name = "LIST")]
    pub n: Option<NList>,

    /// Iterations per repeat. With --min-time too: at least K iterations and at least SECS.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,

    /// Minimum wall time per repeat, in seconds; iterations continue until it has passed.
    /// [default: 0.2 unless --iterations is given]
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub min_time: Option<f64>,

    /// Unmeasured iterations after each N's setup, before its first repeat (outside the
    /// phase markers).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub warmup: u64,

    /// Measure each (variant, N) R times, each repeat its own phase-marker pair; the table
    /// then adds _median and _stddev rows, the JSON one row per repeat.
    #[arg(long, value_name = "R", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: u32,

    /// Also write the results as JSON to PATH (via a temporary file in the same directory
    /// and a rename, so PATH is never half-written).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Pin this process, and so its children, to one CPU. Removes cross-CPU wake-up latency
    /// from fork+wait timings (large and erratic in VMs) so the kernel's own work dominates.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,

    /// Print no table on stdout (the --json report holds every row); notes still go to
    /// stderr. `tracer sweep` runs a workload once per N and round this way.
    #[arg(short, long)]
    pub quiet: bool,

    /// Log setup steps and every phase begin/end to stderr. Per-N progress is printed to
    /// stderr anyway when it is a terminal.
    #[arg(short, long)]
    pub verbose: bool,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 86_400.0 {
        return Err(format!("{s}: give a time between 0 and 86400 seconds"));
    }
    Ok(v)
}

/// How long each phase runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub iterations: Option<u64>,
    pub min_time: Option<Duration>,
    pub warmup: u64,
    pub repeats: u32,
}

impl Plan {
    pub fn from_common(c: &Common) -> Self {
        let min_time = match (c.iterations, c.min_time) {
            (None, None) => Some(DEFAULT_MIN_TIME),
            (_, t) => t,
        };
        Plan {
            iterations: c.iterations,
            min_time: min_time.map(Duration::from_secs_f64),
            warmup: c.warmup,
            repeats: c.repeats,
        }
    }

    /// Whether a phase that ran `iters` iterations in `elapsed_ns` is finished.
    pub fn done(&self, iters: u64, elapsed_ns: u64) -> bool {
        self.iterations.is_none_or(|k| iters >= k)
            && self
                .min_time
                .is_none_or(|t| u128::from(elapsed_ns) >= t.as_nanos())
    }

    /// How many iterations to run before looking at the clock (and the stop flag) again:
    /// enough to reach the goal, but never much more than `check_ns` of work.
    pub fn next_batch(&self, iters: u64, elapsed_ns: u64, check_ns: u64) -> u64 {
        let per = (elapsed_ns / iters.max(1)).max(1);
        let mut want = 1u64;
        if let Some(k) = self.iterations {
            want = want.max(k.saturating_sub(iters));
        }
        if let Some(t) = self.min_time {
            let left = (t.as_nanos() as u64).saturating_sub(elapsed_ns);
            want = want.max(left.div_ceil(per));
        }
        want.min((check_ns / per).max(1)).min(iters.max(1) * 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(iterations: Option<u64>, min_ms: Option<u64>) -> Plan {
        Plan {
            iterations,
            min_time: min_ms.map(Duration::from_millis),
            warmup: 0,
            repeats: 1,
        }
    }

    #[test]
    fn done_needs_every_goal() {
        let p = plan(Some(10), Some(5));
        assert!(!p.done(10, 1_000_000));
        assert!(!p.done(9, 10_000_000));
        assert!(p.done(10, 5_000_000));
        assert!(plan(Some(3), None).done(3, 0));
        assert!(plan(None, Some(1)).done(1, 1_000_000));
    }

    #[test]
    fn batches_aim_at_the_goal_but_stay_short() {
        // 1 us per iteration, 8 ms to go, 20 ms check interval: 8000 iterations.
        assert_eq!(
            plan(None, Some(10)).next_batch(2000, 2_000_000, 20_000_000),
            8000
        );
        // ... but never more than 10x what ran so far.
        assert_eq!(
            plan(None, Some(10)).next_batch(100, 100_000, 20_000_000),
            1000
        );
        // Slow iterations (5 ms each): one at a time, whatever the goal.
        assert_eq!(
            plan(Some(100), None).next_batch(2, 10_000_000, 20_000_000),
            4
        );
        assert_eq!(plan(Some(100), None).next_batch(98, 490_000_000, 1_000), 1);
        // Never past the iteration goal when it is the only one.
        assert_eq!(plan(Some(5), None).next_batch(3, 300, 20_000_000), 2);
    }
}
