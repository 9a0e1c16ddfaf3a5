//! The framed, checksummed byte stream that carries the guest's `/out` files to the
//! host, over either transport (see `vm::Transport`): the raw NVMe output disk or the
//! VM's second serial port.
//!
//! The transports are plain byte pipes: the framing gives file boundaries, and the
//! checksums turn any corruption or truncation into a reported error instead of a
//! silently wrong file.
//!
//! Stream = `STREAM_MAGIC`, then frames. A frame is
//!
//! ```text
//! magic  b"KF"      2 bytes
//! seq    u32 LE     0, 1, 2, ... (a lost or repeated frame breaks the sequence)
//! kind   u8         FileStart | Data | FileEnd | Dir | Symlink | Stopped | Complete | Done
//! len    u32 LE     payload length, at most MAX_PAYLOAD
//! payload
//! crc    u32 LE     CRC-32 (IEEE) of seq, kind, len and payload
//! ```
//!
//! Payloads: `FileStart` = mode u32 + path; `Data` = file bytes; `FileEnd` = size u64 +
//! CRC-32 of the whole file; `Dir` = mode u32 + path; `Symlink` = path len u32 + path +
//! target; `Done` = exit status i32 + entry count u32. Paths are relative to the guest's
//! output directory and must not escape it.
//!
//! A run cut short (the host asked the guest to stop the command: see `vm::complete`) adds,
//! after the entries and before `Done`: `Stopped` = u8, 1 if a process of the command had
//! to be killed (SIGKILL after the grace period), else 0; then one `Complete` = path for
//! each entry that was complete when the command was stopped (each one an entry the stream
//! carried).

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

pub const STREAM_MAGIC: &[u8; 8] = b"KPTOUT1\n";
const FRAME_MAGIC: &[u8; 2] = b"KF";
/// Largest payload; also the chunk size for file data.
pub const MAX_PAYLOAD: usize = 64 * 1024;
const HEADER_LEN: usize = 2 + 4 + 1 + 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum FrameKind {
    FileStart = 1,
    Data = 2,
    FileEnd = 3,
    Dir = 4,
    Symlink = 5,
    Done = 6,
    Stopped = 7,
    Complete = 8,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::FileStart,
            2 => Self::Data,
            3 => Self::FileEnd,
            4 => Self::Dir,
            5 => Self::Symlink,
            6 => Self::Done,
            7 => Self::Stopped,
            8 => Self::Complete,
            _ => return None,
        })
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib/gzip), incremental.
#[derive(Debug, Clone, Copy)]
pub struct Crc32(u32);

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    pub fn new() -> Self {
        Crc32(0xFFFF_FFFF)
    }
    pub fn update(&mut self, data: &[u8]) {
        let mut c = self.0;
        for &b in data {
            c = CRC_TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
        }
        self.0 = c;
    }
    pub fn finish(self) -> u32 {
        self.0 ^ 0xFFFF_FFFF
    }
    pub fn of(data: &[u8]) -> u32 {
        let mut c = Self::new();
        c.update(data);
        c.finish()
    }
}

/// Writes the stream. Used by the guest's init on its raw serial port.
pub struct Encoder<W: Write> {
    w: W,
    seq: u32,
    entries: u32,
}

impl<W: Write> Encoder<W> {
    pub fn new(mut w: W) -> io::Result<Self> {
        w.write_all(STREAM_MAGIC)?;
        Ok(Encoder {
            w,
            seq: 0,
            entries: 0,
        })
    }

    fn frame(&mut self, kind: FrameKind, payload: &[u8]) -> io::Result<()> {
        debug_assert!(payload.len() <= MAX_PAYLOAD);
        let mut head = [0u8; HEADER_LEN];
        head[..2].copy_from_slice(FRAME_MAGIC);
        head[2..6].copy_from_slice(&self.seq.to_le_bytes());
        head[6] = kind as u8;
        head[7..11].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let mut crc = Crc32::new();
        crc.update(&head[2..]);
        crc.update(payload);
        // One write per frame: fewer syscalls on the slow serial path.
        let mut buf = Vec::with_capacity(HEADER_LEN + payload.len() + 4);
        buf.extend_from_slice(&head);
        buf.extend_from_slice(payload);
        buf.extend_from_slice(&crc.finish().to_le_bytes());
        self.w.write_all(&buf)?;
        self.seq = self.seq.wrapping_add(1);
        Ok(())
    }

