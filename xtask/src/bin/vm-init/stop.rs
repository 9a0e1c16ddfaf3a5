//! The host's stop request: read from the console while the command runs; the command and
//! its processes frozen, `/out` recorded, then SIGTERM and SIGKILL; afterwards, which `/out`
//! entries were complete at the stop (the rule: `xtask::vm::complete`).

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use xtask::protocol;
use xtask::vm::complete::{self, AtStop, Tree};

/// Where the command stands with respect to a stop request.
enum StopState {
    Running,
    /// The host asked to stop; /out as the stop found it (or why it could not be read),
    /// and when the grace period ends.
    Stopping {
        at_stop: Result<AtStop, String>,
        grace_ends: Instant,
        killed: bool,
    },
    /// The command ended (by itself or stopped); later requests are ignored.
    Ended,
}

static STOP: Mutex<StopState> = Mutex::new(StopState::Running);

fn stop_state() -> std::sync::MutexGuard<'static, StopState> {
    STOP.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a stopped command left: taken once the command ended.
pub(crate) struct Stop {
    at_stop: Result<AtStop, String>,
    grace_ends: Instant,
    killed: bool,
}

/// The stop report that goes into the stream.
pub(crate) struct StopReport {
    pub(crate) killed: bool,
    pub(crate) complete: Vec<std::path::PathBuf>,
}

impl Stop {
    /// The command's other processes (a tracer still writing its partial output after the
    /// shell that started it died of SIGTERM) get the rest of the grace period too: reaps
    /// until none is left, SIGKILLs what is still there when the period ends.
    pub(crate) fn outlive_grace(mut self) -> Stop {
        loop {
            let mut st = 0;
            // SAFETY: st is a valid out-pointer.
            match unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) } {
                -1 if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
                -1 => return self, // ECHILD: nothing left
                0 if Instant::now() >= self.grace_ends => break,
                0 => std::thread::sleep(Duration::from_millis(20)),
                _ => {}
            }
        }
        eprintln!("vm-init: processes of the command outlived the grace period; killing them");
        self.killed = true;
        // SAFETY: kill(-1) signals every process but init itself; waitpid as above.
        unsafe {
            libc::kill(-1, libc::SIGKILL);
            let mut st = 0;
            while libc::waitpid(-1, &mut st, 0) > 0 {}
        }
        self
    }

    /// Call once nothing runs any more: compares /out with what the stop found.
    pub(crate) fn report(self) -> StopReport {
        let after = Tree::capture(Path::new(protocol::OUT_DIR)).map_err(|e| e.to_string());
        let complete = match (self.at_stop, after) {
            (Ok(at_stop), Ok(after)) => complete::complete_entries(&at_stop, &after),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!(
                    "vm-init: cannot tell which {} entries are complete ({e}); reporting none",
                    protocol::OUT_DIR
                );
                Vec::new()
            }
        };
        StopReport {
            killed: self.killed,
            complete,
        }
    }
}

/// Called when the command has been reaped: ends the watch for stop requests and returns
/// the stop, if the command was stopped.
pub(crate) fn command_ended() -> Option<Stop> {
    let mut st = stop_state();
    match std::mem::replace(&mut *st, StopState::Ended) {
        StopState::Stopping {
            at_stop,
            grace_ends,
            killed,
        } => Some(Stop {
            at_stop,
            grace_ends,
            killed,
        }),
        _ => None,
    }
}

