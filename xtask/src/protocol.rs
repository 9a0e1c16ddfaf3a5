//! What the host runner and the guest's init (`vm-init`) agree on: where the run's
//! command lives in the initramfs, where output goes, and the console markers.
//!
//! The markers carry a per-run nonce chosen by the host, so output of the command that
//! happens to look like a marker cannot end a run early or fake its exit status.

/// NUL-terminated argv of the command to run.
pub const ARGV_PATH: &str = "/etc/kpt-vm/argv";
/// NUL-terminated `KEY=VALUE` pairs added to the command's environment.
pub const ENV_PATH: &str = "/etc/kpt-vm/env";
/// The run's nonce (ASCII, no whitespace).
pub const NONCE_PATH: &str = "/etc/kpt-vm/nonce";
/// Files the command writes below this directory are sent back to the host.
pub const OUT_DIR: &str = "/out";
/// The serial port carrying the output stream with the serial transport (the VM's
/// second UART).
pub const OUT_TTY: &str = "/dev/ttyS1";
/// With the disk transport the second serial port is free: vm-init writes one byte to it
/// every [`HEARTBEAT_SECS`] while the guest runs, so the host tells a guest that stopped
/// running altogether (qemu TCG has frozen whole guests on a 2-core host, console silent
/// for the full timeout) from a command that is merely slow, and boots again minutes sooner.
pub const HEARTBEAT_TTY: &str = "/dev/ttyS1";
/// Seconds between two heartbeat bytes (guest time).
pub const HEARTBEAT_SECS: u64 = 5;
/// Which transport carries the output stream: `disk` or `serial` (see `vm::Transport`).
pub const TRANSPORT_PATH: &str = "/etc/kpt-vm/transport";
/// Serial number of the NVMe device that receives the output stream (the cloud kernels
/// build the NVMe driver in, unlike virtio).
pub const OUT_DISK_SERIAL: &str = "kptout";
/// The stream starts here on the output disk; the header sits in the first sector.
pub const DISK_DATA_OFFSET: u64 = 4096;
const DISK_MAGIC: &[u8; 8] = b"KPTDISK1";
/// Size of the header written at offset 0 of the output disk.
pub const DISK_HEADER_LEN: usize = 20;

/// The output disk's header: magic, stream length (u64 LE), CRC-32 of both (u32 LE).
/// Written last, after the stream is on the disk, so its presence means "complete".
pub fn disk_header(stream_len: u64) -> [u8; DISK_HEADER_LEN] {
    let mut h = [0u8; DISK_HEADER_LEN];
    h[..8].copy_from_slice(DISK_MAGIC);
    h[8..16].copy_from_slice(&stream_len.to_le_bytes());
    let crc = crate::outstream::Crc32::of(&h[..16]);
    h[16..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The stream length from a disk header; `None` if the header is absent or damaged.
pub fn parse_disk_header(h: &[u8]) -> Option<u64> {
    if h.len() < DISK_HEADER_LEN || &h[..8] != DISK_MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(h[16..20].try_into().ok()?);
    (crate::outstream::Crc32::of(&h[..16]) == crc)
        .then(|| u64::from_le_bytes(h[8..16].try_into().unwrap()))
}

/// PATH inside the guest.
pub const GUEST_PATH: &str = "/bin:/sbin:/usr/bin:/usr/sbin";

/// Exit status vm-init reports when it could not even start the command (setup failure);
/// a command that is not found is reported as 127, as a shell would.
pub const INIT_FAILURE_STATUS: i32 = 255;

const START: &str = "@@KPT-VM-START ";
const EXIT: &str = "@@KPT-VM-EXIT ";
const STOP: &str = "@@KPT-VM-STOP ";

/// Where vm-init reads the host's requests: the console's input (qemu's stdin).
pub const CONSOLE_IN: &str = "/dev/console";

/// The line the host writes on the console's input to cut a run short (its timeout, an
/// interrupt): vm-init stops the command (SIGTERM, SIGKILL after `grace_secs`) and sends
/// /out, saying which entries were complete (see `vm::complete`).
pub fn stop_request(nonce: &str, grace_secs: u64) -> String {
    format!("{STOP}{nonce} grace={grace_secs}")
}

/// The grace period of a stop request for this run's nonce in `line`.
pub fn parse_stop_request(line: &str, nonce: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix(STOP)?;
    let grace = rest.strip_prefix(nonce)?.strip_prefix(" grace=")?;
    grace.parse().ok()
}

pub fn start_marker(nonce: &str) -> String {
    format!("{START}{nonce}")
}

pub fn exit_marker(nonce: &str, status: i32) -> String {
    format!("{EXIT}{nonce} status={status}")
}

/// The line vm-init prints after the exit marker (where it is recorded but not shown):
/// how long sending /out took, for throughput figures.
pub fn send_stats_line(bytes: u64, micros: u64) -> String {
    format!("vm-init: sent {bytes} bytes of /out in {micros} us")
}

/// (bytes, microseconds) from the console, if vm-init reported them.
pub fn parse_send_stats(console: &str) -> Option<(u64, u64)> {
    console.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("vm-init: sent ")?;
        let (bytes, rest) = rest.split_once(" bytes of /out in ")?;
        let micros = rest.strip_suffix(" us")?;
        Some((bytes.parse().ok()?, micros.parse().ok()?))
    })
}

