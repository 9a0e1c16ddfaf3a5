//! Syscall tracepoints through `raw_syscalls`: a tracepoint slot on `syscalls:sys_enter_X`
//! or `sys_exit_X` (and fd tracking's openat/close) can be fed by the raw `sys_enter` and
//! `sys_exit` programs through `SYSCALL_ROUTES` instead of a perf event of its own.
//!
//! Why: closing the last perf event of a tracepoint waits for its RCU grace periods while
//! holding the kernel's `event_mutex` (`perf_trace_event_unreg`), one tracepoint after the
//! other whatever the number of closing threads: ~65 ms each here, 1.4 s for the default
//! targets' 21 events. The raw pair is two links for any number of syscalls, unregistered
//! without that wait, and cheaper per call (no perf record is built).
//!
//! Used on x86_64 when the kernel accepts raw tracepoint programs; the per-event path stays
//! for every other case, and `TRACER_PERF_TRACEPOINTS=1` forces it (for comparing the two).
//! The same goes for tracepoint slots whose role reads no event field (`rtp_N`, attached
//! by tracepoint name) and for the scheduler's programs (`fixed.rs`).
use aya::maps::{Array, MapData};
use aya::programs::RawTracePoint;
use tracer_ebpf::*;

use super::{Engine, EngineError, map_error};
use crate::kernel::syscalls;

/// Forces one perf event per syscall tracepoint.
pub const FORCE_PERF_ENV: &str = "TRACER_PERF_TRACEPOINTS";

/// Whether the raw pair is attached, refused, or not tried yet.
#[derive(Debug, Default)]
pub(super) enum RawState {
    #[default]
    Untried,
    Attached,
    /// Refused (or not applicable here), with why: the per-event path is used.
    Unavailable(String),
}

/// The raw tracepoint program of tracepoint slot `j`.
pub(super) fn raw_slot_program(j: usize) -> String {
    format!("rtp_{j}")
}

/// Which end of a syscall a tracepoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    Enter,
    Exit,
}

/// `syscalls:sys_enter_NAME` / `sys_exit_NAME` -> (NAME's number, end).
pub(super) fn syscall_of(category: &str, name: &str) -> Option<(u32, End)> {
    if category != "syscalls" {
        return None;
    }
    let (end, call) = if let Some(c) = name.strip_prefix("sys_enter_") {
        (End::Enter, c)
    } else {
        (End::Exit, name.strip_prefix("sys_exit_")?)
    };
    Some((syscalls::number(call)?, end))
}

impl Engine {
    /// Attach the raw pair if it is not yet; false (with the reason kept) when this kernel,
    /// architecture or environment cannot use it.
    pub(super) fn raw_syscalls_ready(&mut self) -> bool {
        match &self.raw {
            RawState::Attached => return true,
            RawState::Unavailable(_) => return false,
            RawState::Untried => {}
        }
        let state = if !self.raw_allowed() {
            RawState::Unavailable(format!("{FORCE_PERF_ENV} is set"))
        } else if !cfg!(target_arch = "x86_64") {
            RawState::Unavailable("syscall routes read x86_64 registers".into())
        } else {
            // Exit side first, like every slot pair: an exit without its entry is ignored,
            // an entry without its exit would leave a call open.
            match ["raw_sys_exit", "raw_sys_enter"]
                .into_iter()
                .try_for_each(|p| self.attach_raw(p))
            {
                Ok(()) => RawState::Attached,
                Err(e) => {
                    for p in ["raw_sys_enter", "raw_sys_exit"] {
                        self.unload_prog(p);
                    }
                    RawState::Unavailable(e.to_string())
                }
            }
        };
        if let RawState::Unavailable(why) = &state {
            log::debug!("syscall tracepoints as perf events: {why}");
        }
        self.raw = state;
        matches!(self.raw, RawState::Attached)
    }

    fn attach_raw(&mut self, prog: &str) -> Result<(), EngineError> {
        let tp = prog.strip_prefix("raw_").expect("raw_ program");
        self.attach_raw_to(prog, tp)
    }

    /// Load raw tracepoint program `prog` and attach it to tracepoint `tp`.
    pub(super) fn attach_raw_to(&mut self, prog: &str, tp: &str) -> Result<(), EngineError> {
        self.attach_raw_program(prog, tp)?;
        self.raw_used = true;
        Ok(())
    }

