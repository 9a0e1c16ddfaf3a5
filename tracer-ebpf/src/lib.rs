//! Types shared by the eBPF programs (`src/main.rs`, built for `bpfel-unknown-none`) and the
//! userspace tracer. Everything here is `#[repr(C)]` with explicit padding, because the same
//! bytes are written by the kernel side and read by userspace through map syscalls: an implicit
//! padding byte would make two equal keys hash differently.
#![no_std]

/// Most traced targets in one run (the four mission targets plus room for more).
pub const MAX_TARGETS: usize = 8;
/// Open calls remembered per thread, over all targets (nesting and recursion); calls nested
/// deeper are counted, not timed.
pub const MAX_NEST: usize = 16;
/// Attach slots per program kind (fentry, fexit, kprobe, kretprobe). One slot is one attach
/// point; a target measured through a set of functions uses several slots.
pub const FN_SLOTS: usize = 12;
/// Tracepoint slots. A slot's role (enter / exit / point) is configured at run time. The
/// default targets use 15 on a kernel without function probes (syscall brackets); measuring
/// the probes' own cost at attach takes up to 3 more (a bracket and a count).
pub const TP_SLOTS: usize = 20;
/// uprobe/uretprobe slot pairs, for user-space functions as targets.
pub const UPROBE_SLOTS: usize = 4;
/// Call-site slot pairs: kprobes on a `call` in a traceable function and on the instruction
/// after it, for a callee that cannot be probed itself (lib/'s `idr_find`, outside ftrace).
pub const SITE_SLOTS: usize = 4;
/// Index of the first slot of each kind in the `SLOTS` array.
pub const SLOT_BASE_FENTRY: u32 = 0;
pub const SLOT_BASE_KPROBE: u32 = FN_SLOTS as u32;
pub const SLOT_BASE_TP: u32 = 2 * FN_SLOTS as u32;
pub const SLOT_BASE_UPROBE: u32 = (2 * FN_SLOTS + TP_SLOTS) as u32;
pub const SLOT_BASE_SITE: u32 = SLOT_BASE_UPROBE + UPROBE_SLOTS as u32;
pub const SLOT_COUNT: u32 = SLOT_BASE_SITE + SITE_SLOTS as u32;

/// Phase "case" of spans that happened outside any announced phase.
pub const CASE_UNPHASED: u32 = 0;
/// Aggregate row of the unphased spans: reserved by userspace at load.
pub const ROW_UNPHASED: u32 = 0;
/// A phase that got no aggregate row (more phases than `Config::max_phases`).
pub const NO_ROW: u32 = u32::MAX;
/// No target (an enclosing call that is not there).
pub const NO_TARGET: u32 = u32::MAX;

/// Log-linear histogram: values below `2^HIST_SUB_BITS` get one bucket each; above, every
/// power of two is split into `2^HIST_SUB_BITS` equal sub-buckets. With 4 bits the midpoint of
/// a bucket is within 1/32 (~3.1%) of any value in it, which bounds the percentile error.
pub const HIST_SUB_BITS: u32 = 4;
pub const HIST_SUB: u64 = 1 << HIST_SUB_BITS;
/// Number of distinct buckets (exponents 0..=63).
pub const HIST_BUCKETS: u32 = (64 - HIST_SUB_BITS + 1) << HIST_SUB_BITS;

/// One histogram: a count per bucket, the value of one `HIST` array element.
pub type HistRow = [u64; HIST_BUCKETS as usize];

/// Index of the highest set bit (v > 0). Written as a branchy binary search because the BPF
/// instruction set has no count-leading-zeros and the verifier likes straight-line code.
#[inline(always)]
pub fn log2_floor(mut v: u64) -> u32 {
    let mut r = 0u32;
    if v >= 1 << 32 {
        v >>= 32;
        r += 32;
    }
    if v >= 1 << 16 {
        v >>= 16;
        r += 16;
    }
    if v >= 1 << 8 {
        v >>= 8;
        r += 8;
    }
    if v >= 1 << 4 {
        v >>= 4;
        r += 4;
    }
    if v >= 1 << 2 {
        v >>= 2;
        r += 2;
    }
    if v >= 1 << 1 {
        r += 1;
    }
    r
}

