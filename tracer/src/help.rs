//! The long help texts of `tracer`'s commands. The workloads' lines in `tracer sweep --help`
//! come from the workloads crate's table, so they cannot drift from what a sweep runs.
use std::sync::LazyLock;

use workloads::catalog::WORKLOADS;

pub const ABOUT: &str = "Time kernel functions with eBPF while a workload sweeps N, and show which \
kernel loop grows with N.";

pub const LONG_ABOUT: &str = "\
Time kernel functions with eBPF while a workload sweeps a size N (children, VMAs, SysV \
segments, pages), and show which kernel loop grows with N.

Targets: the built-in do_wait, dup_mmap, sysvipc_find_ipc, get_task_policy (each resolved \
per kernel: fentry -> kprobe -> out-of-line callers -> syscall tracepoints, and verified by a \
short calibration), or any kernel function by name (fentry -> kprobe -> its compiler clone). \
`tracer probes` shows what this kernel allows and why.

Do not know which function to suspect? `--discover` samples the kernel stacks of the whole \
process tree at every N, counts every syscall and page fault it makes, and names the kernel \
loop: the syscall whose time per call grows, and the frame inside it that carries the \
growth, apart from the setup that only makes more calls. It needs no function probe, so it \
works on kernels that refuse them.

Sweep your own benchmark: `tracer sweep --n 10,100,1000 -- ./bench {N}` runs it once per N \
({N}, or its lower-case form, replaced; TRACER_N set), each run one phase.

Needs root, or CAP_BPF + CAP_PERFMON (5.8+) and a kernel with BTF for fentry. When the host \
kernel forbids function probes (no kprobes, fentry refused), run inside a VM: \
`cargo xtask vm --kernel 6.1 -- tracer ...`.";

pub const RECORD_HELP: &str = "\
Output (read later without root by `tracer report`):
  run.json                       metadata, attach plans, counters, per-(target, case, N) spans
                                 with log-linear histograms, workload phases, and each
                                 target's probe_cost (probe_cost_ns: what its kind of probe
                                 adds to one call, measured at attach on this machine)
  spans.csv                      the span aggregates as a flat table
  stacks/<kind>/<target>/<case>/n<N>.folded
                                 folded stacks; kind = oncpu (sampled inside the target),
                                 offcpu (where it blocked), callers (who called it)
  events.csv                     with --raw-events: one row per call
                                 (end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns)
The directory appears only when complete; a run cut short by a signal says
\"status\": \"partial\" in run.json.

The command may follow the options directly, as with perf (`tracer record ./bench -x`: the
command's own options stay its own), or after `--`. After the run, each target's per-call
times are printed as a log2 histogram with p50/p90/p99, as bcc's funclatency does, with the
probe's own cost per call; a mean within 3x of it is flagged (the probe's cost is a third or
more of what is measured). `tracer report --subtract-probe-cost` shows corrected times.

Tracepoints are attached as raw tracepoints where the kernel takes them (the syscall ones
through raw_syscalls, on x86_64; the scheduler's with the pid offset from the kernel's BTF):
cheaper per call, and detached at once instead of one RCU grace period per perf event.
TRACER_PERF_TRACEPOINTS=1 attaches one perf event per tracepoint instead; run.json's
resources.raw_tracepoints says which was used.

If the tracer is killed (SIGKILL) or crashes, the command it started gets SIGKILL too
(PR_SET_PDEATHSIG; processes the command started themselves are not killed unless they
arrange the same, as the workloads binary's children do). Processes followed with --pid,
--comm, --cgroup or --system are never signalled. The temporary .NAME.partial-PID directory
such a death leaves is removed by the next tracer writing to the same directory.

Examples:
  sudo tracer record ./my-benchmark --size 1000
  sudo tracer record -- ./my-benchmark --size 1000
  sudo tracer record -p 4242,4243 -d 30s -o bench-run
  sudo tracer record -a -F 4999 -t do_wait -d 10s
  sudo tracer record --targets do_wait --plan do_wait=kprobe -- workloads waitpid --n 1,100,1000";

pub const REPORT_HELP: &str = "\
Writes index.html (a summary table of every target and case first, then the scaling plots,
the findings, and per target its tables and embedded flamegraphs), README.md (verdicts and
root causes first), report.txt, summary.json,
tables/<target>.{md,csv,json}, plots/<target>.svg and flamegraphs/.../n<N>.svg with a
differential flamegraph between the smallest and largest N. Exports (skip with --no-exports):
trace.pftrace, a Perfetto trace of every call (runs recorded with --raw-events, events.csv
up to 64 MiB; open it in ui.perfetto.dev), and profiles/<kind>-<target>.pb.gz, pprof
profiles of the stacks (`go tool pprof -http=: FILE`); in a sweep, traces/<run>.pftrace and
profiles/<run>/. `tracer export` writes one of them for one run.

