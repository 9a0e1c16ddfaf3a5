//! The object's fixed programs, attached by name rather than through slots: the scheduler's
//! tracepoints, the cpu-clock sampler, fd tracking and the phase markers.
use std::path::Path;

use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use aya::programs::{PerfEvent, TracePoint, UProbe, uprobe::UProbeScope};

use tracer_ebpf::{ROUTE_FD_CLOSE, ROUTE_FD_OPEN, ROUTE_FD_OPENAT};

use super::{AttachFailure, Engine, EngineError};
use crate::kernel::tracefs;

impl Engine {
    pub(super) fn tracepoint(
        &mut self,
        prog: &str,
        category: &str,
        name: &str,
    ) -> Result<(), EngineError> {
        let what = format!("attaching {prog} to {category}:{name}");
        let p: &mut TracePoint = self
            .bpf
            .program_mut(prog)
            .expect("program exists")
            .try_into()
            .map_err(|source| EngineError::Program {
                what: what.clone(),
                source,
            })?;
        // One program may serve several tracepoints (the floor's): load it once.
        if p.fd().is_err() {
            p.load().map_err(|source| EngineError::Program {
                what: what.clone(),
                source,
            })?;
        }
        p.attach(category, name)
            .map_err(|source| EngineError::Program { what, source })?;
        Ok(())
    }

    /// The scheduler's programs: as raw tracepoints where the kernel takes them and its BTF
    /// says where `task_struct` keeps the pid (their arguments are task pointers), else as
    /// perf tracepoints (see `raw_syscalls` for why raw ones are preferred).
    pub(super) fn attach_scheduler(&mut self) -> Result<(), EngineError> {
        const RAW: [(&str, &str); 3] = [
            ("rsched_switch", "sched_switch"),
            ("rsched_fork", "sched_process_fork"),
            ("rsched_exit", "sched_process_exit"),
        ];
        let btf = crate::kernel::btf::KernelBtf::from_sys_fs().ok();
        let pid_off = btf
            .as_ref()
            .and_then(|b| b.member_offset("task_struct", "pid"));
        if self.raw_allowed()
            && let Some(off) = pid_off
        {
            self.config.task_pid_off = off;
            // For telling a preempted task from one that blocked (`__state` since 5.14).
            self.config.task_state_off = btf
                .as_ref()
                .and_then(|b| {
                    b.member_offset("task_struct", "__state")
                        .or_else(|| b.member_offset("task_struct", "state"))
                })
                .unwrap_or(tracer_ebpf::NO_OFFSET);
            self.write_config()?;
            match RAW
                .iter()
                .try_for_each(|(prog, tp)| self.attach_raw_to(prog, tp))
            {
                Ok(()) => {
                    self.scheduler_raw = true;
                    return Ok(());
                }
                Err(e) => {
                    log::debug!("scheduler tracepoints as perf events: {e}");
                    for (prog, _) in RAW {
                        self.unload_prog(prog);
                    }
                }
            }
        }
        self.tracepoint("sched_switch", "sched", "sched_switch")?;
        self.tracepoint("sched_fork", "sched", "sched_process_fork")?;
        self.tracepoint("sched_exit", "sched", "sched_process_exit")?;
        Ok(())
    }

    /// Discover mode's kernel-entry counting (`entries` in the eBPF object): the syscall
    /// pair as raw tracepoints, and user page faults where the kernel has that tracepoint.
    /// None when the syscalls are counted; otherwise why not (the run says so, and discover
    /// falls back to its per-op ranking alone).
    pub(super) fn attach_entries(&mut self) -> Option<String> {
        if !self.raw_allowed() {
            return Some(format!(
                "{} is set (entries are counted by raw tracepoints only)",
                super::raw_syscalls::FORCE_PERF_ENV
            ));
        }
        if !cfg!(target_arch = "x86_64") {
            return Some("syscall numbers are read as x86_64's".into());
        }
        // Exec before the entry: the entry remembers a process's code segment until it execs.
        // No exit program: a sample's kernel stack tells whether its thread is still inside
        // the syscall it entered last (`collect::entries`).
        let progs = [
            ("ent_exec", "sched_process_exec"),
            ("ent_sys_enter", "sys_enter"),
        ];
        for (prog, tp) in progs {
            if let Err(e) = self.attach_raw_to(prog, tp) {
                for (p, _) in progs {
                    self.unload_prog(p);
                }
                return Some(format!("raw syscall tracepoints refused: {e}"));
            }
        }
        // Without it (another architecture, an older kernel) faults have samples but no
        // counts, and are left out of the two lists.
        if let Err(e) = self.attach_raw_to("ent_fault", "page_fault_user") {
            log::debug!("user page faults not counted: {e}");
            self.unload_prog("ent_fault");
        }
        self.interruptions = Some(self.attach_interruptions());
        None
    }

