//! The kernel's aggregates: phase rows, span statistics, histograms, stacks and counters,
//! read back as a `Snapshot` and cleared between calibration and the real run.
use std::collections::{BTreeMap, HashMap as StdHashMap};

use aya::Ebpf;
use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use tracer_ebpf::*;

use super::{Engine, EngineError, map_error};

/// How many times the snapshot reads a row whose counts and histogram disagree.
const SNAPSHOT_READS: usize = 20;

/// Raw aggregates read from the kernel maps.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub spans: BTreeMap<AggKey, SpanStats>,
    /// (agg, kind) -> bucket -> count
    pub hist: BTreeMap<(AggKey, u32), BTreeMap<u32, u64>>,
    pub stacks: Vec<(StackKey, StackVal)>,
    pub phases: Vec<(PhaseKey, PhaseStats)>,
    pub counters: [u64; counter::COUNT as usize],
    /// Stack id -> instruction pointers (innermost first), for caller and off-CPU stacks.
    pub traces: StdHashMap<i32, Vec<u64>>,
    /// The same for on-CPU samples (their own stack map).
    pub sampled: StdHashMap<i32, Vec<u64>>,
}

impl Engine {
    /// Claim aggregate row 0 for spans outside phases; the probes hand out the others.
    pub(super) fn init_rows(&mut self) -> Result<(), EngineError> {
        let unphased = PhaseKey {
            case: CASE_UNPHASED,
            _pad: 0,
            n: 0,
        };
        self.own_row(ROW_UNPHASED, unphased)?;
        let mut next: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("NEXT_ROW").expect("NEXT_ROW"))
                .map_err(map_error("NEXT_ROW"))?;
        next.set(0, ROW_UNPHASED as u64 + 1, 0)
            .map_err(map_error("NEXT_ROW"))?;
        // Threads may have cached a phase and row from before: make them look again.
        self.bump_phase_gen()
    }

    /// Record that aggregate `row` belongs to phase `key` (both directions, as the probes do).
    fn own_row(&mut self, row: u32, key: PhaseKey) -> Result<(), EngineError> {
        let mut owner: HashMap<&mut MapData, u32, PhaseKey> =
            HashMap::try_from(self.bpf.map_mut("ROW_OWNER").expect("ROW_OWNER"))
                .map_err(map_error("ROW_OWNER"))?;
        owner.insert(row, key, 0).map_err(map_error("ROW_OWNER"))?;
        let mut rows: HashMap<&mut MapData, PhaseKey, u32> =
            HashMap::try_from(self.bpf.map_mut("PHASE_ROWS").expect("PHASE_ROWS"))
                .map_err(map_error("PHASE_ROWS"))?;
        rows.insert(key, row, 0).map_err(map_error("PHASE_ROWS"))
    }

    /// The aggregate rows in use and the phase each belongs to (a phase may own more than
    /// one row when two CPUs raced to give it one; its rows are summed).
    fn rows(&self) -> Result<Vec<(u32, PhaseKey)>, EngineError> {
        let m: HashMap<&MapData, u32, PhaseKey> =
            HashMap::try_from(self.bpf.map("ROW_OWNER").expect("ROW_OWNER"))
                .map_err(map_error("ROW_OWNER"))?;
        let mut rows = Vec::new();
        for item in m.iter() {
            rows.push(item.map_err(map_error("ROW_OWNER"))?);
        }
        rows.sort_unstable_by_key(|r| r.0);
        Ok(rows)
    }

    /// Every (row, target) aggregate that saw a call, with its `SPANS` element.
    fn span_elements(&self) -> Result<Vec<(u32, AggKey, SpanStats)>, EngineError> {
        let stride = self.config.target_stride;
        let m: PerCpuArray<&MapData, SpanStats> =
            PerCpuArray::try_from(self.bpf.map("SPANS").expect("SPANS"))
                .map_err(map_error("SPANS"))?;
        let mut out = Vec::new();
        for (row, phase) in self.rows()? {
            for target in 0..stride {
                let ix = span_index(row, stride, target);
                let per_cpu = m.get(&ix, 0).map_err(map_error("SPANS"))?;
                let stats = merge_stats(per_cpu.iter());
                if stats.calls > 0 {
                    let key = AggKey {
                        target,
                        case: phase.case,
                        n: phase.n,
                    };
                    out.push((ix, key, stats));
                }
            }
        }
        Ok(out)
    }

    /// The phase process `pid` is in, if any.
    pub fn current_phase(&self, pid: u32) -> Option<CurrentPhase> {
        let map = self.bpf.map("CURRENT_PHASE")?;
        let m = HashMap::<&MapData, u32, CurrentPhase>::try_from(map).ok()?;
        m.get(&pid, 0).ok()
    }

    /// Sum of calls per target over all phases (for progress and calibration).
    pub fn calls_per_target(&self) -> Result<[u64; MAX_TARGETS], EngineError> {
        let mut out = [0u64; MAX_TARGETS];
        for (_, k, stats) in self.span_elements()? {
            if let Some(slot) = out.get_mut(k.target as usize) {
                *slot += stats.calls;
            }
        }
        Ok(out)
    }

    /// Read every aggregate.
    pub fn snapshot(&self) -> Result<Snapshot, EngineError> {
        let mut snap = self.span_snapshot()?;
        self.read_rest(&mut snap)?;
        Ok(snap)
    }

    /// Read the span statistics and their histograms only (`spans` and `hist`): what an
    /// external sweep reads after each run of the command, to keep each run's calls apart.
    pub fn span_snapshot(&self) -> Result<Snapshot, EngineError> {
        let mut snap = Snapshot::default();
        let hist: Array<&MapData, HistRow> =
            Array::try_from(self.bpf.map("HIST").expect("HIST")).map_err(map_error("HIST"))?;
        let spans: PerCpuArray<&MapData, SpanStats> =
            PerCpuArray::try_from(self.bpf.map("SPANS").expect("SPANS"))
                .map_err(map_error("SPANS"))?;
        // Absent from nothing: sized to one element when a single target is traced.
        let trips: Option<Array<&MapData, HistRow>> = self
            .bpf
            .map("TRIP_HIST")
            .and_then(|m| Array::try_from(m).ok());
        for (ix, key, mut stats) in self.span_elements()? {
            // Between a multi-run session's runs the probes stay attached, and a call that
            // ends while its row is read has bumped the counts but not yet its histograms
            // (the program updates them in that order): read the row again until the wall
            // histogram holds every timed call. A full map drops buckets for good; a row
            // that never settles is kept as read, and the run's check says so.
            let mut rows: [HistRow; 2] = [[0; tracer_ebpf::HIST_BUCKETS as usize]; 2];
            for attempt in 0..SNAPSHOT_READS {
                if attempt > 0 {
                    let per_cpu = spans.get(&ix, 0).map_err(map_error("SPANS"))?;
                    stats = merge_stats(per_cpu.iter());
                }
                for (kind, row) in [HIST_WALL, HIST_ONCPU].into_iter().zip(rows.iter_mut()) {
                    *row = hist
                        .get(&hist_index(ix, kind), 0)
                        .map_err(map_error("HIST"))?;
                }
                if rows[0].iter().sum::<u64>() == stats.calls - stats.untimed {
                    break;
                }
            }
            let merged = snap.spans.entry(key).or_default();
            *merged = merge_stats([*merged, stats].iter());
            let trip_row = trips
                .as_ref()
                .filter(|t| ix < t.len())
                .and_then(|t| t.get(&ix, 0).ok())
                .filter(|r| r.iter().any(|&c| c > 0));
            let kinds = [(HIST_WALL, Some(&rows[0])), (HIST_ONCPU, Some(&rows[1]))];
            for (kind, row) in kinds
                .into_iter()
                .chain([(HIST_TRIPS, trip_row.as_ref())])
                .filter_map(|(k, r)| Some((k, r?)))
            {
                let dest = snap.hist.entry((key, kind)).or_default();
                for (bucket, &count) in row.iter().enumerate() {
                    if count > 0 {
                        *dest.entry(bucket as u32).or_default() += count;
                    }
                }
            }
        }
        Ok(snap)
    }

    /// Move the stack aggregates of processes that have ended out of the kernel's map into
    /// this engine's memory, where the snapshot reads them beside the live ones; how many
    /// entries moved. A session of many runs (a sweep by rounds, a script that starts a
    /// process per item) files every process's caller stacks under keys of its own, and the
    /// map is sized for one run: without this, a long sweep found it full and lost a quarter
    /// of its stacks (`stack_aggregates_full`). An ended process adds nothing more under its
    /// keys, so reading and deleting them loses nothing; a live one's stay where they are.
    /// The keys of no process (kernel-only stacks: samples, blocking points) move too when
    /// `tree_ended`: the caller knows that nothing it traces still runs. Call between runs.
    /// The stack traces the moved keys name stay in the kernel's stack maps (other keys may
    /// name the same stacks).
    pub fn drain_ended_stacks(&mut self, tree_ended: bool) -> Result<usize, EngineError> {
        let mut m: HashMap<&mut MapData, StackKey, StackVal> =
            HashMap::try_from(self.bpf.map_mut("STACKS").expect("STACKS"))
                .map_err(map_error("STACKS"))?;
        let mut ended = std::collections::HashMap::<u32, bool>::new();
        let keys: Vec<StackKey> = m
            .keys()
            .filter_map(Result::ok)
            .filter(|k| match k.tgid {
                0 => tree_ended,
                // The pid as the probes read it: the tracer's own namespace's (see spans.rs).
                tgid => *ended
                    .entry(tgid)
                    .or_insert_with(|| !std::path::Path::new(&format!("/proc/{tgid}")).exists()),
            })
            .collect();
        let mut moved = 0;
        for k in keys {
            let Ok(v) = m.get(&k, 0) else { continue };
            m.remove(&k).map_err(map_error("STACKS"))?;
            let d = self.drained_stacks.entry(k).or_default();
            d.count += v.count;
            d.ns += v.ns;
            moved += 1;
        }
        Ok(moved)
    }

    /// Stacks, phases, counters and stack traces into `snap`.
    fn read_rest(&self, snap: &mut Snapshot) -> Result<(), EngineError> {
        let m: HashMap<&MapData, StackKey, StackVal> =
            HashMap::try_from(self.bpf.map("STACKS").expect("STACKS"))
                .map_err(map_error("STACKS"))?;
        // The live aggregates, then those drained from ended processes (a key in both when
        // its process id came round again: summed).
        let mut stacks = self.drained_stacks.clone();
        for item in m.iter() {
            let (k, v) = item.map_err(map_error("STACKS"))?;
            let d = stacks.entry(k).or_default();
            d.count += v.count;
            d.ns += v.ns;
        }
        snap.stacks.extend(stacks);
        // The kernel-entry counts, as stacks of their kind (no frames).
        let m: HashMap<&MapData, AggKey, StackVal> =
            HashMap::try_from(self.bpf.map("ENTRY_COUNTS").expect("ENTRY_COUNTS"))
                .map_err(map_error("ENTRY_COUNTS"))?;
        for item in m.iter() {
            let (agg, val) = item.map_err(map_error("ENTRY_COUNTS"))?;
            let key = StackKey {
                agg,
                kind: STACK_ENTRY,
                kstack: -1,
                ustack: -1,
                tgid: 0,
            };
            snap.stacks.push((key, val));
        }
        // And the counts each CPU holds in its cache, not yet added to the map (duplicate
        // keys are summed with the map's by the reader of the snapshot).
        let m: PerCpuArray<&MapData, EntryCache> =
            PerCpuArray::try_from(self.bpf.map("ENTRY_CACHE").expect("ENTRY_CACHE"))
                .map_err(map_error("ENTRY_CACHE"))?;
        for slot in 0..ENTRY_CACHE_SLOTS {
            let per_cpu = m.get(&slot, 0).map_err(map_error("ENTRY_CACHE"))?;
            for c in per_cpu.iter().filter(|c| c.count > 0) {
                let key = StackKey {
                    agg: c.key,
                    kind: STACK_ENTRY,
                    kstack: -1,
                    ustack: -1,
                    tgid: 0,
                };
                snap.stacks.push((
                    key,
                    StackVal {
                        count: c.count,
                        ns: 0,
                    },
                ));
            }
        }

        let m: HashMap<&MapData, PhaseKey, PhaseStats> =
            HashMap::try_from(self.bpf.map("PHASE_STATS").expect("PHASE_STATS"))
                .map_err(map_error("PHASE_STATS"))?;
        for item in m.iter() {
            snap.phases.push(item.map_err(map_error("PHASE_STATS"))?);
        }

        let m: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.bpf.map("COUNTERS").expect("COUNTERS"))
                .map_err(map_error("COUNTERS"))?;
        for (i, c) in snap.counters.iter_mut().enumerate() {
            let v = m.get(&(i as u32), 0).map_err(map_error("COUNTERS"))?;
            *c = v.iter().sum();
        }

        for (map, oncpu) in [("STACK_TRACES", false), ("SAMPLED_STACKS", true)] {
            let traces: HashMap<&MapData, u32, StackBuf> =
                HashMap::try_from(self.bpf.map(map).expect("stack map")).map_err(map_error(map))?;
            let mut wanted: Vec<i32> = Vec::new();
            for (k, _) in &snap.stacks {
                if is_sampled_kind(k.kind) == oncpu {
                    wanted.extend([k.kstack, k.ustack].into_iter().filter(|&id| id >= 0));
                }
            }
            wanted.sort_unstable();
            wanted.dedup();
            let dest = if oncpu {
                &mut snap.sampled
            } else {
                &mut snap.traces
            };
            for id in wanted {
                // A missing id renders as a lost-stack frame rather than failing the run.
                if let Ok(t) = traces.get(&(id as u32), 0) {
                    dest.insert(
                        id,
                        t.ips.iter().copied().take_while(|&ip| ip != 0).collect(),
                    );
                }
            }
        }
        Ok(())
    }

    /// Make `(case, n)` the phase of every traced process that announces none itself (one
    /// run of an external sweep's command), claiming its aggregate row as the phase markers
    /// would. Call only while no traced process runs: the probes claim rows too.
    pub fn set_default_phase(&mut self, case: u32, n: u64) -> Result<(), EngineError> {
        let key = PhaseKey { case, _pad: 0, n };
        let row = self.claim_row(key)?;
        self.config.default_case = case;
        self.config.default_n = n;
        self.config.default_row = row;
        self.write_config()?;
        self.bump_phase_gen()
    }

    /// Back to unphased for processes without a phase of their own.
    pub fn clear_default_phase(&mut self) -> Result<(), EngineError> {
        self.config.default_case = CASE_UNPHASED;
        self.config.default_n = 0;
        self.config.default_row = ROW_UNPHASED;
        self.write_config()?;
        self.bump_phase_gen()
    }

    /// The row of a phase: its own if it has one, else the next free one (`NO_ROW` when
    /// all are taken; the calls are then counted as lost, as for marker phases).
    fn claim_row(&mut self, key: PhaseKey) -> Result<u32, EngineError> {
        {
            let rows: HashMap<&MapData, PhaseKey, u32> =
                HashMap::try_from(self.bpf.map("PHASE_ROWS").expect("PHASE_ROWS"))
                    .map_err(map_error("PHASE_ROWS"))?;
            if let Ok(r) = rows.get(&key, 0) {
                return Ok(r);
            }
        }
        let mut next: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("NEXT_ROW").expect("NEXT_ROW"))
                .map_err(map_error("NEXT_ROW"))?;
        let row = next.get(&0, 0).map_err(map_error("NEXT_ROW"))?;
        if row >= self.config.max_phases as u64 {
            return Ok(NO_ROW);
        }
        next.set(0, row + 1, 0).map_err(map_error("NEXT_ROW"))?;
        let row = row as u32;
        self.own_row(row, key)?;
        Ok(row)
    }

    fn bump_phase_gen(&mut self) -> Result<(), EngineError> {
        let mut generation: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("PHASE_GEN").expect("PHASE_GEN"))
                .map_err(map_error("PHASE_GEN"))?;
        let g = generation.get(&0, 0).map_err(map_error("PHASE_GEN"))?;
        generation
            .set(0, g.wrapping_add(1), 0)
            .map_err(map_error("PHASE_GEN"))
    }

    /// Add one finished run of an external command to its phase's statistics (what the
    /// end marker does for workloads that announce their phases).
    pub fn add_phase_stats(
        &mut self,
        case: u32,
        n: u64,
        ops: u64,
        wall_ns: u64,
    ) -> Result<(), EngineError> {
        let key = PhaseKey { case, _pad: 0, n };
        let mut m: HashMap<&mut MapData, PhaseKey, PhaseStats> =
            HashMap::try_from(self.bpf.map_mut("PHASE_STATS").expect("PHASE_STATS"))
                .map_err(map_error("PHASE_STATS"))?;
        let mut v = m.get(&key, 0).unwrap_or_default();
        v.phases += 1;
        v.ops += ops;
        v.wall_ns += wall_ns;
        m.insert(key, v, 0).map_err(map_error("PHASE_STATS"))
    }

    /// Forget all aggregates (after calibration, before the real run).
    pub fn clear(&mut self) -> Result<(), EngineError> {
        fn clear_hash<K: aya::Pod, V: aya::Pod>(
            bpf: &mut Ebpf,
            name: &'static str,
        ) -> Result<(), EngineError> {
            let mut m: HashMap<&mut MapData, K, V> =
                HashMap::try_from(bpf.map_mut(name).expect("map"))
                    .map_err(|source| EngineError::Map { name, source })?;
            let keys: Vec<K> = m.keys().filter_map(Result::ok).collect();
            for k in keys {
                let _ = m.remove(&k);
            }
            Ok(())
        }
        let ncpu = aya::util::nr_cpus().map_err(|(_, e)| EngineError::Cpus(e))?;
        let stride = self.config.target_stride;
        let used = self.rows()?;
        {
            let mut spans: PerCpuArray<&mut MapData, SpanStats> =
                PerCpuArray::try_from(self.bpf.map_mut("SPANS").expect("SPANS"))
                    .map_err(map_error("SPANS"))?;
            for &(row, _) in &used {
                for target in 0..stride {
                    let zeros = aya::maps::PerCpuValues::try_from(vec![SpanStats::default(); ncpu])
                        .map_err(EngineError::Cpus)?;
                    spans
                        .set(span_index(row, stride, target), zeros, 0)
                        .map_err(map_error("SPANS"))?;
                }
            }
        }
        {
            let mut hist: Array<&mut MapData, HistRow> =
                Array::try_from(self.bpf.map_mut("HIST").expect("HIST"))
                    .map_err(map_error("HIST"))?;
            let zero: HistRow = [0; HIST_BUCKETS as usize];
            for &(row, _) in &used {
                for target in 0..stride {
                    for kind in [HIST_WALL, HIST_ONCPU] {
                        let ix = hist_index(span_index(row, stride, target), kind);
                        hist.set(ix, zero, 0).map_err(map_error("HIST"))?;
                    }
                }
            }
        }
        {
            let mut trips: Array<&mut MapData, HistRow> =
                Array::try_from(self.bpf.map_mut("TRIP_HIST").expect("TRIP_HIST"))
                    .map_err(map_error("TRIP_HIST"))?;
            let zero: HistRow = [0; HIST_BUCKETS as usize];
            let len = trips.len();
            for &(row, _) in &used {
                for target in 0..stride {
                    let ix = span_index(row, stride, target);
                    if ix < len {
                        trips.set(ix, zero, 0).map_err(map_error("TRIP_HIST"))?;
                    }
                }
            }
        }
        clear_hash::<StackKey, StackVal>(&mut self.bpf, "STACKS")?;
        self.drained_stacks.clear();
        clear_hash::<AggKey, StackVal>(&mut self.bpf, "ENTRY_COUNTS")?;
        {
            let mut cache: PerCpuArray<&mut MapData, EntryCache> =
                PerCpuArray::try_from(self.bpf.map_mut("ENTRY_CACHE").expect("ENTRY_CACHE"))
                    .map_err(map_error("ENTRY_CACHE"))?;
            for slot in 0..ENTRY_CACHE_SLOTS {
                let zeros = aya::maps::PerCpuValues::try_from(vec![EntryCache::default(); ncpu])
                    .map_err(EngineError::Cpus)?;
                cache
                    .set(slot, zeros, 0)
                    .map_err(map_error("ENTRY_CACHE"))?;
            }
        }
        clear_hash::<PhaseKey, PhaseStats>(&mut self.bpf, "PHASE_STATS")?;
        clear_hash::<u32, CurrentPhase>(&mut self.bpf, "CURRENT_PHASE")?;
        clear_hash::<u32, PhaseKey>(&mut self.bpf, "ROW_OWNER")?;
        clear_hash::<PhaseKey, u32>(&mut self.bpf, "PHASE_ROWS")?;
        clear_hash::<u32, OffStart>(&mut self.bpf, "OFF_START")?;
        self.init_rows()?;
        clear_hash::<u32, StackBuf>(&mut self.bpf, "STACK_TRACES")?;
        clear_hash::<u32, StackBuf>(&mut self.bpf, "SAMPLED_STACKS")?;
        let mut m: PerCpuArray<&mut MapData, u64> =
            PerCpuArray::try_from(self.bpf.map_mut("COUNTERS").expect("COUNTERS"))
                .map_err(map_error("COUNTERS"))?;
        for i in 0..counter::COUNT {
            let zeros =
                aya::maps::PerCpuValues::try_from(vec![0u64; ncpu]).map_err(EngineError::Cpus)?;
            m.set(i, zeros, 0).map_err(map_error("COUNTERS"))?;
        }
        Ok(())
    }
}

