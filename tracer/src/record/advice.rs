//! What a sweep's extra runs ask of the analysis between runs, and the shape of its answers.
//! Record holds only the questions: the analysis answers them (`analysis::advice`), and the
//! sweep that builds an external run hands its answerer in ([`super::ExternalSweep::advice`]),
//! so recording imports no analysis module.

use crate::rundata::{Folded, Invocation, Run, StackFile};

/// The analysis, as the extra runs of a sweep consult it.
pub trait Advice: std::fmt::Debug + Sync {
    /// Every verdict of the runs so far with two sizes or more, each size run at least twice:
    /// what it says now, at `max_runs` per size, and the size to run next for it; for the
    /// `counted` targets (whose class a loop count gives), whether it grows only. Sizes whose
    /// command failed are left out.
    fn verdicts(&self, invocations: &[Invocation], max_runs: u32, counted: &[String]) -> Vec<Open>;

    /// A discover sweep between runs: the sizes whose runs would decide a frame the analysis
    /// leaves undecided so far, from the run so far (`run`, labelled `label`, with its folded
    /// `stacks`). Err: the run so far could not be read.
    fn undecided_sizes(
        &self,
        label: &str,
        run: Run,
        stacks: &[(StackFile, Folded)],
    ) -> Result<Vec<MoreRuns>, String>;
}

/// What a verdict says, as far as more runs could change it: flat, or growing within a
/// set of classes.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Flat,
    /// Growing: how many classes its set holds and their label ("O(n) or O(n log n)"); no
    /// class for a verdict whose class a loop count gives.
    Grows {
        classes: usize,
        label: String,
    },
}

impl Decision {
    /// Growth alone, for a verdict whose class comes from a loop count.
    pub fn growth_only(self) -> Decision {
        match self {
            Decision::Grows { .. } => Decision::Grows {
                classes: 0,
                label: String::new(),
            },
            flat => flat,
        }
    }

    /// Its class set holds more than one class.
    pub fn is_wide(&self) -> bool {
        matches!(self, Decision::Grows { classes, .. } if *classes > 1)
    }

    /// "O(1)", "O(n)", "O(n) or O(n log n)"; "grows" for growth whose class a loop count
    /// gives.
    pub fn label(&self) -> String {
        match self {
            Decision::Flat => "O(1)".into(),
            Decision::Grows { classes: 0, .. } => "grows".into(),
            Decision::Grows { label, .. } => label.clone(),
        }
    }
}

/// One verdict of the runs so far (a target, with its case for a built-in workload's), and
/// what the same data would say at the cap of runs per size.
#[derive(Clone, Debug, PartialEq)]
pub struct Open {
    /// `do_wait`, or `do_wait [waitpid-any]`.
    pub target: String,
    pub now: Decision,
    /// The verdict with every size at the cap: its runs so far repeated, its error shrunk
    /// as √runs. Equal to `now`: more runs of these sizes cannot change it.
    pub at_cap: Decision,
    /// A "no rising trend" reading that one size's centre, moved within its error, turns
    /// into growth: that reading, and the size. None: it holds at every size's error, or the
    /// reading is another.
    pub shaky: Option<(Decision, u64)>,
    /// The size to run next for it (the shaky size when under the cap, else the one with
    /// the largest error among those under the cap), its runs so far and its relative
    /// error; None when every size is at the cap.
    pub next: Option<(u64, usize, f64)>,
    /// Where its class set would part, when it holds several: the size to add, where more
    /// runs of these cannot narrow it.
    pub parts_at: Option<u64>,
}

impl Open {
    /// What more runs could make it read: its reading at the cap where that differs, else
    /// growth where a size's error leaves "no rising trend" open.
    pub fn could_read(&self) -> Option<&Decision> {
        if self.now != self.at_cap {
            Some(&self.at_cap)
        } else {
            self.shaky.as_ref().map(|(d, _)| d)
        }
    }

    /// More runs could change the verdict, and a size has runs to spare.
    pub fn wants_runs(&self) -> bool {
        self.could_read().is_some() && self.next.is_some()
    }
}

/// A size whose runs would decide whether `function`'s rise in `entry` is a loop.
#[derive(Clone, Debug, PartialEq)]
pub struct MoreRuns {
    pub n: u64,
    /// The frame's samples there so far.
    pub samples: u64,
    /// The samples under which its time there is not yet measured well enough to compare:
    /// the size runs again until it should have them.
    pub enough: u64,
    pub entry: String,
    pub function: String,
}
