//! The tracer's eBPF programs.
//!
//! Every traced call becomes a *span* (entry -> exit) paired per thread and per target with a
//! small frame stack, so nested and recursive calls pair exactly. On-CPU time is accumulated
//! from `sched_switch`, so a call that sleeps (do_wait waiting for its child) reports its
//! blocked time as off-CPU instead of loop cost. Spans are aggregated in the kernel per
//! (target, workload case, N): counts and sums in a per-CPU array, log-linear histograms in
//! an array, and stack weights. Userspace reads a few maps at the end, so nothing is lost at
//! any call rate.
//!
//! The hot path (one entry and one exit per traced call) does one hash lookup each, for the
//! thread's state; everything else it touches is an array element. A phase (case, N) gets an
//! aggregate *row* when it begins, and threads cache their process's phase and row, checked
//! against a generation number that every phase change bumps.
//!
//! Attach points are *slots*: one program per slot and kind, all sharing the handlers below.
//! Userspace decides at run time which slot measures which target (the `SLOTS` array), so the
//! attach-plan table lives in userspace as data.
#![no_std]
#![no_main]
#![feature(asm_experimental_arch)]

use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    cty::c_void,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_stack,
        bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user,
        bpf_probe_read_user_str_bytes,
    },
    macros::{fentry, fexit, kprobe, kretprobe, map, perf_event, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::{
        FEntryContext, FExitContext, PerfEventContext, ProbeContext, RetProbeContext,
        TracePointContext,
    },
};
use tracer_ebpf::*;

/// One open call on one thread.
#[repr(C)]
#[derive(Clone, Copy)]
struct Frame {
    entry_ns: u64,
    /// The thread's on-CPU clock at entry; the span's on-CPU time is the difference at exit.
    oncpu_at_entry: u64,
    target: u32,
    _pad: u32,
}

/// Per-thread state, kept from a thread's first traced call until it exits, with the open
/// calls inline: one hash lookup per entry and exit instead of a frame map insert, lookup
/// and delete per call. Preallocated, because the perf_event sampler reads it and (before
/// 6.1) perf_event programs may only use preallocated hash maps.
#[repr(C)]
struct ThreadState {
    /// On-CPU time accumulated since the first open frame, up to `last_in_ns`.
    oncpu_ns: u64,
    /// When the thread last started running (or opened its first frame).
    last_in_ns: u64,
    /// When the thread was switched out while inside a target (0 = running).
    off_since_ns: u64,
    off_n: u64,
    off_case: u32,
    off_target: u32,
    off_kstack: i32,
    /// Open calls over all targets, including untimed ones beyond MAX_NEST.
    active: u32,
    /// Open calls per target (to tell a missed entry from a nested exit).
    depth: [u32; MAX_TARGETS],
    /// The open calls, innermost at `active - 1`.
    frames: [Frame; MAX_NEST],
    /// The process's phase as last looked up, valid while `PHASE_GEN` equals
    /// `phase_gen - 1` (0 = never looked up).
    phase_gen: u64,
    phase_n: u64,
    phase_case: u32,
    phase_row: u32,
}

const FN_SLOT_BASE_FENTRY: u32 = SLOT_BASE_FENTRY;
const FN_SLOT_BASE_KPROBE: u32 = SLOT_BASE_KPROBE;
const TP_SLOT_BASE: u32 = SLOT_BASE_TP;

#[map]
static CONFIG: Array<Config> = Array::with_max_entries(1, 0);

#[map]
static SLOTS: Array<SlotConf> = Array::with_max_entries(SLOT_COUNT, 0);

#[map]
static FOLLOW: HashMap<u32, u8> = HashMap::with_max_entries(32768, 0);

#[map]
static THREADS: HashMap<u32, ThreadState> = HashMap::with_max_entries(16384, 0);

/// Never written: a zeroed ThreadState to insert from (kept off the 512-byte BPF stack).
#[map]
static ZERO_THREAD: Array<ThreadState> = Array::with_max_entries(1, 0);

/// Per-CPU call counter for sampling caller stacks of short calls (see `on_exit`).
#[map]
static CALLER_TICK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[map]
static CURRENT_PHASE: HashMap<u32, CurrentPhase> = HashMap::with_max_entries(16384, 0);

/// Bumped whenever any process's phase changes: invalidates the threads' cached phases.
#[map]
static PHASE_GEN: Array<u64> = Array::with_max_entries(1, 0);

/// Aggregate row of each phase seen, and the phase that owns each row. A row is claimed by
/// inserting into `ROW_OWNER` with BPF_NOEXIST, which is atomic: kernels before 5.12 have no
/// atomic fetch-and-add to hand out numbers with. `NEXT_ROW` is only a hint where to start.
/// Userspace sizes both hashes to `Config::max_phases` and claims row 0 for unphased spans.
#[map]
static PHASE_ROWS: HashMap<PhaseKey, u32> = HashMap::with_max_entries(128, 0);

#[map]
static ROW_OWNER: HashMap<u32, PhaseKey> = HashMap::with_max_entries(128, 0);

#[map]
static NEXT_ROW: Array<u64> = Array::with_max_entries(1, 0);

#[map]
static PHASE_STATS: HashMap<PhaseKey, PhaseStats> = HashMap::with_max_entries(4096, 0);

/// Element `span_index(row, stride, target)`. Sized by userspace.
#[map]
static SPANS: PerCpuArray<SpanStats> = PerCpuArray::with_max_entries(128 * 8, 0);

/// Element `hist_index(span element, kind)`: one whole histogram. Shared (not per-CPU) with
/// atomic adds: per-CPU rows would lock rows x CPUs x 7.8 KiB. Sized by userspace.
#[map]
static HIST: Array<HistRow> = Array::with_max_entries(128 * 8 * 2, 0);