/// Histogram bucket of a value (nanoseconds).
#[inline(always)]
pub fn hist_bucket(v: u64) -> u32 {
    if v < HIST_SUB {
        return v as u32;
    }
    let e = log2_floor(v);
    let sub = ((v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1)) as u32;
    ((e - HIST_SUB_BITS + 1) << HIST_SUB_BITS) + sub
}

/// Smallest value that falls in `bucket` (buckets past the last one read as the last one:
/// run data comes from files and must not be able to make this panic).
pub fn hist_bucket_low(bucket: u32) -> u64 {
    let bucket = bucket.min(HIST_BUCKETS - 1);
    let sub_mask = (HIST_SUB - 1) as u32;
    if (bucket as u64) < HIST_SUB {
        return bucket as u64;
    }
    let e = (bucket >> HIST_SUB_BITS) + HIST_SUB_BITS - 1;
    let sub = (bucket & sub_mask) as u64;
    (1u64 << e) | (sub << (e - HIST_SUB_BITS))
}

/// One past the largest value that falls in `bucket` (saturating at u64::MAX).
pub fn hist_bucket_high(bucket: u32) -> u64 {
    if bucket >= HIST_BUCKETS - 1 {
        return u64::MAX;
    }
    hist_bucket_low(bucket + 1)
}

/// Program-wide settings, element 0 of the `CONFIG` array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    /// One of the `FILTER_*` constants.
    pub filter: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Cgroup v2 id for `FILTER_CGROUP`.
    pub cgroup_id: u64,
    /// NUL-padded command name for `FILTER_COMM`.
    pub comm: [u8; 16],
    /// Offset of `next_pid` in the `sched:sched_switch` record (varies across kernels).
    pub switch_next_pid_off: u32,
    /// Offset of `child_pid` in `sched:sched_process_fork` (char[16] vs __data_loc layouts).
    pub fork_child_pid_off: u32,
    /// Offset of `pid` in `struct task_struct` (from the kernel's BTF), for the raw
    /// scheduler tracepoints, whose arguments are task pointers.
    pub task_pid_off: u32,
    /// The syscall numbers the raw-syscall floor programs count (benchmarks only; unused
    /// entries are `u32::MAX`, which no syscall has).
    pub floor_nrs: [u32; 2],
    /// Offset of `filename` in `syscalls:sys_enter_openat`.
    pub openat_filename_off: u32,
    /// Offset of `ret` in `syscalls:sys_exit_openat`.
    pub openat_ret_off: u32,
    /// Offset of `fd` in `syscalls:sys_enter_close`.
    pub close_fd_off: u32,
    /// Length of `path_prefix` in use.
    pub path_prefix_len: u32,
    /// Files opened with this prefix have their fds tracked (for `SLOT_FLAG_TRACKED_FD`).
    pub path_prefix: [u8; 32],
    /// Period of the cpu-clock sampler; each on-CPU sample is weighted by it.
    pub sample_period_ns: u64,
    /// With `FILTER_FOLLOW`: the traced command's process, passed without a map lookup
    /// (0 = none).
    pub root_tgid: u32,
    /// Targets per aggregate row: the span aggregates of (row, target) are element
    /// `row * target_stride + target` of `SPANS`, its histograms elements `2 * that + kind`
    /// of `HIST`. Userspace sizes both maps by it and by `max_phases`.
    pub target_stride: u32,
    /// Aggregate rows (phases, the unphased row included) the maps hold.
    pub max_phases: u32,
    /// The phase of a traced process that announced none itself: `CASE_UNPHASED` and
    /// `ROW_UNPHASED` normally; an external sweep sets it to the (case, N) of the command it
    /// is running, so the whole process tree of one run of the command is one phase.
    pub default_row: u32,
    pub default_n: u64,
    pub default_case: u32,
    pub _pad: u32,
    /// With `FLAG_PHASE_FN`: operations one call of the phase function counts for (the
    /// sweep's `--ops` at the current N, or 1).
    pub fn_ops: u64,
    /// The tracer's PID namespace (device and inode of `/proc/self/ns/pid`) when it is not the
    /// initial one (0: the initial one). The programs see every task by its pid in the initial
    /// namespace; the tracer knows its command, and the user's `--pid`s, by their pids in its
    /// own. With this set, `FOLLOW` is seeded through `NS_SEEDS` (see there), and the tgid a
    /// caller stack is keyed by (for reading its process's maps) is the namespace's.
    pub pidns_dev: u64,
    pub pidns_ino: u64,
    /// Offset of the task state (`__state`, or `state` before 5.14) in `struct task_struct`,
    /// for the raw `sched_switch`, whose `prev_state` argument came in 5.18 (`NO_OFFSET`:
    /// unknown, preemptions are told by the preempt flag alone).
    pub task_state_off: u32,
    /// Offset of `prev_state` in the `sched:sched_switch` record.
    pub switch_prev_state_off: u32,
}

