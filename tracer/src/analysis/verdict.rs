//! The scaling verdict of one target and case: the fit of its time per call, what the plan
//! measured, and what a loop count or a population split says beside it.

use crate::rundata::PlanUsed;

use super::fit::{Complexity, Scaling, fit_scaling_runs};
use super::populations::Mix;
use super::table::{CaseTable, Metric};
use super::trips::LoopClass;

/// Scaling verdict of one target and case; `render::verdict` says it in one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub metric: Metric,
    /// None when there was nothing to fit (count-only plan, fewer than two sizes).
    pub scaling: Option<Scaling>,
    /// The plan measured a stand-in: its name and every attach point (e.g.
    /// "syscall-bracket syscalls:sys_enter_wait4,..."); the line names it briefly.
    pub stand_in: Option<String>,
    /// The plan timed its calls (false: count-only, nothing to fit).
    pub timed: bool,
    /// The plan that measured it (the line names it briefly).
    pub plan: Option<PlanUsed>,
    /// The class an exact loop count inside the target gives the growing time (see
    /// [`super::trips::loop_class`]); None when no count does.
    pub by_loop: Option<LoopClass>,
    /// The calls are two populations ([`super::populations`]): the one the headline is, or
    /// that they could not be split.
    pub mix: Option<Mix>,
}

impl Verdict {
    /// The verdict's class: the loop count's where one gives it (a count is exact; time per
    /// call also carries the cost of each trip, which may creep up with N), else the time's.
    pub fn class(&self) -> Option<Complexity> {
        match &self.by_loop {
            Some(l) => Some(l.class),
            None => self.time_class(),
        }
    }

    /// The classes the data does not exclude, least growth first: the loop count's class (a
    /// count is exact), else the time's set ([`Scaling::classes`]). Empty with nothing fitted.
    pub fn classes(&self) -> Vec<Complexity> {
        match (&self.by_loop, self.headline()) {
            (Some(l), _) => vec![l.class],
            (None, Some(s)) => s.classes.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// The fit the headline rests on: a mixed table's growing population, else the time per
    /// call of all calls; None when nothing was fitted or when the mean of an unsplit mix
    /// did not grow (that says nothing about either population).
    pub fn headline(&self) -> Option<&Scaling> {
        match &self.mix {
            Some(Mix::Population { scaling, .. }) => Some(scaling.as_ref()),
            Some(Mix::Unsplit { .. })
                if self
                    .scaling
                    .as_ref()
                    .is_some_and(|s| s.flat_reason.is_some()) =>
            {
                None
            }
            _ => self.scaling.as_ref(),
        }
    }

    /// The class when the data names one alone (a set of one), else None.
    pub fn sole_class(&self) -> Option<Complexity> {
        let set = self.classes();
        (set.len() == 1).then(|| set[0])
    }

    /// The loop count that gives the verdict a class other than the time's own fit (what
    /// lines, tables and plots name beside the class); None when the two agree.
    pub fn count_overrides_time(&self) -> Option<&LoopClass> {
        // Also when the time names the count's class only among others: the count decides.
        let time_alone = self.headline().and_then(|s| s.sole_class());
        self.by_loop
            .as_ref()
            .filter(|l| time_alone != Some(l.class))
    }

    /// The class the time per call fitted by itself (of the headline's population).
    pub fn time_class(&self) -> Option<Complexity> {
        self.headline().map(|s| s.class)
    }
}

/// The scaling verdict of one table (`render::verdict::line` gives its one-line summary).
pub fn verdict(t: &CaseTable) -> Verdict {
    Verdict {
        metric: t.metric,
        scaling: fit_scaling_runs(&t.points(), &t.run_points()),
        stand_in: t.stand_in(),
        timed: t.timed,
        plan: t.plan.clone(),
        by_loop: None,
        mix: None,
    }
}
