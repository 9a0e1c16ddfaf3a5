//! The one sequence that attaches, releases and detaches the attach slots.
//!
//! Attach order matters for pairing: exits are attached before entries and detached after
//! them, so a call in flight at either moment yields at most an unpaired exit (counted and
//! ignored), never an entry without an exit that would leave a thread "inside" a target
//! forever.
use std::path::Path;

use aya::Btf;
use aya::programs::{Program, ProgramError, uprobe::UProbeScope};
use tracer_ebpf::*;

use super::errors::classify;
use super::raw_syscalls;
use super::slots::{SlotKind, SlotsInUse, detached_last};
use super::{AttachFailure, Engine, EngineError, Slot, TpRole, map_error};
use crate::kernel::tracefs;
use crate::plan::FnMech;

/// Where a slot's programs attach: this decides the slot kind and how each program is
/// loaded and attached.
enum AttachPoint<'a> {
    Fentry(&'a str),
    Kprobe(&'a str),
    Tracepoint {
        category: &'a str,
        name: &'a str,
    },
    Uprobe {
        binary: &'a Path,
        symbol: &'a str,
    },
    /// A call instruction at `call` bytes into `symbol`, `len` bytes long: kprobes on it and
    /// on the instruction after it.
    Site {
        symbol: &'a str,
        call: u64,
        len: u64,
    },
}

impl AttachPoint<'_> {
    fn kind(&self) -> SlotKind {
        match self {
            AttachPoint::Fentry(_) => SlotKind::Fentry,
            AttachPoint::Kprobe(_) => SlotKind::Kprobe,
            AttachPoint::Tracepoint { .. } => SlotKind::Tracepoint,
            AttachPoint::Uprobe { .. } => SlotKind::Uprobe,
            AttachPoint::Site { .. } => SlotKind::Site,
        }
    }

    /// Names the attach in plan reports.
    fn describe(&self) -> String {
        match self {
            AttachPoint::Fentry(symbol) => format!("fentry/fexit on {symbol}"),
            AttachPoint::Kprobe(symbol) => format!("kprobe/kretprobe on {symbol}"),
            AttachPoint::Tracepoint { category, name } => format!("tracepoint {category}:{name}"),
            AttachPoint::Uprobe { binary, symbol } => {
                format!("uprobe on {}:{symbol}", binary.display())
            }
            AttachPoint::Site { symbol, call, .. } => {
                format!("kprobes on the call at {symbol}+{call:#x}")
            }
        }
    }

    /// Load one program of the slot (its exit side when `exit`) and attach it here.
    fn attach(
        &self,
        prog: &mut Program,
        btf: Option<&Btf>,
        exit: bool,
    ) -> Result<(), ProgramError> {
        let fentry_btf = || btf.expect("fentry slots are attached only with the kernel's BTF");
        match (self, prog) {
            (AttachPoint::Fentry(symbol), Program::FEntry(p)) => {
                p.load(symbol, fentry_btf())?;
                p.attach()?;
            }
            (AttachPoint::Fentry(symbol), Program::FExit(p)) => {
                p.load(symbol, fentry_btf())?;
                p.attach()?;
            }
            (AttachPoint::Kprobe(symbol), Program::KProbe(p)) => {
                p.load()?;
                p.attach(symbol, 0)?;
            }
            (AttachPoint::Tracepoint { category, name }, Program::TracePoint(p)) => {
                p.load()?;
                p.attach(category, name)?;
            }
            (AttachPoint::Uprobe { binary, symbol }, Program::UProbe(p)) => {
                p.load()?;
                p.attach(*symbol, binary, UProbeScope::AllProcesses)?;
            }
            (AttachPoint::Site { symbol, call, len }, Program::KProbe(p)) => {
                p.load()?;
                p.attach(*symbol, if exit { call + len } else { *call })?;
            }
            _ => return Err(ProgramError::UnexpectedProgramType),
        }
        Ok(())
    }
}

/// A slot timing calls of `target` from entry to exit.
fn entry_conf(target: u32) -> SlotConf {
    SlotConf {
        target,
        role: ROLE_ENTER,
        flags: 0,
        arg_off: 0,
    }
}

impl Engine {
    /// Time calls of kernel function `symbol` as target `target`.
    pub fn attach_function(
        &mut self,
        target: u32,
        mech: FnMech,
        symbol: &str,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        match mech {
            FnMech::Fentry => {
                if self.btf.is_none() {
                    return Ok(Err(AttachFailure::NotInBtf(format!(
                        "no kernel BTF ({})",
                        self.btf_error
                            .as_deref()
                            .unwrap_or("/sys/kernel/btf/vmlinux missing")
                    ))));
                }
                if !self.in_btf(symbol) {
                    return Ok(Err(AttachFailure::NotInBtf(format!(
                        "{symbol} is not in the kernel's BTF (inlined or not built)"
                    ))));
                }
                self.attach_slot(AttachPoint::Fentry(symbol), entry_conf(target))
            }
            FnMech::Kprobe => self.attach_slot(AttachPoint::Kprobe(symbol), entry_conf(target)),
        }
    }