/// An offset the kernel's BTF or an event format did not give.
pub const NO_OFFSET: u32 = u32::MAX;
/// The bit `sched:sched_switch` sets in `prev_state` for a preempted task (`TASK_REPORT_MAX`,
/// shown as `R+`; the same from 4.14 to 6.18).
pub const SWITCH_STATE_PREEMPTED: i64 = 0x100;

/// Size of `NS_SEEDS`: the processes a tracer inside a PID namespace can be asked to follow
/// by pid (its command, `--pid`s, calibration children).
pub const MAX_NS_SEEDS: u32 = 1024;

pub const FILTER_ALL: u32 = 0;
/// Only processes in `FOLLOW` (a process tree: children are added at fork).
pub const FILTER_FOLLOW: u32 = 1;
pub const FILTER_COMM: u32 = 2;
pub const FILTER_CGROUP: u32 = 3;

/// Record one ring-buffer event per completed span.
pub const FLAG_RAW_EVENTS: u32 = 1 << 0;
/// Capture the kernel+user caller stack at entry and weight it by the span's wall time.
pub const FLAG_CALLER_STACKS: u32 = 1 << 1;
/// Capture the kernel stack where a thread inside a target blocks, weighted by off-CPU time.
pub const FLAG_OFFCPU_STACKS: u32 = 1 << 2;
/// Capture kernel stacks from the perf_event sampler while inside a target.
pub const FLAG_ONCPU_SAMPLES: u32 = 1 << 3;
/// Discover mode: the sampler keeps every sample of a traced task (not only those inside a
/// target) as a `STACK_PROFILE` stack, and `sched_switch` records where traced tasks block
/// (`STACK_PROFILE_OFFCPU`), so functions nobody named can be found.
pub const FLAG_DISCOVER: u32 = 1 << 4;
/// `--phase-fn`: a traced process is in the default phase only while inside the phase
/// function (its entry uprobe begins the phase, its return probe ends it); outside it, and
/// without a phase of its own, it is unphased.
pub const FLAG_PHASE_FN: u32 = 1 << 5;
/// The per-CPU fast path of span pairing (`fastpath` in the programs): set only when the
/// scheduler programs are attached, since `sched_switch` moves a blocked call off it.
pub const FLAG_FAST_PATH: u32 = 1 << 6;
/// Discover mode: `sched_switch` counts the traced tasks' preemptions (`ENTRY_PREEMPTION`).
/// Set only while the syscalls are counted too, so that a run's entry counts are all or none.
pub const FLAG_COUNT_PREEMPTION: u32 = 1 << 7;

/// What one attach slot does, element `slot` of a `*_SLOTS` array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotConf {
    /// Index of the target this slot measures (0..MAX_TARGETS).
    pub target: u32,
    /// `ROLE_*`; 0 = slot unused.
    pub role: u32,
    /// `SLOT_FLAG_*`.
    pub flags: u32,
    /// For tracepoints: offset of the field `flags` refers to (an fd for `SLOT_FLAG_TRACKED_FD`).
    pub arg_off: u32,
}

