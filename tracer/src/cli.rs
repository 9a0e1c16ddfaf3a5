//! Parsing of command-line values that clap does not know: durations, `--plan` pairs.
use std::time::Duration;

/// `90`, `90s`, `1.5m`, `250ms`, `2h`: a positive duration up to 7 days.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 30s, 5m, 250ms)"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {s:?} (use ms, s, m or h)"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("duration {s:?} must be positive"));
    }
    if secs > 7.0 * 86400.0 {
        return Err(format!("duration {s:?} is longer than 7 days"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `TARGET=PLAN`
pub fn parse_plan(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((t, p)) if !t.is_empty() && !p.is_empty() => Ok((t.to_string(), p.to_string())),
        _ => Err(format!("{s:?}: expected TARGET=PLAN, e.g. dup_mmap=kprobe")),
    }
}

/// `WORKLOAD=LIST` for `sweep --n-for`.
pub fn parse_n_for(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((w, l)) if !w.is_empty() && !l.is_empty() => Ok((w.to_string(), l.to_string())),
        _ => Err(format!(
            "{s:?}: expected WORKLOAD=LIST, e.g. spawn=1,100,1000"
        )),
    }
}

/// Sampling frequency in Hz, 1..=20000 (higher perturbs the workload more than it tells).
pub fn parse_freq(s: &str) -> Result<u64, String> {
    let v: u64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a frequency in Hz"))?;
    if !(1..=20_000).contains(&v) {
        return Err(format!("frequency {v} Hz out of range 1..=20000"));
    }
    Ok(v)
}

/// Sizes like `4M`, `64K`, `1048576` (bytes), for the raw-event ring buffer: 4 KiB..1 GiB.
pub fn parse_size(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let v: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (try 4M)"))?;
    let bytes = v
        .checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if !(4096..=(1 << 30)).contains(&bytes) {
        return Err(format!("size {s:?} out of range 4K..=1G"));
    }
    Ok(bytes as u32)
}

/// The number of aggregate rows (phases): 2..=8192 (a suffix K is 1024).
pub fn parse_phases(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        _ => (t, 1),
    };
    let n = num
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a phase count (try 1024 or 1K)"))?;
    if !(2..=8192).contains(&n) {
        return Err(format!("phase count {s:?} out of range 2..=8192"));
    }
    Ok(n as u32)
}

/// A default output directory name: `tracer-run-YYYYmmdd-HHMMSS` (UTC).
pub fn default_run_name(prefix: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, mo, d, h, mi, s) = civil_from_unix(secs);
    format!("{prefix}-{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// UTC calendar fields of a Unix time (days-from-civil inverse, proleptic Gregorian).
pub fn civil_from_unix(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        for bad in ["", "0", "-1", "5y", "abc", "8d", "1e9"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_duration("200h").unwrap_err().contains("7 days"));
    }

    #[test]
    fn plans_freqs_sizes() {
        assert_eq!(
            parse_plan("dup_mmap=kprobe").unwrap(),
            ("dup_mmap".into(), "kprobe".into())
        );
        assert!(parse_plan("dup_mmap").is_err());
        assert!(parse_plan("=x").is_err());
        assert_eq!(parse_freq("999").unwrap(), 999);
        assert!(parse_freq("0").is_err());
        assert!(parse_freq("50000").is_err());
        assert_eq!(parse_size("4M").unwrap(), 4 << 20);
        assert!(parse_size("1").is_err());
        assert!(parse_size("2G").is_err());
        assert_eq!(parse_phases("1K").unwrap(), 1024);
        assert_eq!(parse_phases("300").unwrap(), 300);
        assert!(parse_phases("1").is_err());
        assert!(parse_phases("16K").is_err());
        assert!(
            parse_phases("lots")
                .unwrap_err()
                .contains("not a phase count")
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_unix(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_from_unix(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil_from_unix(1_795_981_845), (2026, 11, 29, 19, 50, 45));
    }
}
