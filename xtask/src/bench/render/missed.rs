//! "Why targets are missed": for each missed target, what the figures and the profile
//! say about it.

use std::fmt::Write;

use super::ns;
use crate::bench::Results;
use crate::bench::overhead::OverheadSet;

/// `ns`'s figure with its unit: "134 ns", "248.7 µs".
fn with_unit(v: f64) -> String {
    let s = ns(v);
    if s.ends_with("µs") {
        s
    } else {
        format!("{s} ns")
    }
}

/// For each missed target, the reason the figures and the profile give.
pub(super) fn why_missed(md: &mut String, r: &Results) {
    let missed: Vec<&str> = r
        .targets
        .iter()
        .filter(|t| t.met == Some(false))
        .map(|t| t.target.as_str())
        .collect();
    if missed.is_empty() {
        md.push_str("Every target measured was met.\n\n");
        return;
    }
    md.push_str("### Why targets are missed\n\n");
    let overhead_missed = missed.iter().any(|t| t.contains("added ns per call"));
    if overhead_missed {
        overhead_why(md, r);
    }
    if missed.iter().any(|t| t.contains("discover / perf-record")) {
        discover_why(md, r);
    }
    if missed.iter().any(|t| t.contains("attached in")) {
        md.push_str(
            "- **Start-up.** The launch → command starts time includes loading and verifying \
             the whole eBPF object (every program slot, not just the ones a run attaches), \
             reading BTF and kallsyms, and, unless `--no-verify`, one calibration workload per \
             target; compare attach_ms and verify_ms in section 3.\n",
        );
    }
    if missed.iter().any(|t| t.contains("detached in")) {
        detach_why(md, r);
    }
    if missed.iter().any(|t| t.contains("RSS")) {
        md.push_str(
            "- **Memory.** See section 4: the peak is reached when the maps are read and the \
             stacks symbolised at the end of the run.\n",
        );
    }
    if missed.iter().any(|t| t.contains("tracer report")) {
        md.push_str(
            "- **Analysis speed.** See section 5: compare the runs with and without \
             flamegraphs.\n",
        );
    }
    if missed.iter().any(|t| t.contains("zero loss")) {
        md.push_str(
            "- **Loss.** Aggregate mode lost calls: see the map-full counters in section 2.\n",
        );
    }
    md.push('\n');
}

/// Why the added cost per call is missed: what the tracer does beyond the timed floor, each
/// set's floors, the phase markers' share, and where the profile puts the time.
fn overhead_why(md: &mut String, r: &Results) {
    md.push_str(
        "- **Added cost per call.** The reference is the *timed floor*: a per-CPU \
         counter, a clock read at entry and at exit and the entry time carried between \
         them in a per-CPU slot (right only for calls that neither block nor migrate), the \
         least any timing probe of that mechanism can cost. Per call the tracer does, \
         beyond that, the pairing (a call that neither blocks, migrates, nests nor \
         recurses is kept in its CPU's own slot and cached phase; any other moves to the \
         thread's state in a hash map, one lookup at entry and one at exit, so nested, \
         recursive, blocking and migrating calls pair exactly), the process-tree filter, \
         the syscall routing of the raw tracepoints, and the aggregation: counts, sums, \
         extremes and the loop trip count in a per-CPU array, two histogram buckets by \
         atomic add. With default options, calls shorter than 20 us also have their \
         kernel and user stacks walked 1 time in 64 (longer calls every time), the on-CPU \
         sampler runs at 999 Hz and blocked calls \
         record where they blocked: the difference between *tracer* and *tracer-lean*.\n",
    );
    for set in r
        .overhead
        .iter()
        .chain(r.vm.iter().flat_map(|v| v.sets.iter()))
    {
        // Only costs clearly above zero: a ratio to one lost in noise says nothing.
        let added = |name: &str| {
            set.config(name)
                .and_then(|c| c.added_ns)
                .filter(|a| a.q1 > 0.0)
                .map(|a| a.median)
        };
        if let (Some(f), Some(t), Some(lean)) =
            (added("floor"), added("timed-floor"), added("tracer-lean"))
        {
            let _ = writeln!(
                md,
                "  - {}: timing alone costs {:.2}x the bare floor ({} against {} added per \
                 call); the lean tracer, the best configuration measured, costs {:.2}x that \
                 timed floor ({}).",
                set.title,
                t / f,
                with_unit(t),
                with_unit(f),
                lean / t,
                with_unit(lean)
            );
        }
    }
    for set in &r.overhead {
        let added = |name: &str| set.added_median(name);
        if let (Some(bt), Some(up), Some(lean)) = (
            added("bpftrace"),
            added("bpftrace-phase-uprobes"),
            added("tracer-lean"),
        ) && up - bt > 0.5 * lean
        {
            let _ = writeln!(
                md,
                "  - {}: the phase markers are most of it. bpftrace adds {} per call; with \
                 uprobes on the workload's `tracer_phase_begin`/`_end`, where the tracer \
                 places its phase markers, {} (tracer-lean: {}). A process with a uprobe in \
                 its text copies that mapping's page tables at every fork and frees them at \
                 every exit (the breakpoint's copy-on-write page gives the mapping an \
                 `anon_vma`, so fork can no longer leave its page tables to be faulted in), \
                 whatever the tool that placed it.",
                set.title,
                with_unit(bt),
                with_unit(up),
                with_unit(lean)
            );
        }
    }
    profile_why(md, r);
    if r.vm.is_some() {
        md.push_str(
            "- The fentry/kprobe floors count both ends of the function (fentry + fexit, \
             kprobe + kretprobe), as the tracer must; what remains is the body: the clock \
             reads, the pairing, the filter and the aggregation.\n",
        );
    }
}

