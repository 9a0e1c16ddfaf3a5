//! Turns the guest's raw serial console into clean text: strips the run's markers (and
//! the blank line vm-init prints before the exit marker), removes the tty's `\r` before
//! `\n`, and reports the events the runner acts on (command started, exit status, kernel
//! panic).
//!
//! Text is released as soon as it cannot be part of a marker, so a live echo keeps up
//! with the guest, including unterminated prompt lines.

use crate::protocol::{self, Marker};

/// Something the runner must react to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Started,
    Exited(i32),
    /// A line reporting a kernel panic (the runner waits briefly for qemu to exit).
    Panic(String),
    /// The soft-lockup watchdog's report of a CPU stuck in the kernel, with how long.
    Lockup {
        line: String,
        stuck_secs: u64,
    },
}

/// `watchdog: BUG: soft lockup - CPU#0 stuck for 52s! [tracer:20732]` -> 52.
fn soft_lockup_secs(line: &str) -> Option<u64> {
    let rest = line.split("soft lockup - CPU#").nth(1)?;
    let secs = rest.split("stuck for ").nth(1)?;
    secs.split('s').next()?.trim().parse().ok()
}

/// Text released by the filter, split by when it appeared: before the command started
/// (kernel boot messages) or while it ran (its output, plus any kernel messages printed
/// meanwhile). The runner sends the first to stderr and the second to stdout, so the
/// runner's stdout is the command's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    pub boot: String,
    pub command: String,
}

impl Shown {
    pub fn is_empty(&self) -> bool {
        self.boot.is_empty() && self.command.is_empty()
    }
}

/// Streaming console filter. Feed it raw bytes with [`ConsoleFilter::push`]; it returns
/// the text to show.
#[derive(Debug)]
pub struct ConsoleFilter {
    nonce: String,
    /// The current, unterminated line.
    line: Vec<u8>,
    /// How many bytes of `line` have been released already.
    released: usize,
    /// A blank line held back: it may be vm-init's separator before the exit marker.
    blank_pending: bool,
    text: String,
    command_output: Option<String>,
    command_done: bool,
    events: Vec<Event>,
}

impl ConsoleFilter {
    pub fn new(nonce: &str) -> Self {
        ConsoleFilter {
            nonce: nonce.to_string(),
            line: Vec::new(),
            released: 0,
            blank_pending: false,
            text: String::new(),
            command_output: None,
            command_done: false,
            events: Vec::new(),
        }
    }

    /// Consumes raw console bytes; returns the text that may be shown now.
    pub fn push(&mut self, bytes: &[u8]) -> Shown {
        let mut out = Shown::default();
        for &b in bytes {
            if b == b'\n' {
                self.end_line(&mut out);
            } else {
                self.line.push(b);
            }
        }
        self.release_partial(&mut out);
        out
    }

    /// Flushes whatever is held back (call at end of stream).
    pub fn finish(&mut self) -> Shown {
        let mut out = Shown::default();
        if self.blank_pending {
            self.blank_pending = false;
            self.emit(&mut out, "\n");
        }
        if !self.line.is_empty() {
            // Terminate an unfinished last line so what follows starts on its own line.
            let rest = String::from_utf8_lossy(&self.line[self.released..]).into_owned();
            self.emit(&mut out, &format!("{rest}\n"));
        }
        self.line.clear();
        self.released = 0;
        out
    }

    /// Events seen since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Everything shown so far: the console minus markers.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// What was shown between the start and exit markers: the command's own output (plus
    /// any kernel messages printed meanwhile). `None` if the command never started.
    pub fn command_output(&self) -> Option<&str> {
        self.command_output.as_deref()
    }

    fn emit(&mut self, out: &mut Shown, s: &str) {
        // After the exit marker only shutdown noise follows ("reboot: Power down"): it
        // stays in the record but is not shown.
        if self.command_output.is_none() {
            out.boot.push_str(s);
        } else if !self.command_done {
            out.command.push_str(s);
        }
        self.text.push_str(s);
        if let Some(c) = &mut self.command_output
            && !self.command_done
        {
            c.push_str(s);
        }
    }

