//! The page model: what `index.html` and `README.md` show (the summary table's rows, the
//! findings, the per-target sections), built by the views and written by [`super::index`]
//! (and the comparison's page). It imports no other renderer, so the sentence-writing views
//! can fill it without reaching into an output.

pub struct Section {
    pub title: String,
    pub plot: Option<String>,
    /// (text, path)
    pub links: Vec<(String, String)>,
    /// The per-N tables as an HTML fragment (already escaped), shown in `index.html` only.
    pub tables_html: Option<String>,
    pub groups: Vec<FlameGroup>,
}

/// Links the index shows for one target, gathered while its files are written.
#[derive(Default)]
pub(crate) struct TargetLinks {
    pub(crate) plot: Option<String>,
    pub(crate) tables: Vec<(String, String)>,
    /// The per-N tables as HTML, for the index.
    pub(crate) tables_html: Option<String>,
    pub(crate) flames: Vec<FlameGroup>,
    /// (run, case, kind, path) of the differential flamegraphs, for the summary's links.
    pub(crate) diffs: Vec<(String, String, crate::rundata::StackKind, String)>,
}

/// The flamegraphs of one (run, case, stack kind) of a target.
pub struct FlameGroup {
    pub title: String,
    /// (text, path), differentials first.
    pub items: Vec<(String, String)>,
    /// Paths of `items` that `index.html` embeds (the rest are links).
    pub embed: Vec<String>,
}

/// One row of the summary table: a target and case in short form.
pub struct SummaryRow {
    /// The section the row belongs to (its table and flamegraphs).
    pub target: String,
    pub case: String,
    pub class: String,
    /// One line per side (compare) or one line.
    pub growth: Vec<String>,
    pub root_cause: Vec<String>,
    /// (text, path or `#anchor`)
    pub links: Vec<(String, String)>,
    /// The log-log slope of the growth, one per side; empty when nothing grows.
    pub slope: Vec<String>,
    /// The attach plan in a few words, one per side.
    pub plan: Vec<String>,
    /// Highlights rows that grow.
    pub grows: bool,
    /// A finding the workload exists for (or the user's own command): leads the summary;
    /// the other target/case pairs are incidental and go in a collapsed section.
    pub relevant: bool,
}

/// One line of the findings with the lines that explain it (its root cause).
pub struct Item {
    pub line: String,
    pub details: Vec<String>,
}

pub struct Page {
    pub title: String,
    pub source: String,
    /// The summary table, first in `index.html`.
    pub summary: Vec<SummaryRow>,
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
pub fn anchor(s: &str) -> String {
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
