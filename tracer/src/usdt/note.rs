//! The `.note.stapsdt` section: one ELF note per USDT probe site, written by `<sys/sdt.h>`.
//!
//! Each note is `namesz, descsz, type` (u32 each), the owner name (`"stapsdt\0"`) padded to 4
//! bytes, then the descriptor padded to 4: the probe's address, the address of
//! `.stapsdt.base` when the binary was linked (to adjust for prelinking), the semaphore's
//! address (0: none), and three NUL-terminated strings: provider, probe name, argument specs.
//! Only ELF64 little-endian (x86-64) is read; addresses are 8 bytes.

/// `NT_STAPSDT`: the note type of a probe descriptor.
pub const NT_STAPSDT: u32 = 3;
const OWNER: &[u8] = b"stapsdt";

/// One probe descriptor as written in the note, addresses not yet adjusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawNote {
    pub provider: String,
    pub name: String,
    /// The probe site (a `nop`), as a link-time virtual address.
    pub pc: u64,
    /// What the linker saw as the address of `.stapsdt.base`.
    pub base: u64,
    /// The semaphore (a `unsigned short` the program tests before firing), 0 for none.
    pub semaphore: u64,
    /// Argument specs separated by spaces, e.g. `-4@%edi 8@-16(%rbp) 8@$5`.
    pub args: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("note at byte {at}: its header or contents run past the end of the section")]
    Truncated { at: usize },
    #[error("note at byte {at}: descriptor of {len} bytes, too short for a stapsdt probe")]
    ShortDescriptor { at: usize, len: usize },
    #[error("note at byte {at}: the {what} string is not NUL-terminated")]
    Unterminated { at: usize, what: &'static str },
    #[error("note at byte {at}: the {what} string is not UTF-8")]
    NotUtf8 { at: usize, what: &'static str },
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    let b = data.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn align4(v: usize) -> Option<usize> {
    v.checked_add(3).map(|x| x & !3)
}

/// Every stapsdt probe descriptor of a note section's bytes, in order. Notes of other owners
/// or types are skipped; a malformed stapsdt note is an error (the probe it describes cannot
/// be trusted, and the ones after it cannot be found).
pub fn parse_notes(data: &[u8]) -> Result<Vec<RawNote>, NoteError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    // Trailing bytes shorter than a header are alignment padding.
    while data.len().saturating_sub(at) >= 12 {
        let trunc = NoteError::Truncated { at };
        let namesz = u32_at(data, at).ok_or(trunc.clone())? as usize;
        let descsz = u32_at(data, at + 4).ok_or(trunc.clone())? as usize;
        let ntype = u32_at(data, at + 8).ok_or(trunc.clone())?;
        let name_start = at + 12;
        let desc_start = name_start
            .checked_add(align4(namesz).ok_or(trunc.clone())?)
            .ok_or(trunc.clone())?;
        let next = desc_start
            .checked_add(align4(descsz).ok_or(trunc.clone())?)
            .ok_or(trunc.clone())?;
        let desc_end = desc_start.checked_add(descsz).ok_or(trunc.clone())?;
        if desc_end > data.len() || name_start + namesz > data.len() {
            return Err(trunc);
        }
        let owner = &data[name_start..name_start + namesz];
        let owner = owner.strip_suffix(b"\0").unwrap_or(owner);
        if owner == OWNER && ntype == NT_STAPSDT {
            out.push(descriptor(&data[desc_start..desc_end], at)?);
        }
        // The last note's padding may be cut off by the section's end.
        at = next.min(data.len());
    }
    Ok(out)
}

fn descriptor(desc: &[u8], at: usize) -> Result<RawNote, NoteError> {
    if desc.len() < 24 + 3 {
        return Err(NoteError::ShortDescriptor {
            at,
            len: desc.len(),
        });
    }
    let pc = u64_at(desc, 0).unwrap_or(0);
    let base = u64_at(desc, 8).unwrap_or(0);
    let semaphore = u64_at(desc, 16).unwrap_or(0);
    let mut rest = &desc[24..];
    let mut take = |what: &'static str| -> Result<String, NoteError> {
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(NoteError::Unterminated { at, what })?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|_| NoteError::NotUtf8 { at, what })?
            .to_string();
        rest = &rest[end + 1..];
        Ok(s)
    };
    let provider = take("provider")?;
    let name = take("probe name")?;
    let args = take("arguments")?;
    Ok(RawNote {
        provider,
        name,
        pc,
        base,
        semaphore,
        args,
    })
}