/// Stack kinds whose kernel stacks come from the sampler's own stack map.
fn is_sampled_kind(kind: u32) -> bool {
    kind == STACK_ONCPU || kind == STACK_PROFILE
}

/// Merge per-CPU span statistics. CPUs that only counted untimed calls (or none) carry no
/// meaningful min.
pub fn merge_stats<'a>(per_cpu: impl Iterator<Item = &'a SpanStats>) -> SpanStats {
    let mut out = SpanStats::default();
    let mut have_timed = false;
    for s in per_cpu {
        out.calls += s.calls;
        out.untimed += s.untimed;
        for (o, w) in out.within.iter_mut().zip(s.within) {
            *o += w;
        }
        if s.calls > s.untimed {
            out.wall_sum += s.wall_sum;
            out.oncpu_sum += s.oncpu_sum;
            out.wall_max = out.wall_max.max(s.wall_max);
            out.oncpu_max = out.oncpu_max.max(s.oncpu_max);
            if !have_timed {
                out.wall_min = s.wall_min;
                out.oncpu_min = s.oncpu_min;
                have_timed = true;
            } else {
                out.wall_min = out.wall_min.min(s.wall_min);
                out.oncpu_min = out.oncpu_min.min(s.oncpu_min);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_ignores_cpus_without_timed_calls() {
        let a = SpanStats {
            calls: 2,
            untimed: 0,
            wall_sum: 30,
            wall_min: 10,
            wall_max: 20,
            oncpu_sum: 6,
            oncpu_min: 2,
            oncpu_max: 4,
            within: [0, 2, 0, 0, 0, 0, 0, 0],
        };
        let empty = SpanStats::default();
        let untimed = SpanStats {
            calls: 3,
            untimed: 3,
            ..SpanStats::default()
        };
        let b = SpanStats {
            calls: 1,
            wall_sum: 5,
            wall_min: 5,
            wall_max: 5,
            within: [0, 1, 1, 0, 0, 0, 0, 0],
            ..SpanStats::default()
        };
        let m = merge_stats([empty, a, untimed, b].iter());
        assert_eq!(m.within, [0, 3, 1, 0, 0, 0, 0, 0]);
        assert_eq!(m.calls, 6);
        assert_eq!(m.untimed, 3);
        assert_eq!(m.wall_sum, 35);
        assert_eq!(m.wall_min, 5);
        assert_eq!(m.wall_max, 20);
        assert_eq!(m.oncpu_min, 0);
        assert_eq!(m.oncpu_max, 4);
    }
}
