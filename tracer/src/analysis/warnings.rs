//! What the analysis tells a reader besides tables: partial runs, lost events, failed sizes,
//! targets that were not traced. Data only; `render::warnings` words each.

use std::path::PathBuf;

/// Something a reader of the report should know; `render::warnings` words it.
#[derive(Clone, Debug, PartialEq)]
pub enum Warning {
    /// The sweep's `sweep.json` is not JSON.
    SweepUnreadable {
        path: PathBuf,
    },
    /// The sweep did not complete.
    PartialSweep {
        reason: Option<String>,
    },
    /// An external sweep's command failed at this N, which is left out.
    CommandFailed {
        run: String,
        n: u64,
        exit: Option<i32>,
    },
    /// Workload results that could not be parsed.
    UnreadableResults {
        run: String,
        count: usize,
    },
    PartialRun {
        run: String,
        reason: Option<String>,
    },
    /// The workload reported itself interrupted.
    Interrupted {
        run: String,
    },
    /// A loss counter above 0, with what it means.
    LossCounter {
        run: String,
        name: String,
        value: u64,
        /// For `stack_errors`: the stacks taken and lost per kind (older runs lack them).
        stacks: Option<StackLoss>,
        meaning: &'static str,
    },
    /// A function the user named was attached but never fired.
    NeverFired {
        run: String,
        target: String,
        plan: String,
        attach_points: Vec<String>,
    },
    /// The kernel lowered its perf sample-rate limit during the run, below the frequency
    /// sampled at: what ran later was sampled less.
    SampleRateLowered {
        run: String,
        from_hz: u64,
        to_hz: u64,
        freq_hz: u64,
    },
    /// No plan could measure the target: each rejected plan and why.
    NotTraced {
        run: String,
        target: String,
        rejected: Vec<(String, String)>,
    },
}

/// Stacks taken and lost per kind, beside the `stack_errors` counter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StackLoss {
    pub taken: u64,
    pub caller: u64,
    pub offcpu: u64,
    pub sampled: u64,
    /// Stacks taken whose aggregate entry found the stack-aggregate map full (any kind).
    pub aggregates_full: u64,
}

/// The warning for a run whose sampling the kernel throttled: its perf sample-rate limit
/// (the session's counters) fell during the run to below the frequency sampled at.
pub fn sample_rate_lowered(
    run: &str,
    counters: &std::collections::BTreeMap<String, u64>,
    freq_hz: u64,
) -> Option<Warning> {
    let from = *counters.get(crate::rundata::SAMPLE_RATE_LIMIT_START)?;
    let to = *counters.get(crate::rundata::SAMPLE_RATE_LIMIT_END)?;
    (to < from && to < freq_hz).then(|| Warning::SampleRateLowered {
        run: run.to_string(),
        from_hz: from,
        to_hz: to,
        freq_hz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_lowered_below_the_frequency_warns() {
        let c = |from: u64, to: u64| {
            [
                (crate::rundata::SAMPLE_RATE_LIMIT_START.to_string(), from),
                (crate::rundata::SAMPLE_RATE_LIMIT_END.to_string(), to),
            ]
            .into_iter()
            .collect()
        };
        assert!(matches!(
            sample_rate_lowered("r", &c(100_000, 3_000), 4999),
            Some(Warning::SampleRateLowered { to_hz: 3000, .. })
        ));
        // Lowered, but still above what was sampled at: nothing throttled.
        assert_eq!(sample_rate_lowered("r", &c(100_000, 25_000), 4999), None);
        // Unchanged, or a run that did not record the limit.
        assert_eq!(sample_rate_lowered("r", &c(3_000, 3_000), 4999), None);
        assert_eq!(sample_rate_lowered("r", &Default::default(), 4999), None);
    }
}
