//! Discover mode's interruption counts (`interruptions` in the eBPF object): the interrupt
//! tracepoints as raw tracepoints, and preemptions from the scheduler's `sched_switch`. Each
//! kind the kernel lacks or refuses is left out with a note saying which tracepoint and why,
//! and the rest are counted.
use tracer_ebpf::{FLAG_COUNT_PREEMPTION, NO_OFFSET};

use super::Engine;
use crate::kernel::tracefs;
use crate::rundata::{Interruption, InterruptionCounting, Uncounted};

/// The program of each interrupt tracepoint, `(program, category, tracepoint)`.
fn programs(kind: Interruption) -> &'static [(&'static str, &'static str, &'static str)] {
    match kind {
        Interruption::TimerInterrupt => &[("ent_timer", "irq_vectors", "local_timer_entry")],
        Interruption::RescheduleIpi => &[("ent_resched", "irq_vectors", "reschedule_entry")],
        Interruption::FunctionCallIpi => &[
            ("ent_callfn", "irq_vectors", "call_function_entry"),
            ("ent_callfn1", "irq_vectors", "call_function_single_entry"),
        ],
        Interruption::DeviceInterrupt => &[("ent_irq", "irq", "irq_handler_entry")],
        Interruption::Softirq => &[("ent_softirq", "irq", "softirq_entry")],
        Interruption::Preemption => &[],
    }
}

impl Engine {
    /// Attach what counts each interruption (after the syscalls' programs, which the counts
    /// are compared with). A kind is counted whole or not at all.
    pub(super) fn attach_interruptions(&mut self) -> InterruptionCounting {
        let mut out = InterruptionCounting::default();
        for kind in Interruption::ALL {
            let done = match kind {
                Interruption::Preemption => self.count_preemptions(),
                _ => self.attach_interruption(kind),
            };
            match done {
                Ok(()) => out.counted.push(kind),
                Err(why) => out.uncounted.push(Uncounted { kind, why }),
            }
        }
        out
    }

    /// The programs of interrupt kind `kind`, attached; Err(why not), with none left loaded.
    fn attach_interruption(&mut self, kind: Interruption) -> Result<(), String> {
        let progs = programs(kind);
        let undo = |e: &mut Engine| {
            for (prog, _, _) in progs {
                e.unload_prog(prog);
            }
        };
        for &(prog, category, tp) in progs {
            if !tracefs::event_exists(&self.tracefs, category, tp) {
                undo(self);
                return Err(format!(
                    "{category}:{tp} is not a tracepoint of this kernel"
                ));
            }
            if let Err(e) = self.attach_raw_to(prog, tp) {
                undo(self);
                return Err(format!("{category}:{tp} refused: {e}"));
            }
        }
        Ok(())
    }

    /// Preemptions are counted by the scheduler's `sched_switch` program, which must tell a
    /// task that could still run from one that blocked: from the task's state (raw program)
    /// or the record's `prev_state` (perf program).
    fn count_preemptions(&mut self) -> Result<(), String> {
        if !self.options.scheduler {
            return Err("the scheduler tracepoints are not attached".into());
        }
        let readable = if self.scheduler_raw {
            self.config.task_state_off != NO_OFFSET
        } else {
            self.config.switch_prev_state_off != NO_OFFSET
        };
        if !readable {
            return Err(if self.scheduler_raw {
                "the kernel's BTF gives no task_struct state to tell a preempted task by"
            } else {
                "sched:sched_switch has no prev_state field"
            }
            .into());
        }
        self.config.flags |= FLAG_COUNT_PREEMPTION;
        self.write_config().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every interrupt kind has programs of the object, and only preemption is counted
    /// elsewhere; program names fit the kernel's 15 characters.
    #[test]
    fn each_interrupt_kind_names_programs_of_the_object() {
        let names = super::super::program_names();
        for kind in Interruption::ALL {
            let progs = programs(kind);
            assert_eq!(
                progs.is_empty(),
                kind == Interruption::Preemption,
                "{kind:?}"
            );
            for (prog, category, tp) in progs {
                assert!(names.iter().any(|n| n == prog), "{prog} missing");
                assert!(
                    kind.tracepoints()
                        .contains(&format!("{category}:{tp}").as_str()),
                    "{kind:?}: {category}:{tp}"
                );
            }
        }
    }
}
