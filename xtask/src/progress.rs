//! Progress of the xtask's long steps (VM sweeps, benchmark rounds): a bar with the elapsed
//! time and an estimate of the time left on a terminal, and on anything else (CI logs, a
//! pipe) one plain line per completed unit with the same figures, so a log shows how far a
//! step got and how long the rest should take.
//!
//! The estimate is linear in completed units: honest for rounds of equal work, rough for a
//! sweep whose workloads differ in cost (it is labelled "about").

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    what: String,
    total: u64,
    done: u64,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// `total` units of `what`; drawn as a bar when stderr is a terminal.
    pub fn new(what: &str, total: u64) -> Progress {
        Progress::new_in(what, total, None)
    }

    /// Whether bars can be drawn: plain lines where indicatif would draw nothing (and drop
    /// what is printed through it): not a terminal, or one it cannot drive (TERM=dumb).
    pub fn drawable() -> bool {
        std::io::stderr().is_terminal() && !ProgressDrawTarget::stderr().is_hidden()
    }

    /// The same, its bar one of several in `board` (kernels swept side by side): each
    /// keeps its line, redrawn in place.
    pub fn new_in(what: &str, total: u64, board: Option<&MultiProgress>) -> Progress {
        let bar = Progress::drawable().then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let b = match board {
                Some(m) => m.add(b),
                None => b,
            };
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:24}] {pos}/{len} {elapsed} elapsed, about {eta} left  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(what.to_string());
            b.enable_steady_tick(Duration::from_millis(500));
            b
        });
        Progress {
            what: what.to_string(),
            total,
            done: 0,
            started: Instant::now(),
            bar,
        }
    }

    /// What is running now (shown beside the bar; not logged, it changes too often).
    pub fn message(&self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(msg.to_string());
        }
    }

    /// A line above the bar (or just a line).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// One unit done: `label` says which.
    pub fn inc(&mut self, label: &str) {
        self.done = (self.done + 1).min(self.total);
        match &self.bar {
            Some(b) => {
                b.set_position(self.done);
                b.println(format!("{}: {label}", self.what));
            }
            None => eprintln!(
                "{}",
                plain_line(
                    &self.what,
                    label,
                    self.done,
                    self.total,
                    self.started.elapsed()
                )
            ),
        }
    }

    pub fn finish(self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The plain form of one completed unit, e.g.
/// `sweep on 5.10: waitpid done (2/5, 3m10s elapsed, about 4m45s left)`.
pub fn plain_line(what: &str, label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let left = match eta(done, total, elapsed) {
        Some(d) if done < total => format!(", about {} left", short(d)),
        _ => String::new(),
    };
    format!(
        "{what}: {label} ({done}/{total}, {} elapsed{left})",
        short(elapsed)
    )
}

/// Time left, linear in completed units; None before the first unit.
pub fn eta(done: u64, total: u64, elapsed: Duration) -> Option<Duration> {
    (done > 0).then(|| elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

/// `45s`, `3m10s`, `1h02m`.
pub fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_is_linear_in_completed_units() {
        assert_eq!(eta(0, 5, Duration::from_secs(10)), None);
        assert_eq!(
            eta(2, 5, Duration::from_secs(100)),
            Some(Duration::from_secs(150))
        );
        assert_eq!(eta(5, 5, Duration::from_secs(100)), Some(Duration::ZERO));
    }

    #[test]
    fn plain_lines_say_where_and_how_long() {
        assert_eq!(
            plain_line(
                "sweep on 5.10",
                "waitpid done",
                2,
                5,
                Duration::from_secs(190)
            ),
            "sweep on 5.10: waitpid done (2/5, 3m10s elapsed, about 4m45s left)"
        );
        // The last unit: no estimate.
        assert_eq!(
            plain_line("bench", "round 9", 9, 9, Duration::from_secs(3725)),
            "bench: round 9 (9/9, 1h02m elapsed)"
        );
        assert_eq!(short(Duration::from_secs(59)), "59s");
    }
}
