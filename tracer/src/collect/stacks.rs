//! Symbolized folded stacks from the kernel's stack maps: frames named root-first, the
//! probes' own frames removed, identical stacks merged into one file per (kind, target, case, N).
use std::collections::BTreeMap;

use tracer_ebpf::{
    AggKey, STACK_CALLER, STACK_OFFCPU, STACK_ONCPU, STACK_PROFILE, STACK_PROFILE_OFFCPU,
};

use crate::engine::Snapshot;
use crate::kernel::symbolize::{KernelSymbolizer, UNKNOWN, is_bpf_frame, is_return_trampoline};
use crate::rundata::{
    Folded, PROFILE_TARGET, StackFile, StackKind, TRUNCATED_KERNEL_STACK, USER_FRAME,
    stack_file_path,
};
use crate::symbols::UserSymbolizer;

/// Frames the probes themselves add on top of kernel stacks (fentry trampolines, the BPF
/// program, the tracepoint and kprobe machinery): not part of what the user traced.
fn is_probe_frame(name: &str) -> bool {
    const PREFIXES: [&str; 15] = [
        "bpf_prog_",
        "bpf_trampoline_",
        "__bpf_prog_",
        "bpf_trace_run",
        // A tracepoint's probe iterator and its static-call trampoline (raw tracepoints).
        "__traceiter_",
        "__SCT__",
        "__bpf_trace_",
        "trace_call_bpf",
        "perf_trace_",
        "perf_syscall_",
        "kprobe_",
        "kretprobe_",
        "__kretprobe_",
        "ftrace_",
        "bpf_get_stack",
    ];
    // Compiler clones keep the function's job: 6.1 names its syscall tracing hook
    // `syscall_trace_enter.constprop.0`.
    let base = name.split('.').next().unwrap_or(name);
    is_bpf_frame(name)
        || PREFIXES.iter().any(|p| name.starts_with(p))
        || matches!(
            base,
            "syscall_trace_enter" | "syscall_exit_work" | "trace_syscall_exit"
        )
        || name.starts_with("arch_ftrace_")
        || name.starts_with("rethook_")
}

/// Code that runs a probe's handler: whatever it calls works for the probe, never for the
/// traced code (which runs after it returns; an fexit trampoline, which does call the traced
/// function, is not one of these).
fn is_probe_dispatch(name: &str) -> bool {
    const NAMES: [&str; 13] = [
        "ftrace_trampoline",
        "ftrace_ops_assist_func",
        "ftrace_ops_list_func",
        "arch_ftrace_ops_list_func",
        "kprobe_ftrace_handler",
        "kprobe_int3_handler",
        "aggr_pre_handler",
        "pre_handler_kretprobe",
        "opt_pre_handler",
        "optimized_callback",
        "trampoline_handler",
        "__kretprobe_trampoline_handler",
        "rethook_trampoline_handler",
    ];
    const PREFIXES: [&str; 5] = [
        "[bpf_prog",
        "trace_call_bpf",
        "bpf_trace_run",
        "__bpf_trace_",
        "kprobe_perf_func",
    ];
    NAMES.contains(&name)
        || PREFIXES.iter().any(|p| name.starts_with(p))
        // A trampoline's calls around its programs (`__bpf_prog_enter_recur`,
        // `__bpf_prog_exit_recur`, ...): what they call (migrate_enable, rcu_read_unlock)
        // runs for the probe; the traced function is called by the trampoline itself.
        || name.starts_with("__bpf_prog_enter")
        || name.starts_with("__bpf_prog_exit")
}