    fn path_payload(prefix: &[u8], path: &str) -> io::Result<Vec<u8>> {
        check_rel_path(path).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut p = prefix.to_vec();
        p.extend_from_slice(path.as_bytes());
        if p.len() > MAX_PAYLOAD {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "path too long"));
        }
        Ok(p)
    }

    /// Sends one file: `rel` is its path under the output directory.
    pub fn file(&mut self, rel: &str, mode: u32, mut data: impl Read) -> io::Result<u64> {
        let start = Self::path_payload(&mode.to_le_bytes(), rel)?;
        self.frame(FrameKind::FileStart, &start)?;
        let mut buf = vec![0u8; MAX_PAYLOAD];
        let mut crc = Crc32::new();
        let mut size = 0u64;
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            crc.update(&buf[..n]);
            size += n as u64;
            self.frame(FrameKind::Data, &buf[..n])?;
        }
        let mut end = size.to_le_bytes().to_vec();
        end.extend_from_slice(&crc.finish().to_le_bytes());
        self.frame(FrameKind::FileEnd, &end)?;
        self.entries += 1;
        Ok(size)
    }

    pub fn dir(&mut self, rel: &str, mode: u32) -> io::Result<()> {
        let p = Self::path_payload(&mode.to_le_bytes(), rel)?;
        self.frame(FrameKind::Dir, &p)?;
        self.entries += 1;
        Ok(())
    }

    pub fn symlink(&mut self, rel: &str, target: &str) -> io::Result<()> {
        let mut p = Self::path_payload(&(rel.len() as u32).to_le_bytes(), rel)?;
        p.extend_from_slice(target.as_bytes());
        if p.len() > MAX_PAYLOAD {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "link too long"));
        }
        self.frame(FrameKind::Symlink, &p)?;
        self.entries += 1;
        Ok(())
    }

    /// Says the command was stopped before it ended (`killed`: by SIGKILL, after ignoring
    /// SIGTERM) and which of the entries sent were complete then. After every entry.
    pub fn stopped(&mut self, killed: bool, complete: &[&str]) -> io::Result<()> {
        self.frame(FrameKind::Stopped, &[u8::from(killed)])?;
        for rel in complete {
            let p = Self::path_payload(&[], rel)?;
            self.frame(FrameKind::Complete, &p)?;
        }
        Ok(())
    }

    /// Ends the stream, recording the command's exit status and how many entries were
    /// sent (so the host can tell a complete stream from a truncated one).
    pub fn finish(mut self, status: i32) -> io::Result<W> {
        let mut p = status.to_le_bytes().to_vec();
        p.extend_from_slice(&self.entries.to_le_bytes());
        self.frame(FrameKind::Done, &p)?;
        self.w.flush()?;
        Ok(self.w)
    }
}

fn check_rel_path(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if path.is_empty() || path.contains('\0') {
        return Err(format!("bad path {path:?}"));
    }
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            _ => return Err(format!("path {path:?} escapes the output directory")),
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(
        "output stream is empty: the guest never started sending (did it reach the end of COMMAND?)"
    )]
    Empty,
    #[error("output stream does not start with the stream magic")]
    BadStreamMagic,
    #[error("output stream corrupt at byte {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    #[error(
        "output stream truncated at byte {offset} (inside frame {seq}); no end-of-stream frame"
    )]
    Truncated { offset: u64, seq: u32 },
    #[error("output stream ended after {entries} entries without its end-of-stream frame")]
    NoDone { entries: u32 },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("reading output stream: {0}")]
    Read(#[source] io::Error),
}

/// What a complete stream delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Files, directories and symlinks written, as paths under the destination directory.
    pub entries: Vec<PathBuf>,
    /// Total file bytes.
    pub bytes: u64,
    /// The exit status the guest recorded in its end-of-stream frame.
    pub status: i32,
    /// Present when the command was stopped before it ended.
    pub stopped: Option<Stopped>,
}

/// A stream's account of a command that was stopped (the run was cut short).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// A process of the command outlived the grace period after SIGTERM and was killed.
    pub killed: bool,
    /// The entries that were complete at the stop (largest first: a directory stands for
    /// what is under it), each one of [`Received::entries`].
    pub complete: Vec<PathBuf>,
}