#[map]
static STACKS: HashMap<StackKey, StackVal> = HashMap::with_max_entries(32768, 0);

/// Kernel and user stacks, each stored once under a 31-bit id derived from its frames. Not
/// the kernel's stack-trace maps: those file a stack under its hash bucket and refuse a new
/// stack whose bucket is taken, which lost a few percent of the stacks of a sweep, and not
/// at random (long, varied stacks collide first). Here a stack is lost only when its store
/// is full or two different stacks share an id (they are compared frame by frame, so never
/// merged). Two stores, so the sampler's stacks never compete for room with the many caller
/// stacks. Userspace sizes both at load time.
#[map]
static STACK_TRACES: HashMap<u32, StackBuf> = HashMap::with_max_entries(16384, 0);

#[map]
static SAMPLED_STACKS: HashMap<u32, StackBuf> = HashMap::with_max_entries(16384, 0);

/// How deeply stack-taking programs can nest on one CPU (a perf_event sample in the middle
/// of an fentry program, a target called from an interrupt): one scratch buffer per level.
const STACK_NEST_MAX: u32 = 4;

/// Where a stack is taken before it is filed (512 bytes: too big for the BPF stack).
#[map]
static STACK_SCRATCH: PerCpuArray<StackBuf> = PerCpuArray::with_max_entries(STACK_NEST_MAX, 0);

/// The stack-taking programs running on this CPU right now: the next free scratch level.
#[map]
static STACK_NEST: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// Userspace shrinks this to one page unless raw events are requested.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(4 << 20, 0);

/// Discover mode: traced tasks that blocked, from switch-out to switch-in.
#[map]
static OFF_START: HashMap<u32, OffStart> = HashMap::with_max_entries(16384, 0);

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Threads inside an openat() of a path that matched `Config::path_prefix`.
#[map]
static PENDING_OPEN: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);

/// (tgid << 32 | fd) of files opened with the tracked prefix.
#[map]
static TRACKED_FD: HashMap<u64, u8> = HashMap::with_max_entries(4096, 0);

// Array indices are masked after their range checks: older verifiers (5.10, 6.1) do not carry
// bounds from a 32-bit compare over to the 64-bit register used for the address, and reject
// "math between map_value pointer and register with unbounded min value". A mask bounds the
// register on every kernel. The sizes are powers of two (asserted below).
const _: () = assert!(MAX_TARGETS.is_power_of_two());
const _: () = assert!(MAX_NEST.is_power_of_two());

/// Hide a value's known range from LLVM, so the mask that follows is not optimised away
/// (LLVM knows the range from the earlier check; the verifier may not).
#[inline(always)]
fn opaque(mut v: u64) -> u64 {
    unsafe { core::arch::asm!("{0} = {0}", inout(reg) v) };
    v
}

#[inline(always)]
fn target_ix(t: u32) -> usize {
    (opaque(t as u64) & (MAX_TARGETS as u64 - 1)) as usize
}

#[inline(always)]
fn nest_ix(a: u32) -> usize {
    (opaque(a as u64) & (MAX_NEST as u64 - 1)) as usize
}

#[inline(always)]
fn now() -> u64 {
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn config() -> Option<&'static Config> {
    CONFIG.get(0)
}

#[inline(always)]
fn bump(idx: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(idx) {
        unsafe { *c += 1 };
    }
}

#[inline(always)]
fn atomic_add(p: *mut u64, v: u64) {
    // A plain BPF_XADD (no BPF_FETCH): kernels older than 5.12 accept only this form, and
    // core's atomics are not available on the BPF target.
    unsafe {
        core::arch::asm!("lock *(u64 *)({p} + 0) += {v}", p = in(reg) p, v = in(reg) v);
    }
}

/// Does the current task pass the configured filter?
#[inline(always)]
fn filter_pass(cfg: &Config) -> bool {
    match cfg.filter {
        FILTER_ALL => true,
        FILTER_FOLLOW => {
            let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
            // The traced command itself, without a hash lookup.
            tgid == cfg.root_tgid || unsafe { FOLLOW.get(&tgid) }.is_some()
        }
        FILTER_COMM => match bpf_get_current_comm() {
            Ok(comm) => {
                let mut i = 0;
                while i < 16 {
                    if comm[i] != cfg.comm[i] {
                        return false;
                    }
                    if comm[i] == 0 {
                        break;
                    }
                    i += 1;
                }
                true
            }
            Err(_) => false,
        },
        FILTER_CGROUP => (unsafe { bpf_get_current_cgroup_id() }) == cfg.cgroup_id,
        _ => false,
    }
}

/// The phase generation, plus one (so that a zeroed cache is never valid).
#[inline(always)]
fn phase_gen() -> u64 {
    match PHASE_GEN.get(0) {
        Some(g) => *g + 1,
        None => 0,
    }
}

