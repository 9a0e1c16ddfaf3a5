//! Dangerous targets: functions named on the command line that the tracer refuses to probe,
//! each with the reason, before anything is attached; and functions called so often that a
//! probe on them would slow the whole machine, refused unless `--force-hot`.
//!
//! Built-in targets are not checked: their plans were chosen for these kernels and are
//! verified by calibration. A function the user names gets, in order:
//!
//! | check | refused | source of truth |
//! | --- | --- | --- |
//! | recursion | always (exit 2, before anything loads) | [`OWN_CALLS`]: what our own eBPF programs reach, plus every `bpf_`/`__bpf_` name |
//! | kprobe blacklist | the kprobe plan | `/sys/kernel/debug/kprobes/blacklist` (debugfs mounted privately for the read when it is not mounted) |
//! | not traceable | the fentry and kprobe plans | absent from `<tracefs>/available_filter_functions` (`notrace`, `noinstr`, ...) |
//! | hot | the plan that attached, unless `--force-hot` | the attached probes' run count and run time over [`HOT_WINDOW`] (less when [`clearly_hot`]), from the kernel's BPF statistics (5.8+; without them the rate is not measured, and a note says so) |
//!
//! Where a list cannot be read (no debugfs, a restricted tracefs file), that check is skipped
//! and a note says so; the kernel still refuses what it must when attaching.
//!
//! Patterns (globs) are not accepted as targets at all (`plan::valid_function_name` takes
//! letters, digits, `_` and `.` only), so there is nothing to cap.
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::engine::ProbeRuns;
use crate::plan::FnMech;

/// Kernel functions our programs call or are called through, on the kernels we support
/// (5.10 to 6.x; names of every version are listed). A probe on one of them fires inside our
/// own probes: the kernel's recursion protection then skips the nested run (kprobes count
/// it as "missed", fentry programs as `recursion_misses`), so its counts would be wrong at
/// best, and every traced call would pay for two probes.
pub const OWN_CALLS: &[&str] = &[
    // Map helpers and the map implementations behind them (hash, per-CPU array, array).
    "htab_map_lookup_elem",
    "__htab_map_lookup_elem",
    "htab_map_update_elem",
    "htab_map_delete_elem",
    "htab_lock_bucket",
    "htab_unlock_bucket",
    "alloc_htab_elem",
    "free_htab_elem",
    "htab_elem_free",
    "lookup_elem_raw",
    "lookup_nulls_elem_raw",
    "pcpu_freelist_pop",
    "__pcpu_freelist_pop",
    "___pcpu_freelist_pop",
    "pcpu_freelist_push",
    "__pcpu_freelist_push",
    "array_map_lookup_elem",
    "percpu_array_map_lookup_elem",
    "array_map_update_elem",
    "unit_alloc",
    "unit_free",
    // Clock, task and cgroup helpers.
    "ktime_get_mono_fast_ns",
    "strncpy_from_user_nofault",
    // Stack walks (caller stacks, the sampler).
    "get_perf_callchain",
    "get_callchain_entry",
    "put_callchain_entry",
    "perf_callchain_kernel",
    "perf_callchain_user",
    "copy_from_user_nmi",
    "__unwind_start",
    "unwind_next_frame",
    "unwind_get_return_address",
    "orc_find",
    "__orc_find",
    "kernel_text_address",
    "__kernel_text_address",
    "is_bpf_text_address",
    // Ring buffer (raw events).
    "irq_work_queue",
    // How the kernel enters our programs: kprobes, trampolines, tracepoints, perf events.
    "trace_call_bpf",
    "kprobe_perf_func",
    "kretprobe_perf_func",
    "kprobe_dispatcher",
    "kretprobe_dispatcher",
    "kprobe_ftrace_handler",
    "pre_handler_kretprobe",
    "__kretprobe_trampoline_handler",
    "trampoline_handler",
    "kretprobe_trampoline",
    "__kretprobe_trampoline",
    "rethook_trampoline_handler",
    "arch_rethook_trampoline_callback",
    "perf_trace_run_bpf_submit",
    "perf_event_overflow",
    "__perf_event_overflow",
    "migrate_disable",
    "migrate_enable",
    "__rcu_read_lock",
    "__rcu_read_unlock",
    "rcu_read_unlock_strict",
    "preempt_count_add",
    "preempt_count_sub",
    "_raw_spin_lock_irqsave",
    "_raw_spin_unlock_irqrestore",
];

