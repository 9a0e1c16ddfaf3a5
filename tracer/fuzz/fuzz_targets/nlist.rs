//! `--n` lists: any text parses to a sorted, duplicate-free, bounded list of sizes >= 1, or to
//! an error; never a panic, never an endless expansion.
#![no_main]

use libfuzzer_sys::fuzz_target;
use workloads::nlist::{MAX_VALUES, NList, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(v) = parse(text) {
        assert!(!v.is_empty(), "{text:?} parsed to nothing");
        assert!(v.len() <= MAX_VALUES, "{text:?}: {} sizes", v.len());
        assert!(v[0] >= 1, "{text:?}: size 0");
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "{text:?}: not strictly ascending"
        );
        let canon = NList(v.clone()).to_string();
        assert_eq!(parse(&canon).as_ref(), Ok(&v), "canonical form of {text:?}");
    }
});
