//! Every map of the object, in one place: userspace finds them by these names and sizes most
//! of them at load time.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};
use tracer_ebpf::*;

use crate::{entries::CpuEntry, fastpath::CpuCall, spans::ThreadState};

#[map]
pub(crate) static CONFIG: Array<Config> = Array::with_max_entries(1, 0);

#[map]
pub(crate) static SLOTS: Array<SlotConf> = Array::with_max_entries(SLOT_COUNT, 0);

/// Per syscall number: the slots and fd tracking the `raw_syscalls` programs feed.
#[map]
pub(crate) static SYSCALL_ROUTES: Array<SyscallRoute> = Array::with_max_entries(MAX_SYSCALL_NR, 0);

#[map]
pub(crate) static FOLLOW: HashMap<u32, u8> = HashMap::with_max_entries(32768, 0);

/// Bumped whenever a process leaves `FOLLOW` (by the probes at its exit, by userspace): the
/// discover programs' per-CPU memory of a followed process is good while it is unchanged.
#[map]
pub(crate) static FOLLOW_GEN: Array<u64> = Array::with_max_entries(1, 0);

/// Inside a PID namespace (`Config::pidns_ino`): the processes to follow by their pid in the
/// tracer's namespace (userspace writes them with value 0). The first time such a process
/// runs a traced event, the filter finds it by its namespace pid, follows it by its kernel
/// pid in `FOLLOW`, and stores that pid here as the value (so userspace can unfollow it).
#[map]
pub(crate) static NS_SEEDS: HashMap<u32, u32> = HashMap::with_max_entries(MAX_NS_SEEDS, 0);

#[map]
pub(crate) static THREADS: HashMap<u32, ThreadState> = HashMap::with_max_entries(16384, 0);

/// The call open on each CPU, for the fast path (see `fastpath`).
#[map]
pub(crate) static CPU_CALL: PerCpuArray<CpuCall> = PerCpuArray::with_max_entries(1, 0);

/// Never written: a zeroed ThreadState to insert from (kept off the 512-byte BPF stack).
#[map]
pub(crate) static ZERO_THREAD: Array<ThreadState> = Array::with_max_entries(1, 0);

/// Per-CPU call counter for sampling caller stacks of short calls (see `on_exit`).
#[map]
pub(crate) static CALLER_TICK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[map]
pub(crate) static CURRENT_PHASE: HashMap<u32, CurrentPhase> = HashMap::with_max_entries(16384, 0);

/// Bumped whenever any process's phase changes: invalidates the threads' cached phases.
#[map]
pub(crate) static PHASE_GEN: Array<u64> = Array::with_max_entries(1, 0);

/// Aggregate row of each phase seen, and the phase that owns each row. A row is claimed by
/// inserting into `ROW_OWNER` with BPF_NOEXIST, which is atomic: kernels before 5.12 have no
/// atomic fetch-and-add to hand out numbers with. `NEXT_ROW` is only a hint where to start.
/// Userspace sizes both hashes to `Config::max_phases` and claims row 0 for unphased spans.
#[map]
pub(crate) static PHASE_ROWS: HashMap<PhaseKey, u32> = HashMap::with_max_entries(128, 0);

#[map]
pub(crate) static ROW_OWNER: HashMap<u32, PhaseKey> = HashMap::with_max_entries(128, 0);

#[map]
pub(crate) static NEXT_ROW: Array<u64> = Array::with_max_entries(1, 0);

#[map]
pub(crate) static PHASE_STATS: HashMap<PhaseKey, PhaseStats> = HashMap::with_max_entries(4096, 0);

/// Element `span_index(row, stride, target)`. Sized by userspace.
#[map]
pub(crate) static SPANS: PerCpuArray<SpanStats> = PerCpuArray::with_max_entries(128 * 8, 0);

/// Element `hist_index(span element, kind)`: one whole histogram. Shared (not per-CPU) with
/// atomic adds: per-CPU rows would lock rows x CPUs x 7.8 KiB. Sized by userspace.
#[map]
pub(crate) static HIST: Array<HistRow> = Array::with_max_entries(128 * 8 * 2, 0);

