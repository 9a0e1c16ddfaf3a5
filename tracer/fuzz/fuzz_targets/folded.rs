//! Folded stacks: any text parses or is refused with a line number; what parses writes back
//! in a form that parses to the same stacks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::rundata::{parse_folded, write_folded};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(lines) = parse_folded(text) {
        let mut out = Vec::new();
        write_folded(&mut out, &lines).expect("write to memory");
        let again = parse_folded(std::str::from_utf8(&out).expect("utf-8")).expect("re-parse");
        assert_eq!(again, lines);
    }
});