pub const ROLE_NONE: u32 = 0;
pub const ROLE_ENTER: u32 = 1;
pub const ROLE_EXIT: u32 = 2;
/// A point event: counted as a call of zero duration (for plans that can only count).
pub const ROLE_POINT: u32 = 3;

/// Enter only if the fd at `arg_off` was opened from `Config::path_prefix`.
pub const SLOT_FLAG_TRACKED_FD: u32 = 1 << 0;
/// The slot is fed by the `raw_syscalls` programs, not attached to a tracepoint of its own:
/// `arg_off` is then the offset of the argument's register in `struct pt_regs`.
pub const SLOT_FLAG_RAW_SYSCALL: u32 = 1 << 1;

/// Syscall numbers the `raw_syscalls` routes cover (x86_64's table is below 512).
pub const MAX_SYSCALL_NR: u32 = 512;
/// Tracepoint slots one syscall's entry (or exit) can feed.
pub const ROUTE_SLOTS: usize = 2;

/// Where `raw_syscalls:sys_enter`/`sys_exit` send one syscall: element `nr` of
/// `SYSCALL_ROUTES`. One raw tracepoint pair serves every traced syscall, and closing it
/// does not wait for the per-event RCU grace periods that closing perf tracepoint events
/// does, one after the other.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallRoute {
    /// Tracepoint slot indices (0..TP_SLOTS) plus one fed at entry; 0 = none.
    pub enter: [u32; ROUTE_SLOTS],
    /// The same at exit.
    pub exit: [u32; ROUTE_SLOTS],
    /// `ROUTE_FD_*`: this syscall's part in fd tracking.
    pub fd: u32,
}

/// openat() and openat2(): a path (argument 1) matching the prefix makes the returned fd
/// tracked.
pub const ROUTE_FD_OPENAT: u32 = 1 << 0;
/// close(): the fd is no longer tracked.
pub const ROUTE_FD_CLOSE: u32 = 1 << 1;
/// open(), whose path is argument 0 (what musl's open() calls on x86_64).
pub const ROUTE_FD_OPEN: u32 = 1 << 2;

/// `struct pt_regs` on x86_64: where a syscall's arguments and number are.
pub const PT_REGS_ORIG_AX: u32 = 120;
/// Offsets of the syscall argument registers, in argument order (di, si, dx, r10, r8, r9).
pub const PT_REGS_ARGS: [u32; 6] = [112, 104, 96, 56, 72, 64];
/// The user code segment the syscall came from.
pub const PT_REGS_CS: u32 = 136;
/// `__USER32_CS`: a 32-bit process's syscall, numbered by the ia32 table (61 is chroot
/// there, wait4 on x86_64) with its arguments in other registers.
pub const USER32_CS: u64 = 0x23;

/// (target, case, N): the key of stack aggregates, and of the span rows userspace reads back
/// from the aggregate arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AggKey {
    pub target: u32,
    /// Workload case announced by the phase marker, `CASE_UNPHASED` outside phases.
    pub case: u32,
    /// N announced by the phase marker (0 outside phases).
    pub n: u64,
}

/// Per-CPU span statistics. CPUs that saw no call have `calls == 0` and zero min: readers must
/// skip them when merging.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanStats {
    pub calls: u64,
    /// Calls counted without a duration (point events, or calls nested deeper than MAX_NEST).
    pub untimed: u64,
    pub wall_sum: u64,
    pub wall_min: u64,
    pub wall_max: u64,
    pub oncpu_sum: u64,
    pub oncpu_min: u64,
    pub oncpu_max: u64,
    /// Timed calls made directly inside an open call of target `j` (the enclosing traced call,
    /// when it is another target's; a recursive call is counted against nothing): divided by
    /// target j's calls, how many times per call of j this one runs, an exact count of a
    /// loop's trips that no timing noise can bend.
    pub within: [u64; MAX_TARGETS],
}

