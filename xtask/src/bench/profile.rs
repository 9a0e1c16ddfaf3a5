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

/// Lines of `perf report --stdio -q --sort sym`: "  12.22%  [k] htab_map_update_elem".
pub fn parse_report(text: &str) -> Vec<SymbolShare> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (pct, rest) = l.split_once('%')?;
            let percent: f64 = pct.trim().parse().ok()?;
            let rest = rest.trim();
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
                &attach.bpftrace_script()?,
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
                "--comms",
                "workloads",
                "--sort",
                "sym",
                "--percentage",
                "relative",
                "--percent-limit",
                "0.2",
            ]),
            &dir,
            format!("perf-report-{name}"),
        )
        .run()?;
        let syms = parse_report(&rep.stdout);
        ensure!(!syms.is_empty(), "perf report for {name} was empty");
        profiles.push(ToolProfile {
            name,
            categories: categorise(&syms),
            top: syms.into_iter().take(12).collect(),
        });
        let _ = std::fs::remove_file(&data);
    }
    let _ = std::fs::remove_dir_all(dir.join("run"));
    Ok(Profile {
        command: format!(
            "perf record -a -- TOOL ... -- workloads {}; perf report --comms workloads --sort sym --percentage relative",
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
        let text = "    12.22%  [k] htab_map_update_elem\n    11.46%  [.] syscall\n\
                    \n     9.12%  [k] read_tsc\n     8.30%  [k] bpf_prog_b3cf45dfb568759b_tp_0\n\
                     3.14%  [k] trace_call_bpf\n     2.00%  [k] __bpf_get_stackid\n\
                     1.50%  [k] __get_user_handle_exception\n";
        let syms = parse_report(text);
        assert_eq!(syms.len(), 7);
        assert_eq!(syms[1].symbol, "syscall");
        let cats = categorise(&syms);
        assert_eq!(cats[0].symbol, "BPF map operations");
        let get = |c: &str| cats.iter().find(|x| x.symbol == c).map(|x| x.percent);
        assert_eq!(get("stack walks (caller stacks)"), Some(3.5));
        assert_eq!(get("clock reads (bpf_ktime_get_ns)"), Some(9.12));
        assert_eq!(
            get("the workload itself (syscall, user code, scheduler)"),
            Some(11.46)
        );
    }
}