/// Where the profiles put the added cost: the share of each kind of work per tool, the lean
/// tracer's programs, and a user-stack walk that faults.
fn profile_why(md: &mut String, r: &Results) {
    if let Some(p) = &r.profile {
        let get = |tool: &str, cat: &str| {
            p.profiles
                .iter()
                .find(|t| t.name == tool)
                .and_then(|t| t.categories.iter().find(|c| c.symbol.starts_with(cat)))
                .map_or(0.0, |c| c.percent)
        };
        let _ = writeln!(
            md,
            "- One perf profile per tool (share of the workload's CPU samples, tracer-lean / \
             tracer / bpftrace; one run each, a few hundred samples: coarse; the programs' \
             JIT images are named by perf as bpf_prog_TAG_NAME): \
             BPF map operations {:.0}% / {:.0}% / {:.0}%, stack walks \
             {:.0}% / {:.0}% / {:.0}%, BPF program bodies {:.0}% / {:.0}% / {:.0}%, clock \
             reads {:.0}% / {:.0}% / {:.0}%.",
            get("tracer-lean", "BPF map"),
            get("tracer", "BPF map"),
            get("bpftrace", "BPF map"),
            get("tracer-lean", "stack walks"),
            get("tracer", "stack walks"),
            get("bpftrace", "stack walks"),
            get("tracer-lean", "BPF program"),
            get("tracer", "BPF program"),
            get("bpftrace", "BPF program"),
            get("tracer-lean", "clock"),
            get("tracer", "clock"),
            get("bpftrace", "clock"),
        );
    }
    if let Some(lean) = r
        .profile
        .as_ref()
        .and_then(|p| p.profiles.iter().find(|t| t.name == "tracer-lean"))
    {
        let share = |cat: &str| {
            lean.categories
                .iter()
                .find(|c| c.symbol.starts_with(cat))
                .map_or(0.0, |c| c.percent)
        };
        let programs: Vec<String> = lean
            .top
            .iter()
            .filter(|s| s.symbol.starts_with("bpf_prog_"))
            .map(|s| format!("`{}` {:.0}%", s.symbol, s.percent))
            .collect();
        let (bodies, maps) = (share("BPF program"), share("BPF map"));
        if !programs.is_empty() {
            let _ = writeln!(
                md,
                "- Where the lean tracer's time goes: its programs' own instructions ({}) are \
                 {:.0}% of the workload's samples, the map operations they call (the \
                 thread-state hash among them) {:.0}%: {}",
                programs.join(", "),
                bodies,
                maps,
                if bodies > maps {
                    "the work in the program bodies (the routing, the filter, the \
                     aggregation), more than the lookups, is what a cheaper path must cut."
                } else {
                    "the lookups weigh at least as much as the program bodies."
                }
            );
        }
    }
    if let Some(top) = r.profile.as_ref().and_then(|p| {
        p.profiles
            .iter()
            .find(|t| t.name == "tracer")
            .and_then(|t| t.top.first())
    }) && top.symbol.starts_with("__get_user")
    {
        let _ = writeln!(
            md,
            "- With default options the single largest symbol is `{}` ({:.0}% of the \
             workload's samples): the exception fix-up of user-memory reads, most likely the \
             user-stack walk (`BPF_F_USER_STACK`) following frame pointers that the workload \
             binary does not keep and faulting on them.",
            top.symbol, top.percent
        );
    }
}

