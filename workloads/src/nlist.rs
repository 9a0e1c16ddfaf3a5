//! The `--n LIST` syntax: which sizes a workload sweeps.
//!
//! ```text
//! LIST   := ITEM ( ',' ITEM )*
//! ITEM   := NUM                      one size
//!         | NUM '..' NUM '*' FACTOR  geometric range: start, start*F, start*F^2, ... and the end
//!         | NUM '..' NUM '+' STEP    linear range: start, start+S, start+2S, ... and the end
//! NUM    := decimal digits, '_' allowed between digits, optional suffix k (x1000) or m (x1000000)
//! FACTOR := a number greater than 1; decimals are allowed (1.5)
//! ```
//!
//! Both ends of a range are included, so the largest size asked for is always measured:
//! `1..8000*4` is 1, 4, 16, 64, 256, 1024, 4096, 8000, and `1k..4k+1k` is 1000, 2000, 3000,
//! 4000. Every value must be at least 1. The result is sorted ascending with duplicates
//! removed, because a sweep is fitted against N and workloads grow their setup incrementally.

use std::fmt;
use std::str::FromStr;

/// Upper bound on how many sizes one list may expand to (a typo like `1..1m+1` should fail
/// loudly rather than run for a week).
pub const MAX_VALUES: usize = 10_000;

/// A parsed, sorted, de-duplicated list of sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NList(pub Vec<u64>);

/// Why a `--n` list was rejected. Each message quotes the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NListError {
    #[error("the list is empty; give sizes like 1,10,100 or a range like 1..8000*4")]
    Empty,
    #[error("item {index} is empty (stray or trailing comma?)")]
    EmptyItem { index: usize },
    #[error("'{text}' is not a size: {reason}")]
    BadNumber { text: String, reason: String },
    #[error("'{item}': sizes must be at least 1")]
    Zero { item: String },
    #[error("'{item}': {reason}")]
    BadRange { item: String, reason: String },
    #[error("the list expands to more than {MAX_VALUES} sizes")]
    TooMany,
}

impl FromStr for NList {
    type Err = NListError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s).map(NList)
    }
}

