//! The index of an output directory, as `index.html` and `README.md`.
//!
//! `index.html` is read in a browser: a summary table first (one row per target and case:
//! class, growth, root cause, links), the scaling plots next, the findings in full as wrapped
//! text, then one section per target with its per-N tables as HTML and its flamegraphs
//! embedded (differentials first). `README.md` keeps the findings at the top (one verdict line
//! per target and case, its root cause under it), then links to every table, plot and
//! flamegraph by target.

use super::ReportError;
use super::out::OutDir;
pub(super) use super::page::TargetLinks;
pub use super::page::{FlameGroup, Item, Page, Section, SummaryRow, anchor};
use super::xml::escape;

const CSS: &str = "body{font-family:system-ui,sans-serif;font-size:15px;line-height:1.45;max-width:1240px;margin:1.5em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.15em;margin-top:1.6em}h4{margin:1.2em 0 .3em}\
code{background:#f4f4f4;padding:1px 4px}table{border-collapse:collapse;margin:.4em 0}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f2f2f2}\
table.summary td.class{min-width:11em;max-width:22em;font-weight:600}table.summary tr.grows td.class{color:#b00}\
table.num th{white-space:nowrap}table.num th,table.num td{padding:3px 6px}table.num td{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}.scroll{overflow-x:auto}\
img{max-width:100%;border:1px solid #ddd}.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:1em}\
.plots figure{margin:0}figcaption{font-size:.9em;color:#555}.links a{margin-right:.8em}\
ul.findings>li{margin:.5em 0}ul.details{color:#444;font-size:.93em}ul.facts{margin:.2em 0;padding-left:1.2em}\
.flame{margin:.5em 0 1em}.small{font-size:.9em;color:#555}";

fn link(text: &str, href: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape(href), escape(text))
}

/// Escaped lines, one per line of the cell.
fn lines(v: &[String]) -> String {
    v.iter().map(|l| escape(l)).collect::<Vec<_>>().join("<br>")
}

