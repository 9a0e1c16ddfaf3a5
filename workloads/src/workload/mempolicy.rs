//! get_task_policy: the aim9-style tests used in the mempolicy reference-counting thread,
//! page (fault in N fresh pages), brk (grow the heap by N pages, touch, shrink), fork and
//! exec (with N touched pages in the parent), optionally with a reader of
//! /proc/<pid>/status running alongside (the thread's case 3) and with a non-default task
//! policy set through set_mempolicy(2).
//!
//! Every page fault allocates through the task's mempolicy; on most kernels
//! get_task_policy is inlined there, so the tracer resolves an out-of-line caller.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use clap::{Args, ValueEnum};
use workloads::cases;

use crate::harness::children::{self, ExecSpec, Transient};
use crate::harness::error::{Error, Result};
use crate::harness::limits::{self, ProcFs};
use crate::harness::options::Common;
use crate::harness::session::{PhaseSpec, Session};
use crate::harness::{signals, sys};

pub const DEFAULT_N: &str = workloads::catalog::MEMPOLICY.default_n;

/// The hidden argument that makes `workloads` exit at once (the exec test's child).
pub const EXEC_CHILD_ARG: &str = "--exec-child";

#[derive(Args, Debug)]
pub struct MempolicyArgs {
    #[command(flatten)]
    pub common: Common,

    /// Variants to measure, comma-separated [default: all]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANT")]
    pub variant: Vec<Variant>,

    /// Loop over open+read+close of /proc/<our pid>/status while measuring, in a thread of
    /// this process (`--reader` alone) or in a separate process (`--reader process`)
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "thread", value_name = "KIND")]
    pub reader: Option<ReaderKind>,

    /// set_mempolicy(2) to this task policy over all online nodes (preferred: the first)
    /// before measuring; on a kernel without NUMA the run continues with the default policy
    /// and says so
    #[arg(long, value_enum, value_name = "POLICY")]
    pub policy: Option<Policy>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// mmap N fresh anonymous pages, MADV_NOHUGEPAGE, write one byte to each, munmap (ops = pages)
    #[value(name = cases::MEMPOLICY_PAGE)]
    Page,
    /// brk up by N pages, write one byte to each, brk back down (ops = pages)
    #[value(name = cases::MEMPOLICY_BRK)]
    Brk,
    /// fork + child _exit(0) + waitpid, with N touched pages in the parent (ops = forks)
    #[value(name = cases::MEMPOLICY_FORK)]
    Fork,
    /// fork + exec of /proc/self/exe (exits at once) + waitpid, N touched pages (ops = execs)
    #[value(name = cases::MEMPOLICY_EXEC)]
    Exec,
}

impl Variant {
    const ALL: [Variant; 4] = [Variant::Page, Variant::Brk, Variant::Fork, Variant::Exec];

    pub fn case(self) -> &'static str {
        match self {
            Variant::Page => cases::MEMPOLICY_PAGE,
            Variant::Brk => cases::MEMPOLICY_BRK,
            Variant::Fork => cases::MEMPOLICY_FORK,
            Variant::Exec => cases::MEMPOLICY_EXEC,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Variant::Page | Variant::Brk => "pages",
            Variant::Fork => "forks",
            Variant::Exec => "execs",
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReaderKind {
    Thread,
    Process,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// MPOL_INTERLEAVE over all online nodes
    Interleave,
    /// MPOL_BIND to all online nodes
    Bind,
    /// MPOL_PREFERRED on the first online node
    Preferred,
}

impl Policy {
    fn mode(self) -> libc::c_int {
        match self {
            Policy::Interleave => libc::MPOL_INTERLEAVE,
            Policy::Bind => libc::MPOL_BIND,
            Policy::Preferred => libc::MPOL_PREFERRED,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Policy::Interleave => "interleave",
            Policy::Bind => "bind",
            Policy::Preferred => "preferred",
        }
    }
}

/// Applies `policy` to the calling thread; `Ok(Err(reason))` when the kernel has no NUMA
/// support (the run then goes on with the default policy).
fn apply_policy(policy: Policy) -> Result<Result<Vec<u32>, String>> {
    let Some(nodes) = limits::online_nodes(&ProcFs::real()) else {
        return Ok(Err(
            "/sys/devices/system/node is missing (kernel without CONFIG_NUMA)".into(),
        ));
    };
    let nodes: Vec<u32> = if policy == Policy::Preferred {
        nodes.into_iter().take(1).collect()
    } else {
        nodes
    };
    let mut mask = [0u64; 16];
    for &n in nodes.iter().filter(|&&n| n < 1024) {
        mask[(n / 64) as usize] |= 1 << (n % 64);
    }
    // SAFETY: mask holds 1024 bits; maxnode counts bits plus one, as the syscall expects.
    let r = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            policy.mode(),
            mask.as_ptr(),
            1025usize,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            return Ok(Err(
                "set_mempolicy(2) returned ENOSYS (kernel without CONFIG_NUMA)".into(),
            ));
        }
        return Err(Error::io(
            format!("set_mempolicy({}, nodes {nodes:?})", policy.name()),
            e,
        ));
    }
    Ok(Ok(nodes))
}

