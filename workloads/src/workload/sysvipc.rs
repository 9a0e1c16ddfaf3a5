//! sysvipc_find_ipc: time full reads of /proc/sysvipc/shm (or msg) with N objects.
//!
//! Each read() of a /proc/sysvipc file restarts the seq_file iterator at the file position;
//! sysvipc_find_ipc then had to find the object for that position. Before Linux 5.15 it did
//! so with a loop that made a full read O(N^2) (Rafael Aquini, "ipc: replace costly bailout
//! check in sysvipc_find_ipc()"); later it was O(N + highest id), then about O(N). Sparse
//! ids (via /proc/sys/kernel/shm_next_id) separate the N term from the highest-id term.
//!
//! Each size's objects are created in an IPC namespace of their own where the kernel allows
//! (`harness::ipc_ns`): their ids start at 0 whatever ran before. Every object created here is
//! removed again on success, error, panic and stop signals (the owner is a guard whose Drop
//! runs on all of those paths), and when this process is killed by SIGKILL by the kernel
//! ending its namespace, or, where it has none of its own, by a janitor process (see
//! `harness::ipc_janitor` for why it is done so).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::Path;

use clap::{Args, ValueEnum};
use workloads::cases;

use crate::harness::error::{Error, Result};
use crate::harness::ipc_janitor::{IpcJanitor, IpcKind};
use crate::harness::ipc_ns;
use crate::harness::options::Common;
use crate::harness::session::{PhaseSpec, Session};
use crate::harness::{signals, sys};

pub const DEFAULT_N: &str = workloads::catalog::SYSVIPC.default_n;

/// Size of the IPC id index space without the ipcmni_extend boot option.
pub const IPCMNI: u64 = 32768;

const SHM_NEXT_ID: &str = "/proc/sys/kernel/shm_next_id";

#[derive(Args, Debug)]
pub struct SysvipcArgs {
    #[command(flatten)]
    pub common: Common,

    /// Variants to measure, comma-separated [default: sysvipc-shm,sysvipc-msg]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANT")]
    pub variant: Vec<Variant>,

    /// Size of each shm segment in bytes (never touched, so it costs no memory)
    #[arg(long, value_name = "BYTES", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub segment_size: u64,

    /// Bytes per read() call; each call restarts the kernel's iterator, as `cat` would
    #[arg(long, value_name = "BYTES", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(64..=16_777_216))]
    pub read_size: u64,

    /// sysvipc-shm-sparse: distance between consecutive ids [default: 32768/N, which
    /// spreads the N segments over the whole id space]
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    pub stride: Option<u64>,
}

/// The SysV IPC cases: which objects are made, and which listing reads them.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// N shm segments (shmget), read /proc/sysvipc/shm
    #[value(name = cases::SYSVIPC_SHM)]
    Shm,
    /// N message queues (msgget), read /proc/sysvipc/msg
    #[value(name = cases::SYSVIPC_MSG)]
    Msg,
    /// N shm segments at sparse ids set through /proc/sys/kernel/shm_next_id (needs
    /// CONFIG_CHECKPOINT_RESTORE and root), read /proc/sysvipc/shm
    #[value(name = cases::SYSVIPC_SHM_SPARSE)]
    ShmSparse,
}

impl Variant {
    pub fn case(self) -> &'static str {
        match self {
            Variant::Shm => cases::SYSVIPC_SHM,
            Variant::Msg => cases::SYSVIPC_MSG,
            Variant::ShmSparse => cases::SYSVIPC_SHM_SPARSE,
        }
    }

    fn kind(self) -> Kind {
        match self {
            Variant::Msg => Kind::Msg,
            Variant::Shm | Variant::ShmSparse => Kind::Shm,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Shm,
    Msg,
}

impl Kind {
    fn proc_file(self) -> &'static str {
        match self {
            Kind::Shm => "/proc/sysvipc/shm",
            Kind::Msg => "/proc/sysvipc/msg",
        }
    }
}