fn summary_table_html(s: &mut String, rows: &[&SummaryRow]) {
    s.push_str(
        "<table class=\"summary\">\n<tr><th>target</th><th>case</th><th>class</th><th>slope</th><th>growth of the time per call</th><th>root cause</th><th>plan</th><th>links</th></tr>\n",
    );
    for r in rows {
        s.push_str(&format!(
            "<tr{}><td>{}</td><td>{}</td><td class=\"class\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"links\">{}</td></tr>\n",
            if r.grows { " class=\"grows\"" } else { "" },
            link(&r.target, &format!("#{}", anchor(&r.target))),
            escape(&r.case),
            escape(&r.class),
            lines(&r.slope),
            lines(&r.growth),
            lines(&r.root_cause),
            lines(&r.plan),
            r.links
                .iter()
                .map(|(t, h)| link(t, h))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    s.push_str("</table>\n");
}

/// The summary: the findings the workloads exist for in a table, the incidental target/case
/// pairs after them in a collapsed section.
fn summary_html(s: &mut String, rows: &[SummaryRow]) {
    if rows.is_empty() {
        return;
    }
    let (lead, incidental): (Vec<&SummaryRow>, Vec<&SummaryRow>) =
        rows.iter().partition(|r| r.relevant);
    s.push_str("<h2 id=\"summary\">Summary</h2>\n");
    if !lead.is_empty() {
        summary_table_html(s, &lead);
    }
    if !incidental.is_empty() {
        let growing = incidental.iter().filter(|r| r.grows).count();
        s.push_str(&format!(
            "<details class=\"incidental\"><summary>Incidental: {} ({growing} growing): targets traced beside the one each workload exists for</summary>\n",
            super::fmt::count_of(incidental.len(), "more finding")
        ));
        summary_table_html(s, &incidental);
        s.push_str("</details>\n");
    }
}

fn plots_html(s: &mut String, sections: &[Section]) {
    let plots: Vec<(&str, &str)> = sections
        .iter()
        .filter_map(|sec| sec.plot.as_deref().map(|p| (sec.title.as_str(), p)))
        .collect();
    if plots.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"plots\">Scaling plots</h2>\n<div class=\"plots\">\n");
    for (title, plot) in plots {
        s.push_str(&format!(
            "<figure><a href=\"{0}\"><img src=\"{0}\" alt=\"scaling plot of {1}\"></a><figcaption>{2}</figcaption></figure>\n",
            escape(plot),
            escape(title),
            link(&format!("{title}: tables and flamegraphs"), &format!("#{}", anchor(title)))
        ));
    }
    s.push_str("</div>\n");
}

fn html(p: &Page) -> String {
    let mut s =
        String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str(&format!("<title>{}</title>\n", escape(&p.title)));
    s.push_str(&format!("<style>{CSS}</style>\n</head>\n<body>\n"));
    s.push_str(&format!(
        "<h1>{}</h1>\n<p class=\"small\">Data: <code>{}</code></p>\n",
        escape(&p.title),
        escape(&p.source)
    ));
    summary_html(&mut s, &p.summary);
    plots_html(&mut s, &p.sections);
    findings_html(&mut s, &p.findings);
    if !p.warnings.is_empty() {
        s.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &p.warnings {
            s.push_str(&format!("<li>{}</li>\n", escape(w)));
        }
        s.push_str("</ul>\n");
    }
    if !p.runs.is_empty() {
        s.push_str("<h2>Runs</h2>\n<table>\n<tr>");
        for h in &p.run_header {
            s.push_str(&format!("<th>{}</th>", escape(h)));
        }
        s.push_str("</tr>\n");
        for r in &p.runs {
            s.push_str("<tr>");
            for c in r {
                s.push_str(&format!("<td>{}</td>", escape(c)));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
    }
    for sec in &p.sections {
        section_html(&mut s, sec);
    }
    if !p.method.is_empty() {
        s.push_str("<h2>How to read this</h2>\n<ul>\n");
        for m in &p.method {
            s.push_str(&format!("<li>{}</li>\n", escape(m)));
        }
        s.push_str("</ul>\n");
    }
    if !p.other.is_empty() {
        s.push_str("<h2>Other files</h2>\n<ul>\n");
        for (t, href) in &p.other {
            s.push_str(&format!("<li>{}</li>\n", link(t, href)));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</body>\n</html>\n");
    s
}

/// The findings, each with its details, under their titles.
fn findings_html(s: &mut String, findings: &[(String, Vec<Item>)]) {
    if !findings.is_empty() {
        s.push_str("<h2 id=\"findings\">Findings</h2>\n");
        for (title, items) in findings {
            s.push_str(&format!(
                "<h3>{}</h3>\n<ul class=\"findings\">\n",
                escape(title)
            ));
            for i in items {
                s.push_str(&format!("<li>{}", escape(&i.line)));
                if !i.details.is_empty() {
                    s.push_str("\n<ul class=\"details\">\n");
                    for d in &i.details {
                        s.push_str(&format!("<li>{}</li>\n", escape(d)));
                    }
                    s.push_str("</ul>\n");
                }
                s.push_str("</li>\n");
            }
            s.push_str("</ul>\n");
        }
    }
}

/// One target's section: its links, tables and flamegraphs (or a line saying there is no
/// data).
fn section_html(s: &mut String, sec: &Section) {
    s.push_str(&format!(
        "<h2 id=\"{}\">{}</h2>\n",
        anchor(&sec.title),
        escape(&sec.title)
    ));
    if !sec.links.is_empty() {
        s.push_str("<p class=\"links\">Tables: ");
        for (t, href) in &sec.links {
            s.push_str(&link(t, href));
        }
        if let Some(plot) = &sec.plot {
            s.push_str(&link("plot", plot));
        }
        s.push_str("</p>\n");
    }
    if let Some(t) = &sec.tables_html {
        s.push_str(t);
    }
    for g in &sec.groups {
        s.push_str(&format!(
            "<h3>{}</h3>\n<p class=\"links\">",
            escape(&g.title)
        ));
        for (t, href) in &g.items {
            s.push_str(&link(t, href));
        }
        s.push_str("</p>\n");
        for href in &g.embed {
            let text = g
                .items
                .iter()
                .find(|(_, h)| h == href)
                .map_or("flamegraph", |(t, _)| t.as_str());
            s.push_str(&format!(
                "<div class=\"flame\"><a href=\"{0}\" title=\"open the interactive flamegraph\"><img src=\"{0}\" alt=\"flamegraph: {1}\" loading=\"lazy\"></a></div>\n",
                escape(href),
                escape(text)
            ));
        }
    }
    if sec.links.is_empty()
        && sec.plot.is_none()
        && sec.groups.is_empty()
        && sec.tables_html.is_none()
    {
        s.push_str("<p>No data for this target.</p>\n");
    }
}

fn md_link(text: &str, href: &str) -> String {
    let text = text.replace('[', "\\[").replace(']', "\\]");
    format!(
        "[{text}]({})",
        href.replace(' ', "%20")
            .replace('(', "%28")
            .replace(')', "%29")
    )
}

/// The summary table in Markdown: the leading rows, then a count of the incidental ones
/// (listed in the findings below).
fn summary_markdown(s: &mut String, rows: &[SummaryRow]) {
    let lead: Vec<&SummaryRow> = rows.iter().filter(|r| r.relevant).collect();
    if lead.is_empty() {
        return;
    }
    let cell = |v: &[String]| v.join("<br>").replace('|', "\\|");
    s.push_str("## Summary\n\n| target | case | class | slope | growth of the time per call | root cause | plan |\n|---|---|---|---|---|---|---|\n");
    for r in &lead {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.target.replace('|', "\\|"),
            r.case.replace('|', "\\|"),
            r.class.replace('|', "\\|"),
            cell(&r.slope),
            cell(&r.growth),
            cell(&r.root_cause),
            cell(&r.plan)
        ));
    }
    let incidental = rows.len() - lead.len();
    if incidental > 0 {
        s.push_str(&format!(
            "\n{} (targets traced beside the one each workload exists for) in the findings below.\n",
            super::fmt::count_of(incidental, "more incidental finding")
        ));
    }
    s.push('\n');
}

fn markdown(p: &Page) -> String {
    let mut s = format!("# {}\n\nData: `{}`\n\n", p.title, p.source);
    let list = |s: &mut String, title: &str, items: &[String]| {
        if items.is_empty() {
            return;
        }
        s.push_str(&format!("## {title}\n\n"));
        for i in items {
            s.push_str(&format!("- `{i}`\n"));
        }
        s.push('\n');
    };
    summary_markdown(&mut s, &p.summary);
    if !p.findings.is_empty() {
        s.push_str("## Findings\n\n");
        for (title, items) in &p.findings {
            s.push_str(&format!("### {title}\n\n"));
            for i in items {
                s.push_str(&format!("- `{}`\n", i.line));
                for d in &i.details {
                    s.push_str(&format!("  - `{d}`\n"));
                }
            }
            s.push('\n');
        }
    }
    list(&mut s, "Warnings", &p.warnings);
    if !p.runs.is_empty() {
        s.push_str(&format!(
            "## Runs\n\n| {} |\n|{}\n",
            p.run_header.join(" | "),
            " --- |".repeat(p.run_header.len())
        ));
        for r in &p.runs {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            s.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        s.push('\n');
    }
    for sec in &p.sections {
        s.push_str(&format!("## {}\n\n", sec.title));
        if !sec.links.is_empty() {
            let l: Vec<String> = sec.links.iter().map(|(t, h)| md_link(t, h)).collect();
            s.push_str(&format!("Tables: {}\n\n", l.join(" · ")));
        }
        if let Some(plot) = &sec.plot {
            s.push_str(&format!(
                "!{}\n\n",
                md_link(&format!("scaling plot of {}", sec.title), plot)
            ));
        }
        for g in &sec.groups {
            let l: Vec<String> = g.items.iter().map(|(t, h)| md_link(t, h)).collect();
            s.push_str(&format!("- {}: {}\n", g.title, l.join(" · ")));
        }
        if !sec.groups.is_empty() {
            s.push('\n');
        }
    }
    if !p.method.is_empty() {
        s.push_str("## How to read this\n\n");
        for m in &p.method {
            s.push_str(&format!("- {m}\n"));
        }
        s.push('\n');
    }
    if !p.other.is_empty() {
        s.push_str("## Other files\n\n");
        for (t, h) in &p.other {
            s.push_str(&format!("- {}\n", md_link(t, h)));
        }
    }
    s
}

/// Write `index.html` and `README.md`.
pub fn write(out: &mut OutDir, p: &Page) -> Result<(), ReportError> {
    out.write("index.html", html(p).as_bytes())?;
    out.write("README.md", markdown(p).as_bytes())
}
