//! dup_mmap: fork + exit + wait (unixbench "spawn") in a process with N extra VMAs.
//!
//! fork copies every VMA of the parent (dup_mmap), so its cost grows with the number of
//! mappings; Peng Zhang's "Introduce __mt_dup() to improve the performance of fork()"
//! (Linux 6.8) duplicates the maple tree in one pass and made it markedly cheaper.
//! MADV_WIPEONFORK VMAs are still duplicated, but their pages are not copied.

use std::collections::BTreeMap;

use clap::{Args, ValueEnum};
use workloads::cases;

use crate::harness::children;
use crate::harness::error::{Error, Result};
use crate::harness::options::Common;
use crate::harness::session::{PhaseSpec, Session};
use crate::harness::sys;

pub const DEFAULT_N: &str = workloads::catalog::SPAWN.default_n;

#[derive(Args, Debug)]
pub struct SpawnArgs {
    #[command(flatten)]
    pub common: Common,

    /// Variants to measure, comma-separated [default: all]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANT")]
    pub variant: Vec<Variant>,

    /// Leave the N pages untouched (no anonymous pages to copy, only VMAs)
    #[arg(long)]
    pub no_touch: bool,
}

/// The fork cases: a copy of N VMAs, with or without wipe-on-fork.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// N one-page VMAs with alternating protections (they cannot merge)
    #[value(name = cases::SPAWN)]
    Spawn,
    /// the same VMAs, marked MADV_WIPEONFORK (Linux >= 4.14)
    #[value(name = cases::SPAWN_WIPEONFORK)]
    WipeOnFork,
}

impl Variant {
    pub fn case(self) -> &'static str {
        match self {
            Variant::Spawn => cases::SPAWN,
            Variant::WipeOnFork => cases::SPAWN_WIPEONFORK,
        }
    }
}

/// N one-page mappings that cannot merge: one mmap of N pages, then every odd page made
/// read-only, so neighbours always differ in protection. Unmapped on drop.
pub struct VmaRegion {
    addr: *mut libc::c_void,
    len: usize,
}

impl VmaRegion {
    pub fn new(n: u64, page: u64, touch: bool, wipe_on_fork: bool) -> Result<Self> {
        let len = (n * page) as usize;
        let addr = workloads::mem::map_anonymous(len).map_err(|source| Error::Sys {
            call: format!("mmap({n} pages)"),
            source,
        })?;
        let region = VmaRegion { addr, len };
        // Small pages only: a huge page would be split by the mprotect calls anyway.
        // SAFETY: the range is our mapping.
        unsafe { libc::madvise(addr, len, libc::MADV_NOHUGEPAGE) };
        let base = addr.cast::<u8>();
        if touch {
            for i in 0..n as usize {
                // SAFETY: in bounds of the writable mapping.
                unsafe { base.add(i * page as usize).write_volatile(1) };
            }
        }
        for i in (1..n as usize).step_by(2) {
            // SAFETY: one page inside our mapping.
            if unsafe {
                libc::mprotect(
                    base.add(i * page as usize).cast(),
                    page as usize,
                    libc::PROT_READ,
                )
            } != 0
            {
                return Err(Error::last_os(format!("mprotect (VMA {i} of {n})")));
            }
        }
        if wipe_on_fork {
            // SAFETY: the range is our mapping.
            if unsafe { libc::madvise(addr, len, libc::MADV_WIPEONFORK) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINVAL) {
                    return Err(Error::Unsupported(
                        "MADV_WIPEONFORK is not supported (EINVAL): it needs Linux >= 4.14".into(),
                    ));
                }
                return Err(Error::io("madvise(MADV_WIPEONFORK)", e));
            }
        }
        Ok(region)
    }
}

impl Drop for VmaRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

pub fn run(args: &SpawnArgs, s: &mut Session) -> Result<()> {
    let ns = super::n_list(&args.common, DEFAULT_N);
    let variants = super::dedup(if args.variant.is_empty() {
        vec![Variant::Spawn, Variant::WipeOnFork]
    } else {
        args.variant.clone()
    });
    let page = s.limits.page_size;
    let max = *ns.last().expect("n list is never empty");
    let what = format!("{max} extra VMAs");
    s.limits.check_maps(max, &what)?;
    // The pages, plus the child's copy of the page tables and VMA structures.
    s.limits.check_memory(max * (page + 512), &what)?;
    s.limits.check_tasks(2, "one child at a time")?;
    s.config("n", ns.clone());
    s.config(
        "variants",
        variants.iter().map(|v| v.case()).collect::<Vec<_>>(),
    );
    s.config("touch", !args.no_touch);
    s.start_table("forks: fork + child _exit(0) + waitpid");

    for (i, &n) in ns.iter().enumerate() {
        for &v in &variants {
            s.progress(format!(
                "N={n} ({}/{}): mapping {n} VMAs for {}",
                i + 1,
                ns.len(),
                v.case()
            ));
            let region = VmaRegion::new(n, page, !args.no_touch, v == Variant::WipeOnFork)?;
            let vmas = sys::count_own_vmas();
            let spec = PhaseSpec {
                case: v.case(),
                n,
                unit: "forks",
            };
            let rows = s.measure(&spec, &mut || {
                children::fork_exit()?.wait()?;
                Ok(1)
            })?;
            s.commit(rows, &BTreeMap::from([("vmas".to_string(), vmas as f64)]));
            drop(region);
        }
    }
    Ok(())
}