/// Why discover costs more than perf record: the per-syscall work it does and perf does not.
fn discover_why(md: &mut String, r: &Results) {
    md.push_str(
        "- **Discover against perf record.** Both sample the command's tree at the same \
         frequency; discover also counts every syscall the tree makes (a raw `sys_enter` \
         program that counts it in its CPU's cache of counts and keeps it as the thread's \
         last, so that a sample whose stack goes through the syscall entry is filed under it; \
         no clock is read, no program at the exit), which is what tells a syscall whose time \
         per call grows from a benchmark that makes more calls; perf records none of it. \
         Where the command's ops are a few short syscalls, that program (the kernel's dispatch \
         to it, and the slow syscall path an enabled syscall tracepoint puts every syscall \
         on), not the sampling, is discover's cost:",
    );
    for set in &r.discover {
        let added = |name: &str| set.added_median(name);
        if let (Some(d), Some(p)) = (added("discover"), added("perf-record")) {
            let _ = write!(
                md,
                " {}: discover adds {} per op, perf record {}",
                set.title,
                with_unit(d),
                with_unit(p)
            );
            if let Some(few) = perf_saw_little(set) {
                md.push_str(&few);
            }
            md.push(';');
        }
    }
    md.push_str(" see section 1's discover tables.\n");
}

/// Where perf record took under a tenth of discover's samples per run (discover's are every
/// CPU's, a tree pinned to one of two CPUs has at most half of them), " (perf record took
/// 22–39 samples of the command per run, ...)": its cost there is not that of
/// sampling the command, so the ratio flatters it. (On fork + waitpid perf's per-task
/// event, inherited by every child, fired 13 times in a run where `perf record -a` fired
/// 2318 times; why was not established.)
fn perf_saw_little(set: &OverheadSet) -> Option<String> {
    let range = |name: &str| {
        let c = set.configs.iter().find(|c| c.name == name)?;
        let v = c.counted.iter().flatten().copied();
        Some((v.clone().min()?, v.max()?))
    };
    let ((plo, phi), (dlo, dhi)) = (range("perf-record")?, range("discover")?);
    (phi * 10 < dlo).then(|| {
        format!(
            " (perf record took {plo}–{phi} samples of the command per run, discover's sampler \
             fired {dlo}–{dhi} times on every CPU: perf sampled little of this command, so \
             what it adds is not the cost of sampling it)"
        )
    })
}

/// Why detaching is slow: the RCU waits of closing tracepoint perf events, one after another.
fn detach_why(md: &mut String, r: &Results) {
    let fig = |name: &str| {
        r.startup.as_ref().and_then(|s| {
            s.results
                .iter()
                .find(|x| x.name == name)
                .and_then(|x| x.detach_ms)
                .map(|m| m.median)
        })
    };
    let few = fig("tracer record --targets getpid --no-verify");
    let all = fig("tracer record (default targets, verified)");
    md.push_str(
        "- **Detach.** Closing the last perf event of a tracepoint (or uprobe) waits for \
         RCU grace periods (`perf_trace_event_unreg` calls \
         `tracepoint_synchronize_unregister`) while holding the kernel's `event_mutex`: one \
         after another, whatever the number of threads closing them. The tracer attaches \
         tracepoints as raw tracepoints where the kernel takes them (syscalls routed \
         through `raw_syscalls`, the scheduler's by BTF), which unregister without that \
         wait; what is left are uprobes (phase markers, USDT) and kernels that refuse raw \
         tracepoints",
    );
    if let (Some(few), Some(all)) = (few, all) {
        let _ = write!(
            md,
            ": {few:.0} ms for `--targets getpid`, {all:.0} ms for the default targets"
        );
    }
    md.push_str(".\n");
}
