//! The gates' results in sentences: a head line with the outcome and the exit status, then one
//! line per verdict judged (for `--fail-on`, those that tripped it).
use super::{ExpectGate, FailOnGate, GateStatus, Judged};

fn head(flag: &str, status: GateStatus, what: &str) -> String {
    let outcome = match status {
        GateStatus::Passed => "passed",
        GateStatus::Failed => "failed",
        GateStatus::Unjudged => "cannot judge",
    };
    format!(
        "Gate {flag}: {outcome} (exit {}): {what}",
        status.exit_code()
    )
}

/// `--fail-on`: which verdicts tripped it, or what the verdicts were when none did.
pub fn fail_on(g: &FailOnGate) -> Vec<String> {
    let words: Vec<&str> = g.fail_on.iter().map(|w| w.label()).collect();
    let flag = format!("--fail-on {}", words.join(","));
    let status = g.status();
    let total = g.verdicts.len();
    match status {
        GateStatus::Unjudged => vec![head(
            &flag,
            status,
            "no verdicts to gate on: neither side has a traced target and case, nor a kernel \
             loop of the same program (a --discover sweep's verdicts are its kernel loops; \
             name a function with --targets to gate on it)",
        )],
        GateStatus::Failed => {
            let tripped: Vec<_> = g.tripped().collect();
            let mut out = vec![head(
                &flag,
                status,
                &format!("{} of {} tripped it:", tripped.len(), verdicts(total)),
            )];
            out.extend(tripped.iter().map(|c| {
                format!(
                    "  {} [{}]: {}",
                    c.target,
                    c.case_name,
                    c.growth.change.label()
                )
            }));
            out
        }
        GateStatus::Passed => {
            // How many of each outcome, in the order the compare defines them.
            let mut counts: Vec<(&str, usize)> = Vec::new();
            for (c, _) in &g.verdicts {
                let l = c.growth.change.label();
                match counts.iter_mut().find(|(x, _)| *x == l) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((l, 1)),
                }
            }
            let counts: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
            vec![head(
                &flag,
                status,
                &format!(
                    "{} ({})",
                    if total == 1 {
                        "its one verdict did not trip it".to_string()
                    } else {
                        format!("none of its {total} verdicts tripped it")
                    },
                    counts.join(", ")
                ),
            )]
        }
    }
}

fn verdicts(n: usize) -> String {
    crate::render::fmt::count_of(n, "verdict")
}

/// `--expect`: each expectation against each verdict it names.
pub fn expect(g: &ExpectGate) -> Vec<String> {
    let status = g.status();
    let judged: usize = g.expects.iter().map(|(_, j)| j.len()).sum();
    let excluded = g
        .expects
        .iter()
        .map(|(e, j)| j.iter().filter(|x| x.holds(e.class) == Some(false)).count())
        .sum::<usize>();
    let specs: Vec<String> = g.expects.iter().map(|(e, _)| e.to_string()).collect();
    let flag = format!("--expect {}", specs.join(","));
    let what = match status {
        GateStatus::Passed if judged == 1 => "its verdict holds the class expected".to_string(),
        GateStatus::Passed => format!("all {judged} verdicts hold the class expected"),
        GateStatus::Failed => format!(
            "{excluded} of {} {} the class expected",
            verdicts(judged),
            if excluded == 1 { "excludes" } else { "exclude" }
        ),
        GateStatus::Unjudged => {
            "a target or case is not in the data, or has no fitted class".to_string()
        }
    };
    let mut out = vec![head(&flag, status, &what)];
    for (e, judged) in &g.expects {
        let class = e.class.label();
        if judged.is_empty() {
            let name = match &e.case_name {
                Some(c) => format!("{} [{c}]", e.target),
                None => e.target.clone(),
            };
            let have = if g.available.is_empty() {
                "none: no target was traced (a --discover sweep's findings are not verdicts: \
                 name the function with --targets)"
                    .to_string()
            } else {
                // Grouped by target: "do_wait [waitpid-pid, waitpid-any], dup_mmap [spawn]".
                let mut by_target: Vec<(&str, Vec<&str>)> = Vec::new();
                for (t, c) in &g.available {
                    match by_target.iter_mut().find(|(x, _)| x == t) {
                        Some((_, cases)) => cases.push(c),
                        None => by_target.push((t, vec![c])),
                    }
                }
                by_target
                    .iter()
                    .map(|(t, cases)| format!("{t} [{}]", cases.join(", ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(format!(
                "  {name}: expected {class}: not in the data (its verdicts: {have})"
            ));
            continue;
        }
        for j in judged {
            let twice = judged
                .iter()
                .filter(|x| (&x.target, &x.case_name) == (&j.target, &j.case_name))
                .count()
                > 1;
            let name = if twice {
                format!("{} [{}] (run {})", j.target, j.case_name, j.run)
            } else {
                format!("{} [{}]", j.target, j.case_name)
            };
            out.push(format!("  {name}: {}", judgement(j, class, e.class)));
        }
    }
    out
}

fn judgement(j: &Judged, label: &str, class: crate::analysis::fit::Complexity) -> String {
    match j.holds(class) {
        Some(true) => format!("{label} as expected (fitted {})", j.classes_label()),
        Some(false) => format!(
            "expected {label}, fitted {}: trips the gate",
            j.classes_label()
        ),
        None => format!("expected {label}: no fitted class to judge"),
    }
}
