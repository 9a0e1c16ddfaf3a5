//! Durations, percentages and medians as both the workloads' table and the tracer's reports
//! write them: one function each, the differences between their forms named as styles.

/// How [`duration_ns`] writes a duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationStyle {
    /// `850ns`, `1.23µs`, `45.6ms`, `2.00s`: three significant digits, the next unit from
    /// 1000 on (the tracer's reports and terminal).
    Compact,
    /// `615 ns`, `1234.00 ns`, `52.3 us`: up to four digits before the next unit, a space and
    /// an ASCII `us`, as Google Benchmark's table (the workloads' stdout).
    Bench,
}

/// Nanoseconds with a unit.
pub fn duration_ns(v: f64, style: DurationStyle) -> String {
    let (step, sep, micro) = match style {
        DurationStyle::Compact => (1.0, "", "µs"),
        DurationStyle::Bench => (10.0, " ", "us"),
    };
    let a = v.abs();
    let (x, unit) = if a < 1e3 * step {
        (v, "ns")
    } else if a < 1e6 * step {
        (v / 1e3, micro)
    } else if a < 1e9 * step {
        (v / 1e6, "ms")
    } else {
        (v / 1e9, "s")
    };
    let digits = match style {
        DurationStyle::Compact => sig3(x),
        // A zero keeps its decimals here (`0.00 ns`, a stddev of equal repeats).
        DurationStyle::Bench => format!("{x:.d$}", d = decimals(x.abs())),
    };
    format!("{digits}{sep}{unit}")
}

/// Decimals that leave three significant digits (two for values under 1).
fn decimals(a: f64) -> usize {
    if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else {
        2
    }
}

/// Three significant digits without exponent notation; zero is `0`.
pub fn sig3(x: f64) -> String {
    if x == 0.0 {
        "0".to_string()
    } else {
        format!("{x:.d$}", d = decimals(x.abs()))
    }
}

/// How [`percent`] writes a share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PercentStyle {
    /// `95.3%`, and `0.12%` for a share under one percent that is not zero (tables).
    Tenths,
    /// `95%` (the comparison's frame shifts).
    Whole,
    /// `95%`, and `0.5%` for a share strictly between zero and one percent (root causes).
    WholeSmallTenths,
}

/// A share (0.953) as a percentage (`95.3%`).
pub fn percent(share: f64, style: PercentStyle) -> String {
    let p = share * 100.0;
    match style {
        PercentStyle::Tenths if p != 0.0 && p.abs() < 1.0 => format!("{p:.2}%"),
        PercentStyle::Tenths => format!("{p:.1}%"),
        PercentStyle::Whole => format!("{p:.0}%"),
        PercentStyle::WholeSmallTenths if p > 0.0 && p < 1.0 => format!("{p:.1}%"),
        PercentStyle::WholeSmallTenths => format!("{p:.0}%"),
    }
}

fn sorted(v: &[f64]) -> Option<Vec<f64>> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some(s)
}

/// The median: the mean of the two middle values of an even count. None when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let s = sorted(v)?;
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// The upper of the two middle values of an even count, so always one of the values. None
/// when empty.
pub fn upper_median(v: &[f64]) -> Option<f64> {
    let s = sorted(v)?;
    Some(s[s.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let c = |v| duration_ns(v, DurationStyle::Compact);
        assert_eq!(c(0.0), "0ns");
        assert_eq!(c(850.0), "850ns");
        assert_eq!(c(1234.0), "1.23µs");
        assert_eq!(c(45_600_000.0), "45.6ms");
        assert_eq!(c(2e9), "2.00s");
        assert_eq!(c(-1500.0), "-1.50µs");
        let b = |v| duration_ns(v, DurationStyle::Bench);
        assert_eq!(b(0.0), "0.00 ns");
        assert_eq!(b(615.0), "615 ns");
        assert_eq!(b(1.234), "1.23 ns");
        assert_eq!(b(1234.0), "1234 ns");
        assert_eq!(b(9999.0), "9999 ns");
        assert_eq!(b(52_345.0), "52.3 us");
        assert_eq!(b(12_345_678.0), "12.3 ms");
        assert_eq!(b(20e9), "20.0 s");
        assert_eq!(sig3(0.0), "0");
        assert_eq!(sig3(12.345), "12.3");
    }

    #[test]
    fn percents() {
        use PercentStyle::*;
        assert_eq!(percent(0.953, Tenths), "95.3%");
        assert_eq!(percent(0.0012, Tenths), "0.12%");
        assert_eq!(percent(0.0, Tenths), "0.0%");
        assert_eq!(percent(0.953, Whole), "95%");
        assert_eq!(percent(0.005, WholeSmallTenths), "0.5%");
        assert_eq!(percent(0.953, WholeSmallTenths), "95%");
        assert_eq!(percent(0.0, WholeSmallTenths), "0%");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(upper_median(&[4.0, 1.0, 2.0, 3.0]), Some(3.0));
        assert_eq!(upper_median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(upper_median(&[]), None);
    }
}
