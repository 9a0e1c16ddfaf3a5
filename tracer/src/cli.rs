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

/// `--ops EXPR`: operations per run of an external sweep's command, as an arithmetic
/// expression of N: integers, `{n}` (or `n`), `+ - * /` and parentheses, e.g. `100`,
/// `{n}*10`, `({n}+1)*50`. Evaluated in integers, saturating; a result below 1 counts as 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpsExpr {
    text: String,
    expr: Expr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Expr {
    Num(u64),
    N,
    Bin(Box<Expr>, u8, Box<Expr>),
}

impl OpsExpr {
    pub fn parse(s: &str) -> Result<OpsExpr, String> {
        let tokens = tokenize(s)?;
        let mut p = ExprParser { t: &tokens, i: 0 };
        let expr = p.sum()?;
        if p.i != tokens.len() {
            return Err(format!("--ops {s:?}: unexpected {:?}", tokens[p.i]));
        }
        Ok(OpsExpr {
            text: s.trim().to_string(),
            expr,
        })
    }

    pub fn eval(&self, n: u64) -> u64 {
        fn ev(e: &Expr, n: u64) -> u64 {
            match e {
                Expr::Num(v) => *v,
                Expr::N => n,
                Expr::Bin(a, op, b) => {
                    let (a, b) = (ev(a, n), ev(b, n));
                    match op {
                        b'+' => a.saturating_add(b),
                        b'-' => a.saturating_sub(b),
                        b'*' => a.saturating_mul(b),
                        _ => a.checked_div(b).unwrap_or(0),
                    }
                }
            }
        }
        ev(&self.expr, n).max(1)
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Num(u64),
    N,
    Op(u8),
    Open,
    Close,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => i += 1,
            b'0'..=b'9' => {
                let st = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let v = s[st..i]
                    .parse()
                    .map_err(|_| format!("--ops {s:?}: {} is too large", &s[st..i]))?;
                out.push(Tok::Num(v));
            }
            b'{' if s[i..].starts_with("{n}") || s[i..].starts_with("{N}") => {
                out.push(Tok::N);
                i += 3;
            }
            b'n' | b'N' => {
                out.push(Tok::N);
                i += 1;
            }
            c @ (b'+' | b'-' | b'*' | b'/') => {
                out.push(Tok::Op(c));
                i += 1;
            }
            b'(' => {
                out.push(Tok::Open);
                i += 1;
            }
            b')' => {
                out.push(Tok::Close);
                i += 1;
            }
            _ => {
                return Err(format!(
                    "--ops {s:?}: unexpected {:?} (use integers, {{n}}, + - * / and parentheses)",
                    &s[i..].chars().next().unwrap_or(' ')
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("--ops: empty expression (e.g. 100 or {n}*10)".into());
    }
    Ok(out)
}

struct ExprParser<'a> {
    t: &'a [Tok],
    i: usize,
}

impl ExprParser<'_> {
    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        while let Some(Tok::Op(op @ (b'+' | b'-'))) = self.t.get(self.i) {
            self.i += 1;
            e = Expr::Bin(Box::new(e), *op, Box::new(self.product()?));
        }
        Ok(e)
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.atom()?;
        while let Some(Tok::Op(op @ (b'*' | b'/'))) = self.t.get(self.i) {
            self.i += 1;
            e = Expr::Bin(Box::new(e), *op, Box::new(self.atom()?));
        }
        Ok(e)
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let tok = self.t.get(self.i).cloned();
        self.i += 1;
        match tok {
            Some(Tok::Num(v)) => Ok(Expr::Num(v)),
            Some(Tok::N) => Ok(Expr::N),
            Some(Tok::Open) => {
                let e = self.sum()?;
                if self.t.get(self.i) != Some(&Tok::Close) {
                    return Err("--ops: missing ')'".into());
                }
                self.i += 1;
                Ok(e)
            }
            Some(t) => Err(format!("--ops: unexpected {t:?}")),
            None => Err("--ops: the expression ends early".into()),
        }
    }
}

/// clap value parser for `--ops`.
pub fn parse_ops(s: &str) -> Result<OpsExpr, String> {
    OpsExpr::parse(s)
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
    fn ops_expressions() {
        let e = |s: &str, n| OpsExpr::parse(s).unwrap().eval(n);
        assert_eq!(e("100", 7), 100);
        assert_eq!(e("{n}*10", 7), 70);
        assert_eq!(e("{N}*10", 7), 70, "the spelling --help shows");
        assert_eq!(e("n * 10 + 5", 7), 75);
        assert_eq!(e("({n}+1)*50", 3), 200);
        assert_eq!(e("{n}/4", 10), 2);
        assert_eq!(e("{n}-10", 3), 1, "below one counts as one");
        assert_eq!(e("{n}/0", 3), 1, "division by zero is not a crash");
        for bad in [
            "",
            "x",
            "10 +",
            "(1",
            "1)",
            "{m}",
            "99999999999999999999999",
        ] {
            assert!(OpsExpr::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_unix(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_from_unix(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil_from_unix(1_795_981_845), (2026, 11, 29, 19, 50, 45));
    }
}
