//! The run's length, apart from the calls a command makes (`--discover`): interrupts and
//! preemption of the traced tasks, counted per op by kind (`rundata::Interruption`), and the
//! sampled kernel time spent in them. A CPU-bound loop run four times as long makes no more
//! syscalls, but takes four times the timer interrupts, their softirqs and, on a busy
//! machine, preemptions at their return to user mode: its kernel time per run grows with N
//! for a reason that is neither a kernel loop nor more calls.
//!
//! What carries the growth of the kernel time per op ([`KernelGrowth`]): the added kernel
//! time is split between the interruptions (every sample taken in one, whichever entry it
//! was filed under) and each entry's own samples, each part counting what it added from the
//! smallest N to the largest. Entries made more often per op (the more-calls list) carry
//! their part; the interruptions carry theirs when their counts per op grow too. A part of at
//! least [`CARRIES`] of the added time is a reason, and the answer gives the reasons found,
//! never "more calls" when no entry counted more often carries the growth.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::rundata::{EntryRow, Interruption, InterruptionCounting, Uncounted};

use super::entries::{KernelEntry, MIN_CALLS_GROWTH};
use super::growers::MIN_ADDED_SIGMA;
use super::stacks::StackData;

/// A part of the added kernel time per op this large carries the growth: a reason for it.
pub const CARRIES: f64 = 1.0 / 3.0;

/// Interrupts and preemption of the traced tasks over the sizes of one discovery.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunLength {
    /// Whether the run counted interruptions (false for runs recorded before they were:
    /// their time is still in the samples).
    pub counted: bool,
    /// Each kind counted, per op at each size (the kinds the run counted, none left out for
    /// having no count).
    pub counts: Vec<InterruptionCount>,
    /// The kinds the run could not count, with why.
    pub uncounted: Vec<Uncounted>,
    /// Sampled kernel time per op in interrupts and preemption at each size (ns), and the
    /// samples behind it: every kernel sample taken in an interrupt (its handler, its
    /// softirqs, its return to user mode) or in a switch away from a task that could still
    /// run, under whichever entry it was filed.
    pub time_per_op: Vec<f64>,
    pub samples: Vec<u64>,
}

/// One kind of interruption, per op at each size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InterruptionCount {
    pub kind: Interruption,
    pub per_op: Vec<f64>,
}

impl RunLength {
    /// Every kind counted together, per op at each size (None: none counted). Softirqs
    /// mostly run on an interrupt's exit, so the sum is a measure of growth, not of events.
    pub fn total_per_op(&self) -> Option<Vec<f64>> {
        let first = self.counts.first()?;
        Some(
            (0..first.per_op.len())
                .map(|i| self.counts.iter().map(|c| c.per_op[i]).sum())
                .collect(),
        )
    }

    /// Whether the interruptions are counted more often per op at the largest N
    /// ([`MIN_CALLS_GROWTH`] times as at the smallest); None when none were counted.
    pub fn counts_grow(&self) -> Option<bool> {
        let t = self.total_per_op()?;
        let (f, l) = (t.first()?, t.last()?);
        Some(*l >= MIN_CALLS_GROWTH * f && *l > 0.0)
    }

    /// The kernel time per op they add from the smallest N to the largest (ns), and its
    /// standard error from sampling.
    pub fn added(&self, period_ns: u64) -> (f64, f64) {
        let last = self.time_per_op.len() - 1;
        let se = |i: usize| {
            let t = self.time_per_op[i];
            let s = self.samples[i];
            // One sample's worth at least: a size without one still has an error.
            if s == 0 {
                period_ns as f64
            } else {
                t / (s as f64).sqrt()
            }
        };
        (
            self.time_per_op[last] - self.time_per_op[0],
            se(0).hypot(se(last)),
        )
    }
}

/// What carries the growth of the kernel time per op, beside any loop.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelGrowth {
    pub reason: GrowthReason,
    /// The kernel time per op added from the smallest N to the largest (ns): what each
    /// entry's own samples and the interruptions' added, the parts that fell left out.
    pub added_ns: f64,
    /// The entries made more often per op (the more-calls list): their part of it.
    pub more_calls_share: f64,
    /// The interrupts and preemption: their part of it.
    pub run_length_share: f64,
    /// The per-op root cause (the frame whose self time carries most of the added kernel
    /// time) lies in an interrupt or a preemption: the run's length, not a loop.
    pub cause_in_interruptions: bool,
    /// The interruptions' part would carry the growth ([`CARRIES`]) but their sampled rise is
    /// within [`MIN_ADDED_SIGMA`] standard errors: a longer run the samples do not show (awk
    /// beside a busy core, 2.2 -> 7.4 ms of kernel time per run from 710 samples, 89% of it
    /// in interruptions).
    pub run_length_within_noise: bool,
}