/// Why `name` must not be probed by our programs (it runs inside them), or None.
pub fn recursion(name: &str) -> Option<String> {
    // A compiler clone (`htab_map_update_elem.isra.0`) is the same function.
    let base = name.split('.').next().unwrap_or(name);
    // Every helper (`bpf_map_lookup_elem`, `bpf_get_stackid`, ...) and the trampoline and
    // tracepoint glue (`__bpf_prog_enter`, `bpf_trace_run2`, `__bpf_trace_*`) is named so.
    if base.starts_with("bpf_") || base.starts_with("__bpf_") || OWN_CALLS.contains(&base) {
        Some(format!(
            "{name}: our own probes call it: tracing it would recurse (the kernel skips a probe \
             fired inside a probe, so its calls would be missed, and every traced call would \
             pay twice)"
        ))
    } else {
        None
    }
}

/// Names listed in the kprobe blacklist: lines `0xSTART-0xEND\tSYMBOL` (`SYMBOL [module]`
/// for modules; addresses are zeros without the privilege to see them).
pub fn parse_blacklist(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split('\t').nth(1))
        .filter_map(|s| s.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Names listed in `available_filter_functions`: one per line, `NAME` or `NAME [module]`
/// (6.5+ with `available_filter_functions_addrs` beside it; the plain file is the same
/// everywhere).
pub fn parse_filter_functions(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Is `name` (or, for kprobes, one of its compiler clones `name.*`) in `set`?
fn listed(set: &BTreeSet<String>, name: &str, clones: bool) -> bool {
    if set.contains(name) {
        return true;
    }
    let prefix = format!("{name}.");
    clones
        && set
            .range(prefix.clone()..)
            .next()
            .is_some_and(|s| s.starts_with(&prefix))
}

/// A kernel list, or why it could not be read.
#[derive(Clone, Debug)]
pub enum List {
    Read(BTreeSet<String>),
    Unavailable(String),
}

/// The kernel's lists of functions that must not be probed, read once per resolution.
#[derive(Clone, Debug)]
pub struct Guard {
    pub blacklist: List,
    pub traceable: List,
}

impl Guard {
    /// Read the kprobe blacklist and the traceable functions of this kernel.
    pub fn load(tracefs: &Path) -> Guard {
        let traceable = {
            let path = tracefs.join("available_filter_functions");
            match std::fs::read_to_string(&path) {
                Ok(t) => List::Read(parse_filter_functions(&t)),
                Err(e) => List::Unavailable(format!(
                    "{} unreadable ({e}): notrace functions are not recognised",
                    path.display()
                )),
            }
        };
        let blacklist = match read_blacklist() {
            Ok(t) => List::Read(parse_blacklist(&t)),
            Err(e) => List::Unavailable(format!(
                "kprobe blacklist unreadable ({e}): blacklisted functions are left to the kernel \
                 to refuse"
            )),
        };
        Guard {
            blacklist,
            traceable,
        }
    }

    /// Why `name` must not be probed with `mech` on this kernel, or None.
    pub fn refusal(&self, name: &str, mech: FnMech) -> Option<String> {
        let clones = mech == FnMech::Kprobe;
        if let List::Read(set) = &self.traceable
            && !listed(set, name, clones)
        {
            return Some(format!(
                "{name} is not traceable (notrace, or not in available_filter_functions): the \
                 kernel keeps it out of tracing"
            ));
        }
        if mech == FnMech::Kprobe
            && let List::Read(set) = &self.blacklist
            && listed(set, name, true)
        {
            return Some(format!(
                "{name} is on the kernel's kprobe blacklist (/sys/kernel/debug/kprobes/blacklist): \
                 a kprobe there could crash the kernel"
            ));
        }
        None
    }

    /// What could not be checked, for the user.
    pub fn notes(&self) -> Vec<String> {
        [&self.traceable, &self.blacklist]
            .into_iter()
            .filter_map(|l| match l {
                List::Unavailable(m) => Some(m.clone()),
                List::Read(_) => None,
            })
            .collect()
    }
}

const BLACKLIST: &str = "/sys/kernel/debug/kprobes/blacklist";

/// The kprobe blacklist's text. Minimal systems boot without debugfs mounted: it is then
/// mounted on a private directory just for the read and unmounted again, so nothing is left.
fn read_blacklist() -> Result<String, String> {
    match std::fs::read_to_string(BLACKLIST) {
        Ok(t) => return Ok(t),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("{BLACKLIST}: {e}"));
        }
        Err(_) => {}
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if mounts
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("debugfs"))
    {
        // debugfs is there without kprobes/: a kernel without CONFIG_KPROBES, where no
        // kprobe can be placed and so none is blacklisted.
        return Ok(String::new());
    }
    let dir = std::env::temp_dir().join(format!(".tracer-debugfs-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mounted = nix::mount::mount(
        Some("debugfs"),
        &dir,
        Some("debugfs"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
        None::<&str>,
    );
    let text = match mounted {
        Ok(()) => {
            let t = match std::fs::read_to_string(dir.join("kprobes/blacklist")) {
                Ok(t) => Ok(t),
                // As above: no kprobes, nothing blacklisted.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
                Err(e) => Err(format!("debugfs kprobes/blacklist: {e}")),
            };
            let _ = nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH);
            t
        }
        Err(e) => Err(format!(
            "debugfs is not mounted and mounting it failed: {e}"
        )),
    };
    let _ = std::fs::remove_dir(&dir);
    text
}

/// How long the attached probes are counted to measure a function's call rate.
pub const HOT_WINDOW: Duration = Duration::from_millis(200);

/// The share of one CPU above which probing a function is refused without `--force-hot`.
pub const HOT_SHARE: f64 = 0.05;

/// Ends a counting window early: after 50 ms, a function already over twice the limit is
/// hot whatever the rest of the window would show, and its probe should not stay attached
/// (under emulation a probe on a lock function can take the whole machine).
pub fn clearly_hot(runs: &ProbeRuns) -> bool {
    runs.elapsed >= Duration::from_millis(50) && Heat::from_runs(runs).cpu_share() > 2.0 * HOT_SHARE
}

/// A function's measured call rate and what probing it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Heat {
    pub calls_per_s: f64,
    /// Probe time per call (entry and exit programs), in ns, as the kernel measured it.
    pub ns_per_call: f64,
    /// How long the calls were counted.
    pub window: Duration,
}

