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
}