/// (case, n, aggregate row) of the phase process `tgid` is in.
#[inline(always)]
fn lookup_phase(tgid: u32) -> (u32, u64, u32) {
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

/// The current thread's phase, from its cache when no phase changed since it was filled.
/// The generation is read before the lookup, so a change racing with it invalidates the
/// cache again.
#[inline(always)]
fn thread_phase(st: &mut ThreadState, tgid: u32) -> (u32, u64, u32) {
    let current = phase_gen();
    if current == 0 || st.phase_gen != current {
        let (case, n, row) = lookup_phase(tgid);
        st.phase_case = case;
        st.phase_n = n;
        st.phase_row = row;
        st.phase_gen = current;
    }
    (st.phase_case, st.phase_n, st.phase_row)
}

/// The same without filling the cache, for the sampler: it interrupts the exit program of
/// the same thread, so it must not write fields that program may be writing.
#[inline(always)]
fn peek_phase(st: &ThreadState, tgid: u32) -> (u32, u64) {
    let current = phase_gen();
    if current != 0 && st.phase_gen == current {
        (st.phase_case, st.phase_n)
    } else {
        let (case, n, _) = lookup_phase(tgid);
        (case, n)
    }
}

#[inline(always)]
fn bump_phase_gen() {
    if let Some(g) = PHASE_GEN.get_ptr_mut(0) {
        atomic_add(g, 1);
    }
}

#[inline(always)]
fn slot_target(slot: u32) -> Option<u32> {
    let conf = SLOTS.get(slot)?;
    if conf.role == ROLE_NONE || conf.target as usize >= MAX_TARGETS {
        return None;
    }
    Some(conf.target)
}

#[inline(always)]
fn thread_state(tid: u32) -> Option<*mut ThreadState> {
    if let Some(st) = THREADS.get_ptr_mut(&tid) {
        return Some(st);
    }
    let zero = ZERO_THREAD.get(0)?;
    if THREADS.insert(&tid, zero, BPF_NOEXIST as u64).is_err() {
        // Either another CPU inserted it first (fine: look it up) or the map is full.
        if let Some(st) = THREADS.get_ptr_mut(&tid) {
            return Some(st);
        }
        bump(counter::THREAD_MAP_FULL);
        return None;
    }
    THREADS.get_ptr_mut(&tid)
}

#[inline(always)]
fn on_enter(slot: u32) {
    let Some(target) = slot_target(slot) else {
        return;
    };
    let Some(cfg) = config() else { return };
    if !filter_pass(cfg) {
        return;
    }
    let ts = now();
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(st) = thread_state(tid) else { return };
    let st = unsafe { &mut *st };
    if st.active == 0 {
        st.oncpu_ns = 0;
        st.last_in_ns = ts;
        st.off_since_ns = 0;
    }
    if target as usize >= MAX_TARGETS {
        return;
    }
    let t = target_ix(target);
    let a = st.active;
    if (a as usize) < MAX_NEST {
        let oncpu_at_entry = st.oncpu_ns + ts.saturating_sub(st.last_in_ns);
        st.frames[nest_ix(a)] = Frame {
            entry_ns: ts,
            oncpu_at_entry,
            target,
            _pad: 0,
        };
    } else {
        bump(counter::DEPTH_OVERFLOW);
    }
    st.depth[t] += 1;
    st.active = a + 1;
}

/// No stack: the context had no frames of that kind (a user stack of a kernel thread, the
/// kernel stack of a sample taken in user mode).
const NO_STACK: i32 = -1;
/// A stack that could not be recorded (counted in `STACK_ERRORS` and its kind's counter).
const LOST_STACK: i32 = -2;

/// A caller or off-CPU stack (the current task's kernel stack, or its user stack with
/// `BPF_F_USER_STACK`), filed in `STACK_TRACES`.
#[inline(always)]
fn stack_id<C: EbpfContext>(ctx: &C, flags: u64, lost: u32) -> i32 {
    store_stack(ctx, &STACK_TRACES, flags, lost)
}

/// Take the current stack and file it in `store`; its id, `NO_STACK` or `LOST_STACK`.
#[inline(always)]
fn store_stack<C: EbpfContext>(
    ctx: &C,
    store: &HashMap<u32, StackBuf>,
    flags: u64,
    lost: u32,
) -> i32 {
    let Some(nest) = STACK_NEST.get_ptr_mut(0) else {
        return lose_stack(lost);
    };
    // A program that interrupts this one between the read and the write restores the
    // level before it returns, so a plain read-modify-write is enough on one CPU.
    let level = unsafe { *nest };
    if level >= STACK_NEST_MAX {
        return lose_stack(lost);
    }
    unsafe { *nest = level + 1 };
    let id = file_stack(ctx, store, flags, level, lost);
    unsafe { *nest = level };
    id
}

/// A stack lost before it was taken (counted as taken, then as lost).
#[inline(always)]
fn lose_stack(lost: u32) -> i32 {
    bump(counter::STACKS_TAKEN);
    lost_after_taken(lost)
}

#[inline(always)]
fn file_stack<C: EbpfContext>(
    ctx: &C,
    store: &HashMap<u32, StackBuf>,
    flags: u64,
    level: u32,
    lost: u32,
) -> i32 {
    let Some(buf) = STACK_SCRATCH.get_ptr_mut(level) else {
        return lose_stack(lost);
    };
    // The kernel zeroes the buffer past the frames it writes.
    let len = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            buf as *mut c_void,
            core::mem::size_of::<StackBuf>() as u32,
            flags,
        )
    };
    if len == 0 {
        return NO_STACK;
    }
    if len < 0 {
        return lose_stack(lost);
    }
    bump(counter::STACKS_TAKEN);
    let buf = unsafe { &*buf };
    // Every word, frames and the zeros after them, without an early exit: one straight path
    // for the verifier (a loop that may stop at any of 64 frames, followed by another, made
    // it explore thousands of paths in every program and tripled the load time).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for i in 0..STACK_DEPTH {
        h = (h ^ buf.ips[i]).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    }
    let id = ((h ^ (h >> 32)) as u32) & 0x7fff_ffff;
    if let Some(old) = unsafe { store.get(&id) } {
        return if same_stack(old, buf) {
            id as i32
        } else {
            lost_after_taken(lost)
        };
    }
    if store.insert(&id, buf, BPF_NOEXIST as u64).is_ok() {
        return id as i32;
    }
    // Another CPU filed a stack under this id first, or the store is full.
    match unsafe { store.get(&id) } {
        Some(old) if same_stack(old, buf) => id as i32,
        _ => lost_after_taken(lost),
    }
}

/// A lost stack already counted as taken.
#[inline(always)]
fn lost_after_taken(lost: u32) -> i32 {
    bump(counter::STACK_ERRORS);
    bump(lost);
    LOST_STACK
}