Verdict: whether the time per call grows with N, and which classes of t = a + b*f(N)
(O(1), O(log n), O(n), O(n log n), O(n^2)) the data leaves. The value at each N is robust:
the calls' mean without the fastest and slowest 10%, and the median over the runs when the
command ran more than once (the mean stays a column). Grows: the largest N is above the
smallest by at least 20% (the least growth worth a claim) and by 3 standard errors (of that
robust value: the kept calls' spread over the square root of their number), at two
sizes or more, and with four sizes or more the growth term's 95% interval excludes 0 (a
one-sided 2.5% error rate) or the rise is 3 times the scatter around the fit. Class: every growing model is fitted to every run as its own point; a class
is named alone only when it fits 10 times more likely than each other (Akaike weights, each
point's error at least 5%; an error estimated from the data's own scatter, the best fit's
residuals or the runs' spread, counted as large as its degrees of freedom leave possible:
x4.8 for four sizes run once); otherwise the line names the set (\"O(n) or O(n log n)\",
summary.json `classes`; `class` only when the set has one member). Time never names
O(n log n) alone: a walk whose cost per item rises with N (colder caches) bends the same way,
so a set from time that holds it holds O(n) too; a loop count tells them apart. Root cause: the callee
frame under the target that carries most of the time the target adds per call from the
smallest to the largest N with stacks (a frame's time per call is its share of the samples
times the fitted value above), at least half of it and by 2 standard errors of sampling;
where the fitted value grows by less than 20% there is no added time to give a frame.

