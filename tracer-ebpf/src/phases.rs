//! Phases (workload case, N): the current phase of each process, its aggregate row, the
//! threads' cached copy, and the phase-marker and `--phase-fn` programs that change it.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::bpf_get_current_pid_tgid,
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::*;

use crate::{
    filter::filter_pass,
    maps::{CURRENT_PHASE, NEXT_ROW, PHASE_GEN, PHASE_ROWS, PHASE_STATS, ROW_OWNER},
    util::{atomic_add, bump, config, now},
};

/// The phase generation, plus one (so that a zeroed cache is never valid).
#[inline(always)]
pub(crate) fn phase_gen() -> u64 {
    match PHASE_GEN.get(0) {
        Some(g) => *g + 1,
        None => 0,
    }
}

/// (case, n, aggregate row) of the phase process `tgid` is in.
#[inline(always)]
pub(crate) fn lookup_phase(tgid: u32) -> (u32, u64, u32) {
    match unsafe { CURRENT_PHASE.get(&tgid) } {
        Some(p) => (p.case, p.n, p.row),
        // A process that announced no phase is in the run's default one (an external
        // sweep's current N; unphased otherwise), except with --phase-fn, where only the
        // function's calls are (`phase_fn_entry` puts them there).
        None => match config() {
            Some(c) if c.flags & FLAG_PHASE_FN == 0 => (c.default_case, c.default_n, c.default_row),
            _ => (CASE_UNPHASED, 0, ROW_UNPHASED),
        },
    }
}

/// A process's phase as last looked up: in a thread's state, in the fast path's per-CPU slot
/// and in the syscall-entry slot, so that a traced call or syscall finds its phase without a
/// hash lookup while no phase changes. Valid while `PHASE_GEN` equals `generation - 1` (a zeroed
/// cache, generation 0, is never valid) and the process is `tgid`.
#[repr(C)]
pub(crate) struct PhaseCache {
    generation: u64,
    n: u64,
    case: u32,
    row: u32,
    tgid: u32,
    _pad: u32,
}

impl PhaseCache {
    /// (case, n, row) of process `tgid`, looked up again when a phase changed since the cache
    /// was filled. The generation is read before the lookup, so a change racing with it
    /// invalidates the cache again.
    #[inline(always)]
    pub(crate) fn get(&mut self, tgid: u32) -> (u32, u64, u32) {
        let current = phase_gen();
        if current == 0 || self.generation != current || self.tgid != tgid {
            let (case, n, row) = lookup_phase(tgid);
            self.case = case;
            self.n = n;
            self.row = row;
            self.tgid = tgid;
            self.generation = current;
        }
        (self.case, self.n, self.row)
    }

    /// The same without filling the cache, for the sampler: it interrupts the programs of
    /// the same CPU, so it must not write fields they may be writing.
    #[inline(always)]
    pub(crate) fn peek(&self, tgid: u32) -> (u32, u64) {
        let current = phase_gen();
        if current != 0 && self.generation == current && self.tgid == tgid {
            (self.case, self.n)
        } else {
            let (case, n, _) = lookup_phase(tgid);
            (case, n)
        }
    }
}

#[inline(always)]
pub(crate) fn bump_phase_gen() {
    if let Some(g) = PHASE_GEN.get_ptr_mut(0) {
        atomic_add(g, 1);
    }
}

// ---------------------------------------------------------------------------------------------
// Phase markers: uprobes on `tracer_phase_begin(case: u32, n: u64)` and
// `tracer_phase_end(case: u32, n: u64, ops: u64)` in the workload binary.

