//! Kernel entries (discover mode): the `STACK_ENTRY` counts as rows per phase, and the name
//! of the entry a kernel sample ran under.
use std::collections::BTreeMap;

use tracer_ebpf::{ENTRY_NONE, ENTRY_PAGE_FAULT, ENTRY_SYSCALL, STACK_ENTRY};

use crate::engine::Snapshot;
use crate::kernel::syscalls;
use crate::rundata::{self, EntryRow, Interruption};

/// The name of entry code `code`; for `ENTRY_NONE`, what the sample's kernel frames
/// (root first) show it entered by. Interruption codes are counts only: samples are never
/// filed under them (an interrupt's samples are its `interrupt` pseudo-entry's, or the
/// syscall's it interrupted). A sample's syscall code is the syscall its thread entered last
/// (the kernel keeps no exit): where its frames do not go through the syscall entry, the
/// thread had returned from it (a user page fault, an interrupt from user mode, an exec's
/// new image faulting in), and the frames say what it entered by. Counts (no frames) are
/// the code's.
pub fn entry_name(code: u32, frames: &[String]) -> String {
    if let Some(k) = Interruption::of_code(code) {
        return k.name().to_string();
    }
    if code >= ENTRY_SYSCALL && (frames.is_empty() || in_syscall(frames)) {
        let nr = code - ENTRY_SYSCALL;
        return match syscalls::name(nr) {
            Some(name) => name.to_string(),
            None => format!("syscall_{nr}"),
        };
    }
    if code == ENTRY_PAGE_FAULT || frames.iter().any(|f| is_fault_entry(f)) {
        return rundata::ENTRY_PAGE_FAULT.to_string();
    }
    if frames.iter().any(|f| is_interrupt_entry(f)) {
        rundata::ENTRY_INTERRUPT.to_string()
    } else {
        rundata::ENTRY_KERNEL.to_string()
    }
}

/// Whether a sample's frames (root first) are a syscall's work: in a function the 64-bit
/// syscall entry called, not in the entry itself (its work before the entry tracepoint and
/// after the exit's: a sample there carries the code of the syscall before or of the one
/// ending, and was no syscall's when the tracer had a program at the exit; 65 ms a run of
/// a shell with 3000 jobs on this project's host) and not on the way back to user mode.
fn in_syscall(frames: &[String]) -> bool {
    let Some(entry) = frames.iter().rposition(|f| is_syscall_entry(f)) else {
        return false;
    };
    entry + 1 < frames.len() && !frames.iter().any(|f| is_return_to_user(f))
}

/// The 64-bit syscall entry's frames (`entry_SYSCALL_64_after_hwframe`, `do_syscall_64`),
/// below every syscall's kernel work, and below only a syscall's.
fn is_syscall_entry(frame: &str) -> bool {
    frame == "do_syscall_64" || frame.starts_with("entry_SYSCALL_64")
}

/// The work on the way back to user mode, after the syscall's exit tracepoint: signal
/// delivery (a killed process's whole exit among it), rescheduling, task work. It is no
/// syscall's: the exit tracepoint left it out when the tracer had a program there. Filing
/// it under the syscall moved a shell's killed jobs' exits into clock_nanosleep and lowered
/// the slowdown common to the entries enough, in a 6.1 guest, for execve's teardown of a
/// shell a little larger per job to pass for a loop above the wait walk.
fn is_return_to_user(frame: &str) -> bool {
    matches!(
        frame,
        "syscall_exit_to_user_mode"
            | "syscall_exit_to_user_mode_prepare"
            | "exit_to_user_mode_prepare"
            | "exit_to_user_mode_loop"
            | "syscall_exit_work"
            | "arch_do_signal_or_restart"
            | "arch_do_signal"
            | "do_signal"
            | "get_signal"
    )
}

/// The page-fault handler's entry frames, across kernel versions (`page_fault` before 5.8,
/// `asm_exc_page_fault`/`exc_page_fault` since).
fn is_fault_entry(frame: &str) -> bool {
    matches!(
        frame,
        "asm_exc_page_fault" | "exc_page_fault" | "page_fault" | "do_page_fault"
    )
}