Gate: --expect TARGET:CLASS (or TARGET/CASE:CLASS; a comma list, or repeated), e.g.
--expect do_wait:O(1) or --expect do_wait/waitpid-pid:O(n), exits 9 when the class set of a
verdict it names excludes CLASS (a set that holds it passes; \"O(n) by loop count\" is O(n)),
after the report is written, and says which; 10 when TARGET or CASE has no verdict in the
data, or a verdict it names has no fitted class (10 wins over 9). CLASS as the verdicts
print it: O(1), O(log n), O(n), O(n log n), O(n^2) (or O(n²)). `tracer sweep --expect`
judges the same after the sweep (also with --no-report).";

pub const COMPARE_HELP: &str =
    "Per target and case, the growth with N decides, not the class labels: the growth is the
time per call at the largest N both sides measured over the smallest, and the change is
B's over A's with a 95% interval from each point's error: the spread of its calls and runs,
at least 10% with two runs or more per size, at least 25% with one (a workload's repeats
inside one process miss the drift between runs), and at least its side's scatter about its
fitted model. Outcomes:
  grew           the whole interval is above a twofold change, and the time added from the
                 smallest to the largest N rose more than twofold too
  shrank         the same, below (a loop that was fixed)
  same           the change is within twofold by two one-sided tests at 5% (its 90%
                 interval lies within twofold: the usual test of equivalence); or, where
                 the time cannot show it, a loop count gave a side its class and grows
                 the same (within 25%) on both, and the time's 95% interval holds no
                 change (\"by loop count\" on the line: the loop runs as many times)
  inconclusive   anything else, or fewer than two sizes in common, or a partial side
Two discover sweeps of the same program (its run's name) are compared loop by loop: each
kernel entry (syscall, page fault) that is a loop on either side gets the same decision from
its sampled time per call (\"do_sys_poll in poll [command]: same: ...; a kernel loop in
do_sys_poll on both\"); a loop on one side only is shrank or grew when the data shows it.
Two different programs are not compared: the compare says which each side ran.
Only grew and shrank are highlighted (terminal, compare.md, the HTML summary); compare.json
has them under `verdicts` with the interval and both sides' class sets. The per-N rows mark
a difference * when the runs (or the workload's repeats) differ at 95% (Welch) by 5% or
more, ? when a side has fewer than two.

Gate (CI, git bisect run): --fail-on grew (or shrank, same, inconclusive, changed = grew or
shrank; a comma list, or repeated) writes the comparison as usual, then exits 9 and names
the verdicts whose outcome is one of those, or exits 0 when none is. Every target and case
the compare has a verdict for counts, incidental ones included, and each kernel loop of two
discover sweeps of the same program. Sweeps with neither (--discover without --targets, and
no loop found on either side) give no verdict: that exits 10 (nothing to gate on), never 0.
Other failures keep their own status (6: an input directory missing or corrupt), so a
bisect script can tell them from a regression.

Examples:
  tracer compare sweep-5.10 sweep-6.1
  tracer compare good-sweep new-sweep --fail-on grew -o /tmp/cmp
  tracer compare sweep-6.1/waitpid sweep-6.12/waitpid -o /tmp/waitpid-6.1-vs-6.12";

pub const EXPORT_HELP: &str = "\
Formats:
  perfetto  the raw per-call spans (record --raw-events) as a Perfetto trace: a slice per
            call on its thread, the workload's phases and an N counter per process.
            Default output RUN/trace.pftrace; open it in ui.perfetto.dev (Open trace file).
  pprof     the folded stacks as gzipped pprof profiles, one per kind and target
            (<kind>-<target>.pb.gz), samples labelled target, case and n. Default output
            directory RUN/profiles (replaced as a whole); open a profile with
            `go tool pprof -http=: FILE`, or in Perfetto, Parca, Pyroscope, Grafana.

Examples:
  tracer export perfetto tracer-run-*/
  tracer export pprof sweep/waitpid -o /tmp/waitpid-profiles";

const SWEEP_HELP_HEAD: &str = "\
Your own command, once per N ({N} in its arguments replaced by N; the lower-case form works
too; TRACER_N=N in its environment; each run is one phase of case `command`):
  sudo tracer sweep --n 10,100,1000,3000 --targets do_wait -- ./bench {N} 100
  sudo tracer sweep --n 1..4000*4 --discover --repeat 3 --ops 20000 -- ./poll {N}
A run that fails is kept in run.json (invocations) and its N left out of the fits; the
sweep goes on with the other N and exits 8.

";

const SWEEP_HELP_TAIL: &str = "\
N lists: 1,10,100 or ranges 1..8000*4 (geometric) and 1k..4k+1k (linear).
Ctrl-C keeps the runs finished so far and marks the sweep partial. If the tracer is killed
(SIGKILL) or crashes, the workload gets SIGKILL and its children and SysV IPC objects go
with it; the output is not written, and the next tracer writing in that directory removes
the temporary one. A second sweep into an output another one is writing exits 5.

Your command, or a workload, runs --repeat times per N (default 3), each round in its own
shuffled order of the sizes (never starting with the size the last round ended with), so a
drift over the sweep does not line up with N; each run sets up its N afresh (a workload's extra arguments, e.g. -- --iterations 10, go to every run).
Each run's calls are kept apart (run.json `invocations[].spans`, per target and
case): each run is its own point in the fits, a size's value is the median of its runs, and
their spread is its error. After the rounds, a size runs again only while a verdict could
still change by it (for a workload's case, the target it exists for): the verdict fitted
from the runs so far differs from what the same runs would give at the cap of runs per size
(a class set more runs would narrow, a rise still within noise); the noisiest size of such a
verdict runs next, the verdicts are read again after each run, and the runs stop as soon as
none could change, or at --max-repeat runs in all (default twice --repeat) or --extra-time
for all extra runs (default half the rounds' time). A verdict that names one class, or that
the sizes cannot narrow however many runs (two sizes fit every growing shape), runs nothing
more. The last line says the runs per size, what the extra runs were for, and which
verdicts are still open and why. A --discover sweep then reads its runs so far as the
report will: a frame left undecided (below) names the size whose runs would decide it, and
where its smallest size has fewer than 100 of the frame's samples that size runs again
until it should have them (its samples per run say how many runs), in batches of at most
twice its runs so far, within --extra-time and --max-repeat when given; the runs so far are
read again after each batch, four times at most.

--budget DURATION caps the sweep's wall time. It cuts, in this order: extra runs, a run's
rounds after the first (a round starts only while one as long as the last fits in the run's
share: each run, a workload or your command, gets an equal share of what is left when it
starts, after one round's share is set aside for the loop-count or confirmation pass), then
that pass (it runs only when the first rounds' time fits again). A run's first round always
runs. Each cut is printed and kept in sweep.json (budget_cuts).

Name what a loop calls beside the target (--targets do_wait,wait_consider_task): its calls
inside each target call, counted in the kernel, are the loop's trips per call, and give a
growing verdict its class (\"O(n) by loop count\") where the time per item creeps up with N.
A built-in workload does this by itself: after its rounds it runs once more per N (run
<WORKLOAD>-loops) with its target's per-trip function traced (do_wait: wait_consider_task,
dup_mmap: vm_area_dup, sysvipc_find_ipc: idr_find), where the kernel allows function probes
(a function outside ftrace, as lib/'s idr_find on Debian's kernels, is counted at its calls in
the target's code: plan call-sites, x86-64);
the timed rounds stay free of a probe per trip, and the pass's counts join their verdicts
(\"counted in the kernel by waitpid-loops\"). A command's sweep with stacks sampled does it
too, with the frames the root causes of its growing targets name (run <COMMAND>-loops):
-t do_sys_poll over N idle pipes counts pipe_poll, N per call. --no-loop-count skips it.

A benchmark's setup and teardown often call the target too (N reaps after 100 timed waits).
Where the calls per op follow a + b*N exactly at three sizes or more, the report splits the
two populations by the per-call histogram and the verdict takes the class of the one whose
time per call grows (\"the 100 calls per op: O(n); the ~1.00*N others: O(1); all calls
together: O(1)\"); a mix it cannot split whose mean does not grow gets no class.

--discover: sample every kernel stack of the traced process tree (cpu-clock, --freq) and
where it blocks, then rank the kernel functions whose time per op grows with N; no function
probe needed. With --discover and no --targets, nothing else is traced.
It also counts every kernel entry of the tree, with tracepoints only: each syscall by name
(raw_syscalls sys_enter, counted in the kernel) and each user page fault
(exceptions:page_fault_user), and files every kernel sample under the entry it ran under: the
syscall its thread entered last when the sample's kernel stack is in that syscall's work
(above the syscall entry, not on the way back to user mode), else what the stack shows it
entered by (a fault, an interrupt, the kernel's own return work). Three things can grow with N, and the report keeps them apart:
  kernel loops  an entry inside which a frame's on-CPU time per call of the entry grows
                (a growth class, 4 standard errors of sampling, and at least twofold from
                the smallest to the largest N; of its self time when that carries half
                its growth): `wait4: wait_consider_task O(n) per call`. Where five
                entries or more are well sampled at both ends, the median of their
                time-per-call ratios is a slowdown common to them (the machine's, not a
                loop's: \"every entry slower per call: x1.86 ...\"), and a loop must
                also grow 1.5 times beyond it.
                The answer line, the summary row and the report lead with the top one:
                most time added per op by its growth per call (the top frame's time per
                call at the largest N less at the smallest, times the calls per op), except
                that a loop whose class set lies wholly above another's (each measured at
                three sizes of 20 samples or more) ranks above it. A first loop that weighs less than another entry but grows
                faster gets a line saying near which N it would overtake it (an
                extrapolation of the three largest sizes).
  more calls    an entry made at least 1.5 times as often per op at the largest N while its
                whole time per call does not double (beyond the common slowdown): the
                command's own scaling (N more
                forks, execs and page faults per run), stated, never the answer.
  longer run    the tree's interrupts and preemptions (timer, reschedule and function-call
                IPIs, device interrupts, softirqs, switches away from a task that could
                still run), counted by their tracepoints under the task they interrupted:
                where they carry the growth of the kernel time per op and are counted more
                often, the answer says the run is longer, never \"more calls\".
  undecided     an entry with no loop but a frame that rose as a loop's would, above its
                time at the smallest N at the largest N only (or within the noise of a
                smallest N of few samples): a growing loop or a step, which the sizes do
                not tell apart. Said as such, with the size or the runs that would decide it
                (\"kernel loop undecided\"), never as a loop nor as \"no kernel loop\".
Sweep a wide range of N (tenfold or more): a loop must at least double its time per call.
Sampled times are fitted with their sampling error; in the evidence between classes each
point's error is at least the spread between runs of a size (the command's CPU time per run),
so runs that disagree leave the neighbouring classes in the set.

--expect TARGET[/CASE]:CLASS judges the sweep's verdicts as `tracer report --expect` does
(see `tracer report --help`): exit 9 when a fitted class set excludes CLASS, 10 when a
verdict named is missing or unfitted; a sweep's own 7 or 8 comes first.

Examples:
  sudo tracer sweep waitpid --n 1,10,100,1000,5000,8000
  sudo tracer sweep --n 100,1000,10000 -t do_wait --expect do_wait:O(1) -- ./bench {N}
  sudo tracer sweep --all -o sweep-6.1
  sudo tracer sweep spawn -- --variant spawn,spawn-wipeonfork --iterations 50";

/// `tracer sweep --help`: the examples, then one line per workload with its sweep's default N.
pub static SWEEP_HELP: LazyLock<String> = LazyLock::new(|| {
    let mut s = String::from(SWEEP_HELP_HEAD);
    s.push_str("Workloads (from the `workloads` binary next to tracer, or --workloads-bin):\n");
    for w in WORKLOADS {
        let what = format!("{}: {}", w.target.unwrap_or("calibration"), w.about);
        s.push_str(&format!(
            "  {:<10} {what:<49} (default N {})\n",
            w.name, w.sweep_n
        ));
    }
    s.push('\n');
    s.push_str(SWEEP_HELP_TAIL);
    s
});
