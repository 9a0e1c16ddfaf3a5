//! Sentences of the run's length in a discovery: the interrupts and preemption of the traced
//! tasks, counted (`analysis::runlength`), and what carries the growth of the kernel time per
//! op where no loop is named: more calls, a longer run, both or neither.

use super::fmt::count;
use super::fmt::{ns, pct};
use crate::analysis::discover::Discovery;
use crate::analysis::growers::MIN_ADDED_SIGMA;
use crate::analysis::runlength::{GrowthReason, KernelGrowth, RunLength};

/// How many interruption kinds, and how many more-calls entries, a clause names.
const NAMED: usize = 3;

/// "timer interrupts 299 → 1388 per run, preemptions 19 → 83, softirqs 18 → 86": the kinds
/// with the most at the largest N (at most `max`, none that was never counted); None when
/// no kind was counted at any size.
pub fn counts_text(d: &Discovery, rl: &RunLength, max: usize) -> Option<String> {
    let mut kinds: Vec<_> = rl
        .counts
        .iter()
        .filter(|c| c.per_op.iter().any(|&v| v > 0.0))
        .collect();
    kinds.sort_by(|a, b| {
        let last = |c: &crate::analysis::runlength::InterruptionCount| {
            c.per_op.last().copied().unwrap_or(0.0)
        };
        last(b).total_cmp(&last(a))
    });
    let parts: Vec<String> = kinds
        .iter()
        .take(max)
        .enumerate()
        .map(|(i, c)| {
            let (f, l) = (c.per_op[0], c.per_op[c.per_op.len() - 1]);
            let per = if i == 0 {
                format!(" per {}", d.per)
            } else {
                String::new()
            };
            format!("{} {} → {}{per}", c.kind.plural(), count(f), count(l))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The entries section's line: "interrupts and preemption (the run's length, neither loops
/// nor more calls): timer interrupts 299 → 1388 per run, preemptions 19 → 83, softirqs
/// 18 → 86, reschedule IPIs 2 → 8; 400µs → 2.20ms of kernel time per run in them", with the
/// kinds not counted and why.
pub fn line(d: &Discovery) -> Option<String> {
    let rl = d.entries.run_length.as_ref()?;
    let sampled = rl.samples.iter().any(|&s| s > 0);
    // A run that counted none and whose samples saw none has nothing to say of them.
    if !rl.counted && !sampled {
        return None;
    }
    let mut s = String::from(
        "interrupts and preemption (the run's length, neither loops nor more calls): ",
    );
    match counts_text(d, rl, usize::MAX) {
        Some(c) => s.push_str(&c),
        None if !rl.counted => s.push_str("not counted in this run"),
        None if rl.counts.is_empty() => s.push_str("none could be counted"),
        None => s.push_str("none taken by the traced tasks"),
    }
    if let (Some(f), Some(l), true) = (rl.time_per_op.first(), rl.time_per_op.last(), sampled) {
        // Not a time of 0: below what the samples resolve.
        let at = |t: f64, n: Option<&u64>| match n {
            Some(n) if t == 0.0 => format!("no sample at N={}", super::fmt::fmt_n(*n as f64)),
            _ => ns(t),
        };
        s.push_str(&format!(
            "; {} → {} of kernel time per {} in them",
            at(*f, d.ns.first()),
            at(*l, d.ns.last()),
            d.per
        ));
    } else {
        s.push_str("; no kernel sample in them");
    }
    if !rl.uncounted.is_empty() {
        let why: Vec<String> = rl
            .uncounted
            .iter()
            .map(|u| format!("{} ({})", u.kind.plural(), u.why))
            .collect();
        s.push_str(&format!("; not counted: {}", why.join(", ")));
    }
    Some(s)
}

/// The more-calls entries named: "page_fault, execve and clone", "page_fault, execve, clone
/// and 4 more".
fn more_calls_named(d: &Discovery) -> String {
    let m = &d.entries.more_calls;
    let mut names: Vec<String> = m.iter().take(NAMED).map(|e| e.entry.clone()).collect();
    if m.len() > NAMED {
        names.push(format!("{} more", m.len() - NAMED));
    }
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// "timer interrupts 299 → 1388 per run, preemptions 19 → 83, softirqs 18 → 86", or that
/// they were not counted.
fn interruptions_named(d: &Discovery) -> String {
    d.entries
        .run_length
        .as_ref()
        .and_then(|rl| counts_text(d, rl, NAMED))
        .unwrap_or_else(|| "interrupts and preemption, not counted in this run".into())
}

/// Why the kernel time per op grows where no loop is named: "because the run is longer:
/// timer interrupts 299 → 1388 per run, ...; 91.0% of the added kernel time is in interrupts
/// and preemption". "More calls" only where entries counted more often carry the growth, and
/// named.
pub fn because(d: &Discovery, g: &KernelGrowth) -> String {
    match g.reason {
        GrowthReason::MoreCalls => format!(
            "because the command makes more calls ({}: {} of the added kernel time)",
            more_calls_named(d),
            pct(g.more_calls_share.min(1.0))
        ),
        GrowthReason::RunLength => format!(
            "because the run is longer: {}; {} of the added kernel time is in interrupts and \
             preemption",
            interruptions_named(d),
            pct(g.run_length_share.min(1.0))
        ),
        GrowthReason::MoreCallsAndRunLength => format!(
            "because the command makes more calls ({}: {} of the added kernel time) and the run \
             is longer ({}: {})",
            more_calls_named(d),
            pct(g.more_calls_share.min(1.0)),
            pct(g.run_length_share.min(1.0)),
            interruptions_named(d),
        ),
        GrowthReason::DearerInterruptions => format!(
            "in interrupts and preemption ({} of the added kernel time), though no more of them \
             per {}: each took longer, as on a machine busier at the larger sizes{}",
            pct(g.run_length_share.min(1.0)),
            d.per,
            d.entries
                .run_length
                .as_ref()
                .and_then(|rl| counts_text(d, rl, NAMED))
                .map_or(String::new(), |c| format!(" ({c})"))
        ),
        GrowthReason::Neither if g.run_length_within_noise => format!(
            "carried neither by more calls ({} of the added kernel time in entries counted \
             more often) nor, beyond its sampling noise, by a longer run ({} in interrupts and \
             preemption, a rise under {MIN_ADDED_SIGMA} standard errors of its samples)",
            pct(g.more_calls_share.min(1.0)),
            pct(g.run_length_share.min(1.0))
        ),
        GrowthReason::Neither => format!(
            "carried neither by more calls ({} of the added kernel time in entries counted \
             more often) nor by a longer run ({} in interrupts and preemption)",
            pct(g.more_calls_share.min(1.0)),
            pct(g.run_length_share.min(1.0))
        ),
    }
}

/// The summary row's root-cause cell where no loop is named: "more calls per run",
/// "a longer run: interrupts and preemption", ...
pub fn summary_cause(d: &Discovery, g: &KernelGrowth) -> String {
    match g.reason {
        GrowthReason::MoreCalls => format!("more calls per {}", d.per),
        GrowthReason::RunLength => "a longer run: interrupts and preemption".into(),
        GrowthReason::MoreCallsAndRunLength => {
            format!("more calls per {} and a longer run", d.per)
        }
        GrowthReason::DearerInterruptions => "interrupts and preemption, each dearer".into(),
        GrowthReason::Neither => "neither more calls nor a longer run".into(),
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::discover::Discovery;
    use crate::analysis::entries::tests::discovered_counting;
    use crate::analysis::runlength::tests::{
        SPIN, cpu_bound, dearer_interruptions, spin, spin_and_forks,
    };
    use crate::rundata::{Interruption, InterruptionCounting, Uncounted};

    fn text(d: &Discovery) -> String {
        super::super::discover::text(d, 5, |rows| {
            rows.iter().map(|r| r.join(" ") + "\n").collect()
        })
    }

    fn answer(d: &Discovery) -> String {
        super::super::discover::answer(d)
    }

    /// A longer run its samples do not show beyond their noise is said so, not "neither"
    /// with a share that reads as the run's length.
    #[test]
    fn a_longer_run_within_the_noise_says_why_it_is_not_named() {
        use crate::analysis::runlength::{GrowthReason, KernelGrowth};
        let d = spin();
        let mut g = KernelGrowth {
            reason: GrowthReason::Neither,
            added_ns: 5.2e6,
            more_calls_share: 0.0,
            run_length_share: 0.889,
            cause_in_interruptions: false,
            run_length_within_noise: true,
        };
        assert_eq!(
            super::because(&d, &g),
            "carried neither by more calls (0.0% of the added kernel time in entries counted \
             more often) nor, beyond its sampling noise, by a longer run (88.9% in interrupts \
             and preemption, a rise under 4 standard errors of its samples)"
        );
        g.run_length_within_noise = false;
        assert!(!super::because(&d, &g).contains("noise"));
    }

    #[test]
    fn a_longer_run_is_said_as_such_never_as_more_calls() {
        let d = spin();
        let a = answer(&d);
        assert!(
            a.contains(
                "no kernel loop: no syscall's or fault's time per call grows with N (N=1..8); the \
                 kernel time per run grows (19.0ms → 54.0ms) because the run is longer: timer \
                 interrupts 300 → 2400 per run, preemptions 20.0 → 160, softirqs 18.0 → 144; \
                 100.0% of the added kernel time is in interrupts and preemption"
            ),
            "{a}"
        );
        let t = text(&d);
        assert!(!t.contains("more calls per"), "{t}");
        assert!(
            t.contains(
                "interrupts and preemption (the run's length, neither loops nor more calls): \
                 timer interrupts 300 → 2400 per run, preemptions 20.0 → 160, softirqs 18.0 → \
                 144, reschedule IPIs 2.00 → 16.0; 5.00ms → 40.0ms of kernel time per run in \
                 them"
            ),
            "{t}"
        );
        // The frame the added time is in is an interrupt's way back to user mode: said so.
        assert!(
            t.contains(
                "root cause: the run's length: finish_task_switch.isra.0 (self), in an interrupt \
                 or a preemption, carries 80.0%"
            ),
            "{t}"
        );
        let row = super::super::summary::discovery_row(&d);
        assert_eq!(row.root_cause, ["a longer run: interrupts and preemption"]);
    }

    #[test]
    fn more_calls_and_a_longer_run_are_each_given_their_part() {
        let a = answer(&spin_and_forks());
        assert!(
            a.contains(
                "because the command makes more calls (clone: 37.5% of the added kernel time) and \
                 the run is longer (62.5%: timer interrupts 300 → 2400 per run, preemptions 20.0 \
                 → 160, softirqs 18.0 → 144)"
            ),
            "{a}"
        );
    }

    #[test]
    fn dearer_interrupts_are_said_to_be_no_more_frequent() {
        let a = answer(&dearer_interruptions());
        assert!(
            a.contains(
                "grows (19.0ms → 54.0ms) in interrupts and preemption (100.0% of the added kernel \
                 time), though no more of them per run: each took longer, as on a machine busier \
                 at the larger sizes (timer interrupts 300 → 300 per run"
            ),
            "{a}"
        );
        assert!(
            !a.contains("more calls") && !a.contains("longer run"),
            "{a}"
        );
    }

    #[test]
    fn kinds_not_counted_are_said_with_why() {
        let counting = InterruptionCounting {
            counted: vec![Interruption::TimerInterrupt, Interruption::Preemption],
            uncounted: vec![Uncounted {
                kind: Interruption::RescheduleIpi,
                why: "irq_vectors:reschedule_entry is not a tracepoint of this kernel".into(),
            }],
        };
        let d = discovered_counting(&SPIN, Some(counting), |n| cpu_bound(n, 25));
        let t = text(&d);
        assert!(
            t.contains(
                "timer interrupts 300 → 2400 per run, preemptions 20.0 → 160; 5.00ms → 40.0ms of \
                 kernel time per run in them; not counted: reschedule IPIs \
                 (irq_vectors:reschedule_entry is not a tracepoint of this kernel)"
            ),
            "{t}"
        );
        // A run that counted none (recorded before they were): its samples still say.
        let d = discovered_counting(&SPIN, None, |n| cpu_bound(n, 25));
        let t = text(&d);
        assert!(
            t.contains(
                "because the run is longer: interrupts and preemption, not counted in this run"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "(the run's length, neither loops nor more calls): not counted in this run; "
            ),
            "{t}"
        );
    }
}