    fn end_line(&mut self, out: &mut Shown) {
        let mut raw = std::mem::take(&mut self.line);
        if raw.last() == Some(&b'\r') {
            raw.pop();
        }
        let released = std::mem::replace(&mut self.released, 0);
        let line = String::from_utf8_lossy(&raw).into_owned();
        if line.contains("Kernel panic") {
            self.events.push(Event::Panic(line.trim().to_string()));
        }
        if let Some(stuck_secs) = soft_lockup_secs(&line) {
            self.events.push(Event::Lockup {
                line: line.trim().to_string(),
                stuck_secs,
            });
        }
        if let Some((marker, rest)) = protocol::find_marker(&line, &self.nonce) {
            // The separator blank line belongs to the exit marker; a start marker follows
            // kernel output, where a held blank line is real.
            if self.blank_pending {
                self.blank_pending = false;
                if marker == Marker::Start {
                    self.emit(out, "\n");
                }
            }
            let rest_new = rest.get(released.min(rest.len())..).unwrap_or("");
            if !rest.trim().is_empty() {
                let s = format!("{rest_new}\n");
                self.emit(out, &s);
            } else if released > 0 {
                self.emit(out, "\n");
            }
            match marker {
                Marker::Start => {
                    self.command_output = Some(String::new());
                    self.events.push(Event::Started);
                }
                Marker::Exit(status) => {
                    self.command_done = true;
                    self.events.push(Event::Exited(status));
                }
            }
            return;
        }
        if raw.is_empty() && released == 0 {
            if self.blank_pending {
                self.emit(out, "\n");
            }
            self.blank_pending = true;
            return;
        }
        if self.blank_pending {
            self.blank_pending = false;
            self.emit(out, "\n");
        }
        let rest = String::from_utf8_lossy(&raw[released.min(raw.len())..]).into_owned();
        self.emit(out, &rest);
        self.emit(out, "\n");
    }

