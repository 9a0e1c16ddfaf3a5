//! How a target is attached (the tracer's resolved plan), and the same plan spelled for
//! the other tools: a bpftrace program and the counter-only floor's arguments.

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a target is attached: the tracer's resolved plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attach {
    /// "tracepoint", "fentry" or "kprobe".
    pub mechanism: String,
    pub plan: String,
    pub points: Vec<String>,
}

impl Attach {
    /// From `tracer probes --json` (the plan `tracer record` would use).
    pub fn from_probes(v: &Value, target: &str) -> Result<Attach> {
        let t = v["targets"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"].as_str() == Some(target)))
            .ok_or_else(|| anyhow!("tracer probes does not list {target}"))?;
        let plan = &t["plan"];
        ensure!(
            !plan.is_null(),
            "no plan for {target} on this kernel: {}",
            t["rejected"]
        );
        let mech_text = plan["mechanism"].as_str().unwrap_or("");
        let mechanism = if mech_text.starts_with("fentry") {
            "fentry"
        } else if mech_text.starts_with("kprobe") {
            "kprobe"
        } else if mech_text.starts_with("tracepoint") {
            "tracepoint"
        } else {
            bail!("{target}: mechanism {mech_text:?} has no bpftrace equivalent here")
        };
        Ok(Attach {
            mechanism: mechanism.into(),
            plan: plan["plan"].as_str().unwrap_or("").into(),
            points: plan["attach_points"]
                .as_array()
                .context("attach_points")?
                .iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect(),
        })
    }

    /// The equivalent bpftrace program: a start-time map keyed by tid on entry (filtered to
    /// the command's pid) and a histogram of the delta on exit, as funclatency does.
    /// The bpftrace program timing the same calls; with `phase_uprobes` (the workload binary),
    /// also counting its phase markers with uprobes, as the tracer places them.
    pub fn bpftrace_script(&self, phase_uprobes: Option<&str>) -> Result<String> {
        let (enters, exits): (Vec<String>, Vec<String>) = match self.mechanism.as_str() {
            "tracepoint" => {
                let mut en = Vec::new();
                let mut ex = Vec::new();
                for p in &self.points {
                    let tp = format!("tracepoint:{p}");
                    if p.contains(":sys_enter_") {
                        en.push(tp);
                    } else if p.contains(":sys_exit_") {
                        ex.push(tp);
                    } else {
                        bail!("tracepoint {p} is neither a syscall entry nor exit");
                    }
                }
                (en, ex)
            }
            "fentry" => (
                vec![format!("kfunc:{}", self.points[0])],
                vec![format!("kretfunc:{}", self.points[0])],
            ),
            "kprobe" => (
                vec![format!("kprobe:{}", self.points[0])],
                vec![format!("kretprobe:{}", self.points[0])],
            ),
            m => bail!("no bpftrace equivalent for {m}"),
        };
        ensure!(
            !enters.is_empty() && !exits.is_empty(),
            "no entry/exit pair in {:?}",
            self.points
        );
        let mut script = format!(
            "{} /pid == cpid/ {{ @start[tid] = nsecs; }}\n\
             {} /@start[tid]/ {{ @ns = hist(nsecs - @start[tid]); delete(@start[tid]); @calls = count(); }}\n",
            enters.join(","),
            exits.join(",")
        );
        if let Some(bin) = phase_uprobes {
            script.push_str(&format!(
                "uprobe:{bin}:tracer_phase_begin,uprobe:{bin}:tracer_phase_end {{ @phases = count(); }}\n"
            ));
        }
        Ok(script)
    }

    /// Arguments of `tracer __floor` and the hits one traced call makes: 2 either way. For
    /// syscall tracepoints, the same mechanism as the tracer's: raw `sys_enter`/`sys_exit`
    /// counting those syscalls (`perf_events`: a counter on every tracepoint as its own perf
    /// event, a call entering and exiting one syscall); on both ends of the one function for
    /// fentry/kprobe (fentry+fexit, kprobe+kretprobe).
    pub fn floor_args(&self, perf_events: bool) -> (String, String, u64) {
        match self.mechanism.as_str() {
            "tracepoint" if perf_events => ("tracepoint".into(), self.points.join(","), 2),
            "tracepoint" => {
                let mut calls: Vec<&str> = self
                    .points
                    .iter()
                    .filter_map(|p| {
                        let name = p.strip_prefix("syscalls:")?;
                        name.strip_prefix("sys_enter_")
                            .or_else(|| name.strip_prefix("sys_exit_"))
                    })
                    .collect();
                calls.sort_unstable();
                calls.dedup();
                ("raw-syscall".into(), calls.join(","), 2)
            }
            m => (m.to_string(), self.points[0].clone(), 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp_attach() -> Attach {
        Attach {
            mechanism: "tracepoint".into(),
            plan: "syscall-bracket".into(),
            points: vec![
                "syscalls:sys_exit_wait4".into(),
                "syscalls:sys_enter_wait4".into(),
                "syscalls:sys_exit_waitid".into(),
                "syscalls:sys_enter_waitid".into(),
            ],
        }
    }

    #[test]
    fn bpftrace_script_pairs_entries_and_exits() {
        let s = tp_attach().bpftrace_script(None).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with(
            "tracepoint:syscalls:sys_enter_wait4,tracepoint:syscalls:sys_enter_waitid /pid == cpid/"
        ));
        assert!(lines[1].starts_with(
            "tracepoint:syscalls:sys_exit_wait4,tracepoint:syscalls:sys_exit_waitid /@start[tid]/"
        ));
        assert!(s.contains("hist(nsecs - @start[tid])") && s.contains("@calls = count()"));
        let k = Attach {
            mechanism: "kprobe".into(),
            plan: "kprobe".into(),
            points: vec!["__x64_sys_getpid".into()],
        };
        assert!(
            k.bpftrace_script(None)
                .unwrap()
                .contains("kretprobe:__x64_sys_getpid /@start")
        );
        let bad = Attach {
            points: vec!["sched:sched_switch".into()],
            ..tp_attach()
        };
        assert!(bad.bpftrace_script(None).is_err());
        let u = tp_attach().bpftrace_script(Some("/b/workloads")).unwrap();
        assert!(
            u.contains(
                "uprobe:/b/workloads:tracer_phase_begin,uprobe:/b/workloads:tracer_phase_end {"
            ),
            "{u}"
        );
    }

    #[test]
    fn floor_arguments() {
        let (m, p, per) = tp_attach().floor_args(true);
        assert_eq!(m, "tracepoint");
        assert_eq!(p.split(',').count(), 4);
        // Raw: the two syscalls, each counted at its entry and exit.
        let (m, p, _) = tp_attach().floor_args(false);
        assert_eq!((m.as_str(), p.as_str()), ("raw-syscall", "wait4,waitid"));
        assert_eq!(
            per, 2,
            "a wait4 call hits its own enter and exit, not waitid's"
        );
        let f = Attach {
            mechanism: "fentry".into(),
            plan: "fentry".into(),
            points: vec!["do_wait".into()],
        };
        assert_eq!(f.floor_args(false), ("fentry".into(), "do_wait".into(), 2));
    }
}
