//! The analysis warnings in words: one line per [`Warning`].

use serde::{Serialize, Serializer};

use crate::analysis::warnings::{StackLoss, Warning};

/// One warning as the report, the terminal and `summary.json` give it.
pub fn text(w: &Warning) -> String {
    match w {
        Warning::SweepUnreadable { path } => format!("{}: unreadable, ignored", path.display()),
        Warning::PartialSweep { reason } => {
            format!(
                "partial sweep ({})",
                reason.as_deref().unwrap_or("no reason given")
            )
        }
        Warning::CommandFailed { run, n, exit } => format!(
            "{run}: the command failed at N={n} ({}): that N is left out",
            match exit {
                Some(c) if *c > 128 => format!("killed by signal {}", c - 128),
                Some(c) => format!("exit {c}"),
                None => "it never ended".into(),
            }
        ),
        Warning::UnreadableResults { run, count } => {
            format!("{run}: {count} workload result(s) could not be read")
        }
        Warning::PartialRun { run, reason } => format!(
            "{run}: partial run ({})",
            reason.as_deref().unwrap_or("no reason given")
        ),
        Warning::Interrupted { run } => format!("{run}: the workload was interrupted"),
        Warning::LossCounter {
            run,
            name,
            value,
            stacks,
            meaning,
        } => format!(
            "{run}: counter {name} = {value}{} ({meaning})",
            stacks.as_ref().map(stack_loss).unwrap_or_default()
        ),
        Warning::NeverFired {
            run,
            target,
            plan,
            attach_points,
        } => format!(
            "{run}: {target} was attached ({plan} at {}) but saw 0 calls while the command ran: \
             inlined at its hot call sites, or not on this workload's path? \
             (--discover shows the functions the time goes through)",
            attach_points.join(", ")
        ),
        Warning::SampleRateLowered {
            run,
            from_hz,
            to_hz,
            freq_hz,
        } => format!(
            "{run}: the kernel lowered its perf sample-rate limit from {from_hz} to {to_hz} Hz \
             during the run, below the {freq_hz} Hz sampled at (its perf interrupts took more \
             than kernel.perf_cpu_time_max_percent of the CPU): what ran later was sampled \
             less, so sampled times per op read low at the sizes run late. Sample at --freq \
             {to_hz} or less, or lift the check (sysctl kernel.perf_cpu_time_max_percent=0), \
             and run again"
        ),
        Warning::NotTraced {
            run,
            target,
            rejected,
        } => {
            let why: Vec<String> = rejected
                .iter()
                .map(|(plan, reason)| format!("{plan}: {reason}"))
                .collect();
            format!("{run}: {target} was not traced ({})", why.join("; "))
        }
    }
}

/// " of T stacks taken (caller c, off-CPU o, sampled s)": the share lost, and which kind of
/// stack it was; then how many of them found the stack-aggregate map full, when any did.
fn stack_loss(l: &StackLoss) -> String {
    let full = match l.aggregates_full {
        0 => String::new(),
        f => format!("; {f} found the stack-aggregate map full"),
    };
    format!(
        " of {} stacks taken (caller {}, off-CPU {}, sampled {}{full})",
        l.taken, l.caller, l.offcpu, l.sampled
    )
}

/// Every warning of `ws` in words.
pub fn texts(ws: &[Warning]) -> Vec<String> {
    ws.iter().map(text).collect()
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        text(self).serialize(s)
    }
}