/// Both buffers hold zeros after their last frame, so comparing every word compares the
/// stacks and their lengths; no early exit, for the verifier (see `file_stack`).
#[inline(always)]
fn same_stack(a: &StackBuf, b: &StackBuf) -> bool {
    let mut diff = 0u64;
    for i in 0..STACK_DEPTH {
        diff |= a.ips[i] ^ b.ips[i];
    }
    diff == 0
}

#[inline(always)]
fn on_exit<C: EbpfContext>(ctx: &C, slot: u32, count_unpaired: bool) {
    let Some(target) = slot_target(slot) else {
        return;
    };
    let ts = now();
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    // Exits fire for every task (the filter is applied at entry): a task without state was
    // never traced. A traced task with no open call of this target missed an entry (the
    // probe was attached mid-call); for exit tracepoints that also happens for every
    // unfiltered call (reads of untracked fds), so only function probes count it.
    let Some(st) = THREADS.get_ptr_mut(&tid) else {
        return;
    };
    let st = unsafe { &mut *st };
    if target as usize >= MAX_TARGETS {
        return;
    }
    let t = target_ix(target);
    if st.depth[t] == 0 {
        if count_unpaired {
            bump(counter::UNPAIRED_EXIT);
        }
        return;
    }
    st.depth[t] -= 1;
    let Some(cfg) = config() else { return };
    let (case, n, row) = thread_phase(st, tgid);
    let key = AggKey { target, case, n };
    let ix = span_index(row, cfg.target_stride, target);
    let a = st.active;
    if a == 0 {
        record_untimed(row, ix);
        return;
    }
    let mut top = a - 1;
    st.active = top;
    if top as usize >= MAX_NEST {
        record_untimed(row, ix);
        return;
    }
    // Calls exit innermost first. If the innermost open call is another target's, its exit
    // was lost (a kretprobe miss): drop the frames above this target's.
    let mut found = st.frames[nest_ix(top)].target == target;
    let mut i = 0;
    while !found && i < MAX_NEST as u32 && top > 0 {
        top -= 1;
        found = st.frames[nest_ix(top)].target == target;
        i += 1;
    }
    if !found {
        record_untimed(row, ix);
        return;
    }
    if top != a - 1 {
        if let Some(c) = COUNTERS.get_ptr_mut(counter::ABANDONED_FRAMES) {
            unsafe { *c += (a - 1 - top) as u64 };
        }
        st.active = top;
    }
    let f = st.frames[nest_ix(top)];
    let wall = ts.saturating_sub(f.entry_ns);
    let oncpu_now = st.oncpu_ns + ts.saturating_sub(st.last_in_ns);
    let oncpu = oncpu_now.saturating_sub(f.oncpu_at_entry).min(wall);
    record_span(row, ix, wall, oncpu);

    if cfg.flags & FLAG_CALLER_STACKS != 0 {
        // Walking two stacks costs about a microsecond: always worth it for a call that
        // took longer than CALLER_ALWAYS_NS, sampled 1 in CALLER_SAMPLE (and weighted by
        // as much) for shorter ones, so the weights stay unbiased.
        let weight = if wall >= CALLER_ALWAYS_NS {
            1
        } else {
            match CALLER_TICK.get_ptr_mut(0) {
                Some(c) => {
                    let v = unsafe { *c };
                    unsafe { *c = v + 1 };
                    if v % CALLER_SAMPLE == 0 {
                        CALLER_SAMPLE
                    } else {
                        0
                    }
                }
                None => 0,
            }
        };
        if weight > 0 {
            let skey = StackKey {
                agg: key,
                kind: STACK_CALLER,
                kstack: stack_id(ctx, 0, counter::STACKS_LOST_CALLER),
                ustack: stack_id(ctx, BPF_F_USER_STACK as u64, counter::STACKS_LOST_CALLER),
                tgid,
            };
            add_stack_weighted(&skey, weight, wall * weight);
        }
    }
    if cfg.flags & FLAG_RAW_EVENTS != 0 {
        let ev = SpanEvent {
            end_ns: ts,
            wall_ns: wall,
            oncpu_ns: oncpu,
            n,
            case,
            target,
            tid,
            tgid,
        };
        if EVENTS.output::<SpanEvent>(&ev, 0).is_err() {
            bump(counter::RINGBUF_DROPS);
        }
    }
}

/// Calls at least this long always get their caller stacks recorded.
const CALLER_ALWAYS_NS: u64 = 20_000;
/// Shorter calls get them 1 in this many times (a power of two), weighted by as much.
const CALLER_SAMPLE: u64 = 64;

/// The `SPANS` element of a call, or None (counted as lost) when its phase got no row.
#[inline(always)]
fn span_stats(row: u32, ix: u32) -> Option<*mut SpanStats> {
    if row == NO_ROW {
        bump(counter::AGG_MAP_FULL);
        return None;
    }
    let s = SPANS.get_ptr_mut(ix);
    if s.is_none() {
        bump(counter::AGG_MAP_FULL);
    }
    s
}

/// A call counted without a duration.
#[inline(always)]
fn record_untimed(row: u32, ix: u32) {
    if let Some(s) = span_stats(row, ix) {
        let s = unsafe { &mut *s };
        s.calls += 1;
        s.untimed += 1;
    }
}

#[inline(always)]
fn record_span(row: u32, ix: u32, wall: u64, oncpu: u64) {
    let Some(s) = span_stats(row, ix) else { return };
    update_stats(unsafe { &mut *s }, wall, oncpu);
    hist_add(hist_index(ix, HIST_WALL), hist_bucket(wall));
    hist_add(hist_index(ix, HIST_ONCPU), hist_bucket(oncpu));
}

