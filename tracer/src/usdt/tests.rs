use super::note::{RawNote, encode_note};
use super::testelf::*;
use super::*;

fn raw(name: &str, pc: u64, base: u64, sem: u64, args: &str) -> RawNote {
    RawNote {
        provider: PROVIDER.into(),
        name: name.into(),
        pc,
        base,
        semaphore: sem,
        args: args.into(),
    }
}

#[test]
fn sites_map_to_file_offsets_with_semaphores_and_specs() {
    let mut notes = encode_note(&raw(
        BEGIN,
        TEXT_VADDR + 0x10,
        BASE_VADDR,
        DATA_VADDR + 8,
        "-4@%edi 8@%rbx",
    ));
    notes.extend(encode_note(&raw(
        BEGIN,
        TEXT_VADDR + 0x40,
        BASE_VADDR,
        DATA_VADDR + 8,
        "4@$1 8@-16(%rbp)",
    )));
    notes.extend(encode_note(&raw(
        END,
        TEXT_VADDR + 0x20,
        BASE_VADDR,
        0,
        "4@$1 8@%rbx 8@$5",
    )));
    // Someone else's probe, with an argument we cannot evaluate: not a phase site, no error.
    let mut other = raw("tick", TEXT_VADDR + 0x30, BASE_VADDR, 0, "8@sym(%rip)");
    other.provider = "myapp".into();
    notes.extend(encode_note(&other));
    let elf = x86_64_elf(&notes);
    // Listing every probe reads the foreign one's arguments too, and cannot evaluate them.
    assert!(probes(&elf).unwrap_err().to_string().contains("myapp:tick"));
    let sites = phase_sites(&elf).unwrap();
    assert_eq!(sites.len(), 3);
    assert_eq!(sites[0].probe.file_offset, TEXT_OFFSET + 0x10);
    assert_eq!(sites[0].probe.semaphore_offset, Some(DATA_OFFSET + 8));
    assert_eq!(sites[0].spec.role, tracer_ebpf::USDT_ROLE_BEGIN);
    assert_eq!(sites[0].spec.args[0].kind, tracer_ebpf::USDT_ARG_REG);
    assert_eq!(sites[0].spec.args[0].signed, 1);
    assert_eq!(sites[0].spec.args[0].reg_off, 112);
    assert_eq!(sites[1].spec.args[1].kind, tracer_ebpf::USDT_ARG_MEM);
    assert_eq!(sites[1].spec.args[1].value, -16);
    assert_eq!(sites[2].spec.role, tracer_ebpf::USDT_ROLE_END);
    assert_eq!(sites[2].probe.semaphore_offset, None);
    assert_eq!(sites[2].spec.args[2].kind, tracer_ebpf::USDT_ARG_CONST);
    assert_eq!(sites[2].spec.args[2].value, 5);
}

#[test]
fn a_prelinked_file_is_adjusted_by_the_move_of_stapsdt_base() {
    // The notes say .stapsdt.base was 0x1000 lower when linked: sites and semaphore moved
    // up by as much.
    let old_base = BASE_VADDR - 0x1000;
    let notes = encode_note(&raw(
        BEGIN,
        TEXT_VADDR - 0x1000 + 0x10,
        old_base,
        DATA_VADDR - 0x1000 + 4,
        "8@%rdi 8@%rsi",
    ));
    let p = &probes(&x86_64_elf(&notes)).unwrap()[0];
    assert_eq!(p.addr, TEXT_VADDR + 0x10);
    assert_eq!(p.file_offset, TEXT_OFFSET + 0x10);
    assert_eq!(p.semaphore_offset, Some(DATA_OFFSET + 4));
}

#[test]
fn bad_files_and_notes_are_named_errors() {
    assert!(matches!(
        probes(b"#!/bin/sh\necho hi\n"),
        Err(UsdtError::NotElf(_))
    ));
    assert!(matches!(probes(&[]), Err(UsdtError::NotElf(_))));
    let ok = encode_note(&raw(BEGIN, TEXT_VADDR, BASE_VADDR, 0, "8@%rdi 8@%rsi"));
    // aarch64
    assert!(matches!(
        probes(&elf_with_notes(&ok, 183)),
        Err(UsdtError::Architecture(_))
    ));
    // A site in the data segment, or nowhere.
    for pc in [DATA_VADDR + 4, 0x10, u64::MAX] {
        let n = encode_note(&raw(BEGIN, pc, BASE_VADDR, 0, "8@%rdi 8@%rsi"));
        let e = probes(&x86_64_elf(&n)).unwrap_err();
        assert!(
            e.to_string().contains("outside every executable segment"),
            "{e}"
        );
    }
    // A semaphore past the data segment's file-backed bytes.
    let n = encode_note(&raw(
        BEGIN,
        TEXT_VADDR,
        BASE_VADDR,
        DATA_VADDR + DATA_SIZE + 8,
        "8@%rdi 8@%rsi",
    ));
    assert!(
        probes(&x86_64_elf(&n))
            .unwrap_err()
            .to_string()
            .contains("semaphore")
    );
    // A base adjustment that overflows.
    let n = encode_note(&raw(BEGIN, u64::MAX, 1, 0, ""));
    assert!(
        probes(&x86_64_elf(&n))
            .unwrap_err()
            .to_string()
            .contains("adjustment")
    );
    // An argument the probes cannot evaluate.
    let n = encode_note(&raw(BEGIN, TEXT_VADDR, BASE_VADDR, 0, "8@x(%rip) 8@%rsi"));
    let e = probes(&x86_64_elf(&n)).unwrap_err().to_string();
    assert!(
        e.contains("tracer:phase_begin") && e.contains("x(%rip)"),
        "{e}"
    );
    // Our probe with too few arguments.
    let n = encode_note(&raw(END, TEXT_VADDR, BASE_VADDR, 0, "8@%rdi 8@%rsi"));
    let e = phase_sites(&x86_64_elf(&n)).unwrap_err().to_string();
    assert!(
        e.contains("2 argument(s)") && e.contains("case, n, ops"),
        "{e}"
    );
    // A note section cut short.
    let e = probes(&x86_64_elf(&ok[..ok.len() - 6])).unwrap_err();
    assert!(matches!(e, UsdtError::Note(_)), "{e}");
}

#[test]
fn a_file_without_notes_has_no_probes() {
    let elf = x86_64_elf(&[]);
    assert!(probes(&elf).unwrap().is_empty());
}
