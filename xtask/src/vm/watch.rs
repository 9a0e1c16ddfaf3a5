//! Watching a running VM: the console reader, what the console has told the runner, and
//! the loop that decides when the run is over (qemu exited, a hang after a panic or after
//! the exit marker, a guest whose heartbeat stopped, the timeout, or an interrupt). The
//! timeout and an interrupt first ask the guest to stop the command and send its /out files;
//! qemu is killed only when that cannot work or takes too long.

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{ChildStdin, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::LineSink;
use super::qemu::QemuGuard;
use crate::console::{ConsoleFilter, Event};

/// How many interrupts arrived.
static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTS.fetch_add(1, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP end a running VM cleanly ([`super::VmStatus::Interrupted`])
/// instead of killing the process: the first one has the guest stop the command and send
/// what it finished, a second one kills the VM at once. For command-line tools; tests need
/// not call it.
pub fn install_interrupt_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// True once an interrupt arrived (after [`install_interrupt_handler`]).
pub fn interrupted() -> bool {
    interrupts() > 0
}

fn interrupts() -> usize {
    INTERRUPTS.load(Ordering::SeqCst)
}

/// What the console has told the runner so far.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub(super) exit_status: Option<i32>,
    exit_at: Option<Instant>,
    pub(super) panic: Option<String>,
    panic_at: Option<Instant>,
    pub(super) boot_time: Option<Duration>,
    /// The latest soft-lockup report and how long its CPU had been stuck.
    lockup: Option<(String, u64)>,
}

impl Seen {
    pub(super) fn apply(&mut self, ev: Event, started: Instant) {
        match ev {
            Event::Started => self.boot_time = Some(started.elapsed()),
            Event::Exited(s) => {
                self.exit_status = Some(s);
                self.exit_at = Some(Instant::now());
            }
            // The first panic line is the one that names the cause.
            Event::Panic(m) if self.panic.is_none() => {
                self.panic = Some(m);
                self.panic_at = Some(Instant::now());
            }
            Event::Panic(_) => {}
            Event::Lockup { line, stuck_secs } => self.lockup = Some((line, stuck_secs)),
        }
    }
}

/// The guest's heartbeat as the host sees it: the heartbeat file's length and when it last
/// grew. Silence counts only once a first beat came (before vm-init starts there is none,
/// and a kernel without the port never beats: the overall timeout covers both).
#[derive(Debug, Default)]
pub(super) struct Heartbeat {
    len: u64,
    grew_at: Option<Instant>,
}

impl Heartbeat {
    pub(super) fn observe(&mut self, len: u64, now: Instant) {
        if len > self.len {
            self.len = len;
            self.grew_at = Some(now);
        }
    }
    /// How long the heartbeat has been silent, once it has started.
    pub(super) fn silent_for(&self, now: Instant) -> Option<Duration> {
        self.grew_at.map(|t| now.saturating_duration_since(t))
    }
}

/// How the wait for qemu ended.
pub(super) struct Ending {
    /// qemu's own exit status; `None` if it could not be reaped.
    pub(super) qemu_status: Option<ExitStatus>,
    pub(super) timed_out: bool,
    /// The guest stopped running: (time into the run, heartbeat silent for); qemu was killed.
    pub(super) stalled: Option<(Duration, Duration)>,
    /// A CPU stayed stuck in the guest kernel: (time into the run, the watchdog's line).
    pub(super) locked_up: Option<(Duration, String)>,
    pub(super) interrupted: bool,
    /// A run cut short (`timed_out` or `interrupted`) whose guest could not send its files
    /// back: why, when the runner knows.
    pub(super) flush_lost: Option<String>,
}

/// When the runner gives up on a guest.
pub(super) struct Limits<'a> {
    /// The whole run.
    pub(super) timeout: Duration,
    /// The heartbeat file (disk transport) and how long it may stay silent.
    pub(super) heartbeat: Option<(&'a Path, Duration)>,
    /// From the stop request to the end of sending /out.
    pub(super) flush_timeout: Duration,
}

/// How the runner cuts a run short: qemu's stdin (the guest console's input) and the
/// request to write there ([`crate::protocol::stop_request`]).
pub(super) struct StopLine {
    pub(super) input: ChildStdin,
    pub(super) request: String,
}

/// Asks the guest to stop the command and send /out; `Err` says why that cannot work.
fn request_stop(stop: &mut Option<StopLine>, seen: &Seen) -> Result<(), String> {
    if seen.boot_time.is_none() {
        return Err("the command had not started".into());
    }
    let Some(line) = stop.as_mut() else {
        return Err("the guest's console input is not connected".into());
    };
    line.input
        .write_all(format!("{}\n", line.request).as_bytes())
        .and_then(|()| line.input.flush())
        .map_err(|e| format!("the stop request could not be sent to qemu: {e}"))
}

/// Applies the console's events to `seen` until qemu exits or has to be killed, and
/// kills it then. The timeout and the first interrupt first ask the guest to stop the
/// command and send /out (through `stop`); qemu is then killed only when the guest has not
/// finished within `limits.flush_timeout`, stops running, or a second interrupt comes.
pub(super) fn wait(
    guard: &mut QemuGuard,
    rx: &mpsc::Receiver<Event>,
    seen: &mut Seen,
    started: Instant,
    limits: &Limits,
    mut stop: Option<StopLine>,
) -> Ending {
    let mut w = Watch {
        started,
        ending: Ending {
            qemu_status: None,
            timed_out: false,
            stalled: None,
            locked_up: None,
            interrupted: false,
            flush_lost: None,
        },
        beat: Heartbeat::default(),
        beat_checked: started,
        flushing: None,
    };
    w.ending.qemu_status = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(ev) => {
                seen.apply(ev, started);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The console reader is done (qemu closed its stdout): just poll.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(20))
            }
        }
        if let Ok(Some(st)) = guard.child().try_wait() {
            guard.0 = None; // reaped
            break Some(st);
        }
        let now = Instant::now();
        if w.stopping_ends(now, seen, limits, &mut stop)
            || w.heartbeat_lost(now, seen, limits)
            || w.locked_up(now, seen)
            // panic=-1 reboots at once and -no-reboot turns that into an exit; this only
            // covers a kernel that hangs after the panic message.
            || seen.panic_at.is_some_and(|t| now - t > Duration::from_secs(10))
            // The marker comes after the files were sent; power-off should follow at once.
            || seen.exit_at.is_some_and(|t| now - t > Duration::from_secs(15))
        {
            break guard.kill_and_reap();
        }
    };
    w.ending
}