/// Element `span_index(row, stride, target)`: how many calls of the target had each number
/// of trips (timed calls of other targets closed directly inside it), from one trip up; the
/// calls with none are the rest. Sized by userspace: one element when a single target is
/// traced, which nothing can nest in.
#[map]
pub(crate) static TRIP_HIST: Array<HistRow> = Array::with_max_entries(128 * 8, 0);

#[map]
pub(crate) static STACKS: HashMap<StackKey, StackVal> = HashMap::with_max_entries(32768, 0);

/// 1 while a program on this CPU is inserting into `STACKS` (see `add_stack_weighted`).
#[map]
pub(crate) static STACKS_INSERTING: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// Kernel and user stacks, each stored once under a 31-bit id derived from its frames. Not
/// the kernel's stack-trace maps: those file a stack under its hash bucket and refuse a new
/// stack whose bucket is taken, which lost a few percent of the stacks of a sweep, and not
/// at random (long, varied stacks collide first). Here a stack is lost only when its store
/// is full or two different stacks share an id (they are compared frame by frame, so never
/// merged). Two stores, so the sampler's stacks never compete for room with the many caller
/// stacks. Userspace sizes both at load time.
#[map]
pub(crate) static STACK_TRACES: HashMap<u32, StackBuf> = HashMap::with_max_entries(16384, 0);

#[map]
pub(crate) static SAMPLED_STACKS: HashMap<u32, StackBuf> = HashMap::with_max_entries(16384, 0);

/// How deeply stack-taking programs can nest on one CPU (a perf_event sample in the middle
/// of an fentry program, a target called from an interrupt): one scratch buffer per level.
pub(crate) const STACK_NEST_MAX: u32 = 4;

/// Where a stack is taken before it is filed (512 bytes: too big for the BPF stack).
#[map]
pub(crate) static STACK_SCRATCH: PerCpuArray<StackBuf> =
    PerCpuArray::with_max_entries(STACK_NEST_MAX, 0);

/// The stack-taking programs running on this CPU right now: the next free scratch level.
#[map]
pub(crate) static STACK_NEST: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// Userspace shrinks this to one page unless raw events are requested.
#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(4 << 20, 0);

/// Discover mode: calls and time per (kernel entry, case, N) (see `entries`). A map of its
/// own: the stack aggregates can fill up with a whole-process profile's stacks, and the
/// counts must not be lost with them.
#[map]
pub(crate) static ENTRY_COUNTS: HashMap<AggKey, StackVal> = HashMap::with_max_entries(16384, 0);

/// Discover mode: each CPU's syscall counts not yet added to `ENTRY_COUNTS`, a slot per
/// syscall number modulo `ENTRY_CACHE_SLOTS` (see `entries`).
#[map]
pub(crate) static ENTRY_CACHE: PerCpuArray<EntryCache> =
    PerCpuArray::with_max_entries(ENTRY_CACHE_SLOTS, 0);

/// Discover mode: the syscall of the traced thread running on each CPU (see `entries`).
#[map]
pub(crate) static CPU_ENTRY: PerCpuArray<CpuEntry> = PerCpuArray::with_max_entries(1, 0);

/// Discover mode: the syscall each traced thread is inside, while it is off its CPU (or
/// always, without the scheduler programs; see `entries`).
#[map]
pub(crate) static IN_SYSCALL: HashMap<u32, EntryNow> = HashMap::with_max_entries(16384, 0);

/// Discover mode: traced tasks that blocked, from switch-out to switch-in.
#[map]
pub(crate) static OFF_START: HashMap<u32, OffStart> = HashMap::with_max_entries(16384, 0);

#[map]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Threads inside an openat() of a path that matched `Config::path_prefix`.
#[map]
pub(crate) static PENDING_OPEN: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);

/// (tgid << 32 | fd) of files opened with the tracked prefix.
#[map]
pub(crate) static TRACKED_FD: HashMap<u64, u8> = HashMap::with_max_entries(4096, 0);

/// The argument specs of the USDT probe sites, one per `usdt_N` program.
#[map]
pub(crate) static USDT_SPECS: Array<UsdtSpec> = Array::with_max_entries(USDT_SLOTS as u32, 0);

/// Entry time of the call in progress on this CPU, for the timed floor.
#[map]
pub(crate) static FLOOR_CLOCK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