#[inline(always)]
fn update_stats(s: &mut SpanStats, wall: u64, oncpu: u64) {
    // A per-CPU element created on another CPU starts at zero here: treat calls == 0 as empty.
    let first = s.calls == s.untimed;
    s.calls += 1;
    s.wall_sum += wall;
    s.oncpu_sum += oncpu;
    if first || wall < s.wall_min {
        s.wall_min = wall;
    }
    if wall > s.wall_max {
        s.wall_max = wall;
    }
    if first || oncpu < s.oncpu_min {
        s.oncpu_min = oncpu;
    }
    if oncpu > s.oncpu_max {
        s.oncpu_max = oncpu;
    }
}

#[inline(always)]
fn hist_add(hist_ix: u32, bucket: u32) {
    let Some(h) = HIST.get_ptr_mut(hist_ix) else {
        bump(counter::AGG_MAP_FULL);
        return;
    };
    // A 64-bit bound on a value the verifier cannot otherwise bound (hist_bucket's result).
    let b = opaque(bucket as u64);
    if b >= HIST_BUCKETS as u64 {
        return;
    }
    atomic_add(unsafe { (h as *mut u64).add(b as usize) }, 1);
}

#[inline(always)]
fn add_stack(key: &StackKey, ns: u64) {
    add_stack_weighted(key, 1, ns)
}

#[inline(always)]
fn add_stack_weighted(key: &StackKey, count: u64, ns: u64) {
    if let Some(v) = STACKS.get_ptr_mut(key) {
        let v = v as *mut u64;
        atomic_add(v, count);
        atomic_add(unsafe { v.add(1) }, ns);
        return;
    }
    let val = StackVal { count, ns };
    if STACKS.insert(key, &val, BPF_NOEXIST as u64).is_err() {
        match STACKS.get_ptr_mut(key) {
            Some(v) => {
                let v = v as *mut u64;
                atomic_add(v, count);
                atomic_add(unsafe { v.add(1) }, ns);
            }
            None => bump(counter::STACK_ERRORS),
        }
    }
}

#[inline(always)]
fn on_point(slot: u32) {
    let Some(target) = slot_target(slot) else {
        return;
    };
    let Some(cfg) = config() else { return };
    if !filter_pass(cfg) {
        return;
    }
    // Point events are rare (plans that can only count): no thread state, a direct lookup.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let (_, _, row) = lookup_phase(tgid);
    record_untimed(row, span_index(row, cfg.target_stride, target));
}

// ---------------------------------------------------------------------------------------------
// Function slots: fentry/fexit and kprobe/kretprobe pairs.

macro_rules! fn_slot {
    ($i:literal, $fentry:ident, $fexit:ident, $kprobe:ident, $kretprobe:ident) => {
        #[fentry]
        pub fn $fentry(_ctx: FEntryContext) -> i32 {
            on_enter(FN_SLOT_BASE_FENTRY + $i);
            0
        }
        #[fexit]
        pub fn $fexit(ctx: FExitContext) -> i32 {
            on_exit(&ctx, FN_SLOT_BASE_FENTRY + $i, true);
            0
        }
        #[kprobe]
        pub fn $kprobe(_ctx: ProbeContext) -> u32 {
            on_enter(FN_SLOT_BASE_KPROBE + $i);
            0
        }
        #[kretprobe]
        pub fn $kretprobe(ctx: RetProbeContext) -> u32 {
            on_exit(&ctx, FN_SLOT_BASE_KPROBE + $i, true);
            0
        }
    };
}

fn_slot!(0, fentry_0, fexit_0, kprobe_0, kretprobe_0);
fn_slot!(1, fentry_1, fexit_1, kprobe_1, kretprobe_1);
fn_slot!(2, fentry_2, fexit_2, kprobe_2, kretprobe_2);
fn_slot!(3, fentry_3, fexit_3, kprobe_3, kretprobe_3);
fn_slot!(4, fentry_4, fexit_4, kprobe_4, kretprobe_4);
fn_slot!(5, fentry_5, fexit_5, kprobe_5, kretprobe_5);
fn_slot!(6, fentry_6, fexit_6, kprobe_6, kretprobe_6);
fn_slot!(7, fentry_7, fexit_7, kprobe_7, kretprobe_7);
fn_slot!(8, fentry_8, fexit_8, kprobe_8, kretprobe_8);
fn_slot!(9, fentry_9, fexit_9, kprobe_9, kretprobe_9);
fn_slot!(10, fentry_10, fexit_10, kprobe_10, kretprobe_10);
fn_slot!(11, fentry_11, fexit_11, kprobe_11, kretprobe_11);

// ---------------------------------------------------------------------------------------------
// User-function slots: uprobe/uretprobe pairs (user-space targets, and the pairing tests).

macro_rules! uprobe_slot {
    ($i:literal, $entry:ident, $exit:ident) => {
        #[uprobe]
        pub fn $entry(_ctx: ProbeContext) -> u32 {
            on_enter(SLOT_BASE_UPROBE + $i);
            0
        }
        #[uretprobe]
        pub fn $exit(ctx: RetProbeContext) -> u32 {
            on_exit(&ctx, SLOT_BASE_UPROBE + $i, true);
            0
        }
    };
}

uprobe_slot!(0, uprobe_0, uretprobe_0);
uprobe_slot!(1, uprobe_1, uretprobe_1);
uprobe_slot!(2, uprobe_2, uretprobe_2);
uprobe_slot!(3, uprobe_3, uretprobe_3);

// ---------------------------------------------------------------------------------------------
// Tracepoint slots: role configured per slot (enter, exit or point).