/// Decodes a whole stream into `dest`, verifying every checksum, the frame sequence and
/// each file's size and CRC. Any defect is an error: a partial result is never reported
/// as success.
pub fn decode(mut r: impl Read, dest: &Path) -> Result<Received, StreamError> {
    let mut data = Vec::new();
    r.read_to_end(&mut data).map_err(StreamError::Read)?;
    decode_bytes(&data, dest)
}

pub fn decode_bytes(data: &[u8], dest: &Path) -> Result<Received, StreamError> {
    if data.is_empty() {
        return Err(StreamError::Empty);
    }
    if !data.starts_with(STREAM_MAGIC) {
        return Err(StreamError::BadStreamMagic);
    }
    let mut pos = STREAM_MAGIC.len();
    let mut seq = 0u32;
    let mut d = Decoder {
        dest,
        entries: Vec::new(),
        bytes: 0,
        open: None,
        stopped: None,
    };
    loop {
        if pos == data.len() {
            return Err(StreamError::NoDone {
                entries: d.entries.len() as u32,
            });
        }
        let frame_start = pos;
        let (kind, payload) = read_frame(data, &mut pos, seq)?;
        seq = seq.wrapping_add(1);
        if let Some(status) = d.apply(kind, payload, frame_start)? {
            // Bytes after the end frame would mean two streams got mixed.
            if pos != data.len() {
                return Err(corrupt(pos, "data after the end-of-stream frame".into()));
            }
            return Ok(Received {
                entries: d.entries,
                bytes: d.bytes,
                status,
                stopped: d.stopped,
            });
        }
    }
}

fn corrupt(offset: usize, what: String) -> StreamError {
    StreamError::Corrupt {
        offset: offset as u64,
        what,
    }
}

fn write_error(path: &Path, source: io::Error) -> StreamError {
    StreamError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// The frame at `*pos`, which must be number `seq`, its header and checksum verified; moves
/// `*pos` past it.
fn read_frame<'a>(
    data: &'a [u8],
    pos: &mut usize,
    seq: u32,
) -> Result<(FrameKind, &'a [u8]), StreamError> {
    let at = *pos;
    let truncated = StreamError::Truncated {
        offset: at as u64,
        seq,
    };
    if data.len() - at < HEADER_LEN {
        return Err(truncated);
    }
    let head = &data[at..at + HEADER_LEN];
    if &head[..2] != FRAME_MAGIC {
        return Err(corrupt(at, "frame magic missing".into()));
    }
    let fseq = u32::from_le_bytes(head[2..6].try_into().unwrap());
    let kind_byte = head[6];
    let len = u32::from_le_bytes(head[7..11].try_into().unwrap()) as usize;
    if len > MAX_PAYLOAD {
        return Err(corrupt(
            at,
            format!("frame length {len} exceeds the maximum"),
        ));
    }
    if data.len() - at < HEADER_LEN + len + 4 {
        return Err(truncated);
    }
    let payload = &data[at + HEADER_LEN..at + HEADER_LEN + len];
    let want_crc = u32::from_le_bytes(
        data[at + HEADER_LEN + len..at + HEADER_LEN + len + 4]
            .try_into()
            .unwrap(),
    );
    let mut crc = Crc32::new();
    crc.update(&head[2..]);
    crc.update(payload);
    if crc.finish() != want_crc {
        return Err(corrupt(at, format!("checksum mismatch in frame {seq}")));
    }
    if fseq != seq {
        return Err(corrupt(
            at,
            format!("frame sequence {fseq}, expected {seq} (a frame was lost or repeated)"),
        ));
    }
    let kind = FrameKind::from_u8(kind_byte)
        .ok_or_else(|| corrupt(at, format!("unknown frame kind {kind_byte}")))?;
    *pos = at + HEADER_LEN + len + 4;
    Ok((kind, payload))
}

/// What a stream has written so far into `dest`.
struct Decoder<'a> {
    dest: &'a Path,
    entries: Vec<PathBuf>,
    bytes: u64,
    /// The file being received: (relative path, open file, size so far, running CRC).
    open: Option<(PathBuf, fs::File, u64, Crc32)>,
    stopped: Option<Stopped>,
}

