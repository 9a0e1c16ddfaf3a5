//! Interruptions of the traced tasks (discover mode): the interrupts they took and the
//! switches that preempted them, counted per phase as kernel entries of their own
//! ([`super::EntryRow`]s named by [`Interruption::name`]). Their number follows the run's
//! length on a CPU, not the calls the command makes.

use serde::{Deserialize, Serialize};

/// One kind of interruption, as counted by its tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interruption {
    /// The local APIC timer: the tick, hrtimers (the sampler's among them).
    TimerInterrupt,
    /// A reschedule IPI: another CPU woke a task here or asked this one to preempt.
    RescheduleIpi,
    /// A function-call IPI (single or many CPUs): TLB shootdowns, other CPUs' requests.
    FunctionCallIpi,
    /// A device interrupt's handler.
    DeviceInterrupt,
    /// A softirq run in the task's context (timers, RCU, scheduler balancing, network).
    Softirq,
    /// A switch away from the task while it could still run (rusage's involuntary switch).
    Preemption,
}

impl Interruption {
    pub const ALL: [Interruption; 6] = [
        Interruption::TimerInterrupt,
        Interruption::RescheduleIpi,
        Interruption::FunctionCallIpi,
        Interruption::DeviceInterrupt,
        Interruption::Softirq,
        Interruption::Preemption,
    ];

    /// Its name as an entry (run.json `entries[].entry`), which no syscall has.
    pub fn name(self) -> &'static str {
        match self {
            Interruption::TimerInterrupt => "timer_interrupt",
            Interruption::RescheduleIpi => "reschedule_ipi",
            Interruption::FunctionCallIpi => "function_call_ipi",
            Interruption::DeviceInterrupt => "device_interrupt",
            Interruption::Softirq => "softirq",
            Interruption::Preemption => "preemption",
        }
    }

    /// The kind an entry's name stands for, when it is one.
    pub fn of_entry(name: &str) -> Option<Interruption> {
        Interruption::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its code in the kernel's entry counts (`tracer_ebpf::ENTRY_*`).
    pub fn code(self) -> u32 {
        use tracer_ebpf::*;
        match self {
            Interruption::TimerInterrupt => ENTRY_TIMER,
            Interruption::RescheduleIpi => ENTRY_RESCHEDULE_IPI,
            Interruption::FunctionCallIpi => ENTRY_FUNCTION_IPI,
            Interruption::DeviceInterrupt => ENTRY_DEVICE_IRQ,
            Interruption::Softirq => ENTRY_SOFTIRQ,
            Interruption::Preemption => ENTRY_PREEMPTION,
        }
    }

    /// The kind counted under entry code `code`, when it is one.
    pub fn of_code(code: u32) -> Option<Interruption> {
        Interruption::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The tracepoints that count it, `category:name`.
    pub fn tracepoints(self) -> &'static [&'static str] {
        match self {
            Interruption::TimerInterrupt => &["irq_vectors:local_timer_entry"],
            Interruption::RescheduleIpi => &["irq_vectors:reschedule_entry"],
            Interruption::FunctionCallIpi => &[
                "irq_vectors:call_function_entry",
                "irq_vectors:call_function_single_entry",
            ],
            Interruption::DeviceInterrupt => &["irq:irq_handler_entry"],
            Interruption::Softirq => &["irq:softirq_entry"],
            Interruption::Preemption => &["sched:sched_switch"],
        }
    }

    /// Plural words for it in a sentence: "timer interrupts".
    pub fn plural(self) -> &'static str {
        match self {
            Interruption::TimerInterrupt => "timer interrupts",
            Interruption::RescheduleIpi => "reschedule IPIs",
            Interruption::FunctionCallIpi => "function-call IPIs",
            Interruption::DeviceInterrupt => "device interrupts",
            Interruption::Softirq => "softirqs",
            Interruption::Preemption => "preemptions",
        }
    }
}

/// Which interruptions a run counted (discover mode, with its syscalls), and which it could
/// not, with why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptionCounting {
    pub counted: Vec<Interruption>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncounted: Vec<Uncounted>,
}

/// An interruption a run could not count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uncounted {
    pub kind: Interruption,
    /// "irq_vectors:reschedule_entry is not a tracepoint of this kernel", or the refusal.
    pub why: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip_and_are_no_syscalls() {
        for k in Interruption::ALL {
            assert_eq!(Interruption::of_entry(k.name()), Some(k));
            assert_eq!(Interruption::of_code(k.code()), Some(k));
            assert!(crate::kernel::syscalls::number(k.name()).is_none(), "{k:?}");
            assert_ne!(k.name(), super::super::ENTRY_INTERRUPT);
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
        }
        assert_eq!(Interruption::of_entry("wait4"), None);
        assert_eq!(Interruption::of_code(tracer_ebpf::ENTRY_PAGE_FAULT), None);
    }
}