#[inline(always)]
fn on_tp(ctx: &TracePointContext, j: u32) {
    let slot = TP_SLOT_BASE + j;
    let Some(conf) = SLOTS.get(slot) else { return };
    match conf.role {
        ROLE_ENTER => {
            if conf.flags & SLOT_FLAG_TRACKED_FD != 0 {
                let Ok(fd) = (unsafe { ctx.read_at::<u64>(conf.arg_off as usize) }) else {
                    return;
                };
                let tgid = bpf_get_current_pid_tgid() >> 32;
                let key = (tgid << 32) | (fd & 0xffff_ffff);
                if unsafe { TRACKED_FD.get(&key) }.is_none() {
                    return;
                }
            }
            on_enter(slot)
        }
        ROLE_EXIT => on_exit(ctx, slot, false),
        ROLE_POINT => on_point(slot),
        _ => {}
    }
}

macro_rules! tp_slot {
    ($i:literal, $name:ident) => {
        #[tracepoint]
        pub fn $name(ctx: TracePointContext) -> u32 {
            on_tp(&ctx, $i);
            0
        }
    };
}

tp_slot!(0, tp_0);
tp_slot!(1, tp_1);
tp_slot!(2, tp_2);
tp_slot!(3, tp_3);
tp_slot!(4, tp_4);
tp_slot!(5, tp_5);
tp_slot!(6, tp_6);
tp_slot!(7, tp_7);
tp_slot!(8, tp_8);
tp_slot!(9, tp_9);
tp_slot!(10, tp_10);
tp_slot!(11, tp_11);
tp_slot!(12, tp_12);
tp_slot!(13, tp_13);
tp_slot!(14, tp_14);
tp_slot!(15, tp_15);
tp_slot!(16, tp_16);
tp_slot!(17, tp_17);
tp_slot!(18, tp_18);
tp_slot!(19, tp_19);

// ---------------------------------------------------------------------------------------------
// Scheduler: on/off-CPU accounting and process-tree following.

/// `sched:sched_switch`. The current task is still `prev` here.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    let ts = now();
    let pid_tgid = bpf_get_current_pid_tgid();
    let prev = pid_tgid as u32;
    if prev != 0 {
        if let Some(st) = THREADS.get_ptr_mut(&prev) {
            let st = unsafe { &mut *st };
            if st.active > 0 && st.off_since_ns == 0 {
                st.oncpu_ns += ts.saturating_sub(st.last_in_ns);
                st.off_since_ns = ts;
                if cfg.flags & FLAG_OFFCPU_STACKS != 0 {
                    let (case, n, _) = thread_phase(st, (pid_tgid >> 32) as u32);
                    st.off_case = case;
                    st.off_n = n;
                    st.off_target = top_target(st);
                    st.off_kstack = stack_id(&ctx, 0, counter::STACKS_LOST_OFFCPU);
                }
            }
        }
    }
    if cfg.flags & FLAG_DISCOVER != 0 && prev != 0 && filter_pass(cfg) {
        let (case, n, _) = lookup_phase((pid_tgid >> 32) as u32);
        let start = OffStart {
            since_ns: ts,
            n,
            case,
            kstack: stack_id(&ctx, 0, counter::STACKS_LOST_OFFCPU),
        };
        if OFF_START.insert(&prev, &start, 0).is_err() {
            bump(counter::STACK_ERRORS);
        }
    }
    let Ok(next) = (unsafe { ctx.read_at::<i32>(cfg.switch_next_pid_off as usize) }) else {
        return 0;
    };
    let next = next as u32;
    if cfg.flags & FLAG_DISCOVER != 0 && next != 0 {
        if let Some(start) = unsafe { OFF_START.get(&next) } {
            let start = *start;
            let _ = OFF_START.remove(&next);
            let key = StackKey {
                agg: AggKey {
                    target: 0,
                    case: start.case,
                    n: start.n,
                },
                kind: STACK_PROFILE_OFFCPU,
                kstack: start.kstack,
                ustack: -1,
                tgid: 0,
            };
            add_stack(&key, ts.saturating_sub(start.since_ns));
        }
    }
    if next != 0 {
        if let Some(st) = THREADS.get_ptr_mut(&next) {
            let st = unsafe { &mut *st };
            if st.active > 0 && st.off_since_ns != 0 {
                let blocked = ts.saturating_sub(st.off_since_ns);
                st.last_in_ns = ts;
                st.off_since_ns = 0;
                if cfg.flags & FLAG_OFFCPU_STACKS != 0 && st.off_kstack >= 0 {
                    let key = StackKey {
                        agg: AggKey {
                            target: st.off_target,
                            case: st.off_case,
                            n: st.off_n,
                        },
                        kind: STACK_OFFCPU,
                        kstack: st.off_kstack,
                        ustack: -1,
                        tgid: 0,
                    };
                    add_stack(&key, blocked);
                }
            }
        }
    }
    0
}

#[inline(always)]
fn top_target(st: &ThreadState) -> u32 {
    let a = st.active;
    if a == 0 {
        return 0;
    }
    let i = if a as usize > MAX_NEST {
        MAX_NEST as u32
    } else {
        a
    };
    st.frames[nest_ix(i - 1)].target
}

