//! Watching a running VM: the console reader, what the console has told the runner, and
//! the loop that decides when the run is over (qemu exited, a hang after a panic or after
//! the exit marker, a guest whose heartbeat stopped, the timeout, or an interrupt).

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::LineSink;
use super::qemu::QemuGuard;
use crate::console::{ConsoleFilter, Event};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP end a running VM cleanly ([`super::VmStatus::Interrupted`])
/// instead of killing the process. For command-line tools; tests need not call it.
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
    INTERRUPTED.load(Ordering::SeqCst)
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
}

/// When the runner gives up on a guest.
pub(super) struct Limits<'a> {
    /// The whole run.
    pub(super) timeout: Duration,
    /// The heartbeat file (disk transport) and how long it may stay silent.
    pub(super) heartbeat: Option<(&'a Path, Duration)>,
}

/// Applies the console's events to `seen` until qemu exits or has to be killed, and
/// kills it then.
pub(super) fn wait(
    guard: &mut QemuGuard,
    rx: &mpsc::Receiver<Event>,
    seen: &mut Seen,
    started: Instant,
    limits: &Limits,
) -> Ending {
    let deadline = started + limits.timeout;
    let mut timed_out = false;
    let mut stalled = None;
    let mut locked_up = None;
    let mut was_interrupted = false;
    let mut beat = Heartbeat::default();
    let mut beat_checked = started;
    let qemu_status = loop {
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
        if interrupted() {
            was_interrupted = true;
            break guard.kill_and_reap();
        }
        if now >= deadline {
            timed_out = true;
            break guard.kill_and_reap();
        }
        // Once a second; after the exit marker the guest is only powering off.
        if let Some((file, silence)) = limits.heartbeat
            && seen.exit_at.is_none()
            && now - beat_checked >= Duration::from_secs(1)
        {
            beat_checked = now;
            beat.observe(fs::metadata(file).map_or(0, |m| m.len()), now);
            if let Some(s) = beat.silent_for(now).filter(|s| *s > silence) {
                stalled = Some((now - started, s));
                break guard.kill_and_reap();
            }
        }
        // A CPU stuck in the kernel this long does not come back (TCG guests have stayed
        // stuck for the whole timeout, other CPUs still beating): end the run now.
        if let Some((line, secs)) = &seen.lockup
            && *secs >= LOCKUP_GIVE_UP_SECS
        {
            locked_up = Some((now - started, line.clone()));
            break guard.kill_and_reap();
        }
        // panic=-1 reboots at once and -no-reboot turns that into an exit; this only
        // covers a kernel that hangs after the panic message.
        if seen
            .panic_at
            .is_some_and(|t| now - t > Duration::from_secs(10))
        {
            break guard.kill_and_reap();
        }
        // The marker comes after the files were sent; power-off should follow at once.
        if seen
            .exit_at
            .is_some_and(|t| now - t > Duration::from_secs(15))
        {
            break guard.kill_and_reap();
        }
    };
    Ending {
        qemu_status,
        timed_out,
        stalled,
        locked_up,
        interrupted: was_interrupted,
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
