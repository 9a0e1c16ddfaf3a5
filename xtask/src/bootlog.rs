//! How many boots each VM test script needed. A retried boot hides a fault (qemu's or ours);
//! counting them is how a retry stays rare enough to notice. The test helper appends one
//! line per script to the file named by [`BOOT_LOG_ENV`]; `cargo xtask test` sets it and
//! prints [`summary`] after the VM tests, passed or failed.

use std::io::Write;
use std::path::Path;

/// The environment variable naming the log file (unset: nothing is logged).
pub const BOOT_LOG_ENV: &str = "XTASK_BOOT_LOG";

/// One script's boots: its name, and for each boot that was retried, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// The reason each failed boot was retried, in order (empty: it ran once).
    pub retried: Vec<String>,
}

/// Append `entry` to the log named by [`BOOT_LOG_ENV`], if any. One `write` per line, so
/// lines from concurrent tests do not interleave.
pub fn record(entry: &Entry) {
    if let Some(path) = std::env::var_os(BOOT_LOG_ENV) {
        record_to(Path::new(&path), entry);
    }
}

/// Append `entry` to the log at `path`.
pub fn record_to(path: &Path, entry: &Entry) {
    let reasons: Vec<String> = entry
        .retried
        .iter()
        .map(|r| r.replace(['\t', '\n'], " "))
        .collect();
    let line = format!("{}\t{}\n", entry.name, reasons.join("\t"));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The entries in a log file (missing file: none).
pub fn read(path: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut fields = l.split('\t');
            let name = fields.next().unwrap_or_default().to_string();
            let retried = fields.filter(|f| !f.is_empty()).map(String::from).collect();
            Entry { name, retried }
        })
        .collect()
}

/// "VM boots: 14 scripts, 15 boots (1 retried)" and a line per retried boot.
pub fn summary(entries: &[Entry]) -> String {
    let boots: usize = entries.iter().map(|e| 1 + e.retried.len()).sum();
    let retried: usize = entries.iter().map(|e| e.retried.len()).sum();
    let mut s = format!(
        "VM boots: {} script{}, {boots} boot{} ({retried} retried)",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        if boots == 1 { "" } else { "s" },
    );
    for e in entries {
        for r in &e.retried {
            s.push_str(&format!("\n  {}: booted again after: {r}", e.name));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_sum_up() {
        let dir = std::env::temp_dir().join(format!("bootlog-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("boots.log");
        record_to(
            &path,
            &Entry {
                name: "a".into(),
                retried: vec![],
            },
        );
        record_to(
            &path,
            &Entry {
                name: "b".into(),
                retried: vec!["stalled\tfor 60 s".into(), "Oops: int3".into()],
            },
        );
        let entries = read(&path);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].retried, ["stalled for 60 s", "Oops: int3"]);
        let s = summary(&entries);
        assert!(
            s.starts_with("VM boots: 2 scripts, 4 boots (2 retried)"),
            "{s}"
        );
        assert!(s.contains("\n  b: booted again after: Oops: int3"), "{s}");
        assert_eq!(read(&dir.join("absent")), []);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
