//! Numbers in one-line summaries (verdicts, root causes); the renderers use the same forms.

/// Integer-looking N for text: `4000`, not `4000.0`.
pub fn fmt_n(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Nanoseconds with a unit and three significant digits: `850ns`, `1.23µs`, `45.6ms`, `2.00s`.
pub fn ns(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a < 1e3 {
        (v, "ns")
    } else if a < 1e6 {
        (v / 1e3, "µs")
    } else if a < 1e9 {
        (v / 1e6, "ms")
    } else {
        (v / 1e9, "s")
    };
    format!("{}{unit}", sig3(x))
}

/// Three significant digits without exponent notation.
pub fn sig3(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_n(4000.0), "4000");
        assert_eq!(fmt_n(2.5), "2.5");
        assert_eq!(ns(850.0), "850ns");
        assert_eq!(ns(1234.0), "1.23µs");
        assert_eq!(ns(45_600_000.0), "45.6ms");
        assert_eq!(ns(2e9), "2.00s");
        assert_eq!(sig3(0.0), "0");
    }
}
