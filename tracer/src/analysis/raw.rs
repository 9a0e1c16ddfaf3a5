//! Exact percentiles from the raw per-call spans of `events.csv` (`record --raw-events`).
//!
//! The in-kernel histograms place each percentile within one bucket (1/16 of the value); when
//! a run also kept every call, the tables can say exactly. The file is streamed once: only
//! the on-CPU time of each call is kept (8 bytes per span), grouped by (target, case, N), and
//! reduced to the percentiles the tables show.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::rundata::EVENTS_HEADER;

/// Percentiles the tables show, as fractions.
pub const QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// Exact on-CPU percentiles of one (target, case, N).
#[derive(Clone, Debug, PartialEq)]
pub struct Exact {
    /// Spans behind the figures.
    pub count: u64,
    /// Nearest-rank values for [`QUANTILES`], in ns.
    pub oncpu: [u64; QUANTILES.len()],
}

/// Exact percentiles of every (target, case, N) in one run's `events.csv`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawPercentiles {
    by_key: HashMap<(String, u32, u64), Exact>,
}

impl RawPercentiles {
    pub fn get(&self, target: &str, case: u32, n: u64) -> Option<&Exact> {
        self.by_key.get(&(target.to_string(), case, n))
    }

    /// Spans read.
    pub fn rows(&self) -> u64 {
        self.by_key.values().map(|e| e.count).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RawError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: line {line}: {what}")]
    Corrupt {
        path: PathBuf,
        line: u64,
        what: String,
    },
}

/// The nearest-rank `q`-quantile of sorted values (the same rank rule as the histograms').
fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    let n = sorted.len() as u64;
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    sorted[(rank - 1) as usize]
}

/// One `events.csv` row: a traced call that ended at `end_ns` (kernel monotonic clock) after
/// `wall_ns`, of which `oncpu_ns` on a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub end_ns: u64,
    pub tid: u32,
    pub tgid: u32,
    pub target: &'a str,
    pub case: u32,
    pub n: u64,
    pub wall_ns: u64,
    pub oncpu_ns: u64,
}

/// Parse one data line.
fn parse_line(line: &str) -> Result<RawEvent<'_>, String> {
    let mut f = line.split(',');
    let mut next = |name: &str| f.next().ok_or_else(|| format!("missing field {name}"));
    let num = |name: &str, s: &str| -> Result<u64, String> {
        s.parse::<u64>()
            .map_err(|_| format!("{name} {s:?} is not a number"))
    };
    let num32 = |name: &str, s: &str| -> Result<u32, String> {
        u32::try_from(num(name, s)?).map_err(|_| format!("{name} {s} too large"))
    };
    let end_ns = num("end_ns", next("end_ns")?)?;
    let tid = num32("tid", next("tid")?)?;
    let tgid = num32("tgid", next("tgid")?)?;
    let target = next("target")?;
    if target.is_empty() {
        return Err("empty target".into());
    }
    let case = num32("case", next("case")?)?;
    let n = num("n", next("n")?)?;
    let wall_ns = num("wall_ns", next("wall_ns")?)?;
    let oncpu_ns = num("oncpu_ns", next("oncpu_ns")?)?;
    if f.next().is_some() {
        return Err("more than 8 fields".into());
    }
    if oncpu_ns > wall_ns {
        return Err(format!(
            "on-CPU time {oncpu_ns} exceeds wall time {wall_ns}"
        ));
    }
    Ok(RawEvent {
        end_ns,
        tid,
        tgid,
        target,
        case,
        n,
        wall_ns,
        oncpu_ns,
    })
}

