//! A workload stopped by SIGINT, SIGTERM or SIGHUP in the middle of a phase (or of its
//! setup) must exit 128+signal after cleaning up: no child of it survives (neither orphaned
//! nor as a zombie), no SysV shm segment or message queue it created remains, and its
//! --json file is absent or complete with status "interrupted".
//!
//! This test process makes itself a child subreaper, so any child the workload leaves behind
//! is re-parented to us and stays visible in /proc (a zombie is never reaped by init behind
//! our back). The tests run one at a time: the IPC checks compare system-wide listings.

mod common;

use std::collections::BTreeSet;
use std::sync::{Mutex, Once};
use std::time::Duration;

use common::*;
use workloads::report::Status;

static SERIAL: Mutex<()> = Mutex::new(());

fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl on our own process.
        let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        assert_eq!(
            r,
            0,
            "PR_SET_CHILD_SUBREAPER: {}",
            std::io::Error::last_os_error()
        );
    });
}

/// What the scenario should have created by the time the signal is sent.
#[derive(Clone, Copy)]
struct Expect {
    /// At least this many children of the workload alive when signalled.
    children: usize,
    /// At least this many new shm segments / message queues when signalled.
    shm: usize,
    msg: usize,
}

const NOTHING: Expect = Expect {
    children: 0,
    shm: 0,
    msg: 0,
};

/// Starts `workloads ARGS -v --json ...`, waits for a stderr line containing `when`, then a
/// little longer, sends `sig` and checks the aftermath.
fn interrupt(args: &[&str], when: &str, sig: i32, expect: Expect) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    become_subreaper();
    let dir = TempDir::new("sig");
    let json = dir.path("out.json");
    let (shm_before, msg_before) = (ipc_ids("shm"), ipc_ids("msg"));
    let mut full: Vec<&str> = args.to_vec();
    full.extend(["-v", "--json", json.to_str().expect("utf-8 path")]);
    let mut w = Running::start(&full);
    let wpid = w.pid();
    w.wait_for_line(when, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));

    let kids: BTreeSet<i32> = children_of(wpid).into_iter().collect();
    // In the workload's own namespace, every object it lists is new.
    let own = |kind: &str, before: &BTreeSet<i64>| {
        let ids = ipc_ids_of(wpid, kind);
        match own_ipc_namespace(wpid) {
            true => ids.len(),
            false => ids.difference(before).count(),
        }
    };
    let (new_shm, new_msg) = (own("shm", &shm_before), own("msg", &msg_before));
    assert!(
        kids.len() >= expect.children,
        "only {} children alive when signalled, expected {}",
        kids.len(),
        expect.children
    );
    assert!(
        new_shm >= expect.shm,
        "only {new_shm} new shm segments when signalled, expected {}",
        expect.shm
    );
    assert!(
        new_msg >= expect.msg,
        "only {new_msg} new queues when signalled, expected {}",
        expect.msg
    );

    // SAFETY: signalling the child we spawned.
    assert_eq!(unsafe { libc::kill(wpid, sig) }, 0);
    let status = wait_timeout(&mut w.child, Duration::from_secs(60)).unwrap_or_else(|| {
        let _ = w.child.kill();
        panic!("workload did not exit within 60 s of signal {sig}");
    });
    let stderr = w.stderr_so_far();
    assert_eq!(
        status.code(),
        Some(128 + sig),
        "exit status after signal {sig}; stderr:\n{stderr}"
    );

    // No child survives: an orphan or unreaped zombie would now be ours (subreaper).
    let survivors: Vec<(i32, Option<(char, i32)>)> = kids
        .iter()
        .filter_map(|&p| stat_fields(p).map(|st| (p, Some(st))))
        .collect();
    assert!(
        survivors.is_empty(),
        "children of the workload still exist as (pid, (state, ppid)): {survivors:?}"
    );
    let adopted: Vec<i32> = children_of(std::process::id() as i32)
        .into_iter()
        .filter(|p| kids.contains(p))
        .collect();
    assert!(
        adopted.is_empty(),
        "orphans re-parented to the test: {adopted:?}"
    );

    assert_eq!(ipc_ids("shm"), shm_before, "shm segments left behind");
    assert_eq!(ipc_ids("msg"), msg_before, "message queues left behind");

    // The JSON is absent or complete and marked interrupted; no temporary file remains.
    let entries = dir.entries();
    assert!(
        entries.is_empty() || entries == ["out.json"],
        "unexpected files: {entries:?}"
    );
    if json.exists() {
        let r = read_report(&json);
        assert_eq!(r.status, Status::Interrupted);
    }
}