/// A counter in a shared anonymous page, so a reader process can report its reads.
struct SharedCounter(*mut AtomicU64);

impl SharedCounter {
    fn new() -> Result<Self> {
        // SAFETY: a fresh shared anonymous page; zero-filled, which is a valid AtomicU64.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap(shared counter)"));
        }
        Ok(SharedCounter(p.cast()))
    }

    fn get(&self) -> &AtomicU64 {
        // SAFETY: the page stays mapped for the lifetime of self.
        unsafe { &*self.0 }
    }
}

impl Drop for SharedCounter {
    fn drop(&mut self) {
        // SAFETY: unmapping the page new() mapped.
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

/// The interfering /proc/<pid>/status reader; stopped (joined or killed and reaped) on drop.
enum Reader {
    Thread {
        stop: Arc<AtomicBool>,
        reads: Arc<AtomicU64>,
        handle: Option<JoinHandle<()>>,
    },
    Process {
        _child: Transient,
        reads: SharedCounter,
    },
}

impl Reader {
    /// Starts the reader and returns once it has done its first read, so the interference
    /// is there from the first measured operation on.
    fn start(kind: ReaderKind) -> Result<Self> {
        let reader = Self::spawn(kind)?;
        let deadline = sys::monotonic_ns() + 5_000_000_000;
        while reader.reads() == 0 {
            signals::check()?;
            if sys::monotonic_ns() > deadline {
                return Err(Error::Failed(
                    "the /proc/<pid>/status reader did not complete a read within 5 s".into(),
                ));
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        Ok(reader)
    }

    fn spawn(kind: ReaderKind) -> Result<Self> {
        let path = CString::new(format!("/proc/{}/status", std::process::id())).expect("no NUL");
        let mut buf = vec![0u8; 4096];
        match kind {
            ReaderKind::Thread => {
                let stop = Arc::new(AtomicBool::new(false));
                let reads = Arc::new(AtomicU64::new(0));
                let (stop2, reads2) = (stop.clone(), reads.clone());
                let handle = std::thread::Builder::new()
                    .name("status-reader".into())
                    .spawn(move || {
                        signals::block_in_this_thread();
                        while !stop2.load(Ordering::Relaxed) {
                            if sys::read_whole(&path, &mut buf, false).is_ok() {
                                reads2.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                    .map_err(|e| Error::io("spawning the reader thread", e))?;
                Ok(Reader::Thread {
                    stop,
                    reads,
                    handle: Some(handle),
                })
            }
            ReaderKind::Process => {
                let reads = SharedCounter::new()?;
                let counter = reads.0;
                let child = children::fork_helper(move || {
                    loop {
                        if sys::read_whole(&path, &mut buf, false).is_ok() {
                            // SAFETY: the shared page is inherited and stays mapped in the child.
                            unsafe { (*counter).fetch_add(1, Ordering::Relaxed) };
                        }
                    }
                })?;
                Ok(Reader::Process {
                    _child: child,
                    reads,
                })
            }
        }
    }

    fn reads(&self) -> u64 {
        match self {
            Reader::Thread { reads, .. } => reads.load(Ordering::Relaxed),
            Reader::Process { reads, .. } => reads.get().load(Ordering::Relaxed),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Reader::Thread { stop, handle, .. } = self {
            stop.store(true, Ordering::Relaxed);
            if let Some(h) = handle.take() {
                let _ = h.join();
            }
        }
        // A process reader is killed and reaped by its Transient's Drop.
    }
}

/// N private anonymous pages, each written once. Unmapped on drop.
struct TouchedPages {
    addr: *mut libc::c_void,
    len: usize,
}

impl TouchedPages {
    fn new(n: u64, page: u64) -> Result<Self> {
        let len = (n * page) as usize;
        let addr = workloads::mem::map_anonymous(len).map_err(|source| Error::Sys {
            call: format!("mmap({n} pages)"),
            source,
        })?;
        // SAFETY: our mapping.
        unsafe { libc::madvise(addr, len, libc::MADV_NOHUGEPAGE) };
        let pages = TouchedPages { addr, len };
        if !touch(addr.cast(), n, page) {
            signals::check()?;
        }
        Ok(pages)
    }
}

impl Drop for TouchedPages {
    fn drop(&mut self) {
        // SAFETY: unmapping what new() mapped.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Writes one byte to each of `n` pages from `base`; stops early (returning false) when a
/// stop signal arrives, so a huge N cannot delay the cleanup.
fn touch(base: *mut u8, n: u64, page: u64) -> bool {
    for i in 0..n as usize {
        if i % 4096 == 4095 && signals::pending().is_some() {
            return false;
        }
        // SAFETY: callers pass a writable range of n pages.
        unsafe { base.add(i * page as usize).write_volatile(1) };
    }
    true
}

/// aim9 page_test: map N fresh pages, fault each in with one write, unmap.
fn page_once(n: u64, page: u64) -> Result<u64> {
    let len = (n * page) as usize;
    let addr = workloads::mem::map_anonymous(len).map_err(|source| Error::Sys {
        call: format!("mmap({n} pages)"),
        source,
    })?;
    // SAFETY: our fresh mapping, unmapped before returning.
    unsafe {
        libc::madvise(addr, len, libc::MADV_NOHUGEPAGE);
        let complete = touch(addr.cast(), n, page);
        if libc::munmap(addr, len) != 0 {
            return Err(Error::last_os("munmap"));
        }
        if !complete {
            signals::check()?;
        }
    }
    Ok(n)
}

fn brk(addr: usize) -> usize {
    // SAFETY: the raw brk syscall returns the (possibly unchanged) break; it never fails.
    unsafe { libc::syscall(libc::SYS_brk, addr) as usize }
}

/// aim9 brk_test with faults: raise the break by N pages, write each, lower it again.
/// Uses the raw syscall (musl's sbrk refuses to move the break), and restores the break
/// before returning, so the allocator never sees the change (nothing allocates meanwhile).
fn brk_once(n: u64, page: u64) -> Result<u64> {
    let start = brk(0);
    let first = start.next_multiple_of(page as usize);
    let target = first + (n * page) as usize;
    if brk(target) != target {
        brk(start);
        return Err(Error::Failed(format!(
            "brk could not grow the heap by {n} pages (RLIMIT_DATA or memory)"
        )));
    }
    let complete = touch(first as *mut u8, n, page);
    if brk(start) != start {
        return Err(Error::Failed("brk could not shrink the heap back".into()));
    }
    if !complete {
        signals::check()?;
    }
    Ok(n)
}

pub fn run(args: &MempolicyArgs, s: &mut Session) -> Result<()> {
    let ns = super::n_list(&args.common, DEFAULT_N);
    let variants = super::dedup(if args.variant.is_empty() {
        Variant::ALL.to_vec()
    } else {
        args.variant.clone()
    });
    let page = s.limits.page_size;
    let max = *ns.last().expect("n list is never empty");
    let what = format!("{max} pages");
    // The pages, plus a forked child's copy of their page tables.
    s.limits.check_memory(max * page + max * 16, &what)?;
    if variants.contains(&Variant::Brk) {
        s.limits.check_data(max * page, &what)?;
    }
    let helpers = if args.reader == Some(ReaderKind::Process) {
        3
    } else {
        2
    };
    s.limits.check_tasks(helpers, "a child and a reader")?;
    s.config("n", ns.clone());
    s.config(
        "variants",
        variants.iter().map(|v| v.case()).collect::<Vec<_>>(),
    );
    s.config(
        "reader",
        args.reader.map(|r| format!("{r:?}").to_lowercase()),
    );
    s.config("policy", args.policy.map(|p| p.name()));

    if let Some(policy) = args.policy {
        match apply_policy(policy)? {
            Ok(nodes) => {
                s.progress(format!("task policy {} on nodes {nodes:?}", policy.name()));
                s.summary("policy_applied", true);
                s.summary("policy_nodes", nodes);
            }
            Err(why) => {
                s.note(format!(
                    "--policy {} not applied, running with the default policy: {why}",
                    policy.name()
                ));
                s.summary("policy_applied", false);
            }
        }
    }
    let exec = ExecSpec::new("/proc/self/exe", &["workloads", EXEC_CHILD_ARG]);
    if variants.contains(&Variant::Exec) {
        // Outside any phase: prove the exec child works, so a failure is reported clearly.
        children::fork_exec(&exec)?.wait().map_err(|e| {
            Error::Failed(format!(
                "mempolicy-exec: exec of {} failed: {e}",
                exec.path().to_string_lossy()
            ))
        })?;
    }
    s.start_table("pages touched (page, brk), forks (fork), fork+execs (exec)");

    for (i, &n) in ns.iter().enumerate() {
        for &v in &variants {
            s.progress(format!("N={n} ({}/{}): {}", i + 1, ns.len(), v.case()));
            let pages = match v {
                Variant::Fork | Variant::Exec => Some(TouchedPages::new(n, page)?),
                Variant::Page | Variant::Brk => None,
            };
            let reader = args.reader.map(Reader::start).transpose()?;
            let t0 = sys::monotonic_ns();
            let spec = PhaseSpec {
                case: v.case(),
                n,
                unit: v.unit(),
            };
            let rows = s.measure(&spec, &mut || match v {
                Variant::Page => page_once(n, page),
                Variant::Brk => brk_once(n, page),
                Variant::Fork => children::fork_exit()?.wait().map(|()| 1),
                Variant::Exec => children::fork_exec(&exec)?.wait().map(|()| 1),
            })?;
            let mut counters = BTreeMap::new();
            if let Some(r) = &reader {
                let secs = (sys::monotonic_ns() - t0) as f64 / 1e9;
                counters.insert(
                    "reader_reads_per_second".to_string(),
                    r.reads() as f64 / secs,
                );
            }
            drop(reader);
            drop(pages);
            s.commit(rows, &counters);
        }
    }
    Ok(())
}