/// Stream every row of `events.csv` from any reader to `f`, checking the header and each
/// line; `path` names the file in errors.
pub fn for_each_event(
    r: impl Read,
    path: &Path,
    mut f: impl FnMut(RawEvent<'_>),
) -> Result<(), RawError> {
    let corrupt = |line: u64, what: String| RawError::Corrupt {
        path: path.to_path_buf(),
        line,
        what,
    };
    let io = |source| RawError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut r = BufReader::with_capacity(1 << 20, r);
    let mut line = String::new();
    r.read_line(&mut line).map_err(io)?;
    if line != EVENTS_HEADER {
        return Err(corrupt(
            1,
            format!(
                "header {:?}, expected {:?}",
                line.trim_end(),
                EVENTS_HEADER.trim_end()
            ),
        ));
    }
    let mut lineno = 1u64;
    loop {
        line.clear();
        if r.read_line(&mut line).map_err(io)? == 0 {
            break;
        }
        lineno += 1;
        let Some(body) = line.strip_suffix('\n') else {
            return Err(corrupt(
                lineno,
                "last line is cut short (truncated file?)".into(),
            ));
        };
        f(parse_line(body).map_err(|w| corrupt(lineno, w))?);
    }
    Ok(())
}

/// Read `events.csv` from any reader; `path` names it in errors.
pub fn read_from(r: impl Read, path: &Path) -> Result<RawPercentiles, RawError> {
    // Target names repeat on every line: intern them so a key is (index, case, n).
    let mut names: Vec<String> = Vec::new();
    let mut values: HashMap<(usize, u32, u64), Vec<u64>> = HashMap::new();
    for_each_event(r, path, |ev| {
        let ti = match names.iter().position(|x| x == ev.target) {
            Some(i) => i,
            None => {
                names.push(ev.target.to_string());
                names.len() - 1
            }
        };
        values
            .entry((ti, ev.case, ev.n))
            .or_default()
            .push(ev.oncpu_ns);
    })?;
    let by_key = values
        .into_iter()
        .map(|((ti, case, n), mut v)| {
            v.sort_unstable();
            let oncpu = QUANTILES.map(|q| nearest_rank(&v, q));
            let exact = Exact {
                count: v.len() as u64,
                oncpu,
            };
            ((names[ti].clone(), case, n), exact)
        })
        .collect();
    Ok(RawPercentiles { by_key })
}

/// Read a run directory's `events.csv`; None when the run has none.
pub fn read(dir: &Path) -> Result<Option<RawPercentiles>, RawError> {
    let path = dir.join(crate::rundata::EVENTS_CSV);
    match std::fs::File::open(&path) {
        Ok(f) => read_from(f, &path).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RawError::Io { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<RawPercentiles, RawError> {
        let text = format!("{EVENTS_HEADER}{body}");
        read_from(text.as_bytes(), Path::new("events.csv"))
    }

    fn line(target: &str, case: u32, n: u64, wall: u64, oncpu: u64) -> String {
        format!("1,2,3,{target},{case},{n},{wall},{oncpu}\n")
    }

    #[test]
    fn percentiles_are_the_nearest_rank_values_per_key() {
        // 1..=1000 ns shuffled for one key, a constant for another.
        let mut body = String::new();
        let mut v: Vec<u64> = (1..=1000).collect();
        // A fixed permutation (multiplication by a unit mod 1001 is a bijection on 1..=1000).
        v = v.iter().map(|x| x * 389 % 1001).collect();
        for x in &v {
            body.push_str(&line("do_wait", 1, 100, x + 5, *x));
        }
        for _ in 0..7 {
            body.push_str(&line("do_wait", 1, 200, 9, 9));
        }
        body.push_str(&line("dup_mmap", 1, 100, 4, 4));
        let r = parse(&body).unwrap();
        assert_eq!(r.rows(), 1008);
        let e = r.get("do_wait", 1, 100).unwrap();
        assert_eq!(e.count, 1000);
        assert_eq!(e.oncpu, [500, 900, 990]);
        assert_eq!(r.get("do_wait", 1, 200).unwrap().oncpu, [9, 9, 9]);
        assert_eq!(r.get("dup_mmap", 1, 100).unwrap().count, 1);
        assert!(r.get("dup_mmap", 2, 100).is_none());
    }

    #[test]
    fn nearest_rank_matches_a_brute_force_definition() {
        for n in 1..60u64 {
            let v: Vec<u64> = (0..n).map(|i| i * i).collect();
            for q in QUANTILES {
                let got = nearest_rank(&v, q);
                // Smallest value with at least q·n values at or below it.
                let want = *v
                    .iter()
                    .find(|x| v.iter().filter(|y| y <= x).count() as f64 >= q * n as f64)
                    .unwrap();
                assert_eq!(got, want, "n={n} q={q}");
            }
        }
    }

    #[test]
    fn corrupt_files_name_the_line_and_the_problem() {
        let cases: [(&str, &str); 7] = [
            ("1,2,3,do_wait,1,100,5\n", "missing field oncpu_ns"),
            ("1,2,3,do_wait,1,100,5,4,9\n", "more than 8 fields"),
            ("1,2,3,do_wait,x,100,5,4\n", "case \"x\" is not a number"),
            ("1,2,3,,1,100,5,4\n", "empty target"),
            ("1,2,3,do_wait,1,100,5,6\n", "exceeds wall time"),
            ("1,2,3,do_wait,1,100,5,4", "cut short"),
            ("1,2,3,do_wait,99999999999,100,5,4\n", "too large"),
        ];
        for (bad, want) in cases {
            let body = format!("{}{bad}", line("do_wait", 1, 100, 5, 4));
            match parse(&body) {
                Err(RawError::Corrupt { line, what, .. }) => {
                    assert_eq!(line, 3, "{bad:?}");
                    assert!(what.contains(want), "{bad:?}: {what}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let wrong_header = read_from("a,b\n".as_bytes(), Path::new("events.csv"));
        assert!(matches!(
            wrong_header,
            Err(RawError::Corrupt { line: 1, .. })
        ));
    }

    #[test]
    fn a_header_only_file_has_no_percentiles_and_a_missing_file_is_none() {
        let r = parse("").unwrap();
        assert!(r.is_empty());
        assert_eq!(r.rows(), 0);
        let dir = std::env::temp_dir().join(format!("tracer-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(read(&dir).unwrap().is_none());
        std::fs::write(dir.join("events.csv"), EVENTS_HEADER).unwrap();
        assert!(read(&dir).unwrap().unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
