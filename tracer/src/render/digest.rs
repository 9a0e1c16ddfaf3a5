//! The findings of a report in reading order: one line per (target, case), grouped into what
//! grows with N, what does not, and what could not be fitted, each with its root cause. The
//! index, the README and the terminal summary all start with this.

use crate::analysis::fit::Complexity;
use crate::analysis::{Analysis, CaseResult};

use super::rootcause;

/// One (target, case), or several count-only cases of one target collapsed into one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding<'a> {
    /// The verdict line.
    pub line: String,
    /// The root-cause line, when stacks were sampled.
    pub root_cause: Option<String>,
    /// True when the root cause names a frame (rather than "no frame grows", "too few samples").
    pub culprit: bool,
    /// The cases this line covers.
    pub cases: Vec<&'a CaseResult>,
}

impl Finding<'_> {
    /// A finding about what its workload case exists for (the thread it reproduces), or
    /// about a target the user named for their own command; the others are incidental.
    /// The per-call verdicts of a discover sweep's confirmation pass are detail: the
    /// discovery states their per-op result, the one its ranking is about.
    pub fn leads(&self) -> bool {
        self.cases.iter().any(|c| {
            let t = &c.table;
            t.role() != crate::rundata::RunRole::Confirm
                && workloads::cases::is_thread_target(&t.case_name, &t.target)
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A growth class: the cases the report is about.
    Grows,
    /// O(1), including "O(1) within noise".
    Flat,
    /// Count-only plans and cases with fewer than two timed sizes.
    NotFitted,
}

impl Kind {
    pub fn title(self) -> &'static str {
        match self {
            Kind::Grows => "Grows with N",
            Kind::Flat => "Does not grow (O(1))",
            Kind::NotFitted => "Not fitted",
        }
    }
}

/// (run, target, short plan) of count-only cases shown on one line.
type CountOnlyKey = (String, String, Option<String>);

/// Findings by kind, kinds in reading order, empty kinds left out.
pub fn findings<'a>(a: &'a Analysis) -> Vec<(Kind, Vec<Finding<'a>>)> {
    let mut out: Vec<(Kind, Vec<Finding<'a>>)> = Vec::new();
    let mut push = |kind: Kind, f: Finding<'a>| match out.iter_mut().find(|(k, _)| *k == kind) {
        Some((_, v)) => v.push(f),
        None => out.push((kind, vec![f])),
    };
    // Count-only cases of one (run, target, plan): one line.
    let mut count_only: Vec<(CountOnlyKey, Vec<&CaseResult>)> = Vec::new();
    for c in a.cases() {
        let (t, v) = (&c.table, &c.verdict);
        let kind = match v.class() {
            Some(Complexity::Constant) => Kind::Flat,
            Some(_) => Kind::Grows,
            None => Kind::NotFitted,
        };
        if kind == Kind::NotFitted && !t.timed {
            let key = (
                t.run.clone(),
                t.target.clone(),
                super::fmt::via(t.plan.as_ref()),
            );
            match count_only.iter_mut().find(|(k, _)| *k == key) {
                Some((_, cases)) => cases.push(c),
                None => count_only.push((key, vec![c])),
            }
            continue;
        }
        let rc = c.root_cause.as_ref();
        // A growing case without stacks still gets a line: the reader looks for one.
        let rc_line = rc.map(|r| rootcause::line(&r.cause)).or_else(|| {
            (kind == Kind::Grows).then(|| {
                format!(
                    "{}: no stacks were sampled inside the target in this case",
                    t.key()
                )
            })
        });
        push(
            kind,
            Finding {
                line: super::verdict::line(c),
                root_cause: rc_line,
                culprit: rc.is_some_and(|r| r.cause.culprit.is_some()),
                cases: vec![c],
            },
        );
    }
    for ((_, target, via), covered) in count_only {
        let cases: Vec<&str> = covered.iter().map(|c| c.table.case_name.as_str()).collect();
        let via = via.map_or(String::new(), |v| format!("; via {v}"));
        push(
            Kind::NotFitted,
            Finding {
                line: format!(
                    "{target} [{}]: count-only plan, no time per call to fit{via}",
                    cases.join(", ")
                ),
                root_cause: None,
                culprit: false,
                cases: covered,
            },
        );
    }
    out.sort_by_key(|(k, _)| *k);
    out
}