    fn attach_raw_program(&mut self, prog: &str, tp: &str) -> Result<(), EngineError> {
        let what = format!("attaching {prog} to raw tracepoint {tp}");
        let p: &mut RawTracePoint = self
            .bpf
            .program_mut(prog)
            .expect("raw program is in the object")
            .try_into()
            .map_err(|source| EngineError::Program {
                what: what.clone(),
                source,
            })?;
        p.load().map_err(|source| EngineError::Program {
            what: what.clone(),
            source,
        })?;
        p.attach(tp)
            .map_err(|source| EngineError::Program { what, source })?;
        Ok(())
    }

    /// Whether raw tracepoints may be tried at all (not forced off, not refused before).
    pub(super) fn raw_allowed(&self) -> bool {
        std::env::var_os(FORCE_PERF_ENV).is_none_or(|v| v == "0")
    }

    /// Tracepoint slot `j`, configured with `conf`, attached as raw tracepoint `name` (its
    /// program `rtp_j`). Err, with everything undone, when the kernel refuses it: the
    /// caller attaches the per-event program instead.
    pub(super) fn attach_raw_slot(
        &mut self,
        j: usize,
        name: &str,
        conf: SlotConf,
        set: impl Fn(&mut Engine, SlotConf) -> Result<(), EngineError>,
    ) -> Result<bool, EngineError> {
        if !self.raw_allowed() {
            return Ok(false);
        }
        set(self, conf)?;
        let prog = raw_slot_program(j);
        match self.attach_raw_to(&prog, name) {
            Ok(()) => Ok(true),
            Err(e) => {
                log::debug!("tracepoint {name} as a perf event: {e}");
                self.unload_prog(&prog);
                set(self, SlotConf::default())?;
                Ok(false)
            }
        }
    }

    /// The route of syscall `nr`, changed by `f` and written back.
    pub(super) fn update_route(
        &mut self,
        nr: u32,
        f: impl FnOnce(&mut SyscallRoute),
    ) -> Result<(), EngineError> {
        let map = self
            .bpf
            .map_mut("SYSCALL_ROUTES")
            .expect("SYSCALL_ROUTES map");
        let mut arr: Array<&mut MapData, SyscallRoute> =
            Array::try_from(map).map_err(map_error("SYSCALL_ROUTES"))?;
        let mut r = arr.get(&nr, 0).map_err(map_error("SYSCALL_ROUTES"))?;
        f(&mut r);
        arr.set(nr, r, 0).map_err(map_error("SYSCALL_ROUTES"))
    }

    /// Route the `end` of syscall `nr` to tracepoint slot `j`; false when the syscall
    /// already feeds as many slots as a route holds.
    pub(super) fn route_slot(&mut self, nr: u32, end: End, j: usize) -> Result<bool, EngineError> {
        let mut placed = false;
        self.update_route(nr, |r| {
            let ends = match end {
                End::Enter => &mut r.enter,
                End::Exit => &mut r.exit,
            };
            if let Some(free) = ends.iter_mut().find(|s| **s == 0) {
                *free = j as u32 + 1;
                placed = true;
            }
        })?;
        Ok(placed)
    }

    /// Take tracepoint slot `j` out of every route.
    pub(super) fn unroute_slot(&mut self, j: usize) -> Result<(), EngineError> {
        for (nr, _) in self
            .routed
            .iter()
            .filter(|(_, s)| *s == j)
            .cloned()
            .collect::<Vec<_>>()
        {
            self.update_route(nr, |r| {
                for s in r.enter.iter_mut().chain(r.exit.iter_mut()) {
                    if *s == j as u32 + 1 {
                        *s = 0;
                    }
                }
            })?;
        }
        self.routed.retain(|(_, s)| *s != j);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_tracepoints_map_to_numbers_and_ends() {
        assert_eq!(
            syscall_of("syscalls", "sys_enter_wait4"),
            Some((61, End::Enter))
        );
        assert_eq!(
            syscall_of("syscalls", "sys_exit_clone3"),
            Some((435, End::Exit))
        );
        assert_eq!(syscall_of("syscalls", "sys_enter_no_such_call"), None);
        assert_eq!(syscall_of("kmem", "mm_page_alloc"), None);
        assert_eq!(syscall_of("syscalls", "something_else"), None);
    }
}