    /// Use tracepoint `category:name` as `role` of target `target`. With `tracked_fd_off`,
    /// enters only when the fd at that record offset was opened from the configured prefix.
    pub fn attach_tracepoint(
        &mut self,
        target: u32,
        role: TpRole,
        category: &str,
        name: &str,
        tracked_fd_off: Option<u32>,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        if !tracefs::event_exists(&self.tracefs, category, name) {
            return Ok(Err(AttachFailure::Failed(format!(
                "tracepoint {category}:{name} does not exist on this kernel"
            ))));
        }
        let (flags, arg_off) = match tracked_fd_off {
            Some(off) => (SLOT_FLAG_TRACKED_FD, off),
            None => (0, 0),
        };
        let role = match role {
            TpRole::Enter => ROLE_ENTER,
            TpRole::Exit => ROLE_EXIT,
            TpRole::Point => ROLE_POINT,
        };
        let conf = SlotConf {
            target,
            role,
            flags,
            arg_off,
        };
        if let Some((nr, end)) = raw_syscalls::syscall_of(category, name)
            && let Some(conf) = routed_conf(conf)
            && self.raw_syscalls_ready()
            && let Some(slot) = self.attach_routed(nr, end, conf)?
        {
            if let Slot::Tracepoint(j) = slot {
                self.tp_points[j] = Some(format!("{category}:{name}"));
            }
            return Ok(Ok(slot));
        }
        // A role that reads no field of the event can take the raw tracepoint of the same
        // name (syscall events have none: they are routed above or attached per event).
        if flags & SLOT_FLAG_TRACKED_FD == 0
            && category != "syscalls"
            && let Some(j) = self.slots.free(SlotKind::Tracepoint)
        {
            let slot = Slot::new(SlotKind::Tracepoint, j);
            let index = slot.conf_index();
            if self.attach_raw_slot(j, name, conf, |e, c| e.set_slot(index, c))? {
                self.slots.set(&slot, true);
                self.tp_points[j] = Some(format!("{category}:{name}"));
                return Ok(Ok(slot));
            }
        }
        let res = self.attach_slot(AttachPoint::Tracepoint { category, name }, conf)?;
        if let Ok(Slot::Tracepoint(j)) = res {
            self.tp_points[j] = Some(format!("{category}:{name}"));
        }
        Ok(res)
    }

    /// A tracepoint slot fed by the raw syscall pair: configured, then routed (so the exit
    /// route of a bracket exists before its entry's). None, with nothing changed, when the
    /// syscall's route is full or no slot is free.
    fn attach_routed(
        &mut self,
        nr: u32,
        end: raw_syscalls::End,
        conf: SlotConf,
    ) -> Result<Option<Slot>, EngineError> {
        let Some(j) = self.slots.free(SlotKind::Tracepoint) else {
            return Ok(None);
        };
        let slot = Slot::new(SlotKind::Tracepoint, j);
        self.set_slot(slot.conf_index(), conf)?;
        self.route_nrs.insert(nr);
        if !self.route_slot(nr, end, j)? {
            self.set_slot(slot.conf_index(), SlotConf::default())?;
            return Ok(None);
        }
        self.routed.push((nr, j));
        self.slots.set(&slot, true);
        Ok(Some(slot))
    }

    /// Time the calls made by the `len`-byte call instruction at `call` bytes into kernel
    /// function `symbol`, as target `target`.
    pub fn attach_call_site(
        &mut self,
        target: u32,
        symbol: &str,
        call: u64,
        len: u64,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        self.attach_slot(AttachPoint::Site { symbol, call, len }, entry_conf(target))
    }

    /// Time calls of the user-space function `symbol` in `binary` as target `target`.
    pub fn attach_user_function(
        &mut self,
        target: u32,
        binary: &Path,
        symbol: &str,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        self.attach_slot(AttachPoint::Uprobe { binary, symbol }, entry_conf(target))
    }

    /// The attach sequence of every slot kind: take a free slot, configure it, load and
    /// attach its programs exits first, and on failure undo all of it.
    fn attach_slot(
        &mut self,
        point: AttachPoint<'_>,
        conf: SlotConf,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        let kind = point.kind();
        let Some(i) = self.slots.free(kind) else {
            return Err(EngineError::NoSlot {
                kind: kind.spec().name,
                max: kind.spec().count,
            });
        };
        let slot = Slot::new(kind, i);
        self.set_slot(slot.conf_index(), conf)?;
        let programs = slot.programs();
        let res = programs.iter().enumerate().rev().try_for_each(|(i, name)| {
            let prog = self
                .bpf
                .program_mut(name)
                .unwrap_or_else(|| panic!("slot program {name} is in the object"));
            point.attach(prog, self.btf.as_ref(), i > 0)
        });
        match res {
            Ok(()) => {
                self.slots.set(&slot, true);
                Ok(Ok(slot))
            }
            Err(e) => {
                for name in &programs {
                    self.unload_prog(name);
                }
                self.set_slot(slot.conf_index(), SlotConf::default())?;
                Ok(Err(classify(&point.describe(), &e)))
            }
        }
    }

