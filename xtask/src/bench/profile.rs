//! Where the added cost goes: `perf record -a` around one getpid run per tool, summarised as
//! the share of the workload process's samples per symbol and per category (BPF program
//! bodies, hash-map operations, stack walks, clock reads, the tracepoint plumbing).

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};

use super::exec::{Cmd, argv, path_str, probe_output};
use super::measure::{Attach, LEAN_FLAGS, Tools, Workload, record_argv};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SymbolShare {
    pub symbol: String,
    pub percent: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolProfile {
    pub name: String,
    /// Percent of the workload process's samples, by category.
    pub categories: Vec<SymbolShare>,
    pub top: Vec<SymbolShare>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub command: String,
    pub profiles: Vec<ToolProfile>,
}

/// Category of a kernel or user symbol, for the summary.
pub fn category(sym: &str) -> &'static str {
    let s = sym;
    if s.starts_with("bpf_prog_") {
        "BPF program bodies"
    } else if s.contains("stackid")
        || s.contains("callchain")
        || s.starts_with("unwind_")
        || s.contains("stack_trace")
        || s.starts_with("__unwind")
        || s.contains("_unwind_")
        || s.starts_with("orc_")
        || s.contains("copy_from_user_nmi")
        || s.contains("stack_map")
        || s.starts_with("__get_user")
        || s.contains("bpf_ksym_find")
        || s.contains("kernel_text_address")
        || s.contains("is_bpf_text_address")
        || s.starts_with("stack_access_ok")
        || s.starts_with("get_stack_info")
        || s.starts_with("in_task_stack")
        || s.contains("exception_tables")
        || s.starts_with("search_extable")
        || s.starts_with("fixup_exception")
        || s.starts_with("ex_handler")
    {
        "stack walks (caller stacks)"
    } else if s.starts_with("htab_")
        || s.starts_with("__htab_")
        || s.contains("lookup_nulls_elem")
        || s.contains("pcpu_freelist")
        || s.contains("free_htab_elem")
        || s.contains("alloc_htab_elem")
        || s == "memcmp"
        || s.contains("jhash")
        || s.starts_with("bpf_map_")
        || s.starts_with("percpu_array")
        || s.starts_with("array_map")
    {
        "BPF map operations"
    } else if s.contains("read_tsc") || s.starts_with("ktime_get") || s.contains("clocksource") {
        "clock reads (bpf_ktime_get_ns)"
    } else if s.starts_with("perf_")
        || s.starts_with("trace_call_bpf")
        || s.starts_with("syscall_trace")
        || s.contains("bpf_trampoline")
        || s.starts_with("__bpf_prog_enter")
        || s.starts_with("__bpf_prog_exit")
        || s.contains("kprobe")
        || s.contains("rethook")
        || s.contains("ftrace")
        || s.starts_with("bpf_get_current")
        || s.starts_with("__rcu_read")
        || s.starts_with("migrate_")
    {
        "probe plumbing (tracepoint/perf/trampoline, helpers)"
    } else {
        "the workload itself (syscall, user code, scheduler)"
    }
}

/// The rows of process `comm` in `perf report --stdio -q --sort comm,sym` ("  3.45%  workloads
/// [k] bpf_prog_6ff1f9e5e519750a_raw_sys_exit"), as percent of that comm's samples. The comm
/// is filtered here rather than with perf's `--comms`, which on perf 6.1 drops about half of
/// the process's samples, among them every sample in a BPF program's JIT image: profiled that
/// way the tracer's own programs never showed up.
pub fn parse_report(text: &str, comm: &str) -> Vec<SymbolShare> {
    let rows: Vec<SymbolShare> = text
        .lines()
        .filter_map(|l| {
            let (pct, rest) = l.trim().split_once('%')?;
            let percent: f64 = pct.trim().parse().ok()?;
            let rest = rest.trim_start().strip_prefix(comm)?;
            let rest = rest.strip_prefix(char::is_whitespace)?.trim();
            let sym = rest
                .strip_prefix("[k]")
                .or_else(|| rest.strip_prefix("[.]"))
                .unwrap_or(rest)
                .trim();
            (!sym.is_empty()).then(|| SymbolShare {
                symbol: sym.to_string(),
                percent,
            })
        })
        .collect();
    let total: f64 = rows.iter().map(|r| r.percent).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    rows.into_iter()
        .map(|r| SymbolShare {
            percent: r.percent * 100.0 / total,
            ..r
        })
        .collect()
}