/// What watching a guest has come to so far.
struct Watch {
    started: Instant,
    /// How it ended, filled in as the reasons arise.
    ending: Ending,
    beat: Heartbeat,
    beat_checked: Instant,
    /// Once the stop request went out: when, and how many interrupts had come by then.
    flushing: Option<(Instant, usize)>,
}

impl Watch {
    /// Past the timeout, or interrupted: asks the guest to stop its command and send its
    /// files; while it does, gives up on a second interrupt or past the flush timeout.
    /// Whether qemu must be killed now.
    fn stopping_ends(
        &mut self,
        now: Instant,
        seen: &Seen,
        limits: &Limits,
        stop: &mut Option<StopLine>,
    ) -> bool {
        if let Some((since, interrupts_then)) = self.flushing {
            if interrupts() > interrupts_then {
                self.ending.flush_lost =
                    Some("interrupted again, so qemu was killed at once".into());
                return true;
            }
            if seen.exit_at.is_none() && now - since > limits.flush_timeout {
                self.ending.flush_lost = Some(format!(
                    "the guest had not sent them {} s after the stop request",
                    limits.flush_timeout.as_secs()
                ));
                return true;
            }
            return false;
        }
        // (Past the exit marker the guest only powers off: the timeout waits for that.)
        let deadline = self.started + limits.timeout;
        if !(interrupted() || (now >= deadline && seen.exit_at.is_none())) {
            return false;
        }
        let cause = if interrupted() {
            self.ending.interrupted = true;
            "interrupted".to_string()
        } else {
            self.ending.timed_out = true;
            format!(
                "the run reached its timeout ({} s)",
                limits.timeout.as_secs()
            )
        };
        if seen.exit_at.is_some() {
            // The files were sent already.
            return true;
        }
        match request_stop(stop, seen) {
            Ok(()) => {
                eprintln!(
                    "xtask vm: {cause}: asking the guest to stop the command and send its /out \
                     files (up to {} s; interrupt again to kill the VM at once)",
                    limits.flush_timeout.as_secs()
                );
                self.flushing = Some((now, interrupts()));
                false
            }
            Err(why) => {
                self.ending.flush_lost = Some(why);
                true
            }
        }
    }

