//! The index of an output directory, as `index.html` and `README.md`: the findings at the top
//! (one verdict line per target and case, its root cause under it), then every table, plot and
//! flamegraph by target.

use super::ReportError;
use super::out::OutDir;
use super::xml::escape;

pub struct Section {
    pub title: String,
    pub plot: Option<String>,
    /// (text, path)
    pub links: Vec<(String, String)>,
    /// (group title, [(text, path)])
    pub groups: Vec<(String, Vec<(String, String)>)>,
}

/// One line of the findings with the lines that explain it (its root cause).
pub struct Item {
    pub line: String,
    pub details: Vec<String>,
}

pub struct Page {
    pub title: String,
    pub source: String,
    /// (group title, items): the findings, first on the page.
    pub findings: Vec<(String, Vec<Item>)>,
    pub warnings: Vec<String>,
    pub run_header: Vec<String>,
    pub runs: Vec<Vec<String>>,
    pub sections: Vec<Section>,
    /// Other files: (text, path)
    pub other: Vec<(String, String)>,
    /// "How to read" notes.
    pub method: Vec<String>,
}

/// `do_wait` -> `do_wait`, `a b` -> `a-b`: an HTML id / Markdown anchor.
fn anchor(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn html(p: &Page) -> String {
    let mut s =
        String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str(&format!("<title>{}</title>\n", escape(&p.title)));
    s.push_str(
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}\
code{background:#f4f4f4;padding:1px 4px}li{margin:.25em 0}li li{list-style:none;color:#444}table{border-collapse:collapse}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}img{max-width:100%;border:1px solid #ddd}\
.links a{margin-right:.8em}</style>\n</head>\n<body>\n",
    );
    s.push_str(&format!(
        "<h1>{}</h1>\n<p>Data: <code>{}</code></p>\n",
        escape(&p.title),
        escape(&p.source)
    ));
    let list = |s: &mut String, title: &str, items: &[String]| {
        if items.is_empty() {
            return;
        }
        s.push_str(&format!("<h2>{}</h2>\n<ul>\n", escape(title)));
        for i in items {
            s.push_str(&format!("<li><code>{}</code></li>\n", escape(i)));
        }
        s.push_str("</ul>\n");
    };
    if !p.findings.is_empty() {
        s.push_str("<h2>Findings</h2>\n");
        for (title, items) in &p.findings {
            s.push_str(&format!("<h3>{}</h3>\n<ul>\n", escape(title)));
            for i in items {
                s.push_str(&format!("<li><code>{}</code>", escape(&i.line)));
                if !i.details.is_empty() {
                    s.push_str("\n<ul>\n");
                    for d in &i.details {
                        s.push_str(&format!("<li><code>{}</code></li>\n", escape(d)));
                    }
                    s.push_str("</ul>\n");
                }
                s.push_str("</li>\n");
            }
            s.push_str("</ul>\n");
        }
    }
    list(&mut s, "Warnings", &p.warnings);
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
    if !p.sections.is_empty() {
        s.push_str("<h2>Targets</h2>\n<ul>\n");
        for sec in &p.sections {
            s.push_str(&format!(
                "<li><a href=\"#{}\">{}</a></li>\n",
                anchor(&sec.title),
                escape(&sec.title)
            ));
        }
        s.push_str("</ul>\n");
    }
    for sec in &p.sections {
        s.push_str(&format!(
            "<h2 id=\"{}\">{}</h2>\n",
            anchor(&sec.title),
            escape(&sec.title)
        ));
        if !sec.links.is_empty() {
            s.push_str("<p class=\"links\">Tables: ");
            for (t, href) in &sec.links {
                s.push_str(&format!("<a href=\"{}\">{}</a>", escape(href), escape(t)));
            }
            s.push_str("</p>\n");
        }
        if let Some(plot) = &sec.plot {
            s.push_str(&format!(
                "<p><a href=\"{0}\"><img src=\"{0}\" alt=\"scaling plot of {1}\"></a></p>\n",
                escape(plot),
                escape(&sec.title)
            ));
        }
        for (g, items) in &sec.groups {
            s.push_str(&format!("<h3>{}</h3>\n<p class=\"links\">", escape(g)));
            for (t, href) in items {
                s.push_str(&format!("<a href=\"{}\">{}</a>", escape(href), escape(t)));
            }
            s.push_str("</p>\n");
        }
        if sec.links.is_empty() && sec.plot.is_none() && sec.groups.is_empty() {
            s.push_str("<p>No data for this target.</p>\n");
        }
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
            s.push_str(&format!(
                "<li><a href=\"{}\">{}</a></li>\n",
                escape(href),
                escape(t)
            ));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</body>\n</html>\n");
    s
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
        for (g, items) in &sec.groups {
            let l: Vec<String> = items.iter().map(|(t, h)| md_link(t, h)).collect();
            s.push_str(&format!("- {g}: {}\n", l.join(" · ")));
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
