//! Resolution: walk each target's plan list, attach the first plan this kernel allows, verify
//! it by calibration when asked, and keep the reason every better plan was rejected.
use std::collections::BTreeMap;

use crate::calibrate::{self, CalibrateError};
use crate::engine::{Engine, EngineError, Slot, TpRole};
use crate::guard::{self, Guard, Heat};
use crate::kernel::{self, kallsyms::Kallsyms};
use crate::plan::{Calibration, FnMech, Method, Plan, Target};
use crate::rundata::{PlanUsed, ProbeCost, Rejection, TargetReport, Verification};

mod plans;
use plans::{try_call_sites, try_functions, try_syscalls};

#[derive(Clone, Debug, Default)]
pub struct ResolveOptions {
    /// Run each accepted plan's calibration and move on when the count is wrong.
    pub verify: bool,
    /// Force a plan by name for a target (`--plan dup_mmap=kprobe`).
    pub forced: BTreeMap<String, String>,
    /// Trace functions named on the command line even when their call rate makes the probe
    /// expensive (see `guard.rs`).
    pub force_hot: bool,
    /// Leave the targets that attach nowhere and the resolver's notes unreported: the caller
    /// says in one line what their absence means (a loop-count pass).
    pub quiet: bool,
}

/// A plan attached for a target.
#[derive(Clone, Debug)]
pub struct ActivePlan {
    pub plan: &'static Plan,
    pub slots: Vec<Slot>,
    pub attach_points: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Resolved {
    pub target: &'static Target,
    pub index: u32,
    pub active: Option<ActivePlan>,
    pub rejected: Vec<Rejection>,
    pub verification: Option<Verification>,
    /// The call rate measured for a function named on the command line.
    pub heat: Option<Heat>,
    /// Refused because it is called too often (without `--force-hot`).
    pub hot_refused: bool,
    /// Some plan was refused by the dangerous-function checks (not by this kernel's
    /// abilities): another kernel or a VM would refuse it too.
    pub guarded: bool,
    /// What could not be checked, or was accepted only because it was forced.
    pub notes: Vec<String>,
    /// The active plan's own cost per call (`probecost::measure_all`, after resolution).
    pub probe_cost: Option<ProbeCost>,
}

impl Resolved {
    pub fn report(&self) -> TargetReport {
        TargetReport {
            name: self.target.name.to_string(),
            plan: self.active.as_ref().map(|a| PlanUsed {
                plan: a.plan.name.to_string(),
                mechanism: mechanism_label(&a.plan.method).to_string(),
                attach_points: a.attach_points.clone(),
                timed: !matches!(a.plan.method, Method::Count { .. }),
                note: a.plan.note.to_string(),
            }),
            rejected: self.rejected.clone(),
            verification: self.verification.clone(),
            probe_cost: self.probe_cost.clone(),
        }
    }
}

pub fn mechanism_label(m: &Method) -> &'static str {
    match m {
        Method::Functions { mech, .. } => mech.label(),
        Method::Syscalls { .. } => "tracepoint (syscall enter/exit)",
        Method::Count { .. } => "tracepoint (count only)",
        Method::CallSites { .. } => crate::plan::CALL_SITES_LABEL,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Calibrate(#[from] CalibrateError),
    #[error("unknown plan {plan:?} for {target} (its plans: {known})")]
    UnknownPlan {
        target: String,
        plan: String,
        known: String,
    },
}

/// Facts learned while resolving that apply to every target.
#[derive(Default)]
struct Learned {
    /// The first fentry refusal (EPERM): later fentry plans fail the same way.
    fentry_refused: Option<String>,
    kprobe_refused: Option<String>,
}

/// Resolve `targets`, each with its kernel-side target id.
pub fn resolve(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    targets: &[(u32, &'static Target)],
    opts: &ResolveOptions,
    mut progress: impl FnMut(&str),
) -> Result<(Vec<Resolved>, std::time::Duration), ResolveError> {
    check_forced(targets, opts)?;
    let mut ctx = Context {
        learned: Learned::default(),
        kprobes_possible: kernel::has_kprobe_pmu()
            || engine.tracefs_root().join("kprobe_events").exists(),
        // Functions named on the command line are checked against the kernel's lists of
        // what must not be probed; read them only when there is such a function.
        guard: targets
            .iter()
            .any(|(_, t)| t.calibration == Calibration::None)
            .then(|| Guard::load(engine.tracefs_root())),
        verify_time: std::time::Duration::ZERO,
    };
    let mut out = Vec::new();
    for &(index, target) in targets {
        out.push(resolve_target(
            engine,
            ksyms,
            index,
            target,
            opts,
            &mut ctx,
            &mut progress,
        )?);
    }
    Ok((out, ctx.verify_time))
}

/// What resolving one target uses of the others': what was learned, the kernel's abilities,
/// the dangerous-function lists, and the time spent calibrating.
struct Context {
    learned: Learned,
    kprobes_possible: bool,
    guard: Option<Guard>,
    verify_time: std::time::Duration,
}

/// A forced plan (`--plan TARGET=PLAN`) must be one of its target's.
fn check_forced(
    targets: &[(u32, &'static Target)],
    opts: &ResolveOptions,
) -> Result<(), ResolveError> {
    for (target, plan) in &opts.forced {
        if let Some((_, t)) = targets.iter().find(|(_, t)| t.name == target)
            && !t.plans.iter().any(|p| p.name == plan)
        {
            return Err(ResolveError::UnknownPlan {
                target: target.clone(),
                plan: plan.clone(),
                known: t
                    .plans
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

/// Walks one target's plans (only the forced one, when forced): the first that the
/// dangerous-function checks allow, this kernel attaches, its calibration confirms (with
/// `verify`) and, for a named function, whose call rate is not too hot, is the active one.
fn resolve_target(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    index: u32,
    target: &'static Target,
    opts: &ResolveOptions,
    ctx: &mut Context,
    progress: &mut impl FnMut(&str),
) -> Result<Resolved, ResolveError> {
    let forced = opts.forced.get(target.name);
    let arbitrary = target.calibration == Calibration::None;
    let mut r = Resolved {
        target,
        index,
        active: None,
        rejected: Vec::new(),
        verification: None,
        heat: None,
        hot_refused: false,
        guarded: false,
        notes: Vec::new(),
        probe_cost: None,
    };
    let guard = ctx.guard.as_ref().filter(|_| arbitrary);
    if let Some(g) = guard {
        r.notes.extend(g.notes());
    }
    for plan in target.plans {
        if forced.is_some_and(|f| f != plan.name) {
            continue;
        }
        if let Some(g) = guard
            && let Some(reason) = guarded(g, target.name, &plan.method)
        {
            r.rejected.push(Rejection {
                plan: plan.name.into(),
                reason,
            });
            r.guarded = true;
            continue;
        }
        progress(&format!("{}: trying {}", target.name, plan.name));
        let attached = match try_plan(
            engine,
            ksyms,
            index,
            plan,
            &mut ctx.learned,
            ctx.kprobes_possible,
        )? {
            PlanOutcome::Attached(a) => a,
            PlanOutcome::Refused(reason) => {
                r.rejected.push(Rejection {
                    plan: plan.name.into(),
                    reason,
                });
                continue;
            }
        };
        if opts.verify && !arbitrary {
            progress(&format!("{}: calibrating {}", target.name, plan.name));
            let t0 = std::time::Instant::now();
            let verified = verify(engine, target, index, &attached)?;
            ctx.verify_time += t0.elapsed();
            match verified {
                Ok(v) => r.verification = Some(v),
                Err(rejection) => {
                    r.rejected.push(rejection);
                    continue;
                }
            }
        }
        if arbitrary
            && let Some(slot) = attached.slots.first()
            && too_hot(engine, target, slot, opts, &mut r, progress)
        {
            for s in &attached.slots {
                engine.release(s);
            }
            r.rejected.push(Rejection {
                plan: plan.name.into(),
                reason: r.heat.as_ref().expect("measured").refusal(target.name),
            });
            // A cheaper rung does not exist further down: kprobes cost more.
            break;
        }
        r.active = Some(attached);
        break;
    }
    Ok(r)
}

/// Runs the target's calibration with `attached` in place: its verification when the count
/// is what the plan expects, else the plan's rejection (its slots released).
fn verify(
    engine: &mut Engine,
    target: &'static Target,
    index: u32,
    attached: &ActivePlan,
) -> Result<Result<Verification, Rejection>, ResolveError> {
    let plan = attached.plan;
    let counts = calibrate::run(engine, target.calibration)?;
    let observed = counts.get(index as usize).copied().unwrap_or(0);
    let expect = (target.expect)(plan, target.calibration);
    let passed = expect.check(observed);
    let v = Verification {
        workload: target.calibration.describe(),
        expected: expect.describe(),
        observed,
        passed,
    };
    if passed {
        return Ok(Ok(v));
    }
    for s in &attached.slots {
        engine.release(s);
    }
    let why = if observed == 0 {
        "the probe never fired: the calls it should see go through inlined copies"
    } else if expect.too_low(observed) {
        "fewer calls than operations: some call sites are inlined copies"
    } else {
        "more calls than operations: the probe is not specific to the target"
    };
    Ok(Err(Rejection {
        plan: plan.name.into(),
        reason: format!(
            "attached to {}, but calibration ({}) counted {observed} calls, expected {}: {why}",
            attached.attach_points.join(", "),
            v.workload,
            v.expected
        ),
    }))
}

/// Counts a named function's calls for a moment through `slot` (the rate goes to `r.heat`):
/// whether it is called too often to time without `--force-hot`. Traced anyway, or not
/// measured, it says so in `r.notes`.
fn too_hot(
    engine: &mut Engine,
    target: &'static Target,
    slot: &Slot,
    opts: &ResolveOptions,
    r: &mut Resolved,
    progress: &mut impl FnMut(&str),
) -> bool {
    progress(&format!(
        "{}: counting its calls for {} ms",
        target.name,
        guard::HOT_WINDOW.as_millis()
    ));
    match engine.probe_runs(slot, guard::HOT_WINDOW, guard::clearly_hot) {
        Ok(runs) => {
            let heat = Heat::from_runs(&runs);
            let hot = heat.is_hot();
            if hot && !opts.force_hot {
                r.hot_refused = true;
            } else if hot {
                r.notes.push(format!(
                    "{}: traced anyway (--force-hot)",
                    heat.describe(target.name)
                ));
            }
            r.heat = Some(heat);
            r.hot_refused
        }
        Err(e) => {
            r.notes
                .push(format!("{}: call rate not measured ({e})", target.name));
            false
        }
    }
}

/// What trying one plan on this kernel came to.
enum PlanOutcome {
    Attached(ActivePlan),
    /// This kernel does not allow it, and why.
    Refused(String),
}

/// Attach one plan, or say why this kernel does not allow it; Err only when the engine
/// itself failed.
fn try_plan(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    target: u32,
    plan: &'static Plan,
    learned: &mut Learned,
    kprobes_possible: bool,
) -> Result<PlanOutcome, EngineError> {
    match plan.method {
        Method::Functions { mech, symbols } => {
            if let Some(reason) = mech_refusal(mech, learned, kprobes_possible) {
                return Ok(PlanOutcome::Refused(reason));
            }
            try_functions(engine, ksyms, target, plan, mech, symbols, learned)
        }
        Method::Syscalls {
            syscalls,
            fd_prefix,
        } => try_syscalls(engine, target, plan, syscalls, fd_prefix),
        Method::CallSites { callers, callee } => {
            if let Some(reason) = mech_refusal(FnMech::Kprobe, learned, kprobes_possible) {
                return Ok(PlanOutcome::Refused(reason));
            }
            try_call_sites(engine, ksyms, target, plan, callers, callee)
        }
        Method::Count { category, event } => {
            match engine.attach_tracepoint(target, TpRole::Point, category, event, None)? {
                Ok(slot) => Ok(PlanOutcome::Attached(ActivePlan {
                    plan,
                    slots: vec![slot],
                    attach_points: vec![format!("{category}:{event}")],
                })),
                Err(f) => Ok(PlanOutcome::Refused(f.message().to_string())),
            }
        }
    }
}

/// Why the guard keeps `plan` off target `name`: the function is not traceable (or on the
/// kprobe blacklist), or no caller whose calls of it would be probed is.
fn guarded(g: &Guard, name: &str, method: &Method) -> Option<String> {
    match *method {
        Method::Functions { mech, .. } => g.refusal(name, mech),
        Method::CallSites { callers, .. } => {
            let refusals: Vec<String> = callers
                .iter()
                .filter_map(|c| g.refusal(c, FnMech::Kprobe))
                .collect();
            (refusals.len() == callers.len()).then(|| refusals.join("; "))
        }
        _ => None,
    }
}

/// Why this kernel cannot take a function probe of `mech` at all, before any attach: it
/// refused one already, or lacks what the mechanism needs.
fn mech_refusal(mech: FnMech, learned: &Learned, kprobes_possible: bool) -> Option<String> {
    match mech {
        FnMech::Fentry => {
            if let Some(r) = &learned.fentry_refused {
                return Some(format!(
                    "fentry is refused on this kernel (first refusal: {r})"
                ));
            }
            if !kernel::has_vmlinux_btf() {
                return Some(
                    "no kernel BTF (/sys/kernel/btf/vmlinux): fentry needs CONFIG_DEBUG_INFO_BTF"
                        .into(),
                );
            }
        }
        FnMech::Kprobe => {
            if let Some(r) = &learned.kprobe_refused {
                return Some(format!(
                    "kprobes are refused on this kernel (first refusal: {r})"
                ));
            }
            if !kprobes_possible {
                return Some(
                    "no kprobe support (no kprobe PMU and no kprobe_events: CONFIG_KPROBES is \
                     off)"
                        .into(),
                );
            }
        }
    }
    None
}