const SIGINT: i32 = libc::SIGINT;
const SIGTERM: i32 = libc::SIGTERM;
const SIGHUP: i32 = libc::SIGHUP;

/// One test a line: `workloads ARGS --min-time 60`, signalled with the signal once it printed
/// `when` (having made at least `expect` by then); `interrupt` checks the aftermath.
macro_rules! signalled {
    ($($name:ident: $args:literal, $when:literal, $sig:ident, $expect:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let args: Vec<&str> = concat!($args, " --min-time 60").split(' ').collect();
                interrupt(&args, $when, $sig, $expect);
            }
        )*
    };
}

const WAITING: Expect = Expect {
    children: 3000,
    ..NOTHING
};
const SHM: Expect = Expect {
    shm: 2000,
    ..NOTHING
};
const MSG: Expect = Expect {
    msg: 2000,
    ..NOTHING
};
/// The mempolicy reader: one child process.
const READER: Expect = Expect {
    children: 1,
    ..NOTHING
};

signalled! {
    waitpid_sigint_mid_phase: "waitpid --n 3000 --variant waitpid-pid", "phase begin", SIGINT, WAITING;
    waitpid_sigterm_mid_phase: "waitpid --n 3000 --variant waitpid-pid", "phase begin", SIGTERM, WAITING;
    // Signalled while the pool is still growing (8000 children take a while to fork).
    waitpid_sighup_while_forking_children: "waitpid --n 8000", "forking", SIGHUP, Expect { children: 1, ..NOTHING };
    spawn_sigint_mid_phase: "spawn --n 32000 --variant spawn", "phase begin", SIGINT, NOTHING;
    spawn_sigterm_mid_phase: "spawn --n 32000 --variant spawn-wipeonfork", "phase begin", SIGTERM, NOTHING;
    sysvipc_shm_sigint_mid_phase: "sysvipc --n 2000 --variant sysvipc-shm", "phase begin", SIGINT, SHM;
    sysvipc_shm_sigterm_mid_phase: "sysvipc --n 2000 --variant sysvipc-shm", "phase begin", SIGTERM, SHM;
    sysvipc_msg_sigint_mid_phase: "sysvipc --n 2000 --variant sysvipc-msg", "phase begin", SIGINT, MSG;
    sysvipc_msg_sigterm_mid_phase: "sysvipc --n 2000 --variant sysvipc-msg", "phase begin", SIGTERM, MSG;
    mempolicy_exec_with_reader_process_sigint_mid_phase: "mempolicy --n 4096 --variant mempolicy-exec --reader process", "phase begin", SIGINT, READER;
    mempolicy_fork_with_reader_process_sigterm_mid_phase: "mempolicy --n 4096 --variant mempolicy-fork --reader process", "phase begin", SIGTERM, READER;
    mempolicy_page_with_reader_thread_sigterm_mid_phase: "mempolicy --n 65536 --variant mempolicy-page,mempolicy-brk --reader", "phase begin", SIGTERM, NOTHING;
    getpid_sigint_mid_phase: "getpid --n 100000", "phase begin", SIGINT, NOTHING;
    getpid_sigterm_mid_phase: "getpid --n 100000", "phase begin", SIGTERM, NOTHING;
}

#[test]
fn sysvipc_sparse_sigterm_mid_phase_restores_next_id() {
    assert!(
        std::path::Path::new("/proc/sys/kernel/shm_next_id").exists(),
        "this kernel has no /proc/sys/kernel/shm_next_id; the sparse variant cannot be tested here"
    );
    let args = [
        "sysvipc",
        "--n",
        "2000",
        "--variant",
        "sysvipc-shm-sparse",
        "--min-time",
        "60",
    ];
    interrupt(
        &args,
        "phase begin",
        SIGTERM,
        Expect {
            shm: 2000,
            ..NOTHING
        },
    );
    let next = std::fs::read_to_string("/proc/sys/kernel/shm_next_id").expect("shm_next_id");
    assert_eq!(
        next.trim(),
        "-1",
        "shm_next_id must be back to automatic allocation"
    );
}