/// The bytes of one stapsdt note (for tests and fuzz seeds).
pub fn encode_note(n: &RawNote) -> Vec<u8> {
    let mut desc = Vec::new();
    desc.extend_from_slice(&n.pc.to_le_bytes());
    desc.extend_from_slice(&n.base.to_le_bytes());
    desc.extend_from_slice(&n.semaphore.to_le_bytes());
    for s in [&n.provider, &n.name, &n.args] {
        desc.extend_from_slice(s.as_bytes());
        desc.push(0);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    out.extend_from_slice(&NT_STAPSDT.to_le_bytes());
    out.extend_from_slice(b"stapsdt\0");
    out.extend_from_slice(&desc);
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &str, args: &str) -> RawNote {
        RawNote {
            provider: "tracer".into(),
            name: name.into(),
            pc: 0x401539,
            base: 0x494c74,
            semaphore: 0x4a5ab8,
            args: args.into(),
        }
    }

    #[test]
    fn notes_round_trip_and_foreign_notes_are_skipped() {
        let a = note("phase_begin", "4@$1 8@%rbx");
        let b = note("phase_end", "-4@%edi 8@-16(%rbp) 8@$5");
        // A GNU build-id note between them: another owner, skipped.
        let mut bytes = encode_note(&a);
        bytes.extend_from_slice(&4u32.to_le_bytes());
        bytes.extend_from_slice(&4u32.to_le_bytes());
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(b"GNU\0abcd");
        bytes.extend(encode_note(&b));
        assert_eq!(parse_notes(&bytes).unwrap(), vec![a, b]);
    }

    #[test]
    fn malformed_notes_are_errors_not_panics() {
        let good = encode_note(&note("phase_begin", "8@%rdi"));
        // Cut anywhere inside the note (12 + 8 + 50 bytes; the rest is padding): truncated
        // (or, within the strings, unterminated).
        for cut in 12..70 {
            let e = parse_notes(&good[..cut]);
            assert!(e.is_err(), "cut at {cut} parsed: {e:?}");
        }
        // A descriptor size beyond the section.
        let mut big = good.clone();
        big[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse_notes(&big), Err(NoteError::Truncated { at: 0 }));
        // The strings without their terminating NUL.
        let mut unterminated = good.clone();
        let len = unterminated.len();
        for b in &mut unterminated[36..len] {
            if *b == 0 {
                *b = b'x';
            }
        }
        assert!(matches!(
            parse_notes(&unterminated),
            Err(NoteError::Unterminated { .. })
        ));
        // Too short a descriptor.
        let mut short = good[..28].to_vec();
        short[4..8].copy_from_slice(&8u32.to_le_bytes());
        assert!(matches!(
            parse_notes(&short),
            Err(NoteError::ShortDescriptor { len: 8, .. })
        ));
        // Not UTF-8.
        let mut bad = good.clone();
        bad[12 + 8 + 24] = 0xff;
        assert!(matches!(parse_notes(&bad), Err(NoteError::NotUtf8 { .. })));
    }

    #[test]
    fn empty_and_padding_only_sections_have_no_probes() {
        assert_eq!(parse_notes(&[]).unwrap(), vec![]);
        assert_eq!(parse_notes(&[0; 8]).unwrap(), vec![]);
    }
}
