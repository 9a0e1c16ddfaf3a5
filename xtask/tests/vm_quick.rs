//! The quick suite's real kernel (`cargo xtask test --quick`): one boot of Debian's 6.1,
//! where the tracer's main path runs as on a user's machine: targets resolve to function
//! probes (fentry), and a traced workload's calls match its own count, phase by phase.
//! About a minute under TCG; the full suite runs it too.

mod common;

use std::collections::BTreeMap;

use common::{read_json, status_of};
use xtask::kernel::Kernel;

const SCRIPT: &str = "\
tracer record --targets do_wait,dup_mmap --no-samples --markers /bin/workloads -o /out/rec -- workloads waitpid --variant waitpid-pid,waitpid-wnohang --n 1,16 --iterations 5 --warmup 0
echo rec=$? >> /out/status
exit 0
";

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_counts_every_wait_and_fork_through_fentry() {
    let (_, out) = common::boot(Kernel::V6_1, "quick-6.1", SCRIPT, 300, |_, cfg| cfg);
    assert_eq!(status_of(&out)["rec"], 0, "tracer record exit status");
    let run = read_json(&out.join("rec/run.json"));
    for t in run["targets"].as_array().unwrap() {
        let plan = t["plan"]["plan"].as_str().unwrap_or("(none)");
        assert_eq!(plan, "fentry", "{}: plan on 6.1", t["name"]);
    }
    let mut calls: BTreeMap<(String, String, u64), u64> = BTreeMap::new();
    for s in run["spans"].as_array().unwrap() {
        calls.insert(
            (
                s["target"].as_str().unwrap().into(),
                s["case_name"].as_str().unwrap().into(),
                s["n"].as_u64().unwrap(),
            ),
            s["calls"].as_u64().unwrap(),
        );
    }
    let mut checked = 0;
    for p in run["phases"].as_array().unwrap() {
        let case = p["case_name"].as_str().unwrap();
        let n = p["n"].as_u64().unwrap();
        let ops = p["ops"].as_u64().unwrap();
        let of = |t: &str| calls.get(&(t.into(), case.into(), n)).copied().unwrap_or(0);
        // One do_wait per timed wait or poll, exactly.
        assert_eq!(of("do_wait"), ops, "do_wait calls in {case} N={n}");
        if case == "waitpid-pid" {
            // Each timed wait forked the child it waited for.
            assert_eq!(of("dup_mmap"), ops, "forks in {case} N={n}");
        }
        checked += 1;
    }
    assert_eq!(checked, 4, "phases: {}", run["phases"]);
    for bad in ["aggregate_map_full", "thread_map_full", "unpaired_exits"] {
        assert_eq!(run["counters"][bad], 0, "counter {bad}");
    }
}