impl Decoder<'_> {
    /// Applies one frame (starting at byte `at`); the guest's exit status once the
    /// end-of-stream frame is read.
    fn apply(
        &mut self,
        kind: FrameKind,
        payload: &[u8],
        at: usize,
    ) -> Result<Option<i32>, StreamError> {
        // After `Stopped` only `Complete` frames and the end frame may follow.
        if self.stopped.is_some() && !matches!(kind, FrameKind::Complete | FrameKind::Done) {
            return Err(corrupt(at, "an entry after the stop report".into()));
        }
        let in_file = self.open.is_some();
        let need = |ok: bool, what: &str| -> Result<(), StreamError> {
            if ok {
                Ok(())
            } else {
                Err(corrupt(at, format!("unexpected {what} frame")))
            }
        };
        match kind {
            FrameKind::FileStart => {
                need(!in_file, "file-start")?;
                self.file_start(payload, at)?;
            }
            FrameKind::Data => {
                need(in_file, "data")?;
                let (rel, f, size, fcrc) = self.open.as_mut().unwrap();
                f.write_all(payload).map_err(|e| write_error(rel, e))?;
                *size += payload.len() as u64;
                fcrc.update(payload);
            }
            FrameKind::FileEnd => {
                need(in_file, "file-end")?;
                self.file_end(payload, at)?;
            }
            FrameKind::Dir => {
                need(!in_file, "directory")?;
                let mode = mode_of(payload, at)?;
                let rel = path_of(&payload[4..], at)?;
                let full = self.dest.join(&rel);
                fs::create_dir_all(&full).map_err(|e| write_error(&full, e))?;
                fs::set_permissions(&full, fs::Permissions::from_mode((mode & 0o777) | 0o700))
                    .map_err(|e| write_error(&full, e))?;
                self.entries.push(rel);
            }
            FrameKind::Symlink => {
                need(!in_file, "symlink")?;
                self.symlink(payload, at)?;
            }
            FrameKind::Stopped => {
                need(!in_file, "stop report")?;
                let killed = match payload {
                    [0] => false,
                    [1] => true,
                    _ => return Err(corrupt(at, "bad stop report payload".into())),
                };
                self.stopped = Some(Stopped {
                    killed,
                    complete: Vec::new(),
                });
            }
            FrameKind::Complete => self.complete(payload, at)?,
            FrameKind::Done => {
                need(!in_file, "end-of-stream")?;
                if payload.len() != 8 {
                    return Err(corrupt(at, "bad end-of-stream payload".into()));
                }
                let status = i32::from_le_bytes(payload[..4].try_into().unwrap());
                let count = u32::from_le_bytes(payload[4..].try_into().unwrap());
                if count as usize != self.entries.len() {
                    return Err(corrupt(
                        at,
                        format!(
                            "sender sent {count} entries, received {}",
                            self.entries.len()
                        ),
                    ));
                }
                return Ok(Some(status));
            }
        }
        Ok(None)
    }

    fn file_start(&mut self, payload: &[u8], at: usize) -> Result<(), StreamError> {
        let mode = mode_of(payload, at)?;
        let rel = path_of(&payload[4..], at)?;
        let full = self.dest.join(&rel);
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(|e| write_error(parent, e))?;
        }
        let f = fs::File::create(&full).map_err(|e| write_error(&full, e))?;
        // Keep the guest's permission bits (executables stay executable) but never set-id
        // bits on the host.
        f.set_permissions(fs::Permissions::from_mode(mode & 0o777))
            .map_err(|e| write_error(&full, e))?;
        self.open = Some((rel, f, 0, Crc32::new()));
        Ok(())
    }

    fn file_end(&mut self, payload: &[u8], at: usize) -> Result<(), StreamError> {
        if payload.len() != 12 {
            return Err(corrupt(at, "bad file-end payload".into()));
        }
        let (rel, f, size, fcrc) = self.open.take().unwrap();
        let want_size = u64::from_le_bytes(payload[..8].try_into().unwrap());
        let want_crc = u32::from_le_bytes(payload[8..].try_into().unwrap());
        if size != want_size || fcrc.finish() != want_crc {
            return Err(corrupt(
                at,
                format!(
                    "{}: received {size} bytes, sender had {want_size} (or contents differ)",
                    rel.display()
                ),
            ));
        }
        drop(f);
        self.bytes += size;
        self.entries.push(rel);
        Ok(())
    }

    fn symlink(&mut self, payload: &[u8], at: usize) -> Result<(), StreamError> {
        let n = mode_of(payload, at)? as usize;
        let rest = &payload[4..];
        if n > rest.len() {
            return Err(corrupt(at, "bad symlink payload".into()));
        }
        let rel = path_of(&rest[..n], at)?;
        let target = std::str::from_utf8(&rest[n..])
            .map_err(|_| corrupt(at, "link target not UTF-8".into()))?;
        let full = self.dest.join(&rel);
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(|e| write_error(parent, e))?;
        }
        let _ = fs::remove_file(&full);
        std::os::unix::fs::symlink(target, &full).map_err(|e| write_error(&full, e))?;
        self.entries.push(rel);
        Ok(())
    }

    fn complete(&mut self, payload: &[u8], at: usize) -> Result<(), StreamError> {
        let Some(st) = self.stopped.as_mut() else {
            return Err(corrupt(
                at,
                "a complete-entry frame without a stop report".into(),
            ));
        };
        let rel = path_of(payload, at)?;
        if !self.entries.contains(&rel) {
            return Err(corrupt(
                at,
                format!("{} is reported complete but was not sent", rel.display()),
            ));
        }
        st.complete.push(rel);
        Ok(())
    }
}