impl fmt::Display for NList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// Parses a list; see the module documentation for the syntax.
pub fn parse(s: &str) -> Result<Vec<u64>, NListError> {
    if s.trim().is_empty() {
        return Err(NListError::Empty);
    }
    let mut out = Vec::new();
    for (index, raw) in s.split(',').enumerate() {
        let item = raw.trim();
        if item.is_empty() {
            return Err(NListError::EmptyItem { index: index + 1 });
        }
        if item.contains("..") {
            expand_range(item, &mut out)?;
        } else {
            let v = parse_number(item)?;
            if v == 0 {
                return Err(NListError::Zero {
                    item: item.to_string(),
                });
            }
            out.push(v);
        }
        if out.len() > MAX_VALUES {
            return Err(NListError::TooMany);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn bad_range(item: &str, reason: impl Into<String>) -> NListError {
    NListError::BadRange {
        item: item.to_string(),
        reason: reason.into(),
    }
}

fn expand_range(item: &str, out: &mut Vec<u64>) -> Result<(), NListError> {
    let (start_s, rest) = item.split_once("..").expect("caller checked for '..'");
    if rest.contains("..") {
        return Err(bad_range(item, "a range has exactly one '..'"));
    }
    let (end_s, step) = if let Some((e, f)) = rest.split_once('*') {
        (e, Step::Factor(parse_factor(item, f)?))
    } else if let Some((e, s)) = rest.split_once('+') {
        let s = parse_number(s.trim())?;
        if s == 0 {
            return Err(bad_range(item, "the step after '+' must be at least 1"));
        }
        (e, Step::Add(s))
    } else {
        return Err(bad_range(
            item,
            "a range needs a step: write START..END*FACTOR (geometric, e.g. 1..8000*4) \
             or START..END+STEP (linear, e.g. 1000..8000+1000)",
        ));
    };
    let start = parse_number(start_s.trim())?;
    let end = parse_number(end_s.trim())?;
    if start == 0 {
        return Err(NListError::Zero {
            item: item.to_string(),
        });
    }
    if start > end {
        return Err(bad_range(
            item,
            format!("start {start} is larger than end {end}"),
        ));
    }
    let mut v = start;
    loop {
        out.push(v);
        if out.len() > MAX_VALUES {
            return Err(NListError::TooMany);
        }
        let next = match step {
            Step::Add(s) => v.checked_add(s),
            Step::Factor(f) if f.fract() == 0.0 => v.checked_mul(f as u64),
            Step::Factor(f) => {
                let x = (v as f64 * f).round();
                // Small starts with small factors (1..100*1.2) must still make progress.
                if x >= u64::MAX as f64 {
                    None
                } else {
                    Some((x as u64).max(v + 1))
                }
            }
        };
        match next {
            Some(n) if n < end => v = n,
            _ => break,
        }
    }
    if *out.last().expect("pushed at least one") != end {
        out.push(end);
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Step {
    Add(u64),
    Factor(f64),
}

fn parse_factor(item: &str, text: &str) -> Result<f64, NListError> {
    let t = text.trim();
    let f: f64 = t.parse().map_err(|_| NListError::BadNumber {
        text: t.to_string(),
        reason: "the factor after '*' must be a number such as 2 or 1.5".to_string(),
    })?;
    if !f.is_finite() || f <= 1.0 {
        return Err(bad_range(
            item,
            format!("the factor {t} must be greater than 1"),
        ));
    }
    Ok(f)
}

/// Parses one size: digits, optional '_' separators, optional k/m suffix.
pub fn parse_number(text: &str) -> Result<u64, NListError> {
    let bad = |reason: &str| NListError::BadNumber {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let (digits, mult) = match text.as_bytes().last() {
        Some(b'k' | b'K') => (&text[..text.len() - 1], 1_000u64),
        Some(b'm' | b'M') => (&text[..text.len() - 1], 1_000_000u64),
        _ => (text, 1),
    };
    if digits.is_empty() {
        return Err(bad("expected digits"));
    }
    if digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return Err(bad("'_' may only separate digits"));
    }
    let mut v: u64 = 0;
    for c in digits.chars() {
        match c {
            '_' => {}
            '0'..='9' => {
                v = v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(c as u8 - b'0')))
                    .ok_or_else(|| bad("too large"))?;
            }
            '-' => return Err(bad("sizes cannot be negative")),
            _ => return Err(bad("expected digits with an optional k or m suffix")),
        }
    }
    v.checked_mul(mult).ok_or_else(|| bad("too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_lists() {
        let cases: &[(&str, &[u64])] = &[
            ("1", &[1]),
            ("1,10,100,1000", &[1, 10, 100, 1000]),
            (" 1000 , 10,1 ", &[1, 10, 1000]),
            ("8000,1,1,8000", &[1, 8000]),
            ("1..8000*4", &[1, 4, 16, 64, 256, 1024, 4096, 8000]),
            ("1..4096*4", &[1, 4, 16, 64, 256, 1024, 4096]),
            ("1k..4k+1k", &[1000, 2000, 3000, 4000]),
            ("1000..3500+1000", &[1000, 2000, 3000, 3500]),
            ("5..5*2", &[5]),
            ("1..10*1.5", &[1, 2, 3, 5, 8, 10]),
            ("64k", &[64_000]),
            ("2m", &[2_000_000]),
            ("1_000", &[1000]),
            ("1,2..8*2,100", &[1, 2, 4, 8, 100]),
            ("10..20*100", &[10, 20]),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse(input).unwrap_or_else(|e| panic!("{input}: {e}")),
                *want,
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_bad_lists_with_a_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("   ", "empty"),
            ("1,,2", "item 2 is empty"),
            ("1,2,", "item 3 is empty"),
            ("abc", "'abc' is not a size"),
            ("12x", "'12x' is not a size"),
            ("-5", "negative"),
            ("0", "at least 1"),
            ("0..10*2", "at least 1"),
            ("1..8000", "needs a step"),
            ("1..8000*1", "greater than 1"),
            ("1..8000*0.5", "greater than 1"),
            ("1..8000*x", "factor after '*'"),
            ("1..8000+0", "at least 1"),
            ("100..10*2", "larger than end"),
            ("1..2..3*2", "exactly one"),
            ("99999999999999999999", "too large"),
            ("99999999999999999m", "too large"),
            ("1..1m+1", "more than"),
            ("_1", "'_' may only"),
            ("k", "expected digits"),
        ];
        for (input, want) in cases {
            match parse(input) {
                Ok(v) => panic!("{input:?} should be rejected, parsed as {v:?}"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains(want),
                        "{input:?}: message {msg:?} should mention {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn from_str_and_display_round_trip() {
        let l: NList = "1..64*4,1000".parse().expect("valid");
        assert_eq!(l.to_string(), "1,4,16,64,1000");
        assert_eq!(l.to_string().parse::<NList>().expect("valid"), l);
    }
}