/// Entry code of an interrupt or exception: the frame beyond it is the interrupted
/// instruction, not a return address.
fn is_interrupt_entry(name: &str) -> bool {
    const PREFIXES: [&str; 5] = [
        "asm_sysvec_",
        "asm_exc_",
        "asm_common_interrupt",
        "asm_spurious_interrupt",
        "asm_fred_entrypoint",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
        || matches!(
            name,
            "common_interrupt" | "apic_timer_interrupt" | "page_fault" | "nmi" | "asm_exc_nmi"
        )
}

/// Kernel frames root-first. `sampled` selects the on-CPU sampler's stack map.
fn kernel_frames(snap: &Snapshot, id: i32, sampled: bool, ksyms: &KernelSymbolizer) -> Vec<String> {
    if id < 0 {
        return vec!["[no-kernel-stack]".into()];
    }
    let map = if sampled { &snap.sampled } else { &snap.traces };
    let Some(ips) = map.get(&id) else {
        return vec!["[lost-kernel-stack]".into()];
    };
    // Innermost first: the first address is where the stack was taken, every later one a
    // return address, except the one an interrupt or exception entry interrupted: that is
    // the exact instruction (named as a return address, an interrupt at a function's first
    // byte would name the function before it).
    let mut names: Vec<String> = Vec::with_capacity(ips.len());
    for &ip in ips {
        let exact = names.last().is_none_or(|n: &String| is_interrupt_entry(n));
        names.push(ksyms.frame_name(ip, !exact));
    }
    // Everything a BPF program or a kprobe's dispatch called (a stack walk, a map update, a
    // lock the handler took) is the probe's own work: cut at the outermost such frame.
    if let Some(j) = names.iter().rposition(|n| is_probe_dispatch(n)) {
        names.drain(..j);
    }
    // The probe's own frames (BPF programs, trampolines, the tracing machinery) are not the
    // traced work: drop them at the inner end, and drop BPF frames anywhere (an fentry
    // trampoline sits between a function's patched entry and its body, so the function would
    // otherwise appear twice around it).
    let keep = names
        .iter()
        .position(|n| !is_probe_frame(n) && !is_probe_dispatch(n))
        .unwrap_or(names.len());
    names.drain(..keep);
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    let mut dropped_bpf = false;
    for n in names {
        // A return trampoline stands where a probe replaced the caller's return address:
        // probe machinery, like the BPF frames.
        if is_bpf_frame(&n) || is_return_trampoline(&n) {
            dropped_bpf = true;
            continue;
        }
        if dropped_bpf && out.last() == Some(&n) {
            dropped_bpf = false;
            continue;
        }
        dropped_bpf = false;
        // Runs of unknown addresses say no more than one does.
        if n == UNKNOWN && out.last().is_some_and(|l| l == UNKNOWN) {
            continue;
        }
        out.push(n);
    }
    let mut names = out;
    names.reverse();
    // A kernel stack starts at an entry (a syscall, an interrupt or exception, a new task):
    // one whose root is an address no symbol covers is one the unwinder could not finish.
    // What it did walk is real; the root says the rest is missing rather than naming one
    // unknown function as its caller. Seen on this host under load: a sample at
    // `srso_return_thunk` whose only other frame was such an address.
    if names.first().is_some_and(|n| n == UNKNOWN) {
        names[0] = TRUNCATED_KERNEL_STACK.to_string();
    }
    names
}

fn user_frames(snap: &Snapshot, id: i32, tgid: u32, usyms: &mut UserSymbolizer) -> Vec<String> {
    if id < 0 {
        return Vec::new();
    }
    let Some(ips) = snap.traces.get(&id) else {
        return vec!["[lost-user-stack]".into()];
    };
    let mut names: Vec<String> = Vec::with_capacity(ips.len());
    for (i, &ip) in ips.iter().enumerate() {
        let n = usyms.frame_name(tgid, ip, i > 0);
        // A frame-pointer walk through code built without them yields runs of addresses
        // that are in no mapping: one `[unknown]` says as much.
        if n == UNKNOWN && names.last().is_some_and(|l: &String| l == UNKNOWN) {
            continue;
        }
        names.push(n);
    }
    names.reverse();
    names
}

/// Folded stack files: (metadata, stacks). Identical stacks are merged.
pub fn stack_files(
    snap: &Snapshot,
    target_names: &[String],
    ksyms: &KernelSymbolizer,
    usyms: &mut UserSymbolizer,
) -> Vec<(StackFile, Folded)> {
    let mut groups: BTreeMap<(StackKind, String, u32, u64), Group> = BTreeMap::new();
    for (key, val) in &snap.stacks {
        let kind = match key.kind {
            STACK_ONCPU => StackKind::Oncpu,
            STACK_OFFCPU => StackKind::Offcpu,
            STACK_CALLER => StackKind::Callers,
            STACK_PROFILE => StackKind::Profile,
            STACK_PROFILE_OFFCPU => StackKind::ProfileOffcpu,
            _ => continue,
        };
        let AggKey { target, case, n } = key.agg;
        let tname = match kind {
            StackKind::Profile | StackKind::ProfileOffcpu => PROFILE_TARGET.to_string(),
            _ => match target_names.get(target as usize) {
                Some(t) if !t.is_empty() => t.clone(),
                _ => continue,
            },
        };
        let frames = stack_frames(snap, key, kind, ksyms, usyms);
        // A whole-process kernel sample is also filed under the kernel entry it ran under
        // (its target is the entry's code; see `collect::entries`).
        let entry = (kind == StackKind::Profile && key.kstack != -1)
            .then(|| super::entry_name(target, &frames));
        // ';' separates frames and ' ' the weight in folded format: keep names clean.
        let line: Vec<String> = frames.iter().map(|f| f.replace([';', ' '], "_")).collect();
        let mut add = |kind: StackKind, tname: String, line: Vec<String>| {
            let e = groups
                .entry((kind, tname, case, n))
                .or_default()
                .entry(line)
                .or_default();
            e.0 += val.ns;
            e.1 += val.count;
        };
        if let Some(entry) = entry {
            add(StackKind::Entry, entry, line.clone());
        }
        add(kind, tname, line);
    }
    groups
        .into_iter()
        .filter_map(|((kind, tname, case, n), lines)| folded_file(kind, &tname, case, n, &lines))
        .collect()
}

/// One stack file's lines: frames -> (weight, count).
type Group = BTreeMap<Vec<String>, (u64, u64)>;

/// A stack's frames, outermost first: a caller stack's user frames above its kernel ones;
/// a whole-process sample of user mode is one marker frame, a stack of the probe's own
/// frames only another.
fn stack_frames(
    snap: &Snapshot,
    key: &tracer_ebpf::StackKey,
    kind: StackKind,
    ksyms: &KernelSymbolizer,
    usyms: &mut UserSymbolizer,
) -> Vec<String> {
    let mut frames = Vec::new();
    if kind == StackKind::Callers {
        frames.extend(user_frames(snap, key.ustack, key.tgid, usyms));
    }
    match (kind, key.kstack) {
        // A whole-process sample that interrupted user mode: no kernel frames to show.
        (StackKind::Profile, -1) => frames.push(USER_FRAME.to_string()),
        _ => frames.extend(kernel_frames(
            snap,
            key.kstack,
            matches!(kind, StackKind::Oncpu | StackKind::Profile),
            ksyms,
        )),
    }
    if frames.is_empty() {
        // Every frame was the probe's own (a sample taken inside the BPF program).
        frames.push("[probe-only-stack]".to_string());
    }
    frames
}

/// The folded file of one (kind, target, case, N) and its contents; none when no line
/// carries weight.
fn folded_file(
    kind: StackKind,
    tname: &str,
    case: u32,
    n: u64,
    lines: &Group,
) -> Option<(StackFile, Folded)> {
    let case_name = workloads::cases::case_name(case);
    let mut content = Folded::new();
    let (mut total_ns, mut count) = (0u64, 0u64);
    for (stack, (ns, c)) in lines {
        if *ns == 0 {
            continue;
        }
        content.add(stack.clone(), *ns);
        total_ns += ns;
        count += c;
    }
    if content.is_empty() {
        return None;
    }
    let path = stack_file_path(kind, tname, &case_name, n);
    Some((
        StackFile {
            kind,
            target: tname.to_string(),
            case,
            case_name,
            n,
            path,
            total_ns,
            count,
        },
        content,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::tests::snap;

    /// Core text up to `_etext`, freed init and exit text after it, then our BPF program and
    /// an fentry trampoline in module space (listed because the table was read while they
    /// were loaded).
    const KALLSYMS: &str = "\
0000000000001000 T _stext
0000000000001000 T do_wait
0000000000002000 T copy_process
0000000000002400 T dup_mmap
0000000000002800 T copy_page_range
0000000000003000 T entry_SYSCALL_64
0000000000003400 T kernel_wait4
0000000000004000 T wait_consider_task
0000000000004800 T asm_sysvec_apic_timer_interrupt
0000000000004c00 T bpf_get_stack_raw_tp
0000000000004d00 T ftrace_trampoline
0000000000004d80 T aggr_pre_handler
0000000000004e00 T _raw_spin_unlock_irqrestore
0000000000004e80 T __bpf_prog_exit_recur
0000000000004f00 T migrate_enable
0000000000005000 T _etext
0000000000006000 T _sinittext
0000000000006000 t init_amd_microcode
0000000000006100 T _einittext
0000000000007000 t exit_amd_microcode
000000000000c000 t bpf_prog_0123456789abcdef_sampler\t[bpf]
000000000000d000 t bpf_trampoline_6442474530\t[bpf]
";

    fn ksyms(text: &str) -> KernelSymbolizer {
        KernelSymbolizer::build(text, &crate::kernel::symbolize::Extents::default())
    }

    #[test]
    fn trampoline_frames_are_removed_without_doubling_the_function() {
        let mut s = Snapshot::default();
        // innermost first: wait_consider_task <- do_wait body <- trampoline <- do_wait <- caller
        s.traces
            .insert(1, vec![0x4001, 0x1001, 0xd100, 0x1002, 0x3401]);
        let f = kernel_frames(&s, 1, false, &ksyms(KALLSYMS));
        assert_eq!(f, vec!["kernel_wait4", "do_wait", "wait_consider_task"]);
    }

    #[test]
    fn the_instruction_an_interrupt_stopped_is_exact_not_a_return_address() {
        // Interrupted at copy_page_range's first byte: as a return address it would be
        // dup_mmap's last one (5.10 showed bpf_trampoline_put for __bpf_prog_enter+0).
        let mut s = Snapshot::default();
        s.traces.insert(1, vec![0x4810, 0x2800, 0x2410]);
        let f = kernel_frames(&s, 1, false, &ksyms(KALLSYMS));
        assert_eq!(
            f,
            vec![
                "dup_mmap",
                "copy_page_range",
                "asm_sysvec_apic_timer_interrupt"
            ]
        );
    }

    #[test]
    fn what_a_bpf_program_called_is_cut_with_the_program() {
        // A sample inside our own stack walk, in a program on dup_mmap's fentry trampoline.
        let mut s = Snapshot::default();
        s.traces
            .insert(1, vec![0x4c10, 0xc010, 0xd100, 0x2404, 0x2010]);
        let f = kernel_frames(&s, 1, false, &ksyms(KALLSYMS));
        assert_eq!(f, vec!["copy_process", "dup_mmap"]);
    }

    #[test]
    fn what_a_kprobe_handler_called_is_cut_with_the_handler() {
        // 5.10, a kretprobe placed through ftrace on alloc_pages: a sample in the handler's
        // unlock is the probe's work, charged to dup_mmap's callee where the probe fired.
        let mut s = Snapshot::default();
        s.traces
            .insert(1, vec![0x4e10, 0x4d90, 0x4d10, 0x2810, 0x2410]);
        let f = kernel_frames(&s, 1, false, &ksyms(KALLSYMS));
        assert_eq!(f, vec!["dup_mmap", "copy_page_range"]);
    }

    #[test]
    fn what_a_trampoline_runs_around_its_programs_is_cut_with_it() {
        // 6.12, fexit on copy_page_range: a sample in the migrate_enable that the
        // trampoline's __bpf_prog_exit_recur calls after the exit program is the probe's
        // work, charged to the function where the probe fired.
        let mut s = Snapshot::default();
        s.traces
            .insert(1, vec![0x4f10, 0x4e90, 0xd100, 0x2804, 0x2410]);
        let f = kernel_frames(&s, 1, false, &ksyms(KALLSYMS));
        assert_eq!(f, vec!["dup_mmap", "copy_page_range"]);
    }

    #[test]
    fn a_trampoline_past_the_last_text_symbol_never_names_its_neighbour() {
        // The 6.1 phantom: copy_process;dup_mmap;exit_amd_microcode;dup_mmap;copy_page_range.
        let mut s = Snapshot::default();
        s.traces
            .insert(1, vec![0x2810, 0x2410, 0xd040, 0x2404, 0x2010]);
        let f = kernel_frames(&s, 1, false, &ksyms(KALLSYMS));
        assert_eq!(f, vec!["copy_process", "dup_mmap", "copy_page_range"]);
        // Read before the trampoline existed, the table cannot name it: `[unknown]`, never
        // the preceding symbol.
        let before: String = KALLSYMS
            .lines()
            .filter(|l| !l.contains("[bpf]"))
            .map(|l| format!("{l}\n"))
            .collect();
        let f = kernel_frames(&s, 1, false, &ksyms(&before));
        assert_eq!(
            f,
            vec![
                "copy_process",
                "dup_mmap",
                UNKNOWN,
                "dup_mmap",
                "copy_page_range"
            ]
        );
        // Freed init text and memory past `_etext` are unknown too; runs of them fold to one.
        s.traces.insert(2, vec![0x6010, 0x5010, 0x7010, 0x1010]);
        assert_eq!(
            kernel_frames(&s, 2, false, &ksyms(KALLSYMS)),
            vec!["do_wait", UNKNOWN]
        );
        // At the root, they say the unwind ended there: no function called the rest.
        s.traces.insert(3, vec![0x1010, 0x6010, 0x7010]);
        assert_eq!(
            kernel_frames(&s, 3, false, &ksyms(KALLSYMS)),
            vec![TRUNCATED_KERNEL_STACK, "do_wait"]
        );
    }

    #[test]
    fn stacks_are_symbolized_root_first_without_probe_frames() {
        let mut usyms = UserSymbolizer::default();
        let files = stack_files(
            &snap(),
            &["do_wait".to_string()],
            &ksyms(KALLSYMS),
            &mut usyms,
        );
        assert_eq!(files.len(), 1);
        let (meta, folded) = &files[0];
        let content = folded.to_text();
        assert_eq!(meta.path, "stacks/oncpu/do_wait/waitpid-pid/n100.folded");
        assert_eq!(meta.total_ns, 3000);
        assert!(
            content.contains("entry_SYSCALL_64;do_wait 2000\n"),
            "{content}"
        );
        assert!(content.contains("[lost-kernel-stack] 1000\n"), "{content}");
    }

    /// The syscall tracing hook runs the tracer's own programs, under the plain name (5.10)
    /// and a compiler clone's (6.1); the dispatch around it is the traced work's.
    #[test]
    fn the_syscall_tracing_hook_is_a_probe_frame_under_a_clone_name_too() {
        for name in [
            "syscall_trace_enter",
            "syscall_trace_enter.constprop.0",
            "syscall_exit_work.isra.0",
        ] {
            assert!(is_probe_frame(name), "{name}");
        }
        for name in ["do_syscall_64", "syscall_enter_from_user_mode"] {
            assert!(!is_probe_frame(name), "{name}");
        }
    }

    #[test]
    fn user_frames_of_an_unknown_process_are_unknown_without_addresses() {
        let mut s = Snapshot::default();
        s.traces.insert(3, vec![0x7f00_0000_12ad, 0x12, 0x55]);
        let mut usyms = UserSymbolizer::default();
        assert_eq!(user_frames(&s, 3, 4_000_000, &mut usyms), vec![UNKNOWN]);
    }
}