/// The aggregate row of a phase: the one it already has, or a newly claimed one (NO_ROW
/// when all `max_phases` rows are taken).
#[inline(always)]
fn phase_row(key: &PhaseKey, max_phases: u32) -> u32 {
    if let Some(r) = unsafe { PHASE_ROWS.get(key) } {
        return *r;
    }
    let Some(next) = NEXT_ROW.get_ptr_mut(0) else {
        return NO_ROW;
    };
    let mut r = unsafe { *next };
    let mut tries = 0;
    // Rows claimed by racing phase markers are skipped; a bounded walk keeps the verifier
    // happy and is never exhausted in practice (markers are rare and rows handed out in
    // order).
    while tries < 32 && r < max_phases as u64 {
        let row = r as u32;
        if ROW_OWNER.insert(&row, key, BPF_NOEXIST as u64).is_ok() {
            unsafe { *next = r + 1 };
            // Another CPU may have given this phase a row meanwhile: use that one. Ours
            // stays owned by the phase, empty; userspace merges rows by owner.
            if PHASE_ROWS.insert(key, &row, BPF_NOEXIST as u64).is_err() {
                if let Some(theirs) = unsafe { PHASE_ROWS.get(key) } {
                    return *theirs;
                }
            }
            return row;
        }
        r += 1;
        tries += 1;
    }
    NO_ROW
}

/// The phase messages' log target (what `--verbose` prints): the crate's, as when these
/// programs were in main.rs, not this module's path.
const LOG_TARGET: &str = "tracer_ebpf";

#[uprobe]
pub fn phase_begin(ctx: ProbeContext) -> u32 {
    let case: u64 = ctx.arg(0).unwrap_or(0);
    let n: u64 = ctx.arg(1).unwrap_or(0);
    begin_phase(case as u32, n);
    aya_log_ebpf::debug!(&ctx, target: LOG_TARGET, "phase begin: case {} n {}", case as u32, n);
    0
}

#[uprobe]
pub fn phase_end(ctx: ProbeContext) -> u32 {
    let ops: u64 = ctx.arg(2).unwrap_or(0);
    end_phase(ops);
    aya_log_ebpf::debug!(&ctx, target: LOG_TARGET, "phase end: ops {}", ops);
    0
}

/// The calling process enters phase (case, n), if it is traced.
#[inline(always)]
pub(crate) fn begin_phase(case: u32, n: u64) {
    let Some(cfg) = config() else { return };
    if !filter_pass(cfg) {
        return;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let key = PhaseKey { case, _pad: 0, n };
    let p = CurrentPhase {
        case,
        row: phase_row(&key, cfg.max_phases),
        n,
        begin_ns: now(),
    };
    enter_phase(tgid, &p);
}

/// Make `p` process `tgid`'s phase and have every thread look its phase up again.
#[inline(always)]
fn enter_phase(tgid: u32, p: &CurrentPhase) {
    let _ = CURRENT_PHASE.insert(&tgid, p, 0);
    bump_phase_gen();
    bump(counter::PHASE_MARKERS);
}

/// The calling process leaves its phase, which did `ops` operations.
#[inline(always)]
pub(crate) fn end_phase(ops: u64) {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let Some(p) = (unsafe { CURRENT_PHASE.get(&tgid) }) else {
        return;
    };
    let p = *p;
    let wall = now().saturating_sub(p.begin_ns);
    let key = PhaseKey {
        case: p.case,
        _pad: 0,
        n: p.n,
    };
    let added = match PHASE_STATS.get_ptr_mut(&key) {
        Some(s) => {
            let s = s as *mut u64;
            atomic_add(s, 1);
            atomic_add(unsafe { s.add(1) }, ops);
            atomic_add(unsafe { s.add(2) }, wall);
            true
        }
        None => PHASE_STATS
            .insert(
                &key,
                &PhaseStats {
                    phases: 1,
                    ops,
                    wall_ns: wall,
                },
                BPF_NOEXIST as u64,
            )
            .is_ok(),
    };
    if !added {
        bump(counter::AGG_MAP_FULL);
    }
    let _ = CURRENT_PHASE.remove(&tgid);
    bump_phase_gen();
    bump(counter::PHASE_MARKERS);
}

// ---------------------------------------------------------------------------------------------
// `--phase-fn`: the traced process is in the run's default phase (an external sweep's
// current N) while inside one user function: its entry begins the phase, its return ends it.

#[uprobe]
pub fn phase_fn_entry(_ctx: ProbeContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if !filter_pass(cfg) {
        return 0;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let p = CurrentPhase {
        case: cfg.default_case,
        row: cfg.default_row,
        n: cfg.default_n,
        begin_ns: now(),
    };
    enter_phase(tgid, &p);
    0
}

#[uretprobe]
pub fn phase_fn_exit(_ctx: RetProbeContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    end_phase(cfg.fn_ops);
    0
}