/// Histogram kinds.
pub const HIST_WALL: u32 = 0;
pub const HIST_ONCPU: u32 = 1;
/// Histograms per (row, target).
pub const HIST_KINDS: u32 = 2;
/// Userspace's kind for a span element's histogram of trips per call (the timed calls of
/// other targets that closed directly inside each call), which the kernel keeps in a map of
/// its own (`TRIP_HIST`, element `span_index`), not in `HIST`.
pub const HIST_TRIPS: u32 = 2;

/// Element of `SPANS` holding the aggregates of `target` in aggregate row `row`.
#[inline(always)]
pub fn span_index(row: u32, stride: u32, target: u32) -> u32 {
    row.wrapping_mul(stride).wrapping_add(target)
}

/// Element of `HIST` holding histogram `kind` of `SPANS` element `span_ix`.
#[inline(always)]
pub fn hist_index(span_ix: u32, kind: u32) -> u32 {
    span_ix.wrapping_mul(HIST_KINDS).wrapping_add(kind)
}

/// Stack aggregation kinds.
pub const STACK_ONCPU: u32 = 0;
pub const STACK_OFFCPU: u32 = 1;
pub const STACK_CALLER: u32 = 2;
/// Discover mode: every on-CPU sample of a traced task, target 0; `kstack` -1 when the
/// sample hit user mode (no kernel frames).
pub const STACK_PROFILE: u32 = 3;
/// Discover mode: where a traced task blocked (kernel stack at switch-out), weighted by the
/// time until it ran again; target 0.
pub const STACK_PROFILE_OFFCPU: u32 = 4;
mod entry_kinds;
pub use entry_kinds::*;

/// Discover mode: one kernel entry kind's calls (`count`; `ns` 0), target = the `ENTRY_*`
/// code; no stacks. Kept in `ENTRY_COUNTS` and each CPU's `ENTRY_CACHE` by the probes;
/// userspace reads them as stacks of this kind.
pub const STACK_ENTRY: u32 = 5;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StackKey {
    pub agg: AggKey,
    pub kind: u32,
    /// Kernel stack id in `STACK_TRACES` (`SAMPLED_STACKS` for the sampled kinds), -1 for
    /// no kernel frames, -2 for a lost stack.
    pub kstack: i32,
    /// User stack id in `STACK_TRACES`, or -1 / -2 as for `kstack`.
    pub ustack: i32,
    /// Process the stack came from (needed to symbolize user frames).
    pub tgid: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackVal {
    /// Samples or spans.
    pub count: u64,
    /// Weight in nanoseconds (sample period, blocked time or span wall time).
    pub ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PhaseKey {
    pub case: u32,
    pub _pad: u32,
    pub n: u64,
}

/// Phases announced by workloads, summed per (case, n).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseStats {
    /// Completed phases.
    pub phases: u64,
    /// Operations the workload says it did inside them.
    pub ops: u64,
    /// Wall time between begin and end markers.
    pub wall_ns: u64,
}

/// The phase a process is in, keyed by tgid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CurrentPhase {
    pub case: u32,
    /// The phase's aggregate row (`NO_ROW` if the rows ran out).
    pub row: u32,
    pub n: u64,
    pub begin_ns: u64,
}

/// One completed span, sent through the ring buffer when `FLAG_RAW_EVENTS` is set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanEvent {
    /// Exit time (CLOCK_MONOTONIC ns).
    pub end_ns: u64,
    pub wall_ns: u64,
    pub oncpu_ns: u64,
    pub n: u64,
    pub case: u32,
    pub target: u32,
    pub tid: u32,
    pub tgid: u32,
}

/// USDT probe sites (`usdt_i` programs): each site of a `tracer:phase_begin` or
/// `tracer:phase_end` probe gets its own program copy, whose index selects its argument
/// decoding in `USDT_SPECS` (kernels before 5.15 have no BPF cookie to carry it).
pub const USDT_SLOTS: usize = 12;
/// Arguments a USDT phase probe passes: (case, n) to begin, (case, n, ops) to end.
pub const USDT_MAX_ARGS: usize = 3;

