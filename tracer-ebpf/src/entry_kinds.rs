//! Discover mode's kernel entries as the probes and userspace share them: the entry codes,
//! the open syscall of a thread, each CPU's cache of syscall counts, and where a task blocked.

use crate::AggKey;

/// Kernel entry codes, the target of `STACK_ENTRY` keys and of `STACK_PROFILE` samples (the
/// entry a sample ran under). `ENTRY_NONE`: not inside a syscall (a sample in user mode, or
/// kernel work entered otherwise: a fault, an interrupt, a new task's first return).
pub const ENTRY_NONE: u32 = 0;
/// A page fault taken in user mode (`exceptions:page_fault_user`).
pub const ENTRY_PAGE_FAULT: u32 = 1;
/// Interruptions of a traced task, counted under its phase (discover mode): the kernel work
/// a run takes for its length rather than for the calls it makes. A local APIC timer
/// interrupt (`irq_vectors:local_timer_entry`; the tick, hrtimers, the sampler's own).
pub const ENTRY_TIMER: u32 = 2;
/// A reschedule IPI (`irq_vectors:reschedule_entry`).
pub const ENTRY_RESCHEDULE_IPI: u32 = 3;
/// A function-call IPI (`irq_vectors:call_function_entry`, `call_function_single_entry`).
pub const ENTRY_FUNCTION_IPI: u32 = 4;
/// A device interrupt's handler (`irq:irq_handler_entry`).
pub const ENTRY_DEVICE_IRQ: u32 = 5;
/// A softirq run in the task's context (`irq:softirq_entry`), mostly on an interrupt's exit.
pub const ENTRY_SOFTIRQ: u32 = 6;
/// A switch away from the task while it could still run (`sched_switch` with the preempt
/// flag or a running prev state): the involuntary context switches of rusage.
pub const ENTRY_PREEMPTION: u32 = 7;
/// Syscall `nr` is `ENTRY_SYSCALL + nr` (x86_64's numbers, below `MAX_SYSCALL_NR`).
pub const ENTRY_SYSCALL: u32 = 0x100;

/// The syscall a traced thread entered last (discover mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryNow {
    pub nr: u32,
    pub _pad: u32,
}

/// Slots of each CPU's cache of syscall counts (`ENTRY_CACHE`, discover mode), by syscall
/// number modulo their count.
pub const ENTRY_CACHE_SLOTS: u32 = 64;

/// Calls of one kernel entry in one phase counted on one CPU and not yet added to
/// `ENTRY_COUNTS` (count 0: an empty slot). Userspace adds every CPU's slots to the map's
/// counts when it reads them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryCache {
    pub key: AggKey,
    pub count: u64,
}

/// Where a traced task blocked, kept from switch-out to switch-in (discover mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffStart {
    pub since_ns: u64,
    pub n: u64,
    pub case: u32,
    pub kstack: i32,
}