    pub(super) fn attach_sampler(&mut self) -> Result<(), EngineError> {
        let cpus = aya::util::online_cpus().map_err(|(_, e)| EngineError::Cpus(e))?;
        let period = self.sample_period_ns;
        let p: &mut PerfEvent = self
            .bpf
            .program_mut("sampler")
            .expect("sampler")
            .try_into()
            .map_err(|source| EngineError::Program {
                what: "sampler".into(),
                source,
            })?;
        p.load().map_err(|source| EngineError::Program {
            what: "loading sampler".into(),
            source,
        })?;
        for cpu in cpus {
            p.attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Period(period),
                false,
            )
            .map_err(|source| EngineError::Program {
                what: format!("opening the cpu-clock sampler on CPU {cpu}"),
                source,
            })?;
        }
        Ok(())
    }

    /// Track fds of files opened under `prefix` (for fd-filtered syscall brackets).
    pub fn enable_fd_tracking(
        &mut self,
        prefix: &str,
    ) -> Result<Result<(), AttachFailure>, EngineError> {
        if prefix.len() > 32 || prefix.is_empty() {
            return Ok(Err(AttachFailure::Failed(format!(
                "path prefix {prefix:?} must be 1..=32 bytes"
            ))));
        }
        let mut p = [0u8; 32];
        p[..prefix.len()].copy_from_slice(prefix.as_bytes());
        self.config.path_prefix = p;
        self.config.path_prefix_len = prefix.len() as u32;
        self.write_config()?;
        if self.fd_tracking {
            return Ok(Ok(()));
        }
        // Through the raw routes every way of opening a file is seen: open() too, which
        // musl's open() uses (a static musl program would otherwise go untracked); the perf
        // event fallback below follows openat() only.
        if self.raw_syscalls_ready() {
            for (call, flag) in [
                ("openat", ROUTE_FD_OPENAT),
                ("openat2", ROUTE_FD_OPENAT),
                ("open", ROUTE_FD_OPEN),
                ("close", ROUTE_FD_CLOSE),
            ] {
                if let Some(nr) = crate::kernel::syscalls::number(call) {
                    self.route_nrs.insert(nr);
                    self.update_route(nr, |r| r.fd |= flag)?;
                }
            }
            self.fd_tracking = true;
            return Ok(Ok(()));
        }
        for (prog, name) in [
            ("openat_exit", "sys_exit_openat"),
            ("openat_enter", "sys_enter_openat"),
            ("close_enter", "sys_enter_close"),
        ] {
            if !tracefs::event_exists(&self.tracefs, "syscalls", name) {
                return Ok(Err(AttachFailure::Failed(format!(
                    "tracepoint syscalls:{name} does not exist on this kernel"
                ))));
            }
            if let Err(e) = self.tracepoint(prog, "syscalls", name) {
                return Ok(Err(AttachFailure::Failed(e.to_string())));
            }
        }
        self.fd_tracking = true;
        Ok(Ok(()))
    }

    /// The uprobe program `prog` of the object, loaded (once; later attaches reuse it).
    /// `what` names the attach for errors.
    pub(super) fn loaded_uprobe(
        &mut self,
        prog: &str,
        what: &str,
    ) -> Result<&mut UProbe, EngineError> {
        let p: &mut UProbe = self
            .bpf
            .program_mut(prog)
            .unwrap_or_else(|| panic!("uprobe program {prog} is in the object"))
            .try_into()
            .map_err(|source| EngineError::Program {
                what: what.to_string(),
                source,
            })?;
        if p.fd().is_err() {
            p.load().map_err(|source| EngineError::Program {
                what: what.to_string(),
                source,
            })?;
        }
        Ok(p)
    }

    /// Attach the phase-marker uprobes to `binary` if it exports the marker symbols.
    /// Returns false (and attaches nothing) when the binary does not speak the protocol.
    pub fn attach_phase_markers(&mut self, binary: &Path) -> Result<bool, EngineError> {
        if !crate::symbols::elf_has_symbols(
            binary,
            &[
                workloads::marker::BEGIN_SYMBOL,
                workloads::marker::END_SYMBOL,
            ],
        ) {
            return Ok(false);
        }
        for (prog, sym) in [
            ("phase_begin", workloads::marker::BEGIN_SYMBOL),
            ("phase_end", workloads::marker::END_SYMBOL),
        ] {
            let what = format!("uprobe {prog} on {}:{sym}", binary.display());
            let p = self.loaded_uprobe(prog, &what)?;
            p.attach(sym, binary, UProbeScope::AllProcesses)
                .map_err(|source| EngineError::Program { what, source })?;
        }
        Ok(true)
    }
}
