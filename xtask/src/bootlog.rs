//! How many boots each VM test script needed. A retried boot hides a fault (qemu's or ours);
//! counting them is how a retry stays rare enough to notice. The test helper appends one
//! line per script to the file named by [`BOOT_LOG_ENV`]; `cargo xtask test` sets it and
//! prints [`summary`] after the VM tests, passed or failed.

use std::io::Write;
use std::path::Path;

/// The environment variable naming the log file (unset: nothing is logged).
pub const BOOT_LOG_ENV: &str = "XTASK_BOOT_LOG";

/// One script's boots: its name, how long its guests ran, and for each boot that was
/// retried, why.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    /// Seconds its guests ran, retries included (qemu's start to its exit: no wait for a
    /// VM slot).
    pub secs: f64,
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
    let line = format!(
        "{}\t{:.1}\t{}\n",
        entry.name,
        entry.secs,
        reasons.join("\t")
    );
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
            let secs = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0.0);
            let retried = fields.filter(|f| !f.is_empty()).map(String::from).collect();
            Entry {
                name,
                secs,
                retried,
            }
        })
        .collect()
}

/// "VM boots: 14 scripts, 15 boots (1 retried), 1234 s of guests; longest: a 300 s, b
/// 200 s, c 100 s" and a line per retried boot.
pub fn summary(entries: &[Entry]) -> String {
    let boots: usize = entries.iter().map(|e| 1 + e.retried.len()).sum();
    let retried: usize = entries.iter().map(|e| e.retried.len()).sum();
    let mut by_time: Vec<&Entry> = entries.iter().collect();
    by_time.sort_by(|a, b| b.secs.total_cmp(&a.secs));
    let longest: Vec<String> = by_time
        .iter()
        .take(3)
        .map(|e| format!("{} {:.0} s", e.name, e.secs))
        .collect();
    let mut s = format!(
        "VM boots: {} script{}, {boots} boot{} ({retried} retried), {:.0} s of guests; longest: {}",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        if boots == 1 { "" } else { "s" },
        entries.iter().map(|e| e.secs).sum::<f64>(),
        longest.join(", ")
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
                secs: 12.5,
                retried: vec![],
            },
        );
        record_to(
            &path,
            &Entry {
                name: "b".into(),
                secs: 300.0,
                retried: vec!["stalled\tfor 60 s".into(), "Oops: int3".into()],
            },
        );
        let entries = read(&path);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].retried, ["stalled for 60 s", "Oops: int3"]);
        let s = summary(&entries);
        assert_eq!(entries[0].secs, 12.5);
        assert!(
            s.starts_with(
                "VM boots: 2 scripts, 4 boots (2 retried), 312 s of guests; longest: b 300 s, a 12 s"
            ),
            "{s}"
        );
        assert!(s.contains("\n  b: booted again after: Oops: int3"), "{s}");
        assert_eq!(read(&dir.join("absent")), []);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