/// What a USDT site does.
pub const USDT_ROLE_NONE: u32 = 0;
pub const USDT_ROLE_BEGIN: u32 = 1;
pub const USDT_ROLE_END: u32 = 2;

/// How one USDT argument is found (from its `.note.stapsdt` spec such as `-4@%edi`).
pub const USDT_ARG_NONE: u32 = 0;
/// `$imm`: the constant `value`.
pub const USDT_ARG_CONST: u32 = 1;
/// `%reg`: the register at `reg_off` in `struct pt_regs`.
pub const USDT_ARG_REG: u32 = 2;
/// `disp(%base[,%index,scale])`: user memory at base + index * scale + `value`.
pub const USDT_ARG_MEM: u32 = 3;
/// `index_off` of a memory operand without an index register.
pub const USDT_NO_INDEX: u32 = u32::MAX;
/// Bytes of x86-64 `struct pt_regs` (the largest register offset is below it).
pub const PT_REGS_SIZE: u32 = 168;

/// One decoded USDT argument location.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsdtArg {
    /// `USDT_ARG_*`.
    pub kind: u32,
    /// Bytes of the value (1, 2, 4 or 8).
    pub size: u32,
    /// 1 when the value is sign-extended (a negative size in the spec).
    pub signed: u32,
    /// Offset of the (base) register in `struct pt_regs`.
    pub reg_off: u32,
    /// Offset of the index register, or `USDT_NO_INDEX`.
    pub index_off: u32,
    /// Scale of the index register (1, 2, 4, 8).
    pub scale: u32,
    /// The constant, or the memory displacement.
    pub value: i64,
}

/// Element `i` of `USDT_SPECS`: what program `usdt_i` decodes and does.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsdtSpec {
    /// `USDT_ROLE_*`.
    pub role: u32,
    pub nargs: u32,
    pub args: [UsdtArg; USDT_MAX_ARGS],
}

/// Indices into the per-CPU `COUNTERS` array.
pub mod counter {
    /// Raw events that did not fit in the ring buffer.
    pub const RINGBUF_DROPS: u32 = 0;
    /// Calls nested deeper than MAX_NEST (counted, untimed).
    pub const DEPTH_OVERFLOW: u32 = 1;
    /// Exits without a matching entry (probe attached mid-call, or a missed entry).
    pub const UNPAIRED_EXIT: u32 = 2;
    /// Thread-state map full: a call could not be timed.
    pub const THREAD_MAP_FULL: u32 = 3;
    /// Calls lost because their phase got no aggregate row (more phases than the maps were
    /// sized for), or a phase's statistics lost to a full `PHASE_STATS`.
    pub const AGG_MAP_FULL: u32 = 4;
    /// Stacks lost, every kind together: a stack store or the stack-aggregate map was full,
    /// two stacks shared a 31-bit id, or the kernel could not walk a stack.
    pub const STACK_ERRORS: u32 = 5;
    /// perf_event samples taken while some traced thread was inside a target.
    pub const SAMPLES_IN_TARGET: u32 = 6;
    /// All perf_event samples.
    pub const SAMPLES_TOTAL: u32 = 7;
    /// Frames abandoned because the thread exited inside a target.
    pub const ABANDONED_FRAMES: u32 = 8;
    /// Phase-marker events seen.
    pub const PHASE_MARKERS: u32 = 9;
    /// Calls counted by the floor (counter-only) programs used by benchmarks.
    pub const FLOOR_HITS: u32 = 10;
    /// Nanoseconds between entry and exit summed by the timed floor programs.
    pub const FLOOR_NS: u32 = 11;
    /// Stacks the programs tried to record (kernel and user, every kind), the denominator of
    /// the loss counters.
    pub const STACKS_TAKEN: u32 = 12;
    /// Lost stacks of calls (caller stacks), of blocking points (off-CPU) and of perf_event
    /// samples: the per-kind parts of `STACK_ERRORS` that a store refused.
    pub const STACKS_LOST_CALLER: u32 = 13;
    pub const STACKS_LOST_OFFCPU: u32 = 14;
    pub const STACKS_LOST_SAMPLED: u32 = 15;
    /// Syscalls of traced threads that could not be counted (the in-syscall or entry-count
    /// map was full).
    pub const ENTRIES_LOST: u32 = 16;
    /// Stacks taken but not filed because the stack-aggregate map (`STACKS`: one entry per
    /// kind, target, case, N, stack pair and process) was full: part of `STACK_ERRORS`.
    pub const STACK_AGGREGATES_FULL: u32 = 17;
    /// Calls moved from a CPU's fast-path slot to their thread's state (switched out, nested,
    /// or another target's exit while open): informational.
    pub const FAST_PATH_SPILLS: u32 = 18;
    /// Number of counters.
    pub const COUNT: u32 = 19;
}