/// Reads the console's input on a thread; a stop request with this run's nonce stops the
/// command. The console stops echoing input (a request would show up as console output)
/// and stops interpreting it (no signal keys, no line editing, no flow control).
pub(crate) fn watch_console(nonce: &str) {
    let console = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY)
        .open(protocol::CONSOLE_IN)
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "vm-init: warning: cannot read {} ({e}): a run cut short will bring nothing back",
                protocol::CONSOLE_IN
            );
            return;
        }
    };
    if let Err(e) = quiet_input(&console) {
        eprintln!(
            "vm-init: warning: cannot configure {}: {e}",
            protocol::CONSOLE_IN
        );
    }
    let nonce = nonce.to_string();
    std::thread::spawn(move || {
        let mut console = console;
        let mut line = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            let n = match io::Read::read(&mut console, &mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            for &b in &buf[..n] {
                if b != b'\n' {
                    // Requests are short; anything longer is not one.
                    if line.len() < 256 {
                        line.push(b);
                    }
                    continue;
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                if let Some(grace) = protocol::parse_stop_request(&text, &nonce) {
                    stop_command(Duration::from_secs(grace));
                }
            }
        }
    });
}

/// No echo, no line discipline on the console's input; output is left as it is.
fn quiet_input(tty: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            return Err(io::Error::last_os_error());
        }
        t.c_lflag &= !(libc::ECHO | libc::ECHONL | libc::ICANON | libc::ISIG | libc::IEXTEN);
        t.c_iflag &= !(libc::IXON | libc::IXOFF | libc::ICRNL | libc::INLCR | libc::IGNCR);
        t.c_cc[libc::VMIN] = 1;
        t.c_cc[libc::VTIME] = 0;
        if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The host's stop request: freeze every process, record /out, then SIGTERM and, if the
/// command is still there after `grace`, SIGKILL to everything. The main thread reaps the
/// command as usual, gives its other processes the rest of the grace period
/// ([`Stop::outlive_grace`]) and sends /out.
fn stop_command(grace: Duration) {
    let grace_ends;
    {
        let mut st = stop_state();
        if !matches!(*st, StopState::Running) {
            return;
        }
        // SAFETY: kill(-1) signals every process but init itself.
        unsafe { libc::kill(-1, libc::SIGSTOP) };
        if !wait_until_all_stopped(Duration::from_secs(2)) {
            eprintln!("vm-init: warning: not every process stopped within 2 s");
        }
        let at_stop = AtStop::capture(Path::new(protocol::OUT_DIR)).map_err(|e| e.to_string());
        grace_ends = Instant::now() + grace;
        *st = StopState::Stopping {
            at_stop,
            grace_ends,
            killed: false,
        };
        eprintln!(
            "vm-init: the host cut the run short: stopping the command (SIGTERM, SIGKILL after {} s) and sending {}",
            grace.as_secs(),
            protocol::OUT_DIR
        );
        // SAFETY: as above; the pending SIGTERM is delivered as the processes continue.
        unsafe {
            libc::kill(-1, libc::SIGTERM);
            libc::kill(-1, libc::SIGCONT);
        }
    }
    while Instant::now() < grace_ends {
        std::thread::sleep(Duration::from_millis(50));
        if matches!(*stop_state(), StopState::Ended) {
            return;
        }
    }
    let mut st = stop_state();
    if let StopState::Stopping { killed, .. } = &mut *st {
        *killed = true;
        eprintln!(
            "vm-init: the command did not stop within {} s; killing it",
            grace.as_secs()
        );
        // SAFETY: as above.
        unsafe { libc::kill(-1, libc::SIGKILL) };
    }
}

/// Whether every process but init (and the kernel's threads) is stopped or dead, polled
/// until `limit` passes.
fn wait_until_all_stopped(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if all_stopped() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn all_stopped() -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(procs) = fs::read_dir("/proc") else {
        return true;
    };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == 1 {
            continue;
        }
        let Ok(stat) = fs::read_to_string(p.path().join("stat")) else {
            continue; // gone
        };
        // Fields after the ")" that ends the command name: state ppid pgrp session tty_nr
        // tpgid flags ...
        let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let flags: u64 = f.get(6).and_then(|x| x.parse().ok()).unwrap_or(0);
        if flags & PF_KTHREAD != 0 {
            continue;
        }
        if !matches!(f.first(), Some(&("T" | "t" | "Z" | "X"))) {
            return false;
        }
    }
    true
}