/// IPC objects this process created; all removed on drop. In the caller's namespace, each is
/// listed with the janitor while it exists (slot = its index here).
struct IpcSet<'j> {
    kind: Kind,
    ids: Vec<i32>,
    janitor: Option<&'j IpcJanitor>,
}

impl<'j> IpcSet<'j> {
    fn new(kind: Kind, janitor: Option<&'j IpcJanitor>) -> Self {
        IpcSet {
            kind,
            ids: Vec::new(),
            janitor,
        }
    }

    fn create(&mut self, segment_size: u64) -> Result<i32> {
        // SAFETY: plain syscalls; IPC_PRIVATE always creates a new object.
        let id = unsafe {
            match self.kind {
                Kind::Shm => libc::shmget(
                    libc::IPC_PRIVATE,
                    segment_size as usize,
                    libc::IPC_CREAT | 0o600,
                ),
                Kind::Msg => libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600),
            }
        };
        if id < 0 {
            let call = match self.kind {
                Kind::Shm => format!("shmget (segment {})", self.ids.len() + 1),
                Kind::Msg => format!("msgget (queue {})", self.ids.len() + 1),
            };
            return Err(Error::last_os(call));
        }
        let kind = match self.kind {
            Kind::Shm => IpcKind::Shm,
            Kind::Msg => IpcKind::Msg,
        };
        if let Some(j) = self.janitor {
            j.record(self.ids.len(), kind, id);
        }
        self.ids.push(id);
        Ok(id)
    }

    fn remove_all(&mut self) {
        for (slot, id) in self.ids.drain(..).enumerate() {
            if let Some(j) = self.janitor {
                j.forget(slot);
            }
            // SAFETY: IPC_RMID on an id we created; no buffer is passed.
            let r = unsafe {
                match self.kind {
                    Kind::Shm => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                    Kind::Msg => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                }
            };
            if r != 0 {
                let flag = if self.kind == Kind::Shm { "-m" } else { "-q" };
                eprintln!(
                    "workloads: could not remove IPC id {id}: {}; remove it with `ipcrm {flag} {id}`",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

impl Drop for IpcSet<'_> {
    fn drop(&mut self) {
        self.remove_all();
    }
}

/// Restores /proc/sys/kernel/shm_next_id to -1 (automatic allocation) on drop, in case a
/// stop left a value there that would steer another program's next shmget.
struct NextIdGuard;

impl NextIdGuard {
    fn set(&self, id: u64) -> Result<()> {
        std::fs::write(SHM_NEXT_ID, id.to_string())
            .map_err(|e| Error::io(format!("writing {SHM_NEXT_ID}"), e))
    }
}

impl Drop for NextIdGuard {
    fn drop(&mut self) {
        if std::fs::read_to_string(SHM_NEXT_ID)
            .map(|s| s.trim() != "-1")
            .unwrap_or(false)
        {
            let _ = std::fs::write(SHM_NEXT_ID, "-1");
        }
    }
}

pub fn run(args: &SysvipcArgs, s: &mut Session) -> Result<()> {
    let ns = super::n_list(&args.common, DEFAULT_N);
    let variants = super::dedup(if args.variant.is_empty() {
        vec![Variant::Shm, Variant::Msg]
    } else {
        args.variant.clone()
    });
    let max = *ns.last().expect("n list is never empty");
    for v in &variants {
        let file = v.kind().proc_file();
        if !Path::new(file).exists() {
            return Err(Error::Unsupported(format!(
                "{}: {file} is missing (kernel without CONFIG_SYSVIPC or /proc)",
                v.case()
            )));
        }
        match v.kind() {
            Kind::Shm => {
                s.limits
                    .check_shm(max, args.segment_size, &format!("{max} shm segments"))?
            }
            Kind::Msg => s.limits.check_msg(max, &format!("{max} message queues"))?,
        }
        if *v == Variant::ShmSparse {
            check_sparse(s, &ns, args.stride)?;
        }
    }
    s.config("n", ns.clone());
    s.config(
        "variants",
        variants.iter().map(|v| v.case()).collect::<Vec<_>>(),
    );
    s.config("segment_size", args.segment_size);
    s.config("read_size", args.read_size);
    s.config("stride", args.stride);
    s.start_table("reads: open + read() until EOF + close");
    // A namespace per set where the kernel allows one (the first is entered here); else one
    // set of at most `max` objects exists at a time, watched by the janitor.
    let own_namespace = ipc_ns::enter_fresh(&s.limits).is_ok();
    s.config("ipc_namespace_per_size", own_namespace);
    let janitor = match own_namespace {
        true => None,
        false => Some(IpcJanitor::start(max as usize)?),
    };
    let mut fresh = true;

    let mut buf = vec![0u8; args.read_size as usize];
    for (i, &n) in ns.iter().enumerate() {
        for &v in &variants {
            s.progress(format!(
                "N={n} ({}/{}): creating {n} objects for {}",
                i + 1,
                ns.len(),
                v.case()
            ));
            if own_namespace && !std::mem::take(&mut fresh) {
                ipc_ns::enter_fresh(&s.limits)?;
            }
            let mut set = IpcSet::new(v.kind(), janitor.as_ref());
            let max_id = create_set(&mut set, v, n, args)?;
            let path = CString::new(v.kind().proc_file()).expect("no NUL");
            // Outside the phase: one read to learn the size and check that our objects are listed.
            let (bytes, lines) = sys::read_whole(&path, &mut buf, true)?;
            let entries = lines.saturating_sub(1);
            if entries < n {
                return Err(Error::Failed(format!(
                    "{} lists {entries} objects, but {n} were just created",
                    v.kind().proc_file()
                )));
            }
            let spec = PhaseSpec {
                case: v.case(),
                n,
                unit: "reads",
            };
            let rows = s.measure(&spec, &mut || {
                sys::read_whole(&path, &mut buf, false)?;
                Ok(1)
            })?;
            let counters = BTreeMap::from([
                ("entries".to_string(), entries as f64),
                ("bytes_per_read".to_string(), bytes as f64),
                ("max_id".to_string(), f64::from(max_id)),
            ]);
            s.commit(rows, &counters);
            s.progress(format!("N={n}: removing {n} objects"));
            drop(set);
        }
    }
    Ok(())
}

/// Creates the `n` objects of variant `v` in `set`; the highest id.
fn create_set(set: &mut IpcSet<'_>, v: Variant, n: u64, args: &SysvipcArgs) -> Result<i32> {
    let mut max_id = 0i32;
    if v == Variant::ShmSparse {
        let stride = args.stride.unwrap_or((IPCMNI / n).max(1));
        let guard = NextIdGuard;
        for k in 0..n {
            signals::check()?;
            guard.set((k + 1) * stride - 1)?;
            max_id = max_id.max(set.create(args.segment_size)?);
        }
        drop(guard);
    } else {
        for _ in 0..n {
            signals::check()?;
            max_id = max_id.max(set.create(args.segment_size)?);
        }
    }
    Ok(max_id)
}

fn check_sparse(s: &Session, ns: &[u64], stride: Option<u64>) -> Result<()> {
    match s.limits.shm_next_id {
        None => {
            return Err(Error::Unsupported(format!(
                "sysvipc-shm-sparse: {SHM_NEXT_ID} is missing (kernel built without CONFIG_CHECKPOINT_RESTORE)"
            )));
        }
        Some(-1) => {}
        Some(v) => {
            return Err(Error::Failed(format!(
                "sysvipc-shm-sparse: {SHM_NEXT_ID} is {v}, so another program is steering ids right now; try again later"
            )));
        }
    }
    let max = *ns.last().expect("n list is never empty");
    if max > IPCMNI {
        return Err(Error::Failed(format!(
            "sysvipc-shm-sparse: N={max} is more than the {IPCMNI} ids there are"
        )));
    }
    if let Some(st) = stride
        && st * max > IPCMNI
    {
        return Err(Error::Failed(format!(
            "sysvipc-shm-sparse: --stride {st} x N={max} goes past the {IPCMNI} ids there are; use --stride {} or less",
            IPCMNI / max
        )));
    }
    Ok(())
}