/// Frames kept per recorded stack (kernel or user); deeper stacks keep their innermost
/// frames, the ones a root cause is read from.
pub const STACK_DEPTH: usize = 64;

/// One recorded stack: instruction pointers, innermost first, zero after the last frame.
/// Stored under a 31-bit id derived from its frames (see the eBPF side's `store_stack`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StackBuf {
    pub ips: [u64; STACK_DEPTH],
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: all of these are #[repr(C)] plain integers with explicit padding fields, so every
    // bit pattern is valid and there are no implicit padding bytes.
    unsafe impl aya::Pod for Config {}
    unsafe impl aya::Pod for SlotConf {}
    unsafe impl aya::Pod for SyscallRoute {}
    unsafe impl aya::Pod for AggKey {}
    unsafe impl aya::Pod for SpanStats {}
    unsafe impl aya::Pod for StackKey {}
    unsafe impl aya::Pod for StackVal {}
    unsafe impl aya::Pod for PhaseKey {}
    unsafe impl aya::Pod for PhaseStats {}
    unsafe impl aya::Pod for CurrentPhase {}
    unsafe impl aya::Pod for SpanEvent {}
    unsafe impl aya::Pod for OffStart {}
    unsafe impl aya::Pod for UsdtSpec {}
    unsafe impl aya::Pod for StackBuf {}
    unsafe impl aya::Pod for EntryCache {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_cover_their_values() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u32::MAX as u64, 1 << 40, u64::MAX - 1, u64::MAX]) {
            let b = hist_bucket(v);
            assert!(b >= last, "bucket of {v} went backwards");
            last = b;
            assert!(b < HIST_BUCKETS, "bucket {b} of {v} out of range");
            assert!(hist_bucket_low(b) <= v, "low({b}) > {v}");
            assert!(v < hist_bucket_high(b) || hist_bucket_high(b) == u64::MAX);
        }
    }

    #[test]
    fn bucket_midpoint_error_is_bounded() {
        for v in [17u64, 100, 999, 12_345, 1_000_000, 123_456_789, 1 << 50] {
            let b = hist_bucket(v);
            let (lo, hi) = (hist_bucket_low(b) as f64, hist_bucket_high(b) as f64);
            let mid = (lo + hi) / 2.0;
            let err = (mid - v as f64).abs() / v as f64;
            assert!(err <= 1.0 / 32.0 + 1e-9, "v={v} err={err}");
        }
    }

    #[test]
    fn out_of_range_buckets_saturate() {
        assert_eq!(hist_bucket_low(u32::MAX), hist_bucket_low(HIST_BUCKETS - 1));
        assert_eq!(hist_bucket_high(u32::MAX), u64::MAX);
    }

    #[test]
    fn log2_matches_leading_zeros() {
        for s in 0..64 {
            let v = 1u64 << s;
            assert_eq!(log2_floor(v), s);
            assert_eq!(log2_floor(v | (v >> 1)), s);
        }
    }
}
