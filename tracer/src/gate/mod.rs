//! The gates a CI job or `git bisect run` reads from the exit status: `tracer compare
//! --fail-on OUTCOME` fails when a verdict of the compare has one of the outcomes named, and
//! `tracer sweep|report --expect TARGET[/CASE]:CLASS` fails when a fitted class set excludes
//! the class expected. This module parses the two flags' values and judges the analysis's
//! data; [`text`] says what it found. The statuses are [`exit::GATE_FAILED`] and
//! [`exit::GATE_UNJUDGED`].
//!
//! The names come from where the analysis defines them: an outcome is a [`Change`]'s label,
//! `changed` is [`Change::flagged`], a class is a [`Complexity`]'s label, and a verdict's
//! class set is [`crate::analysis::Verdict::classes`] (a loop count's class alone where one gives it, so "O(n)
//! by loop count" is {O(n)}).

use std::fmt;

use crate::analysis::CaseResult;
use crate::analysis::compare::{Change, ClassChange, Comparison};
use crate::analysis::fit::{Complexity, classes_label};
use crate::error::exit;

pub mod text;

/// A value of `--fail-on` or `--expect` that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("{word:?} is not an outcome of tracer compare: use {}", outcome_words().join(", "))]
    UnknownOutcome { word: String },
    #[error(
        "{spec:?}: expected TARGET:CLASS or TARGET/CASE:CLASS, e.g. do_wait:O(1) or \
         do_wait/waitpid-pid:O(n)"
    )]
    Malformed { spec: String },
    #[error("{class:?} is not a class the fits name: use {}", class_names().join(", "))]
    UnknownClass { class: String },
}

/// Every outcome of the compare, in the order `--help` lists them.
const OUTCOMES: [Change; 4] = [
    Change::Grew,
    Change::Shrank,
    Change::Same,
    Change::Inconclusive,
];

/// A new outcome of the compare stops the build here until [`OUTCOMES`] lists it.
const fn _every_outcome_is_listed(c: Change) {
    match c {
        Change::Grew | Change::Shrank | Change::Same | Change::Inconclusive => {}
    }
}

/// The word `--fail-on` takes for grew or shrank.
const CHANGED: &str = "changed";

/// The words `--fail-on` takes.
fn outcome_words() -> Vec<&'static str> {
    OUTCOMES
        .iter()
        .map(|c| c.label())
        .chain([CHANGED])
        .collect()
}

/// Every class the fits name, least growth first.
pub fn classes() -> impl Iterator<Item = Complexity> {
    std::iter::once(Complexity::Constant).chain(Complexity::GROWING)
}

fn class_names() -> Vec<&'static str> {
    classes().map(Complexity::label).collect()
}

/// One word of `--fail-on`: an outcome of the compare, or `changed` (grew or shrank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    Outcome(Change),
    Changed,
}

impl FailOn {
    pub fn parse(word: &str) -> Result<FailOn, SpecError> {
        let w = word.trim().to_ascii_lowercase();
        if w == CHANGED {
            return Ok(FailOn::Changed);
        }
        OUTCOMES
            .iter()
            .find(|c| c.label() == w)
            .map(|&c| FailOn::Outcome(c))
            .ok_or_else(|| SpecError::UnknownOutcome {
                word: word.trim().to_string(),
            })
    }

    /// Does a verdict with outcome `c` trip it?
    pub fn covers(self, c: Change) -> bool {
        match self {
            FailOn::Outcome(o) => o == c,
            FailOn::Changed => c.flagged(),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FailOn::Outcome(c) => c.label(),
            FailOn::Changed => CHANGED,
        }
    }
}

/// A class as the tool prints it, in any case and spacing: `O(1)`, `O(log n)`, `O(n)`,
/// `O(n log n)`, `O(n^2)` (or `O(n²)`).
pub fn parse_class(s: &str) -> Result<Complexity, SpecError> {
    let norm = |x: &str| -> String {
        x.chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(|c| match c {
                '²' => vec!['^', '2'],
                '³' => vec!['^', '3'],
                c => vec![c.to_ascii_lowercase()],
            })
            .collect()
    };
    let want = norm(s);
    classes()
        .find(|c| norm(c.label()) == want)
        .ok_or_else(|| SpecError::UnknownClass {
            class: s.trim().to_string(),
        })
}

/// One value of `--expect`: the class TARGET's verdicts (or its CASE's only) must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    pub target: String,
    /// None: every case of the target.
    pub case_name: Option<String>,
    pub class: Complexity,
}

impl Expect {
    /// `TARGET:CLASS` or `TARGET/CASE:CLASS`.
    pub fn parse(spec: &str) -> Result<Expect, SpecError> {
        let malformed = || SpecError::Malformed {
            spec: spec.trim().to_string(),
        };
        let (what, class) = spec.trim().rsplit_once(':').ok_or_else(malformed)?;
        let (target, case_name) = match what.split_once('/') {
            Some((t, c)) => (t.trim(), Some(c.trim())),
            None => (what.trim(), None),
        };
        if target.is_empty() || case_name.is_some_and(str::is_empty) || class.trim().is_empty() {
            return Err(malformed());
        }
        Ok(Expect {
            target: target.to_string(),
            case_name: case_name.map(str::to_string),
            class: parse_class(class)?,
        })
    }