    fn set_slot(&mut self, index: u32, conf: SlotConf) -> Result<(), EngineError> {
        if conf.role != ROLE_NONE && conf.target >= self.config.target_stride {
            return Err(EngineError::TargetIndex {
                target: conf.target,
                targets: self.config.target_stride,
            });
        }
        let map = self.bpf.map_mut("SLOTS").expect("SLOTS map");
        let mut arr: aya::maps::Array<&mut aya::maps::MapData, SlotConf> =
            aya::maps::Array::try_from(map).map_err(map_error("SLOTS"))?;
        arr.set(index, conf, 0).map_err(map_error("SLOTS"))
    }

    /// Detach and free a slot, entries before exits.
    pub fn release(&mut self, slot: &Slot) {
        self.slots.set(slot, false);
        if let Slot::Tracepoint(j) = *slot {
            self.tp_points[j] = None;
            let _ = self.unroute_slot(j);
            self.unload_prog(&raw_syscalls::raw_slot_program(j));
        }
        for p in slot.programs() {
            self.unload_prog(&p);
        }
        let _ = self.set_slot(slot.conf_index(), SlotConf::default());
    }

    /// Stop slots from recording without detaching them now: their configuration is cleared
    /// (the programs return at once) and they are closed with everything else by
    /// `detach_all` or the engine's Drop. Closing a tracepoint waits for an RCU grace period
    /// (70-90 ms here) that would add to attach time; at the end it overlaps with the others'.
    pub fn retire(&mut self, slots: &[Slot]) {
        for s in slots {
            if let Slot::Tracepoint(j) = *s {
                self.tp_points[j] = None;
            }
            let _ = self.set_slot(s.conf_index(), SlotConf::default());
        }
    }

    pub(super) fn unload_prog(&mut self, name: &str) {
        if let Some(p) = self.bpf.program_mut(name) {
            unload(p);
        }
    }

    /// Detach and unload every program. Maps stay readable.
    pub fn detach_all(&mut self) {
        // USDT perf events hold their programs: closed first, like any entry side.
        self.usdt.close();
        // Entry-side programs first, so in-flight calls can still exit.
        let (mut exits, mut entries): (Vec<_>, Vec<_>) = self
            .bpf
            .programs_mut()
            .partition(|(name, _)| detached_last(name));
        // Closing a perf event (perf tracepoints, kprobes, uprobes) can wait for an RCU
        // grace period; those are spread over threads. Links (raw tracepoints, fentry/fexit)
        // close at once and patch kernel text: one after the other, in this thread, so no
        // two text patches race (the kernel serialises them anyway).
        for group in [&mut entries, &mut exits] {
            let (links, events): (Vec<_>, Vec<_>) = group.drain(..).partition(|(_, p)| {
                matches!(
                    p,
                    Program::RawTracePoint(_) | Program::FEntry(_) | Program::FExit(_)
                )
            });
            for (_, prog) in links {
                unload(prog);
            }
            let threads = events.len().clamp(1, DETACH_THREADS);
            let mut shares: Vec<Vec<&mut Program>> = (0..threads).map(|_| Vec::new()).collect();
            for (i, (_, prog)) in events.into_iter().enumerate() {
                shares[i % threads].push(prog);
            }
            std::thread::scope(|s| {
                for share in shares {
                    s.spawn(move || {
                        for prog in share {
                            unload(prog);
                        }
                    });
                }
            });
        }
        self.slots = SlotsInUse::new();
        self.fd_tracking = false;
        // The routes outlive the programs in the map: a later attach must not find them.
        for nr in std::mem::take(&mut self.route_nrs) {
            let _ = self.update_route(nr, |r| *r = SyscallRoute::default());
        }
        self.routed.clear();
        self.raw = Default::default();
    }
}

/// `conf` for a slot fed by the raw syscall pair: a tracked fd is then read from the
/// argument's register in `struct pt_regs` rather than from the event record. None when the
/// record offset is not one of the six syscall arguments (`syscalls:*` records hold the
/// number at 8 and the arguments from 16, 8 bytes each).
fn routed_conf(conf: SlotConf) -> Option<SlotConf> {
    let mut c = conf;
    c.flags |= SLOT_FLAG_RAW_SYSCALL;
    if conf.flags & SLOT_FLAG_TRACKED_FD != 0 {
        let off = conf.arg_off.checked_sub(16)?;
        if off % 8 != 0 {
            return None;
        }
        c.arg_off = *PT_REGS_ARGS.get((off / 8) as usize)?;
    }
    Some(c)
}

/// Threads that close links at the end of a run.
const DETACH_THREADS: usize = 8;

/// Detach and unload one program (NotLoaded is fine: a slot may have failed before loading).
fn unload(prog: &mut Program) {
    let _ = match prog {
        Program::KProbe(p) => p.unload(),
        Program::FEntry(p) => p.unload(),
        Program::FExit(p) => p.unload(),
        Program::TracePoint(p) => p.unload(),
        Program::UProbe(p) => p.unload(),
        Program::PerfEvent(p) => p.unload(),
        Program::RawTracePoint(p) => p.unload(),
        _ => Ok(()),
    };
}
