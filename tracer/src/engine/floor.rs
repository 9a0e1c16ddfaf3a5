//! The benchmark floor: the cheapest probe of each mechanism (a per-CPU counter increment),
//! against which the span machinery's cost is measured.
use aya::maps::{MapData, PerCpuArray};
use aya::programs::{FEntry, FExit, KProbe, ProgramError};
use tracer_ebpf::counter;

use super::{Engine, EngineError, map_error};

impl Engine {
    /// Attach the cheapest possible probe of a mechanism (a per-CPU counter increment) to
    /// `point`: the floor against which the span machinery's cost is measured.
    /// `mech` is "tracepoint" (point = category:name), "raw-syscall" (point = a syscall name:
    /// raw `sys_enter` and `sys_exit` counting that syscall, 2 hits a call), "kprobe" or
    /// "fentry" (point = function; both ends are counted, kprobe+kretprobe or fentry+fexit,
    /// so a call makes 2 hits).
    /// With `timed`, the programs also read the clock at both ends and keep the entry time
    /// until the exit: the floor of any timing probe.
    pub fn attach_floor(
        &mut self,
        mech: &str,
        point: &str,
        timed: bool,
    ) -> Result<(), EngineError> {
        let what = format!("floor {mech} on {point}");
        let sfx = if timed { "_timed" } else { "" };
        let err = |source| EngineError::Program {
            what: what.clone(),
            source,
        };
        match mech {
            "tracepoint" => {
                let (cat, name) = point.split_once(':').ok_or_else(|| EngineError::Program {
                    what: what.clone(),
                    source: ProgramError::NotAttached,
                })?;
                self.tracepoint(&format!("floor_tp{sfx}"), cat, name)?;
            }
            "raw-syscall" => {
                let nr =
                    crate::kernel::syscalls::number(point).ok_or_else(|| EngineError::Program {
                        what: format!("{what}: no such x86_64 syscall"),
                        source: ProgramError::NotAttached,
                    })?;
                // Config::default() zeroes them, and 0 is read(): mark both unused first.
                let nrs = &mut self.config.floor_nrs;
                let first = !self.floor_raw;
                if first {
                    *nrs = [u32::MAX; 2];
                }
                let Some(free) = nrs.iter_mut().find(|n| **n == u32::MAX) else {
                    return Err(EngineError::Program {
                        what: format!("{what}: the raw-syscall floor counts at most 2 syscalls"),
                        source: ProgramError::NotAttached,
                    });
                };
                *free = nr;
                self.write_config()?;
                if first {
                    let (enter, exit) = if timed {
                        ("floor_rt_enter", "floor_rt_exit")
                    } else {
                        ("floor_raw_enter", "floor_raw_exit")
                    };
                    self.attach_raw_to(exit, "sys_exit")?;
                    self.attach_raw_to(enter, "sys_enter")?;
                    self.floor_raw = true;
                }
            }
            "kprobe" => {
                for prog in ["floor_kprobe", "floor_kretprobe"] {
                    let p: &mut KProbe = self
                        .bpf
                        .program_mut(&format!("{prog}{sfx}"))
                        .expect("floor kprobe programs")
                        .try_into()
                        .map_err(err)?;
                    if p.fd().is_err() {
                        p.load().map_err(err)?;
                    }
                    p.attach(point, 0).map_err(err)?;
                }
            }
            _ => {
                let btf = self.btf.as_ref().ok_or_else(|| EngineError::Program {
                    what: what.clone(),
                    source: ProgramError::NotLoaded,
                })?;
                let p: &mut FEntry = self
                    .bpf
                    .program_mut(&format!("floor_fentry{sfx}"))
                    .expect("floor_fentry")
                    .try_into()
                    .map_err(err)?;
                p.load(point, btf).map_err(err)?;
                p.attach().map_err(err)?;
                let p: &mut FExit = self
                    .bpf
                    .program_mut(&format!("floor_fexit{sfx}"))
                    .expect("floor_fexit")
                    .try_into()
                    .map_err(err)?;
                p.load(point, btf).map_err(err)?;
                p.attach().map_err(err)?;
            }
        }
        Ok(())
    }

    /// Hits counted by the floor programs, and the nanoseconds the timed ones measured.
    pub fn floor_hits(&self) -> Result<(u64, u64), EngineError> {
        let m: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.bpf.map("COUNTERS").expect("COUNTERS"))
                .map_err(map_error("COUNTERS"))?;
        let sum = |ix: u32| -> Result<u64, EngineError> {
            let v = m.get(&ix, 0).map_err(map_error("COUNTERS"))?;
            Ok(v.iter().sum())
        };
        Ok((sum(counter::FLOOR_HITS)?, sum(counter::FLOOR_NS)?))
    }
}
