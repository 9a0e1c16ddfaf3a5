//! Numbers in one-line summaries (verdicts, root causes); the renderers use the same forms,
//! which live in `workloads::numbers` beside the workloads' own.

/// Integer-looking N for text: `4000`, not `4000.0`.
pub fn fmt_n(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

pub use workloads::numbers::sig3;

/// Nanoseconds with a unit and three significant digits: `850ns`, `1.23µs`, `45.6ms`, `2.00s`.
pub fn ns(v: f64) -> String {
    workloads::numbers::duration_ns(v, workloads::numbers::DurationStyle::Compact)
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
