//! Target selection: which kernel functions a run measures, checked before anything loads
//! (names, `--plan` choices, USDT phase sites, `--phase-fn`), each refusal a usage error.
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::TracerError;
use crate::kernel::kallsyms::Kallsyms;
use crate::plan::{self, Target};
use crate::resolve::Resolved;

/// Pick targets by name, with their kernel-side ids (dense, in the order named, so the
/// kernel maps hold just these). No names: the built-in default targets, or none in discover
/// mode (sampling alone needs no probe). A name that is not a built-in target is any kernel
/// function, resolved by the generic plan ladder (`plan::arbitrary_target`).
pub fn select_targets(
    names: &[String],
    discover: bool,
) -> Result<Vec<(u32, &'static Target)>, TracerError> {
    let chosen: Vec<&'static Target> = if names.is_empty() {
        if discover {
            Vec::new()
        } else {
            plan::TARGETS.iter().filter(|t| t.default).collect()
        }
    } else {
        let mut out: Vec<&'static Target> = Vec::new();
        for n in names {
            if out.iter().any(|t| t.name == n) {
                continue;
            }
            match plan::target_by_name(n) {
                Some((_, t)) => out.push(t),
                None if plan::valid_function_name(n) => {
                    check_function_exists(n)?;
                    // Refused on any kernel, so before anything loads: a bad request (exit 2).
                    if let Some(why) = crate::guard::recursion(n) {
                        return Err(TracerError::Usage(format!("cannot trace {why}")));
                    }
                    out.push(plan::arbitrary_target(n))
                }
                None => {
                    return Err(TracerError::Usage(format!(
                        "unknown target {n:?}: not a kernel function name (letters, digits, _ \
                         and .; built-in targets: {})",
                        plan::TARGETS
                            .iter()
                            .map(|t| t.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
        out
    };
    if chosen.len() > tracer_ebpf::MAX_TARGETS {
        return Err(TracerError::Usage(format!(
            "{} targets named: at most {} per run",
            chosen.len(),
            tracer_ebpf::MAX_TARGETS
        )));
    }
    Ok(chosen
        .into_iter()
        .enumerate()
        .map(|(i, t)| (i as u32, t))
        .collect())
}

/// A function the user named must exist in this kernel (as itself or a compiler clone)
/// before anything is attached or run. Names are readable without privileges.
fn check_function_exists(name: &str) -> Result<(), TracerError> {
    static KSYMS: std::sync::OnceLock<Option<Kallsyms>> = std::sync::OnceLock::new();
    let Some(ksyms) = KSYMS.get_or_init(|| Kallsyms::load().ok()) else {
        // No kallsyms to check against: the plan ladder reports what it finds.
        return Ok(());
    };
    if ksyms.contains(name) || !ksyms.clones(name).is_empty() {
        return Ok(());
    }
    Err(TracerError::Usage(format!(
        "unknown target {name:?}: no such function in /proc/kallsyms (not built into this \
         kernel, or inlined into every caller, which can then be traced instead); \
         `tracer sweep --discover -- CMD {{n}}` shows the functions a workload's kernel time \
         goes through"
    )))
}

/// The resolution notes not yet said by this process, each once: a fact about the machine
/// (an unreadable list) is noted for every named function and at every resolution (a sweep's
/// confirmation tries again without its callers when the kernel refuses them) but said once.
pub(super) fn distinct_notes(resolved: &[Resolved]) -> Vec<&String> {
    static SAID: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    resolved
        .iter()
        .flat_map(|r| r.notes.iter())
        .filter(|n| said.insert((*n).clone()))
        .collect()
}

/// The USDT phase sites of a binary: none when it is not an ELF file or has no
/// `tracer:phase_*` probes; a malformed note, or more sites than the probes have room for,
/// is a usage error (exit 2) before anything loads.
pub fn usdt_sites(binary: &Path) -> Result<Vec<crate::usdt::PhaseSite>, TracerError> {
    use crate::usdt::UsdtError;
    let Ok(data) = std::fs::read(binary) else {
        return Ok(Vec::new());
    };
    match crate::usdt::phase_sites(&data) {
        Ok(sites) if sites.len() > tracer_ebpf::USDT_SLOTS => Err(TracerError::Usage(format!(
            "{}: {} USDT phase probe sites (tracer:phase_begin/phase_end), more than the {} \
             the tracer's probes have room for: fire them from fewer places (e.g. one \
             non-inlined function per probe)",
            binary.display(),
            sites.len(),
            tracer_ebpf::USDT_SLOTS
        ))),
        Ok(sites) => Ok(sites),
        Err(UsdtError::NotElf(_) | UsdtError::Architecture(_)) => Ok(Vec::new()),
        Err(e) => Err(TracerError::Usage(format!("{}: {e}", binary.display()))),
    }
}

/// Check the USDT notes of the binaries whose markers a run attaches.
pub fn check_usdt<'a>(binaries: impl Iterator<Item = &'a PathBuf>) -> Result<(), TracerError> {
    let mut total = 0;
    for b in binaries {
        total += usdt_sites(b)?.len();
    }
    if total > tracer_ebpf::USDT_SLOTS {
        return Err(TracerError::Usage(format!(
            "{total} USDT phase probe sites in the traced binaries, more than the {} the \
             tracer's probes have room for",
            tracer_ebpf::USDT_SLOTS
        )));
    }
    Ok(())
}

/// `--phase-fn`, resolved (a usage error when the binary or function cannot be found).
pub fn resolve_phase_fn(
    arg: Option<&str>,
) -> Result<Option<crate::phase_fn::PhaseFn>, TracerError> {
    arg.map(crate::phase_fn::resolve)
        .transpose()
        .map_err(|e| TracerError::Usage(e.to_string()))
}

/// Every `--plan TARGET=PLAN` must name a known target and one of its plans.
pub fn check_forced(forced: &BTreeMap<String, String>) -> Result<(), TracerError> {
    for (t, p) in forced {
        let target = match plan::target_by_name(t) {
            Some((_, target)) => target,
            None if plan::valid_function_name(t) => {
                check_function_exists(t).map_err(|e| match e {
                    TracerError::Usage(m) => TracerError::Usage(format!("--plan {t}={p}: {m}")),
                    other => other,
                })?;
                plan::arbitrary_target(t)
            }
            None => {
                return Err(TracerError::Usage(format!(
                    "--plan {t}={p}: unknown target {t:?}: not a kernel function name (built-in targets: {})",
                    plan::TARGETS
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        if !target.plans.iter().any(|x| x.name == p) {
            return Err(TracerError::Usage(format!(
                "--plan {t}={p}: unknown plan {p:?} for {t} (its plans: {})",
                target
                    .plans
                    .iter()
                    .map(|x| x.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_selection() {
        let all = select_targets(&[], false).unwrap();
        assert_eq!(all.len(), 4, "the four mission targets by default");
        assert!(all.iter().all(|(_, t)| t.name != "getpid"));
        assert!(
            select_targets(&[], true).unwrap().is_empty(),
            "discover needs no probe"
        );
        assert_eq!(select_targets(&["getpid".into()], false).unwrap()[0].0, 0);
        let t = select_targets(&["dup_mmap".into(), "dup_mmap".into()], false).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, 0);
        let t = select_targets(&["do_wait".into(), "copy_process".into()], false).unwrap();
        assert_eq!((t[1].0, t[1].1.name), (1, "copy_process"));
        assert_eq!(t[1].1.calibration, plan::Calibration::None);
        assert!(
            select_targets(&["no/pe".into()], false)
                .unwrap_err()
                .to_string()
                .contains("not a kernel function name")
        );
        assert!(
            select_targets(&["no_such_function_xyz".into()], false)
                .unwrap_err()
                .to_string()
                .contains("no such function in /proc/kallsyms")
        );
        let many: Vec<String> = [
            "do_wait",
            "dup_mmap",
            "sysvipc_find_ipc",
            "get_task_policy",
            "getpid",
            "schedule",
            "do_exit",
            "kernel_clone",
            "vfs_read",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(select_targets(&many, false).is_err());
    }
}