/// Why the kernel time per op grows where no loop is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowthReason {
    /// Entries counted more often per op carry it: the command makes more calls.
    MoreCalls,
    /// Interrupts and preemption, counted more often per op, carry it: the run is longer.
    RunLength,
    /// Each carries a part of it.
    MoreCallsAndRunLength,
    /// Interrupts and preemption carry it, but no more of them per op: each took longer (a
    /// machine busier at the larger sizes, whose interrupts wait for a CPU).
    DearerInterruptions,
    /// Neither does: the calls made as often got dearer (less than a loop's rise), or the
    /// parts are too small to say.
    Neither,
}

/// Whether a sample's frames (root first) are interrupt or preemption work: an interrupt's
/// entry (`asm_sysvec_*`, `asm_common_interrupt`; `*_interrupt` before 5.8), its softirqs,
/// or a switch away from a task that could still run (a preemption point in the kernel, or
/// `schedule()` on the way back to user mode, which is called only when a tick or an IPI
/// found another task due). Exceptions (`asm_exc_*`) are the command's own: a uprobe's int3,
/// a page fault.
pub fn is_interruption(frames: &[String]) -> bool {
    frames.iter().enumerate().any(|(i, f)| {
        is_interrupt_frame(f)
            || is_preemption_point(f)
            || (f == "schedule" && i > 0 && returns_to_user(&frames[i - 1]))
    })
}

fn is_interrupt_frame(f: &str) -> bool {
    const EXACT: [&str; 6] = [
        "common_interrupt",
        "handle_softirqs",
        "__do_softirq",
        "do_softirq",
        "irq_exit_rcu",
        "__irq_exit_rcu",
    ];
    f.starts_with("asm_sysvec_")
        || f.starts_with("sysvec_")
        || f.starts_with("asm_common_interrupt")
        || f == "irq_exit"
        || EXACT.contains(&f)
        || (f.ends_with("_interrupt") && !f.starts_with("asm_exc_") && !f.contains("_do_"))
}

fn is_preemption_point(f: &str) -> bool {
    f.starts_with("preempt_schedule") || f == "__cond_resched" || f == "_cond_resched"
}

/// The kernel's way back to user mode, from a syscall or an interrupt, across versions.
fn returns_to_user(f: &str) -> bool {
    f.contains("exit_to_user") || f.contains("exit_to_usermode") || f.starts_with("irqentry_exit")
}

/// The interruptions of one case: their counts per op (those the run counted, `counting`)
/// and their sampled time.
pub(super) fn measure(
    ns: &[u64],
    ops: &[f64],
    period_ns: u64,
    files: &[&StackData],
    rows: &[&EntryRow],
    counting: Option<&InterruptionCounting>,
) -> RunLength {
    let counts = counting
        .map_or(&[][..], |c| c.counted.as_slice())
        .iter()
        .map(|&kind| InterruptionCount {
            kind,
            per_op: ns
                .iter()
                .zip(ops)
                .map(|(&n, o)| {
                    let c: u64 = rows
                        .iter()
                        .filter(|r| r.n == n && r.entry == kind.name())
                        .map(|r| r.calls)
                        .sum();
                    c as f64 / o
                })
                .collect(),
        })
        .collect();
    let (time_per_op, samples) = ns
        .iter()
        .zip(ops)
        .map(|(&n, o)| {
            let (w, s) = files
                .iter()
                .filter(|f| f.file.n == n)
                .flat_map(|f| f.folded.iter())
                .filter(|(frames, _)| is_interruption(frames))
                .fold((0u64, 0u64), |(w, s), (_, x)| {
                    (w + x, s + x.checked_div(period_ns).unwrap_or(0).max(1))
                });
            (w as f64 / o, s)
        })
        .unzip();
    RunLength {
        counted: counting.is_some(),
        counts,
        uncounted: counting.map(|c| c.uncounted.clone()).unwrap_or_default(),
        time_per_op,
        samples,
    }
}