impl Heat {
    pub fn from_runs(runs: &ProbeRuns) -> Heat {
        let secs = runs.elapsed.as_secs_f64().max(1e-3);
        Heat {
            calls_per_s: runs.calls as f64 / secs,
            ns_per_call: runs.entry_ns_per_run.unwrap_or(0.0) + runs.exit_ns_per_run.unwrap_or(0.0),
            window: runs.elapsed,
        }
    }

    /// The expected probe overhead, as a share of one CPU.
    pub fn cpu_share(&self) -> f64 {
        self.calls_per_s * self.ns_per_call / 1e9
    }

    pub fn is_hot(&self) -> bool {
        self.cpu_share() > HOT_SHARE
    }

    pub fn describe(&self, name: &str) -> String {
        format!(
            "{name} is called {:.0} times/s on this system; at {:.0} ns of probe time per call \
             (entry and exit programs, measured over {} ms by the kernel's BPF statistics; the \
             kprobe or trampoline entry comes on top) tracing it costs at least {:.1}% of one CPU",
            self.calls_per_s,
            self.ns_per_call,
            self.window.as_millis(),
            self.cpu_share() * 100.0
        )
    }

    /// The refusal message for a hot function traced without `--force-hot`.
    pub fn refusal(&self, name: &str) -> String {
        format!(
            "{}, over the {:.0}% limit: pass --force-hot to trace it anyway",
            self.describe(name),
            HOT_SHARE * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_helpers_and_their_clones_are_refused_as_recursion() {
        for n in [
            "bpf_map_lookup_elem",
            "__bpf_prog_enter",
            "bpf_trace_run2",
            "htab_map_update_elem",
            "htab_map_update_elem.isra.0",
            "ktime_get_mono_fast_ns",
            "migrate_disable",
        ] {
            let r = recursion(n).unwrap_or_else(|| panic!("{n} not refused"));
            assert!(r.contains("recurse") && r.starts_with(n), "{r}");
        }
        for n in [
            "do_wait",
            "copy_process",
            "kmem_cache_alloc",
            "bpfilter_x",
            "_bpf_x",
        ] {
            assert_eq!(recursion(n), None, "{n}");
        }
    }

    #[test]
    fn blacklist_lines_give_names_with_and_without_addresses_or_modules() {
        let text = "0xffffffff81001000-0xffffffff81001040\tdo_int3\n\
                    0x0000000000000000-0x0000000000000000\tnotify_die\n\
                    0xffffffffc0001000-0xffffffffc0001080\tkvm_spurious_fault [kvm]\n\
                    garbage without a tab\n";
        let set = parse_blacklist(text);
        assert_eq!(
            set.into_iter().collect::<Vec<_>>(),
            ["do_int3", "kvm_spurious_fault", "notify_die"]
        );
    }

    #[test]
    fn filter_functions_drop_the_module_suffix() {
        let set = parse_filter_functions("do_wait\nxfs_iget [xfs]\n\nfoo.isra.0\n");
        assert!(set.contains("do_wait") && set.contains("xfs_iget") && set.contains("foo.isra.0"));
        assert_eq!(set.len(), 3);
    }

    fn guard(traceable: &[&str], blacklist: &[&str]) -> Guard {
        let set = |v: &[&str]| List::Read(v.iter().map(|s| s.to_string()).collect());
        Guard {
            blacklist: set(blacklist),
            traceable: set(traceable),
        }
    }

    #[test]
    fn notrace_refuses_both_mechanisms_and_the_blacklist_only_kprobes() {
        let g = guard(
            &["do_wait", "notify_die", "foo.isra.0"],
            &["notify_die", "bar"],
        );
        assert_eq!(g.refusal("do_wait", FnMech::Fentry), None);
        assert_eq!(g.refusal("do_wait", FnMech::Kprobe), None);
        for mech in [FnMech::Fentry, FnMech::Kprobe] {
            let r = g.refusal("native_write_cr0", mech).unwrap();
            assert!(r.contains("not traceable"), "{r}");
        }
        assert_eq!(g.refusal("notify_die", FnMech::Fentry), None);
        let r = g.refusal("notify_die", FnMech::Kprobe).unwrap();
        assert!(r.contains("kprobe blacklist"), "{r}");
        // A kprobe may take the clone; fentry needs the function itself.
        assert_eq!(g.refusal("foo", FnMech::Kprobe), None);
        assert!(g.refusal("foo", FnMech::Fentry).is_some());
        // "foobar" is not a clone of "foo", nor "fo" of anything.
        assert!(g.refusal("fo", FnMech::Kprobe).is_some());
    }

    #[test]
    fn unreadable_lists_refuse_nothing_and_say_so() {
        let g = Guard {
            blacklist: List::Unavailable("no debugfs".into()),
            traceable: List::Unavailable("EPERM".into()),
        };
        assert_eq!(g.refusal("anything", FnMech::Kprobe), None);
        assert_eq!(g.notes(), ["EPERM", "no debugfs"]);
        assert!(guard(&["a"], &[]).notes().is_empty());
    }

    fn runs(calls: u64, ms: u64, entry: Option<f64>, exit: Option<f64>) -> ProbeRuns {
        ProbeRuns {
            calls,
            elapsed: Duration::from_millis(ms),
            entry_ns_per_run: entry,
            exit_ns_per_run: exit,
        }
    }

    #[test]
    fn heat_is_calls_per_second_times_measured_cost() {
        // 100k calls in 200 ms at 300+200 ns: 500k/s x 500 ns = 25% of a CPU.
        let h = Heat::from_runs(&runs(100_000, 200, Some(300.0), Some(200.0)));
        assert!((h.calls_per_s - 500_000.0).abs() < 1.0);
        assert!((h.cpu_share() - 0.25).abs() < 1e-9);
        assert!(h.is_hot());
        let msg = h.refusal("_raw_spin_lock");
        assert!(
            msg.contains("500000 times/s") && msg.contains("25.0%"),
            "{msg}"
        );
        assert!(msg.contains("--force-hot"), "{msg}");
        // 1000 calls/s at 1 us: 0.1%.
        let cool = Heat::from_runs(&runs(200, 200, Some(500.0), Some(500.0)));
        assert!(!cool.is_hot(), "{}", cool.cpu_share());
        // Just above and below the limit.
        assert!(Heat::from_runs(&runs(10_001, 1000, Some(5000.0), None)).is_hot());
        assert!(!Heat::from_runs(&runs(9_999, 1000, Some(5000.0), None)).is_hot());
    }

    #[test]
    fn a_window_ends_early_only_for_a_clearly_hot_function_after_50_ms() {
        // 25% of a CPU, but only 20 ms seen: too early to tell.
        assert!(!clearly_hot(&runs(10_000, 20, Some(300.0), Some(200.0))));
        assert!(clearly_hot(&runs(25_000, 50, Some(300.0), Some(200.0))));
        // 7.5%: hot, but within twice the limit: the whole window decides.
        assert!(!clearly_hot(&runs(15_000, 100, Some(300.0), Some(200.0))));
    }
}
