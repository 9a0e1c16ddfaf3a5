//! The counters in `run.json`: the names of the kernel-side counters and what a non-zero
//! loss counter costs the results.
use tracer_ebpf::counter;

/// Names of the kernel-side counters, index = `tracer_ebpf::counter` constant.
pub const COUNTER_NAMES: [&str; counter::COUNT as usize] = [
    "ringbuf_drops",
    "depth_overflow",
    "unpaired_exits",
    "thread_map_full",
    "aggregate_map_full",
    "stack_errors",
    "samples_in_target",
    "samples_total",
    "abandoned_frames",
    "phase_markers",
    "floor_hits",
    "floor_ns",
    "stacks_taken",
    "stacks_lost_caller",
    "stacks_lost_offcpu",
    "stacks_lost_sampled",
    "entries_lost",
    "stack_aggregates_full",
    "fast_path_spills",
];

/// The counters that count, not losses: a non-zero value is no warning, and
/// [`counter_meaning`] has nothing to say about them.
pub const INFORMATIONAL_COUNTERS: [&str; 11] = [
    // The denominator and the parts of stack_errors (per kind, and the full aggregate map),
    // which warns for them.
    "stacks_taken",
    "stacks_lost_caller",
    "stacks_lost_offcpu",
    "stacks_lost_sampled",
    "stack_aggregates_full",
    // Sampling, phase and floor bookkeeping.
    "samples_in_target",
    "samples_total",
    "phase_markers",
    "floor_hits",
    "floor_ns",
    // Calls the per-CPU fast path handed to the exact one.
    "fast_path_spills",
];

/// Session counters of a sampling run: the kernel's perf sample-rate limit (Hz) when
/// recording began and when it ended. The kernel lowers it by itself when perf interrupts take
/// too much CPU time, and samples at a higher frequency are then throttled.
pub const SAMPLE_RATE_LIMIT_START: &str = "sample_rate_limit_start_hz";
pub const SAMPLE_RATE_LIMIT_END: &str = "sample_rate_limit_end_hz";

/// What a non-zero loss counter costs the results, and what to do about it, for warnings.
pub fn counter_meaning(name: &str) -> Option<&'static str> {
    Some(match name {
        "ringbuf_drops" => "raw events lost: events.csv is incomplete (raise --raw-events)",
        "aggregate_map_full" => {
            "calls not counted: their phases came after the kernel aggregates were full, \
             or a phase's own statistics were lost (raise --max-phases)"
        }
        "entries_lost" => {
            "kernel entries of traced threads not counted, or syscalls whose samples could \
             not be filed under them (too many threads inside a syscall at once, or the \
             counts' map full): the kernel-entry counts and per-call times are short of them"
        }
        "thread_map_full" => "threads not tracked: their calls were neither counted nor timed",
        "depth_overflow" => "calls nested deeper than 16 frames were counted without a duration",
        "unpaired_exits" => {
            "exits without a recorded entry (calls already running when tracing began)"
        }
        "abandoned_frames" => {
            "calls whose exit was never seen (a missed return probe, or the thread exited \
             mid-call): not timed"
        }
        "stack_errors" => {
            "stacks not recorded (a full stack store, or a stack the kernel could not walk): \
             flamegraphs and root causes rest on fewer samples; counts and times are unaffected \
             (stacks_lost_* say which kind)"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_loss_counter_explains_itself() {
        for name in COUNTER_NAMES {
            assert_eq!(
                counter_meaning(name).is_some(),
                !INFORMATIONAL_COUNTERS.contains(&name),
                "{name}"
            );
        }
        assert!(
            counter_meaning("aggregate_map_full")
                .unwrap()
                .contains("--max-phases")
        );
    }
}