    /// Releases the unterminated line up to the first byte that could start a marker.
    fn release_partial(&mut self, out: &mut Shown) {
        let pending = &self.line[self.released..];
        if pending.is_empty() {
            return;
        }
        // Hold from the first '@' that could begin a marker (markers start with "@@"),
        // and a trailing '\r' (it may be half of the tty's "\r\n").
        let held_from = (0..pending.len()).find(|&i| {
            pending[i] == b'@'
                && protocol::could_be_marker_prefix(&String::from_utf8_lossy(&pending[i..]))
        });
        let upto = match held_from {
            Some(i) => i,
            None if pending.last() == Some(&b'\r') => pending.len() - 1,
            None => pending.len(),
        };
        // Never split a UTF-8 sequence: a character whose last bytes are still to come
        // (the serial reads cut anywhere) waits for them with the rest of the line.
        let upto = upto - incomplete_utf8_tail(&pending[..upto]);
        if upto == 0 {
            return;
        }
        let s = String::from_utf8_lossy(&pending[..upto]).into_owned();
        if self.blank_pending {
            self.blank_pending = false;
            self.emit(out, "\n");
        }
        self.released += upto;
        self.emit(out, &s);
    }
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character whose remaining
/// bytes have not arrived yet (0 to 3). Anything that can no longer become valid counts as
/// complete, so it is released (as U+FFFD) instead of being held forever.
fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    // The lead byte of a character is at most 3 bytes before the end of its prefix.
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: its lead byte is further back
        }
        let len = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0, // ASCII or a byte that never starts a character
        };
        return if back < len { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: &str = "n0nce";

    /// Everything shown, boot text and command text in order.
    fn feed(chunks: &[&[u8]]) -> (String, ConsoleFilter) {
        let (boot, command, f) = feed_split(chunks);
        (boot + &command, f)
    }

    fn feed_split(chunks: &[&[u8]]) -> (String, String, ConsoleFilter) {
        let mut f = ConsoleFilter::new(N);
        let (mut boot, mut command) = (String::new(), String::new());
        let mut parts: Vec<Shown> = chunks.iter().map(|c| f.push(c)).collect();
        parts.push(f.finish());
        for c in parts {
            // Boot text can only come before command text.
            assert!(c.boot.is_empty() || command.is_empty());
            boot.push_str(&c.boot);
            command.push_str(&c.command);
        }
        (boot, command, f)
    }

    fn guest_run(output: &str, status: i32) -> Vec<u8> {
        format!(
            "[    0.1] boot\r\n{}\r\n{}\n{}\r\n",
            protocol::start_marker(N),
            output,
            protocol::exit_marker(N, status)
        )
        .into_bytes()
    }

    #[test]
    fn strips_markers_and_reports_status() {
        let (shown, mut f) = feed(&[&guest_run("6.1.0-40-cloud-amd64\r\n", 0)]);
        assert_eq!(shown, "[    0.1] boot\n6.1.0-40-cloud-amd64\n");
        assert_eq!(f.command_output(), Some("6.1.0-40-cloud-amd64\n"));
        assert_eq!(f.take_events(), vec![Event::Started, Event::Exited(0)]);
        assert_eq!(f.text(), shown);
    }

    #[test]
    fn boot_text_and_command_text_are_told_apart() {
        let raw = guest_run("6.1.0\r\n", 0);
        let (boot, command, _) = feed_split(&[&raw]);
        assert_eq!(boot, "[    0.1] boot\n");
        assert_eq!(command, "6.1.0\n");
        let chunks: Vec<&[u8]> = raw.chunks(3).collect();
        let (boot3, command3, _) = feed_split(&chunks);
        assert_eq!((boot3, command3), (boot, command));
    }

    #[test]
    fn unterminated_last_line_and_real_blank_lines_survive() {
        let (shown, f) = feed(&[&guest_run("a\r\n\r\nb", 3)]);
        assert_eq!(shown, "[    0.1] boot\na\n\nb\n");
        assert_eq!(f.command_output(), Some("a\n\nb\n"));
        let (shown, _) = feed(&[&guest_run("a\r\n\r\n", 3)]);
        assert_eq!(shown, "[    0.1] boot\na\n\n");
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_result() {
        let raw = guest_run("x@y\r\n@@not a marker\r\nprompt$ ", 1);
        let whole = feed(&[&raw]).0;
        let chunks: Vec<&[u8]> = raw.chunks(1).collect();
        let (bytewise, mut f) = feed(&chunks);
        assert_eq!(whole, bytewise);
        assert_eq!(whole, "[    0.1] boot\nx@y\n@@not a marker\nprompt$ \n");
        assert_eq!(f.take_events(), vec![Event::Started, Event::Exited(1)]);
    }

    #[test]
    fn partial_lines_are_released_early_but_markers_are_held() {
        let mut f = ConsoleFilter::new(N);
        f.push(format!("{}\r\n", protocol::start_marker(N)).as_bytes());
        assert_eq!(f.take_events(), vec![Event::Started]);
        assert_eq!(f.push(b"prompt$ ").command, "prompt$ ");
        assert!(f.push(b"@@KPT-VM").is_empty());
        let rest = format!("-EXIT {N} status=0\r\n");
        assert_eq!(f.push(rest.as_bytes()).command, "\n");
        assert_eq!(f.take_events(), vec![Event::Exited(0)]);
    }

    #[test]
    fn shutdown_noise_after_exit_is_recorded_not_shown() {
        let mut raw = guest_run("ok\r\n", 0);
        raw.extend_from_slice(b"[    4.4] reboot: Power down");
        let (shown, f) = feed(&[&raw]);
        assert_eq!(shown, "[    0.1] boot\nok\n");
        assert!(
            f.text().ends_with("ok\n[    4.4] reboot: Power down\n"),
            "{}",
            f.text()
        );
        assert_eq!(f.command_output(), Some("ok\n"));
    }

    #[test]
    fn forged_marker_with_wrong_nonce_is_output() {
        let fake = protocol::exit_marker("guess", 0);
        let (shown, mut f) = feed(&[format!("{fake}\r\n").as_bytes()]);
        assert_eq!(shown, format!("{fake}\n"));
        assert!(f.take_events().is_empty());
    }

    #[test]
    fn soft_lockups_are_reported_with_how_long() {
        let (_, mut f) = feed(&[
            b"[  524.5] watchdog: BUG: soft lockup - CPU#0 stuck for 52s! [tracer:20732]\r\n",
        ]);
        assert_eq!(
            f.take_events(),
            vec![Event::Lockup {
                line: "[  524.5] watchdog: BUG: soft lockup - CPU#0 stuck for 52s! [tracer:20732]"
                    .into(),
                stuck_secs: 52
            }]
        );
        assert_eq!(
            soft_lockup_secs("rcu: INFO: rcu_sched self-detected stall"),
            None
        );
    }

    /// A progress line with 2-, 3- and 4-byte characters, split into two reads at every
    /// byte: no character may come out as two replacement characters.
    #[test]
    fn a_character_split_across_two_reads_comes_through_whole() {
        let line = "N=1000 \u{2588}\u{2588}26% (6 runs) caf\u{e9} \u{1d11e}";
        let raw = guest_run(&format!("{line}\r\n{line}"), 0);
        let expected = format!("[    0.1] boot\n{line}\n{line}\n");
        for cut in 0..=raw.len() {
            let (shown, _) = feed(&[&raw[..cut], &raw[cut..]]);
            assert_eq!(shown, expected, "split at byte {cut}");
        }
        // Byte by byte, too: every read ends inside a character.
        let chunks: Vec<&[u8]> = raw.chunks(1).collect();
        assert_eq!(feed(&chunks).0, expected);
    }

    /// An invalid sequence is still shown (as U+FFFD) once it cannot become valid, and a
    /// truncated character at the very end of the stream too.
    #[test]
    fn invalid_bytes_are_released_as_replacement_characters() {
        let mut f = ConsoleFilter::new(N);
        f.push(format!("{}\r\n", protocol::start_marker(N)).as_bytes());
        // A lead byte of a 3-byte character is held back...
        assert_eq!(f.push(b"a\xe2\x96").command, "a");
        // ...and released as one replacement character when ASCII follows it.
        assert_eq!(f.push(b"b").command, "\u{fffd}b");
        assert_eq!(f.push(b"\xf0\x9d").command, "");
        assert_eq!(f.finish().command, "\u{fffd}\n");
    }

    #[test]
    fn panic_is_reported() {
        let (_, mut f) = feed(&[b"[   3.2] Kernel panic - not syncing: sysrq triggered crash\r\n"]);
        assert_eq!(
            f.take_events(),
            vec![Event::Panic(
                "[   3.2] Kernel panic - not syncing: sysrq triggered crash".into()
            )]
        );
    }
}