/// Category totals, largest first.
pub fn categorise(syms: &[SymbolShare]) -> Vec<SymbolShare> {
    let mut cats: Vec<SymbolShare> = Vec::new();
    for s in syms {
        let c = category(&s.symbol);
        match cats.iter_mut().find(|x| x.symbol == c) {
            Some(x) => x.percent += s.percent,
            None => cats.push(SymbolShare {
                symbol: c.to_string(),
                percent: s.percent,
            }),
        }
    }
    cats.sort_by(|a, b| b.percent.total_cmp(&a.percent));
    cats
}

pub fn available() -> bool {
    probe_output(&["perf", "--version"]).is_some()
}

/// The process whose samples are profiled: the workloads binary the tools run.
const WORKLOAD_COMM: &str = "workloads";

/// Profile one getpid run under each of: tracer lean, tracer default, bpftrace.
pub fn measure(tools: &Tools, w: &Workload, attach: &Attach) -> Result<Profile> {
    let dir = tools.scratch.join("profile");
    std::fs::create_dir_all(&dir)?;
    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    let json = dir.join("w.json");
    let cmd = w.command(&tools.workloads, &json);
    let tracer = |lean: bool| {
        let mut a = record_argv(tools, &w.target, &dir.join("run"), None);
        if lean {
            a.extend(argv(LEAN_FLAGS));
        }
        a.push("--".into());
        a.extend(cmd.iter().cloned());
        a
    };
    runs.push(("tracer-lean".into(), tracer(true)));
    runs.push(("tracer".into(), tracer(false)));
    if let Some(bt) = &tools.bpftrace {
        runs.push((
            "bpftrace".into(),
            argv([
                path_str(bt).as_str(),
                "-e",
                &attach.bpftrace_script(None)?,
                "-c",
                &cmd.join(" "),
            ]),
        ));
    }
    let mut profiles = Vec::new();
    for (name, a) in runs {
        eprintln!("xtask bench: profile: perf record -a around {name}");
        let data = dir.join(format!("{name}.perf.data"));
        let mut p = argv(["perf", "record", "-a", "-q", "-o", &path_str(&data), "--"]);
        p.extend(a);
        Cmd::new(p, &dir, format!("perf-{name}")).run()?;
        let rep = Cmd::new(
            argv([
                "perf",
                "report",
                "-i",
                &path_str(&data),
                "--stdio",
                "-q",
                "--sort",
                "comm,sym",
            ]),
            &dir,
            format!("perf-report-{name}"),
        )
        .run()?;
        let syms = parse_report(&rep.stdout, WORKLOAD_COMM);
        ensure!(
            !syms.is_empty(),
            "perf report for {name} had no samples of {WORKLOAD_COMM}"
        );
        let categories = categorise(&syms);
        let mut top = syms;
        top.sort_by(|a, b| b.percent.total_cmp(&a.percent));
        top.truncate(12);
        profiles.push(ToolProfile {
            name,
            categories,
            top,
        });
        let _ = std::fs::remove_file(&data);
    }
    let _ = std::fs::remove_dir_all(dir.join("run"));
    Ok(Profile {
        command: format!(
            "perf record -a -- TOOL ... -- workloads {}; perf report --sort comm,sym, the {WORKLOAD_COMM} rows as percent of its samples",
            w.args.join(" ")
        ),
        profiles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_categorises_perf_output() {
        let text = "    12.22%  workloads        [k] htab_map_update_elem\n\
                     30.00%  tracer           [.] malloc\n\
                     11.46%  workloads        [.] syscall\n\
                    \n     9.12%  workloads        [k] read_tsc\n\
                     8.30%  workloads        [k] bpf_prog_b3cf45dfb568759b_tp_0\n\
                     5.00%  workloads-helper [k] read_tsc\n\
                     3.14%  workloads        [k] trace_call_bpf\n\
                     2.00%  workloads        [k] __bpf_get_stackid\n\
                     1.50%  workloads        [k] __get_user_handle_exception\n";
        let syms = parse_report(text, "workloads");
        assert_eq!(syms.len(), 7);
        assert_eq!(syms[1].symbol, "syscall");
        // Percent of the workload's own samples (47.74% of all here).
        let sum: f64 = syms.iter().map(|s| s.percent).sum();
        assert!((sum - 100.0).abs() < 1e-9, "{sum}");
        let cats = categorise(&syms);
        assert_eq!(cats[0].symbol, "BPF map operations");
        let get = |c: &str| cats.iter().find(|x| x.symbol == c).map(|x| x.percent);
        let close = |c: &str, abs: f64| {
            let v = get(c).unwrap();
            assert!((v - abs * 100.0 / 47.74).abs() < 1e-9, "{c}: {v}");
        };
        close("stack walks (caller stacks)", 3.5);
        close("clock reads (bpf_ktime_get_ns)", 9.12);
        close("BPF program bodies", 8.30);
        close("the workload itself (syscall, user code, scheduler)", 11.46);
    }
}