    /// Does it name this case's verdict?
    pub fn selects(&self, c: &CaseResult) -> bool {
        let t = &c.table;
        t.target == self.target && self.case_name.as_ref().is_none_or(|c| *c == t.case_name)
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.case_name {
            Some(c) => write!(f, "{}/{c}:{}", self.target, self.class.label()),
            None => write!(f, "{}:{}", self.target, self.class.label()),
        }
    }
}

/// What a gate concluded, and the status it exits with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateStatus {
    /// Every verdict it judged passed.
    Passed,
    /// A verdict tripped it.
    Failed,
    /// It could not judge (nothing to gate on, a name not in the data, no fit); this wins
    /// over a verdict that tripped it: the gate itself needs fixing, or the data a rerun.
    Unjudged,
}

impl GateStatus {
    pub fn exit_code(self) -> i32 {
        match self {
            GateStatus::Passed => exit::OK,
            GateStatus::Failed => exit::GATE_FAILED,
            GateStatus::Unjudged => exit::GATE_UNJUDGED,
        }
    }
}

/// `--fail-on` judged on one compare: every verdict of the compare, and which tripped it.
#[derive(Clone, Debug, PartialEq)]
pub struct FailOnGate<'c> {
    pub fail_on: Vec<FailOn>,
    /// The compare's verdicts, in its order, each with whether it tripped the gate.
    pub verdicts: Vec<(&'c ClassChange<'c>, bool)>,
}

impl<'c> FailOnGate<'c> {
    pub fn judge(fail_on: &[FailOn], c: &'c Comparison<'c>) -> FailOnGate<'c> {
        let mut words = Vec::new();
        for w in fail_on {
            if !words.contains(w) {
                words.push(*w);
            }
        }
        FailOnGate {
            verdicts: c
                .classes
                .iter()
                .map(|cl| {
                    let tripped = words.iter().any(|w| w.covers(cl.growth.change));
                    (cl, tripped)
                })
                .collect(),
            fail_on: words,
        }
    }

    pub fn tripped(&self) -> impl Iterator<Item = &'c ClassChange<'c>> {
        self.verdicts.iter().filter(|(_, t)| *t).map(|(c, _)| *c)
    }

    /// Unjudged when the compare has no verdict at all (sides with no traced target, as
    /// `--discover` sweeps are): a gate that cannot fail must not pass.
    pub fn status(&self) -> GateStatus {
        if self.verdicts.is_empty() {
            GateStatus::Unjudged
        } else if self.tripped().next().is_some() {
            GateStatus::Failed
        } else {
            GateStatus::Passed
        }
    }
}

/// One verdict an `--expect` named, with its class set.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub run: String,
    pub target: String,
    pub case_name: String,
    /// [`crate::analysis::Verdict::classes`]: empty when nothing was fitted.
    pub classes: Vec<Complexity>,
    /// The class is a loop count's ("O(n) by loop count").
    pub by_loop: bool,
}

impl Judged {
    /// None: nothing fitted, nothing to judge.
    pub fn holds(&self, class: Complexity) -> Option<bool> {
        (!self.classes.is_empty()).then(|| self.classes.contains(&class))
    }

    /// "O(n) or O(n log n)", "O(n) by loop count".
    pub fn classes_label(&self) -> String {
        let set = classes_label(&self.classes);
        if self.by_loop {
            format!("{set} by loop count")
        } else {
            set
        }
    }
}

/// `--expect` judged on one analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectGate {
    /// Each expectation with the verdicts it names (none: its target or case is not there).
    pub expects: Vec<(Expect, Vec<Judged>)>,
    /// Every target and case the data has a verdict for, for the message when one is not.
    pub available: Vec<(String, String)>,
}

impl ExpectGate {
    pub fn judge<'a>(expects: &[Expect], cases: impl IntoIterator<Item = &'a CaseResult>) -> Self {
        let cases: Vec<&CaseResult> = cases.into_iter().collect();
        let mut available: Vec<(String, String)> = Vec::new();
        for c in &cases {
            let key = (c.table.target.clone(), c.table.case_name.clone());
            if !available.contains(&key) {
                available.push(key);
            }
        }
        let expects = expects
            .iter()
            .map(|e| {
                let judged = cases
                    .iter()
                    .filter(|c| e.selects(c))
                    .map(|c| Judged {
                        run: c.table.run.clone(),
                        target: c.table.target.clone(),
                        case_name: c.table.case_name.clone(),
                        classes: c.verdict.classes(),
                        by_loop: c.verdict.by_loop.is_some(),
                    })
                    .collect();
                (e.clone(), judged)
            })
            .collect();
        ExpectGate { expects, available }
    }

    pub fn status(&self) -> GateStatus {
        let unjudged = self.expects.iter().any(|(e, judged)| {
            judged.is_empty() || judged.iter().any(|j| j.holds(e.class).is_none())
        });
        let failed = self
            .expects
            .iter()
            .any(|(e, judged)| judged.iter().any(|j| j.holds(e.class) == Some(false)));
        match (unjudged, failed) {
            (true, _) => GateStatus::Unjudged,
            (false, true) => GateStatus::Failed,
            (false, false) => GateStatus::Passed,
        }
    }
}

#[cfg(test)]
mod tests;
