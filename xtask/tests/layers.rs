//! The renderers import one another one way: no module under `tracer/src/render/` reaches
//! itself through the modules it imports (`super::…`, `crate::render::…`; the render root's
//! shared types and the test modules left out). A circle means two renderers each hold wording
//! the other needs: the wording belongs in a leaf (`render/fmt.rs`) both import. And the
//! views, which write the sentences, import no output.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use xtask::paths;

type Module = Vec<String>;

/// Every module under `dir` (the render root is `[]`) with its code before its tests, without
/// comments.
fn modules(dir: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![(dir.to_path_buf(), Vec::<String>::new())];
    while let Some((d, prefix)) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                let mut m = prefix.clone();
                m.push(name);
                todo.push((p, m));
            } else if p.extension().is_some_and(|x| x == "rs") && name != "tests" {
                let mut m = prefix.clone();
                if name != "mod" {
                    m.push(name);
                }
                let text = fs::read_to_string(&p).unwrap();
                // Comments name modules too ("the terminal text is in `super::terminal`").
                let code: String = text
                    .split("#[cfg(test)]")
                    .next()
                    .unwrap_or("")
                    .lines()
                    .map(|l| l.split("//").next().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n");
                out.insert(m, code);
            }
        }
    }
    out
}

/// The modules `code` (of module `at`) names: after each `super::` chain or `crate::render::`,
/// the longest run of names that are modules.
fn imports(at: &Module, code: &str, known: &BTreeSet<Module>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.contains("::"))
        .collect();
    for w in words {
        let parts: Vec<&str> = w.split("::").filter(|p| !p.is_empty()).collect();
        let (mut base, rest): (Module, &[&str]) = match parts.as_slice() {
            ["crate", "render", rest @ ..] => (Vec::new(), rest),
            ["super", ..] => {
                let ups = parts.iter().take_while(|p| **p == "super").count();
                if ups > at.len() {
                    continue;
                }
                (at[..at.len() - ups].to_vec(), &parts[ups..])
            }
            _ => continue,
        };
        for name in rest {
            let mut next = base.clone();
            next.push(name.to_string());
            if known.contains(&next) {
                base = next;
            } else {
                break;
            }
        }
        if !base.is_empty() && &base != at {
            out.insert(base);
        }
    }
    out
}

/// A circle of imports in `graph`, if there is one.
fn circle(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        m: &Module,
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        path: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.clone());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.clone());
        for n in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(n, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

fn graph_of(mods: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let known: BTreeSet<Module> = mods.keys().cloned().collect();
    mods.iter()
        .filter(|(m, _)| !m.is_empty())
        .map(|(m, code)| (m.clone(), imports(m, code, &known)))
        .collect()
}

#[test]
fn render_modules_import_one_way() {
    let mods = modules(&paths::workspace_root().join("tracer/src/render"));
    assert!(mods.len() > 20, "{} render modules found", mods.len());
    let graph = graph_of(&mods);
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    assert!(edges > 30, "{edges} imports found");
    if let Some(c) = circle(&graph) {
        let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
        panic!("an import circle in render/: {}", names.join(" -> "));
    }
}

/// The renderers that write sentences and fill the page model: what every output shows, in
/// one place. They import none of the outputs (`OUTPUTS`), which walk the analysis and call
/// them: a view that reached into an output would tie its wording to that format.
const VIEWS: &[&str] = &[
    "fmt",
    "verdict",
    "rootcause",
    "trips",
    "runlength",
    "entries",
    "probecost",
    "warnings",
    "digest",
    "discover",
    "summary",
    "page",
];

/// The renderers that write a format: terminal text, HTML and Markdown, tables, JSON, SVG,
/// flamegraphs, exports, and the directories they go in.
const OUTPUTS: &[&str] = &[
    "terminal",
    "index",
    "tables",
    "summary_json",
    "plots",
    "svgplot",
    "flamegraphs",
    "flamesvg",
    "histogram",
    "export",
    "dataset",
    "compare",
    "out",
    "xml",
];

#[test]
fn views_import_no_output() {
    let mods = modules(&paths::workspace_root().join("tracer/src/render"));
    let graph = graph_of(&mods);
    let top = |m: &Module| m.first().cloned().unwrap_or_default();
    // Every top-level renderer is one or the other.
    let unsorted: BTreeSet<String> = graph
        .keys()
        .map(top)
        .filter(|t| !VIEWS.contains(&t.as_str()) && !OUTPUTS.contains(&t.as_str()))
        .collect();
    assert!(
        unsorted.is_empty(),
        "neither a view nor an output: {unsorted:?}"
    );
    let mut wrong = Vec::new();
    for (m, deps) in &graph {
        if !VIEWS.contains(&top(m).as_str()) {
            continue;
        }
        for d in deps.iter().filter(|d| OUTPUTS.contains(&top(d).as_str())) {
            wrong.push(format!("{} -> {}", m.join("::"), d.join("::")));
        }
    }
    assert!(wrong.is_empty(), "views importing an output: {wrong:?}");
}

/// The shared wording (`fmt`: classes, slopes, growth, sizes, counts) is a leaf every output
/// and view can use: it imports no other renderer, so a phrase has one source.
#[test]
fn the_wording_module_is_a_leaf() {
    let mods = modules(&paths::workspace_root().join("tracer/src/render"));
    let graph = graph_of(&mods);
    let fmt: Module = vec!["fmt".to_string()];
    let deps = graph.get(&fmt).expect("render/fmt.rs exists");
    assert!(deps.is_empty(), "render::fmt imports {deps:?}");
    let users = graph.values().filter(|d| d.contains(&fmt)).count();
    assert!(users > 10, "only {users} renderers use render::fmt");
}

/// The scan sees an import through `super`, through `crate::render`, into a nested module, and
/// reports a circle when there is one.
#[test]
fn a_circle_of_imports_is_found() {
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    let mods: BTreeMap<Module, String> = [
        (m("a"), "use super::b::thing;".to_string()),
        (m("b"), "fn f() { crate::render::c::d::g() }".to_string()),
        (m("c"), String::new()),
        (m("c::d"), "use super::super::a;".to_string()),
    ]
    .into_iter()
    .collect();
    let graph = graph_of(&mods);
    assert_eq!(graph[&m("b")], BTreeSet::from([m("c::d")]));
    assert_eq!(
        circle(&graph),
        Some(vec![m("a"), m("b"), m("c::d"), m("a")])
    );
    let mut acyclic = mods.clone();
    acyclic.insert(m("c::d"), String::new());
    assert_eq!(circle(&graph_of(&acyclic)), None);
}

/// Recording imports no analysis module: what its extra runs need of the analysis they ask
/// through `record::advice::Advice`, which the sweep hands them. Test modules may use the
/// real analysis to drive the scheduler.
#[test]
fn recording_imports_no_analysis() {
    let mods = modules(&paths::workspace_root().join("tracer/src/record"));
    assert!(mods.len() > 10, "{} record modules found", mods.len());
    let importing: Vec<String> = mods
        .iter()
        .filter(|(_, code)| code.contains("crate::analysis") || code.contains("analysis::"))
        .map(|(m, _)| m.join("::"))
        .collect();
    assert!(
        importing.is_empty(),
        "record modules that import analysis: {importing:?}"
    );
}