/// A marker found in a console line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    Start,
    Exit(i32),
}

/// Finds this run's marker in `line` (anywhere, since a kernel message may have been
/// printed on the same line) and returns it with the line minus the marker.
pub fn find_marker(line: &str, nonce: &str) -> Option<(Marker, String)> {
    let start = start_marker(nonce);
    if let Some(i) = line.find(&start) {
        let rest = format!("{}{}", &line[..i], &line[i + start.len()..]);
        return Some((Marker::Start, rest));
    }
    let exit = format!("{EXIT}{nonce} status=");
    let i = line.find(&exit)?;
    let after = &line[i + exit.len()..];
    let digits: String = after
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    let status = digits.parse().ok()?;
    let rest = format!("{}{}", &line[..i], &after[digits.len()..]);
    Some((Marker::Exit(status), rest))
}

/// True when `partial` (an unterminated console line) could still grow into a marker;
/// the runner holds such text back instead of echoing it.
pub fn could_be_marker_prefix(partial: &str) -> bool {
    [START, EXIT]
        .iter()
        .any(|m| m.starts_with(partial) || partial.starts_with(m))
}

/// Encodes a list of strings as NUL-terminated records.
pub fn encode_nul_list<S: AsRef<[u8]>>(items: &[S]) -> Vec<u8> {
    let mut v = Vec::new();
    for i in items {
        v.extend_from_slice(i.as_ref());
        v.push(0);
    }
    v
}

pub fn decode_nul_list(data: &[u8]) -> Vec<Vec<u8>> {
    data.split(|&b| b == 0)
        .map(<[u8]>::to_vec)
        .collect::<Vec<_>>()
        .split_last()
        .map(|(last, rest)| {
            let mut v = rest.to_vec();
            // A trailing record without its NUL still counts.
            if !last.is_empty() {
                v.push(last.clone());
            }
            v
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_need_the_nonce() {
        let n = "a1b2";
        assert_eq!(
            find_marker(&exit_marker(n, 7), n),
            Some((Marker::Exit(7), String::new()))
        );
        assert_eq!(
            find_marker(&exit_marker(n, -1), n),
            Some((Marker::Exit(-1), String::new()))
        );
        assert_eq!(
            find_marker(&start_marker(n), n),
            Some((Marker::Start, String::new()))
        );
        // A command echoing a marker with another nonce is just output.
        assert_eq!(find_marker(&exit_marker("other", 0), n), None);
        // A kernel message glued to the marker line is kept.
        let line = format!("[ 1.0] msg{}", exit_marker(n, 3));
        assert_eq!(
            find_marker(&line, n),
            Some((Marker::Exit(3), "[ 1.0] msg".to_string()))
        );
    }

    #[test]
    fn stop_requests_round_trip_and_need_the_nonce() {
        let r = stop_request("a1b2", 10);
        assert_eq!(parse_stop_request(&r, "a1b2"), Some(10));
        assert_eq!(parse_stop_request(&format!("{r}\r"), "a1b2"), Some(10));
        assert_eq!(parse_stop_request(&r, "a1b"), None);
        assert_eq!(parse_stop_request(&stop_request("x", 3), "a1b2"), None);
        assert_eq!(
            parse_stop_request("@@KPT-VM-STOP a1b2 grace=", "a1b2"),
            None
        );
    }

    #[test]
    fn send_stats_round_trip() {
        let console = format!("x\n{}\nreboot: Power down\n", send_stats_line(4096, 1500));
        assert_eq!(parse_send_stats(&console), Some((4096, 1500)));
        assert_eq!(parse_send_stats("vm-init: sent x bytes"), None);
    }

    #[test]
    fn prefix_detection() {
        assert!(could_be_marker_prefix("@@KPT"));
        assert!(could_be_marker_prefix("@@KPT-VM-EXIT abc st"));
        assert!(could_be_marker_prefix(""));
        assert!(!could_be_marker_prefix("$ "));
        assert!(!could_be_marker_prefix("@@X"));
    }

    #[test]
    fn disk_header_round_trip_and_damage() {
        let h = disk_header(123_456);
        assert_eq!(parse_disk_header(&h), Some(123_456));
        assert_eq!(parse_disk_header(&[0u8; DISK_HEADER_LEN]), None);
        let mut bad = h;
        bad[9] ^= 1;
        assert_eq!(parse_disk_header(&bad), None);
        assert_eq!(parse_disk_header(&h[..10]), None);
    }

    #[test]
    fn nul_lists() {
        let enc = encode_nul_list(&["sh", "-c", "exit 7", ""]);
        assert_eq!(enc, b"sh\0-c\0exit 7\0\0");
        let dec = decode_nul_list(&enc);
        assert_eq!(
            dec,
            vec![b"sh".to_vec(), b"-c".to_vec(), b"exit 7".to_vec(), vec![]]
        );
        assert!(decode_nul_list(b"").is_empty());
        assert_eq!(decode_nul_list(b"a"), vec![b"a".to_vec()]);
    }
}
