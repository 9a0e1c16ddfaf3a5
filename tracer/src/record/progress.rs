//! What the user sees while recording: a live status line on a terminal, plain lines
//! elsewhere.
use std::io::IsTerminal;
use std::time::Duration;

use super::RunSpec;
use crate::engine::Engine;
use crate::resolve::Resolved;

/// Status line shown while recording.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    pub(super) fn new(enabled: bool) -> Progress {
        // indicatif draws nothing, and drops what is printed through it, on a terminal it
        // cannot drive (TERM=dumb, as on a VM's serial console): plain lines there.
        if !enabled
            || !std::io::stderr().is_terminal()
            || indicatif::ProgressDrawTarget::stderr().is_hidden()
        {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    pub(super) fn set(&self, msg: String) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
        }
    }

    pub(super) fn println(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    /// A line where there is no status line to show it (a log, a serial console): the
    /// progress of a long sweep, one line per run of its command.
    pub(super) fn log(&self, msg: &str) {
        if self.bar.is_none() {
            eprintln!("{msg}");
        }
    }

    pub(super) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// "waitpid: waitpid-pid N=1000 [3/6]  do_wait 1234  dup_mmap 56"
pub(super) fn status_line(
    engine: &Engine,
    resolved: &[Resolved],
    spec: &RunSpec,
    label: &str,
    root: Option<u32>,
) -> String {
    let mut parts = Vec::new();
    if !label.is_empty() {
        parts.push(format!("{label}:"));
    }
    if let Some(p) = root.and_then(|pid| engine.current_phase(pid)) {
        let pos = spec.n_values.iter().position(|&n| n == p.n);
        let of = match pos {
            Some(i) => format!(" [{}/{}]", i + 1, spec.n_values.len()),
            None => String::new(),
        };
        parts.push(format!(
            "{} N={}{of}",
            workloads::cases::case_name(p.case),
            p.n
        ));
    }
    if let Ok(calls) = engine.calls_per_target() {
        for r in resolved.iter().filter(|r| r.active.is_some()) {
            parts.push(format!("{} {}", r.target.name, calls[r.index as usize]));
        }
    }
    parts.join("  ")
}