    /// Once a second, before the exit marker (after it the guest is only powering off):
    /// whether the heartbeat file stayed silent too long (the guest stopped running).
    fn heartbeat_lost(&mut self, now: Instant, seen: &Seen, limits: &Limits) -> bool {
        let Some((file, silence)) = limits.heartbeat else {
            return false;
        };
        if seen.exit_at.is_some() || now - self.beat_checked < Duration::from_secs(1) {
            return false;
        }
        self.beat_checked = now;
        self.beat
            .observe(fs::metadata(file).map_or(0, |m| m.len()), now);
        let Some(s) = self.beat.silent_for(now).filter(|s| *s > silence) else {
            return false;
        };
        if self.flushing.is_some() {
            self.ending.flush_lost = Some(format!(
                "the guest stopped running while stopping the command (no heartbeat for {} s)",
                s.as_secs()
            ));
        } else {
            self.ending.stalled = Some((now - self.started, s));
        }
        true
    }

    /// A CPU stuck in the kernel this long does not come back (TCG guests have stayed
    /// stuck for the whole timeout, other CPUs still beating): whether to end the run now.
    fn locked_up(&mut self, now: Instant, seen: &Seen) -> bool {
        let Some((line, secs)) = &seen.lockup else {
            return false;
        };
        if *secs < LOCKUP_GIVE_UP_SECS {
            return false;
        }
        if self.flushing.is_some() {
            self.ending.flush_lost = Some(format!("a guest CPU locked up: {line}"));
        } else {
            self.ending.locked_up = Some((now - self.started, line.clone()));
        }
        true
    }
}

/// A soft lockup reported this long ends the run ([`super::VmStatus::LockedUp`]).
const LOCKUP_GIVE_UP_SECS: u64 = 75;

