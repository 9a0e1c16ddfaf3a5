//! `.note.stapsdt` sections: any bytes parse or are refused; what parses re-encodes to the
//! same notes; the same bytes as the note section of an x86-64 executable give probes whose
//! sites lie in its text segment, or a named error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::usdt::{self, note, testelf};

fuzz_target!(|data: &[u8]| {
    if let Ok(notes) = note::parse_notes(data) {
        let again: Vec<u8> = notes.iter().flat_map(note::encode_note).collect();
        if notes.iter().all(|n| ![&n.provider, &n.name, &n.args].iter().any(|s| s.contains('\0'))) {
            assert_eq!(note::parse_notes(&again).expect("re-parse"), notes);
        }
    }
    let elf = testelf::x86_64_elf(data);
    if let Ok(probes) = usdt::probes(&elf) {
        for p in probes {
            let start = testelf::TEXT_OFFSET;
            assert!(p.file_offset >= start && p.file_offset < start + testelf::TEXT_SIZE);
        }
    }
    let _ = usdt::phase_sites(&elf);
    let _ = usdt::probes(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = usdt::args::parse_args(text);
    }
});