/// `sched:sched_process_fork`: children of followed processes are followed too.
#[tracepoint]
pub fn sched_fork(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if cfg.filter != FILTER_FOLLOW {
        return 0;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if unsafe { FOLLOW.get(&tgid) }.is_none() {
        return 0;
    }
    if let Ok(child) = unsafe { ctx.read_at::<i32>(cfg.fork_child_pid_off as usize) } {
        let _ = FOLLOW.insert(&(child as u32), &1u8, 0);
    }
    0
}

/// `sched:sched_process_exit`: forget the thread (and the process when its leader exits) so
/// maps do not grow and a reused pid is not mistaken for a followed one.
#[tracepoint]
pub fn sched_exit(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    if let Some(st) = unsafe { THREADS.get(&tid) } {
        if st.active > 0 {
            if let Some(c) = COUNTERS.get_ptr_mut(counter::ABANDONED_FRAMES) {
                unsafe { *c += st.active as u64 };
            }
        }
        let _ = THREADS.remove(&tid);
    }
    let _ = PENDING_OPEN.remove(&tid);
    let _ = OFF_START.remove(&tid);
    if tid == tgid {
        let _ = FOLLOW.remove(&tgid);
        if CURRENT_PHASE.remove(&tgid).is_ok() {
            bump_phase_gen();
        }
        // A reused pid must not inherit the fast path.
        if let Some(cfg) = CONFIG.get_ptr_mut(0) {
            if unsafe { (*cfg).root_tgid } == tgid {
                unsafe { (*cfg).root_tgid = 0 };
            }
        }
    }
    0
}

// ---------------------------------------------------------------------------------------------
// fd tracking for syscall brackets on particular files (read() of /proc/sysvipc/*).

#[tracepoint]
pub fn openat_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if !filter_pass(cfg) {
        return 0;
    }
    let Ok(fname) = (unsafe { ctx.read_at::<u64>(cfg.openat_filename_off as usize) }) else {
        return 0;
    };
    let mut buf = [0u8; 32];
    let Ok(s) = (unsafe { bpf_probe_read_user_str_bytes(fname as *const u8, &mut buf) }) else {
        return 0;
    };
    let len = cfg.path_prefix_len as usize;
    if len == 0 || len > 32 || s.len() < len {
        return 0;
    }
    let mut i = 0;
    while i < 32 {
        if i >= len {
            break;
        }
        if buf[i] != cfg.path_prefix[i] {
            return 0;
        }
        i += 1;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let _ = PENDING_OPEN.insert(&tid, &1u8, 0);
    0
}

#[tracepoint]
pub fn openat_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if unsafe { PENDING_OPEN.get(&tid) }.is_none() {
        return 0;
    }
    let _ = PENDING_OPEN.remove(&tid);
    let Some(cfg) = config() else { return 0 };
    let Ok(ret) = (unsafe { ctx.read_at::<i64>(cfg.openat_ret_off as usize) }) else {
        return 0;
    };
    if ret >= 0 {
        let key = (pid_tgid & 0xffff_ffff_0000_0000) | (ret as u64 & 0xffff_ffff);
        let _ = TRACKED_FD.insert(&key, &1u8, 0);
    }
    0
}

#[tracepoint]
pub fn close_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    let Ok(fd) = (unsafe { ctx.read_at::<u64>(cfg.close_fd_off as usize) }) else {
        return 0;
    };
    let key = (bpf_get_current_pid_tgid() & 0xffff_ffff_0000_0000) | (fd & 0xffff_ffff);
    let _ = TRACKED_FD.remove(&key);
    0
}

// ---------------------------------------------------------------------------------------------
// Stack sampling: cpu-clock perf events on every CPU, kept only while inside a target.

#[perf_event]
pub fn sampler(ctx: PerfEventContext) -> u32 {
    bump(counter::SAMPLES_TOTAL);
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if tid == 0 {
        return 0;
    }
    if let Some(cfg) = config() {
        if cfg.flags & FLAG_DISCOVER != 0 && filter_pass(cfg) {
            profile_sample(&ctx, cfg, pid_tgid);
        }
    }
    let Some(st) = (unsafe { THREADS.get(&tid) }) else {
        return 0;
    };
    if st.active == 0 {
        return 0;
    }
    let Some(cfg) = config() else { return 0 };
    if cfg.flags & FLAG_ONCPU_SAMPLES == 0 {
        return 0;
    }
    bump(counter::SAMPLES_IN_TARGET);
    let target = top_target(st);
    let (case, n) = peek_phase(st, (pid_tgid >> 32) as u32);
    let kstack = store_stack(&ctx, &SAMPLED_STACKS, 0, counter::STACKS_LOST_SAMPLED);
    let key = StackKey {
        agg: AggKey { target, case, n },
        kind: STACK_ONCPU,
        kstack,
        ustack: -1,
        tgid: 0,
    };
    // Weight: one sample stands for one sample period of CPU time.
    add_stack(&key, cfg.sample_period_ns);
    0
}

