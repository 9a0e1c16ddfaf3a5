//! The run's verdict: the output stream read back from its transport, checked against the
//! exit status the console reported, and unpacked into the out directory.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::watch::{Ending, Seen};
use super::{Flush, Transport, VmStatus, complete};
use crate::{outstream, protocol};

/// The status of a finished run and, when its files arrived intact, what they were.
pub(super) struct Collected {
    pub(super) status: VmStatus,
    pub(super) out_files: Vec<PathBuf>,
    pub(super) out_bytes: u64,
    pub(super) flush: Option<Flush>,
}

/// A run cut short (an interrupt, the timeout) is that, whatever came back; then the exit
/// marker (whose files must arrive intact); then a stopped heartbeat, a panic message, and
/// last qemu's own status.
pub(super) fn collect(
    ending: &Ending,
    seen: &Seen,
    timeout: Duration,
    transport: Transport,
    stream_path: &Path,
    out_dir: &Path,
) -> Collected {
    let mut out_files = Vec::new();
    let mut out_bytes = 0;
    let decode = || {
        read_stream(transport, stream_path)
            .and_then(|data| outstream::decode_bytes(&data, out_dir).map_err(|e| e.to_string()))
    };
    let cut_short = if ending.interrupted {
        Some(VmStatus::Interrupted)
    } else if ending.timed_out {
        Some(VmStatus::Timeout { after: timeout })
    } else {
        None
    };
    if let Some(status) = cut_short {
        let (flush, files, bytes) = flushed(ending, seen, decode);
        return Collected {
            status,
            out_files: files,
            out_bytes: bytes,
            flush: Some(flush),
        };
    }
    let status = if let Some(status) = seen.exit_status {
        match decode() {
            Ok(r) if r.status == status => {
                out_files = r.entries;
                out_bytes = r.bytes;
                VmStatus::Exited(status)
            }
            Ok(r) => VmStatus::OutputCorrupt {
                status,
                error: format!(
                    "the stream recorded status {}, the console {status}",
                    r.status
                ),
            },
            Err(error) => VmStatus::OutputCorrupt { status, error },
        }
    } else if let Some((after, silent)) = ending.stalled {
        VmStatus::Stalled { after, silent }
    } else if let Some((after, message)) = ending.locked_up.clone() {
        VmStatus::LockedUp { after, message }
    } else if let Some(message) = seen.panic.clone() {
        VmStatus::KernelPanic { message }
    } else {
        VmStatus::NoExitMarker {
            qemu_status: ending
                .qemu_status
                .map_or("unknown".into(), |s| s.to_string()),
        }
    };
    Collected {
        status,
        out_files,
        out_bytes,
        flush: None,
    }
}

/// What a run cut short (timed out, or interrupted) sent back after the stop request: the
/// entries complete at the stop, or why they were lost; with the files and bytes received.
fn flushed(
    ending: &Ending,
    seen: &Seen,
    decode: impl FnOnce() -> Result<outstream::Received, String>,
) -> (Flush, Vec<PathBuf>, u64) {
    let Some(console_status) = seen.exit_status else {
        let why = ending
            .flush_lost
            .clone()
            .unwrap_or_else(|| match &seen.panic {
                Some(p) => format!("the kernel panicked while stopping the command: {p}"),
                None => format!(
                    "qemu stopped before the guest sent them ({})",
                    ending
                        .qemu_status
                        .map_or("unknown status".into(), |s| s.to_string())
                ),
            });
        return (Flush::Lost(why), Vec::new(), 0);
    };
    match decode() {
        Ok(r) if r.status == console_status => {
            let (complete, killed) = match r.stopped {
                Some(s) => (s.complete, s.killed),
                // The command had ended by itself: everything is complete.
                None => (
                    r.entries
                        .iter()
                        .filter(|e| e.components().count() == 1)
                        .cloned()
                        .collect(),
                    false,
                ),
            };
            let incomplete = complete::incomplete_entries(&r.entries, &complete);
            let flush = Flush::Sent {
                complete,
                incomplete,
                command_status: console_status,
                killed,
            };
            (flush, r.entries, r.bytes)
        }
        Ok(r) => (
            Flush::Lost(format!(
                "they were damaged in transit: the stream recorded status {}, the console \
                 {console_status}",
                r.status
            )),
            Vec::new(),
            0,
        ),
        Err(e) => (
            Flush::Lost(format!("they were damaged in transit: {e}")),
            Vec::new(),
            0,
        ),
    }
}

/// The raw output stream as the transport left it on the host.
fn read_stream(transport: Transport, path: &Path) -> Result<Vec<u8>, String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    match transport {
        Transport::Serial => fs::read(path).map_err(err),
        Transport::Disk => {
            use std::io::{Seek, SeekFrom};
            let mut f = fs::File::open(path).map_err(err)?;
            let mut head = [0u8; protocol::DISK_HEADER_LEN];
            f.read_exact(&mut head).map_err(err)?;
            let Some(len) = protocol::parse_disk_header(&head) else {
                return Err(
                    "the output disk has no valid header: the guest did not finish \
                            sending its /out files (see the console)"
                        .into(),
                );
            };
            let size = f.metadata().map_err(err)?.len();
            if protocol::DISK_DATA_OFFSET + len > size {
                return Err(format!(
                    "the output disk header claims {len} bytes, more than the disk holds"
                ));
            }
            f.seek(SeekFrom::Start(protocol::DISK_DATA_OFFSET))
                .map_err(err)?;
            let mut data = vec![0u8; len as usize];
            f.read_exact(&mut data).map_err(err)?;
            Ok(data)
        }
    }
}
