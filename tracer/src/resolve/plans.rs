//! Attaching one plan's probes: every present function of a function plan, every call site
//! of a call-site plan, every syscall of a bracket plan; all or, for call sites, as many as
//! take the probes.

use super::{ActivePlan, Learned, PlanOutcome};
use crate::engine::{AttachFailure, Engine, EngineError, TpRole};
use crate::kernel::kallsyms::Kallsyms;
use crate::plan::{FnMech, Plan};

/// Attaches `mech` to each of `symbols` present in kallsyms (a kprobe to a compiler clone
/// of one that is not), all or none; the first refusal is learned for the mechanism.
pub(super) fn try_functions(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    target: u32,
    plan: &'static Plan,
    mech: FnMech,
    symbols: &[&str],
    learned: &mut Learned,
) -> Result<PlanOutcome, EngineError> {
    // Presence in kallsyms first: a name absent there has no out-of-line copy to probe.
    let mut present: Vec<String> = Vec::new();
    let mut absent: Vec<&str> = Vec::new();
    for &s in symbols {
        if ksyms.contains(s) {
            present.push(s.to_string());
        } else if mech == FnMech::Kprobe {
            // A compiler clone (.isra/.constprop) is still an entry point for kprobes.
            match ksyms.clones(s).into_iter().next() {
                Some(c) => present.push(c),
                None => absent.push(s),
            }
        } else {
            absent.push(s);
        }
    }
    if present.is_empty() {
        return Ok(PlanOutcome::Refused(format!(
            "{} not in kallsyms: inlined (or not built) on this kernel",
            symbols.join(", ")
        )));
    }
    let mut slots = Vec::new();
    for s in &present {
        match engine.attach_function(target, mech, s)? {
            Ok(slot) => slots.push(slot),
            Err(f) => {
                for slot in &slots {
                    engine.release(slot);
                }
                if let AttachFailure::Refused(m) = &f {
                    match mech {
                        FnMech::Fentry => learned.fentry_refused = Some(m.clone()),
                        FnMech::Kprobe => learned.kprobe_refused = Some(m.clone()),
                    }
                }
                return Ok(PlanOutcome::Refused(f.message().to_string()));
            }
        }
    }
    let mut points = present;
    if !absent.is_empty() {
        points.push(format!("(absent: {})", absent.join(", ")));
    }
    Ok(PlanOutcome::Attached(ActivePlan {
        plan,
        slots,
        attach_points: points,
    }))
}

/// Attaches a call-site pair at each direct call of `callee` in the code of `callers`. A
/// candidate the kernel refuses is not an instruction (an `e8` byte inside another): the
/// plan is refused only when no candidate takes the probes.
pub(super) fn try_call_sites(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    target: u32,
    plan: &'static Plan,
    callers: &[&str],
    callee: &str,
) -> Result<PlanOutcome, EngineError> {
    use crate::kernel::callsites::{CALL_LEN, find};
    let mut slots = Vec::new();
    let mut points = Vec::new();
    let mut why = Vec::new();
    for caller in callers {
        let offsets = match find(ksyms, caller, callee) {
            Ok(o) => o,
            Err(e) => {
                why.push(e.to_string());
                continue;
            }
        };
        for off in offsets {
            match engine.attach_call_site(target, caller, off, CALL_LEN) {
                Ok(Ok(slot)) => {
                    slots.push(slot);
                    points.push(format!("{caller}+{off:#x}"));
                }
                Ok(Err(f)) => why.push(f.message().to_string()),
                // Out of slots (other targets took them, or more calls than there are):
                // some calls would go uncounted, so none is.
                Err(e @ EngineError::NoSlot { .. }) => {
                    for slot in &slots {
                        engine.release(slot);
                    }
                    return Ok(PlanOutcome::Refused(format!(
                        "{e}: {callee} has more calls in {} than call-site slots free",
                        callers.join(", ")
                    )));
                }
                Err(e) => return Err(e),
            }
        }
    }
    if slots.is_empty() {
        let found = if why.is_empty() {
            format!("no direct call of {callee} in {}", callers.join(", "))
        } else {
            why.join("; ")
        };
        return Ok(PlanOutcome::Refused(found));
    }
    Ok(PlanOutcome::Attached(ActivePlan {
        plan,
        slots,
        attach_points: points,
    }))
}

/// Attaches the enter and exit tracepoints of each of `syscalls` this kernel has (with the
/// fd filter's offset when `fd_prefix` asks for it), all or none.
pub(super) fn try_syscalls(
    engine: &mut Engine,
    target: u32,
    plan: &'static Plan,
    syscalls: &[&str],
    fd_prefix: Option<&str>,
) -> Result<PlanOutcome, EngineError> {
    let root = engine.tracefs_root().to_path_buf();
    let mut slots = Vec::new();
    let mut points = Vec::new();
    if let Some(prefix) = fd_prefix
        && let Err(f) = engine.enable_fd_tracking(prefix)?
    {
        return Ok(PlanOutcome::Refused(f.message().to_string()));
    }
    for sc in syscalls {
        let enter = format!("sys_enter_{sc}");
        let exit = format!("sys_exit_{sc}");
        if !crate::kernel::tracefs::event_exists(&root, "syscalls", &enter)
            || !crate::kernel::tracefs::event_exists(&root, "syscalls", &exit)
        {
            continue;
        }
        let fd_off = match fd_prefix {
            Some(_) => {
                let fmt = crate::kernel::tracefs::EventFormat::load(&root, "syscalls", &enter)
                    .map_err(EngineError::Tracefs)?;
                Some(fmt.offset("fd").map_err(EngineError::Tracefs)?)
            }
            None => None,
        };
        for (role, name, off) in [(TpRole::Exit, &exit, None), (TpRole::Enter, &enter, fd_off)] {
            match engine.attach_tracepoint(target, role, "syscalls", name, off)? {
                Ok(slot) => {
                    slots.push(slot);
                    points.push(format!("syscalls:{name}"));
                }
                Err(f) => {
                    for s in &slots {
                        engine.release(s);
                    }
                    return Ok(PlanOutcome::Refused(f.message().to_string()));
                }
            }
        }
    }
    if slots.is_empty() {
        return Ok(PlanOutcome::Refused(format!(
            "no syscalls:sys_enter/exit tracepoints for {} (CONFIG_FTRACE_SYSCALLS off?)",
            syscalls.join(", ")
        )));
    }
    Ok(PlanOutcome::Attached(ActivePlan {
        plan,
        slots,
        attach_points: points,
    }))
}