/// Discover mode: one sample of a traced task, wherever it is. A sample that interrupted
/// user mode has no kernel frames (an empty kernel stack): it is kept with kstack -1,
/// so the report can tell kernel time from user time and compare it with the rusage.
#[inline(always)]
fn profile_sample(ctx: &PerfEventContext, cfg: &Config, pid_tgid: u64) {
    let kstack = store_stack(ctx, &SAMPLED_STACKS, 0, counter::STACKS_LOST_SAMPLED);
    let (case, n, _) = lookup_phase((pid_tgid >> 32) as u32);
    let key = StackKey {
        agg: AggKey { target: 0, case, n },
        kind: STACK_PROFILE,
        kstack,
        ustack: -1,
        tgid: 0,
    };
    add_stack(&key, cfg.sample_period_ns);
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

#[uprobe]
pub fn phase_begin(ctx: ProbeContext) -> u32 {
    let case: u64 = ctx.arg(0).unwrap_or(0);
    let n: u64 = ctx.arg(1).unwrap_or(0);
    begin_phase(case as u32, n);
    aya_log_ebpf::debug!(&ctx, "phase begin: case {} n {}", case as u32, n);
    0
}

#[uprobe]
pub fn phase_end(ctx: ProbeContext) -> u32 {
    let ops: u64 = ctx.arg(2).unwrap_or(0);
    end_phase(ops);
    aya_log_ebpf::debug!(&ctx, "phase end: ops {}", ops);
    0
}

/// The calling process enters phase (case, n), if it is traced.
#[inline(always)]
fn begin_phase(case: u32, n: u64) {
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
fn end_phase(ops: u64) {
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
// USDT phase probes (`DTRACE_PROBE2(tracer, phase_begin, case, n)`,
// `DTRACE_PROBE3(tracer, phase_end, case, n, ops)`): one program copy per probe site, whose
// arguments are decoded from the site's spec in `USDT_SPECS` (register, memory, constant).

#[map]
static USDT_SPECS: Array<UsdtSpec> = Array::with_max_entries(USDT_SLOTS as u32, 0);

/// 8 bytes of `struct pt_regs` at `off` (0 for an offset outside it).
#[inline(always)]
fn usdt_reg(ctx: &ProbeContext, off: u32) -> u64 {
    if off > PT_REGS_SIZE - 8 {
        return 0;
    }
    // The verifier allows no variable-offset context access: read it as kernel memory.
    let p = unsafe { (ctx.regs as *const u8).add(off as usize) } as *const u64;
    unsafe { bpf_probe_read_kernel(p) }.unwrap_or(0)
}

/// The value of one argument, narrowed to its size and sign- or zero-extended.
#[inline(always)]
fn usdt_arg(ctx: &ProbeContext, a: &UsdtArg) -> u64 {
    let raw = match a.kind {
        USDT_ARG_CONST => a.value as u64,
        USDT_ARG_REG => usdt_reg(ctx, a.reg_off),
        USDT_ARG_MEM => {
            let mut addr = usdt_reg(ctx, a.reg_off).wrapping_add(a.value as u64);
            if a.index_off != USDT_NO_INDEX {
                addr = addr.wrapping_add(usdt_reg(ctx, a.index_off).wrapping_mul(a.scale as u64));
            }
            // Eight bytes and narrowed below, as the value's size is only known at run time.
            unsafe { bpf_probe_read_user(addr as *const u64) }.unwrap_or(0)
        }
        _ => 0,
    };
    let size = if a.size >= 1 && a.size <= 8 {
        a.size
    } else {
        8
    };
    let shift = (64 - 8 * size) & 63;
    if a.signed != 0 {
        (((raw << shift) as i64) >> shift) as u64
    } else {
        (raw << shift) >> shift
    }
}

#[inline(always)]
fn on_usdt(ctx: &ProbeContext, slot: u32) {
    let Some(spec) = USDT_SPECS.get(slot) else {
        return;
    };
    match spec.role {
        USDT_ROLE_BEGIN => {
            let case = usdt_arg(ctx, &spec.args[0]);
            let n = usdt_arg(ctx, &spec.args[1]);
            begin_phase(case as u32, n);
        }
        USDT_ROLE_END => end_phase(usdt_arg(ctx, &spec.args[2])),
        _ => {}
    }
}

macro_rules! usdt_slot {
    ($i:literal, $name:ident) => {
        #[uprobe]
        pub fn $name(ctx: ProbeContext) -> u32 {
            on_usdt(&ctx, $i);
            0
        }
    };
}

usdt_slot!(0, usdt_0);
usdt_slot!(1, usdt_1);
usdt_slot!(2, usdt_2);
usdt_slot!(3, usdt_3);
usdt_slot!(4, usdt_4);
usdt_slot!(5, usdt_5);
usdt_slot!(6, usdt_6);
usdt_slot!(7, usdt_7);
usdt_slot!(8, usdt_8);
usdt_slot!(9, usdt_9);
usdt_slot!(10, usdt_10);
usdt_slot!(11, usdt_11);

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

// ---------------------------------------------------------------------------------------------
// Floor programs for benchmarks: the cheapest possible probe of each mechanism (a per-CPU
// counter increment), to measure how much the span machinery adds on top. Function
// mechanisms get an exit counter too: timing a call needs both ends, and a kretprobe costs
// more than its kprobe.

#[kprobe]
pub fn floor_kprobe(_ctx: ProbeContext) -> u32 {
    bump(counter::FLOOR_HITS);
    0
}

#[kretprobe]
pub fn floor_kretprobe(_ctx: RetProbeContext) -> u32 {
    bump(counter::FLOOR_HITS);
    0
}

#[fentry]
pub fn floor_fentry(_ctx: FEntryContext) -> i32 {
    bump(counter::FLOOR_HITS);
    0
}

#[fexit]
pub fn floor_fexit(_ctx: FExitContext) -> i32 {
    bump(counter::FLOOR_HITS);
    0
}

#[tracepoint]
pub fn floor_tp(_ctx: TracePointContext) -> u32 {
    bump(counter::FLOOR_HITS);
    0
}

/// Entry time of the call in progress on this CPU, for the timed floor.
#[map]
static FLOOR_CLOCK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The timed floor: the counter plus what any timing probe must do, a clock read at both
/// ends and the entry time kept from one to the other (here per CPU and alternating, which
/// is only right for calls that neither nest nor migrate: the benchmarks' getpid).
#[inline(always)]
fn floor_timed() {
    let ts = now();
    if let Some(p) = FLOOR_CLOCK.get_ptr_mut(0) {
        let start = unsafe { *p };
        if start == 0 {
            unsafe { *p = ts };
        } else {
            unsafe { *p = 0 };
            if let Some(c) = COUNTERS.get_ptr_mut(counter::FLOOR_NS) {
                unsafe { *c += ts.saturating_sub(start) };
            }
        }
    }
    bump(counter::FLOOR_HITS);
}

#[kprobe]
pub fn floor_kprobe_timed(_ctx: ProbeContext) -> u32 {
    floor_timed();
    0
}

#[kretprobe]
pub fn floor_kretprobe_timed(_ctx: RetProbeContext) -> u32 {
    floor_timed();
    0
}

#[fentry]
pub fn floor_fentry_timed(_ctx: FEntryContext) -> i32 {
    floor_timed();
    0
}

#[fexit]
pub fn floor_fexit_timed(_ctx: FExitContext) -> i32 {
    floor_timed();
    0
}

#[tracepoint]
pub fn floor_tp_timed(_ctx: TracePointContext) -> u32 {
    floor_timed();
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects programs that could reach a real panic; this is never executed.
    loop {}
}
