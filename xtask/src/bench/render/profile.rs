//! Where the per-call cost goes: the perf profile of each tool's run, by category.

use std::fmt::Write;

use crate::bench::profile::Profile;

/// The category table and the top symbols of each profiled tool.
pub(super) fn profile_section(md: &mut String, p: &Profile) {
    md.push_str("## Where the per-call cost goes (perf)\n\n");
    let _ = writeln!(
        md,
        "`{}`: share of the workload process's samples (system-wide cpu-clock sampling while \
         one getpid run executes). Everything but \"the workload itself\" is probe cost.\n",
        p.command
    );
    let mut cats: Vec<String> = Vec::new();
    for tp in &p.profiles {
        for c in &tp.categories {
            if !cats.contains(&c.symbol) {
                cats.push(c.symbol.clone());
            }
        }
    }
    let _ = writeln!(
        md,
        "| category | {} |\n| --- |{}",
        p.profiles
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        " ---: |".repeat(p.profiles.len())
    );
    for c in &cats {
        let vals: Vec<String> = p
            .profiles
            .iter()
            .map(|t| {
                t.categories
                    .iter()
                    .find(|x| &x.symbol == c)
                    .map_or("–".into(), |x| format!("{:.1}%", x.percent))
            })
            .collect();
        let _ = writeln!(md, "| {c} | {} |", vals.join(" | "));
    }
    md.push('\n');
    for tp in &p.profiles {
        let _ = writeln!(
            md,
            "Top symbols, {}: {}.\n",
            tp.name,
            tp.top
                .iter()
                .map(|s| format!("`{}` {:.1}%", s.symbol, s.percent))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
