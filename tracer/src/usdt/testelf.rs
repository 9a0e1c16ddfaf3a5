//! A minimal x86-64 ELF64 executable around a `.note.stapsdt` section, built byte by byte:
//! for the parser's unit tests and property tests and the fuzzer's seeds (no compiler
//! needed, every field under the test's control).

/// Where the synthetic file puts things.
pub const TEXT_VADDR: u64 = 0x40_1000;
pub const TEXT_OFFSET: u64 = 0x1000;
pub const TEXT_SIZE: u64 = 0x100;
pub const DATA_VADDR: u64 = 0x40_3000;
pub const DATA_OFFSET: u64 = 0x2000;
pub const DATA_SIZE: u64 = 0x100;
/// `.stapsdt.base` sits at the start of the data segment.
pub const BASE_VADDR: u64 = DATA_VADDR;
const NOTE_OFFSET: u64 = 0x3000;

fn put(buf: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    if buf.len() < at + bytes.len() {
        buf.resize(at + bytes.len(), 0);
    }
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// An executable whose `.note.stapsdt` holds `notes` (the bytes of the section), with a text
/// segment at `TEXT_VADDR` and a data segment at `DATA_VADDR`.
pub fn elf_with_notes(notes: &[u8], machine: u16) -> Vec<u8> {
    let mut f = Vec::new();
    let shstr: &[u8] = b"\0.text\0.stapsdt.base\0.note.stapsdt\0.shstrtab\0";
    let shstr_off = NOTE_OFFSET as usize + notes.len();
    let sh_off = (shstr_off + shstr.len() + 7) & !7;
    // ELF header.
    put(&mut f, 0, &[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    put(&mut f, 16, &2u16.to_le_bytes()); // ET_EXEC
    put(&mut f, 18, &machine.to_le_bytes());
    put(&mut f, 20, &1u32.to_le_bytes());
    put(&mut f, 24, &TEXT_VADDR.to_le_bytes());
    put(&mut f, 32, &64u64.to_le_bytes()); // e_phoff
    put(&mut f, 40, &(sh_off as u64).to_le_bytes());
    put(&mut f, 52, &64u16.to_le_bytes());
    put(&mut f, 54, &56u16.to_le_bytes());
    put(&mut f, 56, &2u16.to_le_bytes());
    put(&mut f, 58, &64u16.to_le_bytes());
    put(&mut f, 60, &5u16.to_le_bytes());
    put(&mut f, 62, &4u16.to_le_bytes());
    // Program headers: text (R+X) and data (R+W).
    for (i, (flags, off, va, sz)) in [
        (5u32, TEXT_OFFSET, TEXT_VADDR, TEXT_SIZE),
        (6, DATA_OFFSET, DATA_VADDR, DATA_SIZE),
    ]
    .into_iter()
    .enumerate()
    {
        let at = 64 + i * 56;
        put(&mut f, at, &1u32.to_le_bytes());
        put(&mut f, at + 4, &flags.to_le_bytes());
        put(&mut f, at + 8, &off.to_le_bytes());
        put(&mut f, at + 16, &va.to_le_bytes());
        put(&mut f, at + 24, &va.to_le_bytes());
        put(&mut f, at + 32, &sz.to_le_bytes());
        put(&mut f, at + 40, &sz.to_le_bytes());
        put(&mut f, at + 48, &0x1000u64.to_le_bytes());
    }
    put(&mut f, (DATA_OFFSET + DATA_SIZE) as usize - 1, &[0]);
    put(&mut f, NOTE_OFFSET as usize, notes);
    put(&mut f, shstr_off, shstr);
    // Section headers: null, .text, .stapsdt.base, .note.stapsdt, .shstrtab.
    let sections: [(u32, u32, u64, u64, u64, u64); 5] = [
        (0, 0, 0, 0, 0, 0),
        (1, 1, 6, TEXT_VADDR, TEXT_OFFSET, TEXT_SIZE),
        (7, 1, 2, BASE_VADDR, DATA_OFFSET, 1),
        (21, 7, 0, 0, NOTE_OFFSET, notes.len() as u64),
        (35, 3, 0, 0, shstr_off as u64, shstr.len() as u64),
    ];
    for (i, (name, ty, flags, addr, off, size)) in sections.into_iter().enumerate() {
        let at = sh_off + i * 64;
        put(&mut f, at, &name.to_le_bytes());
        put(&mut f, at + 4, &ty.to_le_bytes());
        put(&mut f, at + 8, &flags.to_le_bytes());
        put(&mut f, at + 16, &addr.to_le_bytes());
        put(&mut f, at + 24, &off.to_le_bytes());
        put(&mut f, at + 32, &size.to_le_bytes());
        put(
            &mut f,
            at + 48,
            &(if ty == 7 { 4u64 } else { 1 }).to_le_bytes(),
        );
        put(&mut f, at + 56, &0u64.to_le_bytes());
    }
    f
}

/// `elf_with_notes` for x86-64.
pub fn x86_64_elf(notes: &[u8]) -> Vec<u8> {
    elf_with_notes(notes, 62)
}
