//! `workloads`: load generators that make one kernel path do work growing with N, timing
//! themselves and announcing each measured phase to the tracer through uprobe markers.

mod harness;
mod workload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use workloads::report::Status;

use harness::error::{Error, signal_name};
use harness::limits::{Limits, ProcFs};
use harness::session::Session;
use harness::{signals, sys};
use workload::{getpid, mempolicy, spawn, sysvipc, waitpid};

const ABOUT: &str =
    "Load generators that reproduce the kernel mailing-list benchmarks behind the tracer's targets";

const LONG_ABOUT: &str = "\
Load generators that reproduce the kernel mailing-list benchmarks behind the tracer's
targets. Each subcommand sweeps a size N, makes one kernel path do work that grows with N,
and times itself, so the tracer's figures can be checked against an independent number.

Every measured phase is bracketed by calls to tracer_phase_begin(case, n) and
tracer_phase_end(case, n, ops), exported functions the tracer attaches uprobes to; setup
(creating N children, VMAs or IPC objects) and teardown happen outside those markers.
Limits (RLIMIT_NPROC, kernel.pid_max, kernel.threads-max, vm.max_map_count, kernel.shmmni,
kernel.msgmni, kernel.shmall, MemAvailable) are checked before anything is created. On
SIGINT, SIGTERM or SIGHUP the run stops, kills and reaps its children, removes its IPC
objects, writes the JSON with status \"interrupted\" and exits 128+signal.

Output: a table in Google Benchmark's layout on stdout (name/N, time and CPU per operation,
iterations, counters) and, with --json PATH, the same rows as JSON:
  {\"workload\", \"kernel\", \"status\": \"complete\"|\"interrupted\", \"limits\": {...},
   \"results\": [{\"case\", \"case_id\", \"n\", \"repeat\", \"iterations\", \"ops\", \"total_ns\",
                \"time_ns_per_op\", \"cpu_ns_per_op\", \"counters\"}], ...}";

const EXIT_CODES: &str = "\
Exit status: 0 done; 1 failed; 2 bad usage; 3 a limit refused the run (the message names
it); 4 the kernel lacks a feature a requested variant needs; 129/130/143 stopped by
SIGHUP/SIGINT/SIGTERM after cleaning up.";

#[derive(Parser, Debug)]
#[command(name = "workloads", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// do_wait: fork + wait with N idle children (Newsome, "do_wait: make PIDTYPE_PID case O(1) instead of O(n)", 5.13)
    #[command(long_about = WAITPID_HELP, after_help = EXIT_CODES)]
    Waitpid(waitpid::WaitpidArgs),
    /// dup_mmap: fork + exit + wait with N extra VMAs (Peng Zhang, "Introduce __mt_dup() to improve the performance of fork()", 6.8)
    #[command(long_about = SPAWN_HELP, after_help = EXIT_CODES)]
    Spawn(spawn::SpawnArgs),
    /// sysvipc_find_ipc: read /proc/sysvipc/{shm,msg} with N objects (Aquini, "ipc: replace costly bailout check in sysvipc_find_ipc()", 5.15)
    #[command(long_about = SYSVIPC_HELP, after_help = EXIT_CODES)]
    Sysvipc(sysvipc::SysvipcArgs),
    /// get_task_policy: aim9 page/brk/fork/exec tests, optional /proc/PID/status reader and set_mempolicy
    #[command(long_about = MEMPOLICY_HELP, after_help = EXIT_CODES)]
    Mempolicy(mempolicy::MempolicyArgs),
    /// getpid: raw syscall vs a MADV_WIPEONFORK-cached pid, with the break-even count (van Riel, "introduce MADV_WIPEONFORK", 4.14)
    #[command(long_about = GETPID_HELP, after_help = EXIT_CODES)]
    Getpid(getpid::GetpidArgs),
}

const WAITPID_HELP: &str = "\
Traced target: do_wait. Thread reproduced: Jim Newsome, \"do_wait: make PIDTYPE_PID case
O(1) instead of O(n)\" (merged for Linux 5.13): waitpid(pid) in a parent with N children
walked the whole children list; since 5.13 it looks the pid up directly. waitpid(-1),
P_ALL and P_PGID still walk the list on every kernel.

Setup (outside the phases): fork N idle children that block in pause() with
PR_SET_PDEATHSIG=SIGKILL (the pool grows as N grows and is killed and reaped at the end).
Phase: one op = fork a child that _exit(0)s at once, then wait for it (waitpid-pid,
waitpid-any, waitid-pidfd), or one waitpid(-1, WNOHANG) poll with nothing to reap
(waitpid-wnohang). Expected shape on Linux >= 5.13: waitpid-pid and waitid-pidfd flat in N,
waitpid-any and waitpid-wnohang linear. Default N: 1,10,100,1000,5000,8000.";

const SPAWN_HELP: &str = "\
Traced target: dup_mmap. Thread reproduced: Peng Zhang, \"Introduce __mt_dup() to improve
the performance of fork()\" (maple tree, merged for Linux 6.8): fork copies every VMA of the
parent, so its cost grows with the number of mappings; __mt_dup made it markedly cheaper.

