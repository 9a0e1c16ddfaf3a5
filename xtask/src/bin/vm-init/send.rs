//! `/out` sent to the host as an `outstream`: over the raw NVMe output disk, or the second
//! serial port; and the heartbeat that tells the host the guest is alive meanwhile.

use std::fs;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use xtask::outstream::Encoder;
use xtask::protocol;

use crate::stop::StopReport;

/// Whether the host chose the second serial port for /out (else the raw NVMe disk).
pub(crate) fn serial_transport() -> bool {
    fs::read_to_string(protocol::TRANSPORT_PATH).is_ok_and(|t| t.trim() == "serial")
}

/// Sends everything under /out as an `outstream`, on the transport the host chose.
pub(crate) fn send_out(status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    if serial_transport() {
        send_out_serial(status, stop)
    } else {
        send_out_disk(status, stop)
    }
}

/// A thread that writes a byte to the heartbeat port every few seconds until power-off
/// (see [`protocol::HEARTBEAT_TTY`]). It runs at the highest priority so that a busy command
/// cannot starve it into a false stall. Without the port it just ends: the host then falls
/// back to its overall timeout.
pub(crate) fn start_heartbeat() {
    let tty = match fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(protocol::HEARTBEAT_TTY)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("vm-init: no heartbeat ({}: {e})", protocol::HEARTBEAT_TTY);
            return;
        }
    };
    std::thread::spawn(move || {
        // SAFETY: plain syscalls without pointers; a failure only leaves the default nice.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, -20);
        }
        let mut tty = tty;
        loop {
            if tty.write_all(b".").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(protocol::HEARTBEAT_SECS));
        }
    });
}

/// Raw NVMe disk: the stream at `DISK_DATA_OFFSET`, made durable, then the header.
fn send_out_disk(status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    let dev = find_out_disk()?;
    let mut disk = fs::OpenOptions::new().write(true).open(&dev)?;
    disk.seek(SeekFrom::Start(protocol::DISK_DATA_OFFSET))?;
    let len = encode_out(io::BufWriter::with_capacity(1 << 20, &disk), status, stop)?;
    disk.sync_all()?;
    disk.seek(SeekFrom::Start(0))?;
    disk.write_all(&protocol::disk_header(len))?;
    disk.sync_all()?;
    Ok(len)
}

/// The NVMe namespace whose controller has our serial number. The driver probes
/// asynchronously, so give it a little time to appear.
fn find_out_disk() -> io::Result<std::path::PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(ctrls) = fs::read_dir("/sys/class/nvme") {
            for c in ctrls.flatten() {
                let serial = fs::read_to_string(c.path().join("serial")).unwrap_or_default();
                if serial.trim() != protocol::OUT_DISK_SERIAL {
                    continue;
                }
                let name = c.file_name().to_string_lossy().into_owned();
                let dev = Path::new("/dev").join(format!("{name}n1"));
                if dev.exists() {
                    return Ok(dev);
                }
            }
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no NVMe disk with serial {} appeared",
                    protocol::OUT_DISK_SERIAL
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes /out as an `outstream` ending with `status` (and the stop report of a command
/// that was stopped) and flushes it; returns its length.
fn encode_out<W: Write>(w: W, status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    let mut counted = Counting { inner: w, n: 0 };
    let mut enc = Encoder::new(&mut counted)?;
    let root = Path::new(protocol::OUT_DIR);
    send_tree(&mut enc, root, root)?;
    if let Some(stop) = stop {
        let complete: Vec<String> = stop
            .complete
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let complete: Vec<&str> = complete.iter().map(String::as_str).collect();
        enc.stopped(stop.killed, &complete)?;
    }
    enc.finish(status)?;
    counted.inner.flush()?;
    Ok(counted.n)
}

struct Counting<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The second UART in raw mode: slower (~0.3 MB/s under TCG) but needs no block driver.
fn send_out_serial(status: i32, stop: Option<&StopReport>) -> io::Result<u64> {
    let tty = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(protocol::OUT_TTY)?;
    set_raw(&tty)?;
    let len = encode_out(io::BufWriter::with_capacity(1 << 16, &tty), status, stop)?;
    // Everything must have left the UART before the power goes off.
    use std::os::fd::AsRawFd;
    // SAFETY: valid fd.
    if unsafe { libc::tcdrain(tty.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len)
}

fn send_tree<W: Write>(enc: &mut Encoder<W>, root: &Path, dir: &Path) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .expect("walk stays under root")
            .to_string_lossy()
            .into_owned();
        let meta = fs::symlink_metadata(&path)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            enc.dir(&rel, meta.mode() & 0o7777)?;
            send_tree(enc, root, &path)?;
        } else if ft.is_file() {
            enc.file(&rel, meta.mode() & 0o7777, fs::File::open(&path)?)?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&path)?;
            enc.symlink(
                &rel,
                &String::from_utf8_lossy(target.as_os_str().as_bytes()),
            )?;
        } else {
            eprintln!(
                "vm-init: not sending {} (not a file, directory or symlink)",
                path.display()
            );
        }
    }
    Ok(())
}

/// Raw mode: no newline translation, no echo, 8-bit clean, so binary passes unchanged.
fn set_raw(tty: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, libc::B115200);
        libc::cfsetospeed(&mut t, libc::B115200);
        if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