/// Interrupt and other exception entry frames (`asm_sysvec_*`, `asm_common_interrupt`,
/// `apic_timer_interrupt` before 5.8, `asm_exc_*` other than the page fault).
fn is_interrupt_entry(frame: &str) -> bool {
    frame.starts_with("asm_sysvec_")
        || frame.starts_with("asm_exc_")
        || frame.starts_with("asm_common_interrupt")
        || frame == "common_interrupt"
        || frame.ends_with("_interrupt") && !frame.contains("_do_")
        || frame.starts_with("irq_exit")
}

/// The entry counts of a snapshot, one row per (case, N, entry), in that order.
pub fn entry_rows(snap: &Snapshot) -> Vec<EntryRow> {
    let mut rows: BTreeMap<(u32, u64, String), u64> = BTreeMap::new();
    for (k, v) in &snap.stacks {
        if k.kind != STACK_ENTRY || k.agg.target == ENTRY_NONE {
            continue;
        }
        *rows
            .entry((k.agg.case, k.agg.n, entry_name(k.agg.target, &[])))
            .or_default() += v.count;
    }
    rows.into_iter()
        .map(|((case, n, entry), calls)| EntryRow {
            case,
            case_name: workloads::cases::case_name(case),
            n,
            entry,
            calls,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn entries_are_named_by_syscall_fault_interrupt_or_kernel() {
        assert_eq!(entry_name(ENTRY_SYSCALL + 61, &[]), "wait4");
        assert_eq!(entry_name(ENTRY_SYSCALL + 511, &[]), "syscall_511");
        assert_eq!(entry_name(ENTRY_PAGE_FAULT, &[]), "page_fault");
        let fault = frames(&["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault"]);
        assert_eq!(entry_name(ENTRY_NONE, &fault), "page_fault");
        let tick = frames(&[
            "asm_sysvec_apic_timer_interrupt",
            "sysvec_apic_timer_interrupt",
        ]);
        assert_eq!(entry_name(ENTRY_NONE, &tick), "interrupt");
        let first_return = frames(&["ret_from_fork", "schedule_tail", "finish_task_switch"]);
        assert_eq!(entry_name(ENTRY_NONE, &first_return), "kernel");
        // A syscall's samples stay the syscall's, whatever they interrupted inside it ...
        let in_read = frames(&[
            "entry_SYSCALL_64_after_hwframe",
            "do_syscall_64",
            "ksys_read",
            "asm_sysvec_apic_timer_interrupt",
            "sysvec_apic_timer_interrupt",
        ]);
        assert_eq!(entry_name(ENTRY_SYSCALL, &in_read), "read");
        let fault_in_read = frames(&["do_syscall_64", "ksys_read", "asm_exc_page_fault"]);
        assert_eq!(entry_name(ENTRY_SYSCALL, &fault_in_read), "read");
        // ... and a sample after the thread returned from the syscall it entered last is
        // what its frames show.
        assert_eq!(entry_name(ENTRY_SYSCALL, &tick), "interrupt");
        assert_eq!(entry_name(ENTRY_SYSCALL + 59, &fault), "page_fault");
        assert_eq!(entry_name(ENTRY_SYSCALL + 61, &first_return), "kernel");
        // The way back to user mode is no syscall's (it was after the exit tracepoint).
        let signal = frames(&[
            "entry_SYSCALL_64_after_hwframe",
            "do_syscall_64",
            "syscall_exit_to_user_mode",
            "exit_to_user_mode_prepare",
            "arch_do_signal_or_restart",
            "get_signal",
            "do_group_exit",
        ]);
        assert_eq!(entry_name(ENTRY_SYSCALL + 230, &signal), "kernel");
        // The entry's own work, before the entry tracepoint or after the exit's, neither.
        let entry_only = frames(&["entry_SYSCALL_64_after_hwframe", "do_syscall_64"]);
        assert_eq!(entry_name(ENTRY_SYSCALL, &entry_only), "kernel");
        assert_eq!(entry_name(tracer_ebpf::ENTRY_TIMER, &[]), "timer_interrupt");
        assert_eq!(entry_name(tracer_ebpf::ENTRY_PREEMPTION, &[]), "preemption");
    }
}