/// Reads qemu's stdout (the guest console) until EOF: logs it raw, echoes the filtered
/// text, forwards events. Returns (console text, command output).
pub(super) fn pump_console(
    mut stdout: impl Read,
    nonce: &str,
    echo: bool,
    on_line: Option<LineSink>,
    log: &Path,
    tx: mpsc::Sender<Event>,
) -> (String, Option<String>) {
    let mut filter = ConsoleFilter::new(nonce);
    let mut log = fs::File::create(log).ok();
    let mut buf = [0u8; 8192];
    let mut echo = echo;
    let mut partial = String::new();
    let mut show = |s: &crate::console::Shown| {
        if echo && !s.is_empty() {
            // print!/eprint! (not raw handles) so that test harnesses capture them. They
            // panic when the stream is gone (`| head`); then stop echoing but keep
            // reading, or qemu would block on a full console pipe.
            let shown = std::panic::catch_unwind(|| {
                if !s.boot.is_empty() {
                    eprint!("{}", s.boot);
                }
                if !s.command.is_empty() {
                    print!("{}", s.command);
                    let _ = std::io::stdout().flush();
                }
            });
            if shown.is_err() {
                echo = false;
            }
        }
        // After the echo, so what the sink prints follows the completed line.
        if let Some(sink) = &on_line {
            partial.push_str(&s.command);
            while let Some(i) = partial.find('\n') {
                (sink.0)(partial[..i].trim_end_matches('\r'));
                partial.drain(..=i);
            }
        }
    };
    loop {
        let n = match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if let Some(l) = &mut log {
            let _ = l.write_all(&buf[..n]);
        }
        let s = filter.push(&buf[..n]);
        show(&s);
        for ev in filter.take_events() {
            let _ = tx.send(ev);
        }
    }
    let s = filter.finish();
    show(&s);
    for ev in filter.take_events() {
        let _ = tx.send(ev);
    }
    (
        filter.text().to_string(),
        filter.command_output().map(str::to_string),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A console that hands out its bytes in the given reads.
    struct Reads(std::collections::VecDeque<Vec<u8>>);

    impl Read for Reads {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(chunk) = self.0.pop_front() else {
                return Ok(0);
            };
            assert!(chunk.len() <= buf.len());
            buf[..chunk.len()].copy_from_slice(&chunk);
            Ok(chunk.len())
        }
    }

    /// What `on_line` receives when the console arrives in two reads split at `cut`.
    fn relayed_lines(raw: &[u8], cut: usize, nonce: &str) -> (Vec<String>, Option<String>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let on_line = LineSink(Arc::new(move |l: &str| {
            sink.lock().unwrap().push(l.to_string())
        }));
        let dir = tempfile::tempdir().unwrap();
        let (tx, _rx) = mpsc::channel();
        // (An empty read would be the end of the console.)
        let reads = Reads(
            [&raw[..cut], &raw[cut..]]
                .into_iter()
                .filter(|c| !c.is_empty())
                .map(<[u8]>::to_vec)
                .collect(),
        );
        let (_, output) = pump_console(
            reads,
            nonce,
            false,
            Some(on_line),
            &dir.path().join("console.log"),
            tx,
        );
        let got = lines.lock().unwrap().clone();
        (got, output)
    }

    /// The progress relay never splits a character: a 2-, 3- or 4-byte character cut in
    /// two by the serial reads reaches `on_line` whole, at every possible cut.
    #[test]
    fn the_line_relay_keeps_characters_split_across_reads_whole() {
        let nonce = "n0nce";
        let line = "N=1000 \u{2588}\u{2588}26% (6 runs) caf\u{e9} \u{1d11e}";
        let raw = format!(
            "{}\r\n{line}\r\n{line}\r\n\n{}\r\n",
            crate::protocol::start_marker(nonce),
            crate::protocol::exit_marker(nonce, 0)
        )
        .into_bytes();
        for cut in 0..=raw.len() {
            let (lines, output) = relayed_lines(&raw, cut, nonce);
            assert_eq!(lines, [line, line], "split at byte {cut}");
            assert_eq!(
                output,
                Some(format!("{line}\n{line}\n")),
                "split at byte {cut}"
            );
        }
    }

    /// A stand-in for qemu that records the first line of its stdin (the console's input)
    /// in `file`, then runs until killed.
    fn fake_qemu(file: &Path) -> (QemuGuard, StopLine) {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "read line; printf '%s' \"$line\" > \"$1\"; exec sleep 1000",
                "sh",
            ])
            .arg(file)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let line = StopLine {
            input,
            request: crate::protocol::stop_request("n0nce", 7),
        };
        (QemuGuard(Some(child)), line)
    }

    /// At the timeout a running command gets the stop request on the console's input; a
    /// guest that then sends nothing is killed after the flush limit, and the ending says so.
    #[test]
    fn the_timeout_sends_the_stop_request_then_gives_up_after_the_flush_limit() {
        let d = tempfile::tempdir().unwrap();
        let got = d.path().join("request");
        let (mut guard, line) = fake_qemu(&got);
        let (tx, rx) = mpsc::channel();
        tx.send(Event::Started).unwrap();
        let limits = Limits {
            timeout: Duration::from_millis(300),
            heartbeat: None,
            flush_timeout: Duration::from_secs(1),
        };
        let started = Instant::now();
        let mut seen = Seen::default();
        let ending = wait(&mut guard, &rx, &mut seen, started, &limits, Some(line));
        let took = started.elapsed();
        assert!(ending.timed_out && !ending.interrupted);
        assert_eq!(
            ending.flush_lost.as_deref(),
            Some("the guest had not sent them 1 s after the stop request")
        );
        assert!(guard.0.is_none(), "the stand-in was not reaped");
        assert_eq!(
            fs::read_to_string(&got).unwrap(),
            crate::protocol::stop_request("n0nce", 7)
        );
        assert!(
            took >= Duration::from_millis(1300) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }

    /// Before the command started there is nothing to send: the timeout kills at once.
    #[test]
    fn the_timeout_before_the_command_started_kills_at_once() {
        let d = tempfile::tempdir().unwrap();
        let got = d.path().join("request");
        let (mut guard, line) = fake_qemu(&got);
        let (_tx, rx) = mpsc::channel();
        let limits = Limits {
            timeout: Duration::from_millis(200),
            heartbeat: None,
            flush_timeout: Duration::from_secs(60),
        };
        let started = Instant::now();
        let ending = wait(
            &mut guard,
            &rx,
            &mut Seen::default(),
            started,
            &limits,
            Some(line),
        );
        assert!(ending.timed_out);
        assert_eq!(
            ending.flush_lost.as_deref(),
            Some("the command had not started")
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(!got.exists(), "a request was sent");
    }

    #[test]
    fn heartbeat_silence_counts_from_the_last_growth_once_beats_started() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut hb = Heartbeat::default();
        // Booting: no beat yet, never silent.
        hb.observe(0, t0 + s(30));
        assert_eq!(hb.silent_for(t0 + s(100)), None);
        hb.observe(1, t0 + s(31));
        assert_eq!(hb.silent_for(t0 + s(36)), Some(s(5)));
        // The same length again is no beat; a longer file is.
        hb.observe(1, t0 + s(40));
        assert_eq!(hb.silent_for(t0 + s(41)), Some(s(10)));
        hb.observe(3, t0 + s(42));
        assert_eq!(hb.silent_for(t0 + s(50)), Some(s(8)));
    }
}