/// A payload's path, relative and inside the output directory.
fn path_of(bytes: &[u8], at: usize) -> Result<PathBuf, StreamError> {
    let s = std::str::from_utf8(bytes).map_err(|_| corrupt(at, "path is not UTF-8".into()))?;
    check_rel_path(s).map_err(|e| corrupt(at, e))?;
    Ok(PathBuf::from(s))
}

/// A payload's leading u32 (a mode, or a length).
fn mode_of(p: &[u8], at: usize) -> Result<u32, StreamError> {
    p.get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .ok_or_else(|| corrupt(at, "short payload".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_known_values() {
        assert_eq!(Crc32::of(b""), 0);
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(Crc32::of(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            Crc32::of(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        let mut c = Crc32::new();
        c.update(b"1234");
        c.update(b"56789");
        assert_eq!(c.finish(), 0xCBF4_3926);
    }

    fn sample_payload() -> Vec<u8> {
        // Every byte value, and more than one chunk, so chunk boundaries are exercised.
        (0..(3 * MAX_PAYLOAD + 1234))
            .map(|i| (i % 256) as u8)
            .collect()
    }

    fn sample_stream() -> Vec<u8> {
        let mut e = Encoder::new(Vec::new()).unwrap();
        e.file("a.txt", 0o644, &b"hello\n"[..]).unwrap();
        e.dir("sub", 0o755).unwrap();
        e.file("sub/all.bin", 0o755, &sample_payload()[..]).unwrap();
        e.file("sub/empty", 0o600, &b""[..]).unwrap();
        e.symlink("sub/link", "all.bin").unwrap();
        e.finish(7).unwrap()
    }

    #[test]
    fn round_trip_is_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let got = decode_bytes(&sample_stream(), dir.path()).unwrap();
        assert_eq!(got.status, 7);
        assert_eq!(
            got.entries,
            ["a.txt", "sub", "sub/all.bin", "sub/empty", "sub/link"]
                .map(PathBuf::from)
                .to_vec()
        );
        assert_eq!(got.bytes, 6 + sample_payload().len() as u64);
        assert_eq!(fs::read(dir.path().join("a.txt")).unwrap(), b"hello\n");
        assert_eq!(
            fs::read(dir.path().join("sub/all.bin")).unwrap(),
            sample_payload()
        );
        assert_eq!(fs::read(dir.path().join("sub/empty")).unwrap(), b"");
        assert_eq!(
            fs::read_link(dir.path().join("sub/link")).unwrap(),
            Path::new("all.bin")
        );
        let mode = fs::metadata(dir.path().join("sub/all.bin"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let stream = sample_stream();
        // Flip one bit at many offsets spread across headers, payloads and CRCs.
        let step = stream.len() / 997;
        for off in (0..stream.len()).step_by(step.max(1)) {
            let mut bad = stream.clone();
            bad[off] ^= 0x10;
            let dir = tempfile::tempdir().unwrap();
            let r = decode_bytes(&bad, dir.path());
            assert!(r.is_err(), "flip at byte {off} went unnoticed");
        }
    }

    #[test]
    fn truncation_is_detected_at_every_length() {
        let stream = sample_stream();
        for cut in (0..stream.len()).step_by(101).chain([stream.len() - 1]) {
            let dir = tempfile::tempdir().unwrap();
            let r = decode_bytes(&stream[..cut], dir.path());
            assert!(
                matches!(
                    r,
                    Err(StreamError::Empty
                        | StreamError::BadStreamMagic
                        | StreamError::Truncated { .. }
                        | StreamError::NoDone { .. })
                ),
                "cut at {cut}: {r:?}"
            );
        }
    }

    /// A whole frame dropped (as a lost chunk would be) keeps every remaining CRC valid;
    /// the sequence number must catch it.
    #[test]
    fn dropped_frame_is_detected() {
        let stream = sample_stream();
        // Find the second Data frame of sub/all.bin by walking the frames.
        let mut pos = STREAM_MAGIC.len();
        let mut frames = Vec::new();
        while pos < stream.len() {
            let len = u32::from_le_bytes(stream[pos + 7..pos + 11].try_into().unwrap()) as usize;
            frames.push((pos, stream[pos + 6], HEADER_LEN + len + 4));
            pos += HEADER_LEN + len + 4;
        }
        let data_frames: Vec<_> = frames.iter().filter(|f| f.1 == 2).collect();
        let (off, _, flen) = *data_frames[2];
        let mut bad = stream[..off].to_vec();
        bad.extend_from_slice(&stream[off + flen..]);
        let dir = tempfile::tempdir().unwrap();
        let err = decode_bytes(&bad, dir.path()).unwrap_err();
        assert!(err.to_string().contains("sequence"), "{err}");
    }

    #[test]
    fn trailing_garbage_and_escaping_paths_are_rejected() {
        let mut s = sample_stream();
        s.push(b'x');
        let dir = tempfile::tempdir().unwrap();
        assert!(decode_bytes(&s, dir.path()).is_err());

        let mut e = Encoder::new(Vec::new()).unwrap();
        assert!(e.file("../evil", 0o644, &b"x"[..]).is_err());
        assert!(e.file("/abs", 0o644, &b"x"[..]).is_err());
    }

    #[test]
    fn a_stop_report_round_trips_and_must_name_sent_entries() {
        let mut e = Encoder::new(Vec::new()).unwrap();
        e.dir("done", 0o755).unwrap();
        e.file("done/f", 0o644, &b"f"[..]).unwrap();
        e.file("log", 0o644, &b"half"[..]).unwrap();
        e.stopped(true, &["done"]).unwrap();
        let stream = e.finish(137).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let got = decode_bytes(&stream, dir.path()).unwrap();
        assert_eq!(got.status, 137);
        assert_eq!(
            got.stopped,
            Some(Stopped {
                killed: true,
                complete: vec![PathBuf::from("done")]
            })
        );
        // An ordinary stream has no stop report.
        assert_eq!(
            decode_bytes(&sample_stream(), tempfile::tempdir().unwrap().path())
                .unwrap()
                .stopped,
            None
        );

        let mut e = Encoder::new(Vec::new()).unwrap();
        e.file("log", 0o644, &b"half"[..]).unwrap();
        e.stopped(false, &["other"]).unwrap();
        let err =
            decode_bytes(&e.finish(143).unwrap(), tempfile::tempdir().unwrap().path()).unwrap_err();
        assert!(err.to_string().contains("was not sent"), "{err}");

        let mut e = Encoder::new(Vec::new()).unwrap();
        e.stopped(false, &[]).unwrap();
        e.file("late", 0o644, &b"x"[..]).unwrap();
        let err =
            decode_bytes(&e.finish(143).unwrap(), tempfile::tempdir().unwrap().path()).unwrap_err();
        assert!(err.to_string().contains("after the stop report"), "{err}");
    }

    #[test]
    fn empty_stream_has_its_own_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            decode_bytes(b"", dir.path()),
            Err(StreamError::Empty)
        ));
    }
}