/// What carries the added kernel time per op: each entry's own samples (those not in an
/// interruption) and the interruptions, over the sizes `ns` with `ops` each. None with fewer
/// than two sizes, or when nothing was added.
pub(super) fn growth(
    ns: &[u64],
    ops: &[f64],
    period_ns: u64,
    files: &[&StackData],
    more_calls: &[KernelEntry],
    run_length: Option<&RunLength>,
) -> Option<KernelGrowth> {
    let last = ns.len().checked_sub(1).filter(|&l| l > 0)?;
    let (n0, n1) = (ns[0], ns[last]);
    // Each entry's own time per op at the two ends, the interruptions' taken out.
    let own = |entry: &str, n: u64, o: f64| {
        files
            .iter()
            .filter(|f| f.file.n == n && f.file.target == entry)
            .flat_map(|f| f.folded.iter())
            .filter(|(frames, _)| !is_interruption(frames))
            .map(|(_, w)| w)
            .sum::<u64>() as f64
            / o
    };
    let entries: BTreeSet<&str> = files.iter().map(|f| f.file.target.as_str()).collect();
    let rise = |entry: &str| (own(entry, n1, ops[last]) - own(entry, n0, ops[0])).max(0.0);
    let entries_added: f64 = entries.iter().map(|e| rise(e)).sum();
    let more: f64 = more_calls.iter().map(|m| rise(&m.entry)).sum();
    let (r_added, r_se) = run_length.map_or((0.0, 0.0), |r| r.added(period_ns));
    let added = entries_added + r_added.max(0.0);
    if added <= 0.0 {
        return None;
    }
    // A sum over no entry is -0.0 (f64's `sum` starts there): none is 0 in summary.json.
    let share = |part: f64| if part > 0.0 { part / added } else { 0.0 };
    let (more_calls_share, run_length_share) = (share(more), share(r_added));
    // The interruptions carry it when their rise is beyond the sampling noise; it is the
    // run's length when there are more of them per op (uncounted, their time alone says).
    let significant = r_added >= MIN_ADDED_SIGMA * r_se;
    let interruptions_carry = run_length_share >= CARRIES && significant;
    let more_of_them = run_length.and_then(RunLength::counts_grow) != Some(false);
    let reason = match (
        more_calls_share >= CARRIES,
        interruptions_carry,
        more_of_them,
    ) {
        (true, true, true) => GrowthReason::MoreCallsAndRunLength,
        (true, _, _) => GrowthReason::MoreCalls,
        (false, true, true) => GrowthReason::RunLength,
        (false, true, false) => GrowthReason::DearerInterruptions,
        (false, false, _) => GrowthReason::Neither,
    };
    Some(KernelGrowth {
        reason,
        added_ns: added,
        more_calls_share,
        run_length_share,
        cause_in_interruptions: false,
        run_length_within_noise: run_length_share >= CARRIES && !significant,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::discover::Discovery;
    use crate::analysis::discover::tests::{PERIOD, data};
    use crate::analysis::entries::tests::{
        discovered_counting, entry_data, row, shell_without_walk,
    };

    fn frames(s: &str) -> Vec<String> {
        s.split(';').map(str::to_string).collect()
    }

    /// The sizes of the CPU-bound command: N times the work in user mode.
    pub(crate) const SPIN: [u64; 4] = [1, 2, 4, 8];

    /// Every kind counted.
    pub(crate) fn all_counted() -> Option<InterruptionCounting> {
        Some(InterruptionCounting {
            counted: Interruption::ALL.to_vec(),
            uncounted: Vec::new(),
        })
    }

    /// Interruption rows at size `n`: `(kind, count)`.
    fn interruption_rows(n: u64, counts: &[(Interruption, u64)]) -> Vec<EntryRow> {
        counts.iter().map(|&(k, c)| row(k.name(), n, c)).collect()
    }

    /// A CPU-bound command (awk's loop, a user-space spin) at size `n`: N times the work in
    /// user mode, the same syscalls and page faults at every size, and the interrupts a
    /// longer run takes: 300 ticks and 20 preemptions per unit of run, the samples of their
    /// handlers, softirqs and return to user mode `interrupt_periods` per unit.
    pub(crate) fn cpu_bound(n: u64, interrupt_periods: u64) -> (Vec<StackData>, Vec<EntryRow>) {
        let exec = "entry_SYSCALL_64;do_syscall_64;__x64_sys_execve;load_elf_binary";
        let exec_text = format!("{exec} {}\n", 30 * PERIOD);
        let fault_text = format!(
            "asm_exc_page_fault;exc_page_fault;handle_mm_fault {}\n",
            40 * PERIOD
        );
        let tick = "asm_sysvec_apic_timer_interrupt";
        let irq_text = format!(
            "{tick};irqentry_exit_to_user_mode;schedule;__schedule;finish_task_switch.isra.0 \
             {}\n{tick};sysvec_apic_timer_interrupt;__irq_exit_rcu;handle_softirqs;\
             sched_balance_softirq {}\n",
            interrupt_periods * 4 / 5 * n * PERIOD,
            interrupt_periods / 5 * n * PERIOD
        );
        let profile = format!(
            "{exec_text}{fault_text}{irq_text}[user] {}\n",
            2000 * n * PERIOD
        );
        let stacks = vec![
            data(n, &profile),
            entry_data("execve", n, &exec_text),
            entry_data("page_fault", n, &fault_text),
            entry_data(crate::rundata::ENTRY_INTERRUPT, n, &irq_text),
        ];
        let mut rows = vec![row("execve", n, 9), row("page_fault", n, 375)];
        rows.extend(interruption_rows(
            n,
            &[
                (Interruption::TimerInterrupt, 300 * n),
                (Interruption::Preemption, 20 * n),
                (Interruption::Softirq, 18 * n),
                (Interruption::RescheduleIpi, 2 * n),
            ],
        ));
        (stacks, rows)
    }

    pub(crate) fn spin() -> Discovery {
        discovered_counting(&SPIN, all_counted(), |n| cpu_bound(n, 25))
    }

    /// The CPU-bound command, which also forks 5·N children (3 periods of clone each): its
    /// more calls carry a part of the growth, its longer run the rest.
    pub(crate) fn spin_and_forks() -> Discovery {
        discovered_counting(&SPIN, all_counted(), |n| {
            let (mut s, mut rows) = cpu_bound(n, 25);
            let clone = format!(
                "entry_SYSCALL_64;do_syscall_64;__do_sys_clone;copy_process {}\n",
                15 * n * PERIOD
            );
            s[0].folded
                .merge(&crate::rundata::Folded::parse(&clone).unwrap());
            s.push(entry_data("clone", n, &clone));
            rows.push(row("clone", n, 5 * n));
            (s, rows)
        })
    }

    /// The CPU-bound command with the same interrupts per run at every size, their samples
    /// growing (a machine busier at the larger sizes).
    pub(crate) fn dearer_interruptions() -> Discovery {
        discovered_counting(&SPIN, all_counted(), |n| {
            let (s, mut rows) = cpu_bound(n, 25);
            for r in &mut rows {
                if Interruption::of_entry(&r.entry).is_some() {
                    r.calls /= n;
                }
            }
            (s, rows)
        })
    }

    fn reason(d: &Discovery) -> GrowthReason {
        d.entries
            .growth
            .as_ref()
            .unwrap_or_else(|| panic!("a growth: {:#?}", d.entries))
            .reason
    }

    #[test]
    fn interrupts_that_grow_with_the_run_and_no_more_calls_are_the_runs_length() {
        let d = spin();
        assert!(
            !d.nothing_grows(),
            "the kernel time per run grows: {:?}",
            d.ranked
        );
        let e = &d.entries;
        assert!(e.loops.is_empty(), "{:#?}", e.loops);
        assert!(e.more_calls.is_empty(), "{:#?}", e.more_calls);
        assert_eq!(reason(&d), GrowthReason::RunLength);
        let g = e.growth.as_ref().unwrap();
        assert!(
            g.run_length_share > 0.95 && g.more_calls_share == 0.0,
            "{g:?}"
        );
        assert!(g.cause_in_interruptions, "{:?}", d.cause);
        let rl = e.run_length.as_ref().expect("counted");
        let timer = rl
            .counts
            .iter()
            .find(|c| c.kind == Interruption::TimerInterrupt)
            .unwrap();
        assert_eq!(timer.per_op, [300.0, 600.0, 1200.0, 2400.0]);
        assert_eq!(rl.counts_grow(), Some(true));
        // Every interrupt sample, under the `interrupt` entry: 25 periods per unit of run.
        assert_eq!(rl.samples, [25, 50, 100, 200]);
    }

    #[test]
    fn entries_counted_more_often_that_carry_the_growth_are_more_calls() {
        // A shell whose wait4 does not walk: N more forks, execs, waits and page faults per
        // run. Its run is longer too, but its interrupts hold next to none of the growth.
        let d = discovered_counting(&[10, 100, 1000, 3000], all_counted(), |n| {
            let (mut s, mut rows) = shell_without_walk(n);
            let tick = format!(
                "asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt {}\n",
                (10 + n / 100) * PERIOD
            );
            s.push(entry_data(crate::rundata::ENTRY_INTERRUPT, n, &tick));
            rows.extend(interruption_rows(
                n,
                &[(Interruption::TimerInterrupt, 100 + n / 10)],
            ));
            (s, rows)
        });
        let e = &d.entries;
        assert!(e.loops.is_empty(), "{:#?}", e.loops);
        assert_eq!(reason(&d), GrowthReason::MoreCalls);
        let g = e.growth.as_ref().unwrap();
        assert!(g.more_calls_share > 0.9, "{g:?}");
        let more: Vec<&str> = e.more_calls.iter().map(|m| m.entry.as_str()).collect();
        assert!(
            more.contains(&"clone") && more.contains(&"page_fault"),
            "{more:?}"
        );
        // Counted, and never an entry of either list.
        assert!(e.run_length.is_some());
        assert!(!more.contains(&"timer_interrupt"), "{more:?}");
    }

    #[test]
    fn more_calls_and_a_longer_run_can_carry_the_growth_together() {
        let d = spin_and_forks();
        let e = &d.entries;
        assert!(e.loops.is_empty(), "{:#?}", e.loops);
        let more: Vec<&str> = e.more_calls.iter().map(|m| m.entry.as_str()).collect();
        assert_eq!(more, ["clone"], "{:#?}", e.more_calls);
        assert_eq!(reason(&d), GrowthReason::MoreCallsAndRunLength);
        let g = e.growth.as_ref().unwrap();
        // 105 periods of clone added per run against 175 of interrupts.
        assert!((g.more_calls_share - 105.0 / 280.0).abs() < 0.01, "{g:?}");
        assert!((g.run_length_share - 175.0 / 280.0).abs() < 0.01, "{g:?}");
    }

    #[test]
    fn interrupts_no_more_frequent_but_dearer_are_neither_a_loop_nor_a_longer_run() {
        // The same interrupts per run at every size, their samples growing (a machine busier
        // at the larger sizes): no loop names them, and the run is no longer.
        let d = dearer_interruptions();
        let e = &d.entries;
        assert!(e.loops.is_empty() && e.undecided.is_empty(), "{e:#?}");
        assert!(e.more_calls.is_empty(), "{:#?}", e.more_calls);
        assert_eq!(e.run_length.as_ref().unwrap().counts_grow(), Some(false));
        assert_eq!(reason(&d), GrowthReason::DearerInterruptions);
    }

    #[test]
    fn a_run_that_counted_no_interruption_has_no_run_length_counts() {
        let d = discovered_counting(&SPIN, None, |n| {
            let (s, mut rows) = cpu_bound(n, 25);
            rows.retain(|r| Interruption::of_entry(&r.entry).is_none());
            (s, rows)
        });
        let rl = d.entries.run_length.as_ref().unwrap();
        assert!(!rl.counted && rl.counts.is_empty(), "{rl:?}");
        assert_eq!(rl.counts_grow(), None);
        // The samples alone still tell where the added time is: interrupts, not more calls.
        assert_eq!(reason(&d), GrowthReason::RunLength);
        assert!(d.entries.more_calls.is_empty());
    }

    #[test]
    fn interrupts_and_preemption_are_told_from_the_commands_own_work() {
        for s in [
            "asm_sysvec_apic_timer_interrupt;irqentry_exit_to_user_mode;schedule;__schedule",
            "asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;__irq_exit_rcu;\
             handle_softirqs;run_rebalance_domains",
            "entry_SYSCALL_64;do_syscall_64;syscall_exit_to_user_mode;schedule;__schedule",
            "entry_SYSCALL_64;do_syscall_64;ksys_read;__cond_resched;__schedule",
            "apic_timer_interrupt;smp_apic_timer_interrupt;hrtimer_interrupt",
            "asm_common_interrupt;common_interrupt;handle_edge_irq",
        ] {
            assert!(is_interruption(&frames(s)), "{s}");
        }
        for s in [
            "asm_exc_page_fault;exc_page_fault;handle_mm_fault",
            "asm_exc_int3;exc_int3;handle_swbp",
            // A syscall that blocks: a voluntary switch, the call's own.
            "entry_SYSCALL_64;do_syscall_64;kernel_wait4;do_wait;schedule;__schedule",
            "ret_from_fork;schedule_tail;finish_task_switch",
        ] {
            assert!(!is_interruption(&frames(s)), "{s}");
        }
    }
}