Setup (outside the phases): map N one-page VMAs that cannot merge (one mapping, every odd
page made read-only), write one byte to each page unless --no-touch, and for
spawn-wipeonfork mark them MADV_WIPEONFORK. Phase: one op = fork + child _exit(0) +
waitpid (unixbench \"spawn\"); the table reports forks_per_second and the process's VMA
count. Expected shape: time per fork linear in N once N dominates the base mappings.
Default N: 1,10,100,1000,4000,16000,64000 (vm.max_map_count is 65530 by default).";

const SYSVIPC_HELP: &str = "\
Traced target: sysvipc_find_ipc. Thread reproduced: Rafael Aquini, \"ipc: replace costly
bailout check in sysvipc_find_ipc()\" (Linux 5.15): reading /proc/sysvipc/shm with N
segments was O(N^2) (5 s for 32768 segments); afterwards O(N + highest id), later about
O(N).

Setup (outside the phases): create N shm segments (shmget IPC_PRIVATE, never attached),
N message queues (sysvipc-msg), or N shm segments at sparse ids steered through
/proc/sys/kernel/shm_next_id (sysvipc-shm-sparse; needs CONFIG_CHECKPOINT_RESTORE and
root). Phase: one op = open + read() in --read-size chunks until EOF + close of
/proc/sysvipc/shm (or msg). Every object is removed after its N, and on error, panic and
SIGINT/SIGTERM/SIGHUP. kernel.shmmni / kernel.msgmni / kernel.shmall are checked first,
counting objects that already exist. Expected shape on Linux >= 5.15: linear in N.
Default N: 1,10,100,1000,4000 (kernel.shmmni is 4096 by default).";

const MEMPOLICY_HELP: &str = "\
Traced target: get_task_policy. Thread reproduced: the mempolicy reference-counting change
measured with aim9's page_test, brk_test, fork_test and exec_test, with and without a task
reading /proc/PID/status (the thread's case 3). get_task_policy is usually inlined into the
page-allocation path, so the tracer resolves an out-of-line caller.

Phases: mempolicy-page: one iteration maps N fresh anonymous pages (MADV_NOHUGEPAGE),
writes one byte to each and unmaps them (ops = pages touched). mempolicy-brk: raise the
break by N pages, touch each, lower it (ops = pages). mempolicy-fork: fork + _exit +
waitpid with N touched pages in the parent (ops = forks). mempolicy-exec: fork + exec of
/proc/self/exe with a hidden flag that exits at once + waitpid (ops = execs). --reader runs
an open+read+close loop on /proc/<pid>/status during the phases (thread or process);
--policy sets a task mempolicy first and degrades to the default policy, with a note, on
kernels without NUMA. Expected shape: page/brk time per page flat in N. Default N:
1,16,256,4096,65536.";

const GETPID_HELP: &str = "\
Calibration workload (also the tracer's probe-overhead yardstick). Thread reproduced: Rik
van Riel, \"mm,fork: introduce MADV_WIPEONFORK\" (Linux 4.14): a per-process value such as a
cached pid is only safe across fork if the child sees it wiped.

Phases: getpid-syscall: N raw syscall(SYS_getpid) per iteration. getpid-cached: N reads of
a pid cached in a MADV_WIPEONFORK page (one syscall refills it when zero). Before measuring,
a forked child checks that it finds the cache zeroed and recomputes its own pid. After the
sweep it prints the break-even count: cache setup cost (mmap + madvise + fill + munmap)
divided by the per-call saving at the largest N. pipe-read (only when named): N one-byte
read()s from a pipe kept full, a syscall that does a little work (the cost of tracing a
read-heavy loop). Default N: 1,10,100,1000,10000.";

fn main() -> ExitCode {
    // The exec test's child: leave before doing anything else, so exec cost is the kernel's.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == mempolicy::EXEC_CHILD_ARG)
    {
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    ExitCode::from(run(cli))
}

fn run(cli: Cli) -> u8 {
    let (name, common) = match &cli.command {
        Command::Waitpid(a) => ("waitpid", &a.common),
        Command::Spawn(a) => ("spawn", &a.common),
        Command::Sysvipc(a) => ("sysvipc", &a.common),
        Command::Mempolicy(a) => ("mempolicy", &a.common),
        Command::Getpid(a) => ("getpid", &a.common),
    };
    if let Err(e) = signals::install() {
        eprintln!("workloads {name}: {e}");
        return e.exit_code();
    }
    if let Some(cpu) = common.cpu
        && let Err(e) = sys::pin_to_cpu(cpu)
    {
        eprintln!("workloads {name}: {e}");
        return e.exit_code();
    }
    let limits = Limits::read(&ProcFs::real(), sys::page_size());
    let mut session = Session::new(name, common, limits);
    // Every guard (children, mappings, IPC objects) lives inside these calls and is dropped
    // before we get the result back, whatever the outcome.
    let outcome = match &cli.command {
        Command::Waitpid(a) => waitpid::run(a, &mut session),
        Command::Spawn(a) => spawn::run(a, &mut session),
        Command::Sysvipc(a) => sysvipc::run(a, &mut session),
        Command::Mempolicy(a) => mempolicy::run(a, &mut session),
        Command::Getpid(a) => getpid::run(a, &mut session),
    };
    // A stop signal that lands after the last phase still means the run was stopped.
    let outcome = outcome.and_then(|()| signals::check());
    match outcome {
        Ok(()) => match session.finish(Status::Complete) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("workloads {name}: {e}");
                e.exit_code()
            }
        },
        Err(Error::Interrupted(sig)) => {
            eprintln!(
                "workloads {name}: stopped by {} after cleaning up",
                signal_name(sig)
            );
            if let Err(e) = session.finish(Status::Interrupted) {
                eprintln!("workloads {name}: {e}");
            }
            Error::Interrupted(sig).exit_code()
        }
        Err(e) => {
            eprintln!("workloads {name}: {e}");
            e.exit_code()
        }
    }
}
