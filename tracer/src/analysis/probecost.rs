//! The probe's own cost against what it measured. Every run records what one call costs its
//! probes (`probe_cost` of each target, measured at attach); a time per call within
//! [`FLAG_RATIO`] times that cost is flagged, because then the probe is a third or more of
//! what is reported, and with `--subtract-probe-cost` a corrected time is given beside the
//! measured one. Data only: the renderers write the sentences.

use serde::Serialize;

use crate::rundata::ProbeCost;

/// A time per call below this many times the probe's cost is flagged.
pub const FLAG_RATIO: f64 = 3.0;

/// What a case table knows about its probe's cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeCostCheck {
    /// The kind of probe, e.g. "tracepoint (syscall enter/exit)".
    pub mechanism: String,
    /// Added ns per traced call, measured at attach; None when it could not be.
    pub probe_cost_ns: Option<f64>,
    /// Why there is no figure.
    pub not_measured: Option<String>,
    /// The sizes whose time per call is within [`FLAG_RATIO`] times the probe's cost.
    pub flagged_n: Vec<u64>,
    /// The largest share of a time per call that is the probe's cost, over the sizes.
    pub max_share: Option<f64>,
}

impl ProbeCostCheck {
    pub fn flagged(&self) -> bool {
        !self.flagged_n.is_empty()
    }
}

/// The probe's share of a time per call (cost / time), and whether it is flagged. None for a
/// time that is not positive.
pub fn share(time_per_call_ns: f64, probe_cost_ns: f64) -> Option<(f64, bool)> {
    (time_per_call_ns > 0.0 && probe_cost_ns > 0.0).then(|| {
        (
            probe_cost_ns / time_per_call_ns,
            time_per_call_ns <= FLAG_RATIO * probe_cost_ns,
        )
    })
}

/// What the probe's cost means for one size's time per call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SizeCost {
    /// The probe's share of the time per call.
    pub share: Option<f64>,
    /// The time per call is within [`FLAG_RATIO`] times the probe's cost.
    pub flagged: bool,
    /// The time per call less the probe's cost (with `subtract`).
    pub corrected_ns: Option<f64>,
}

/// The check of a table whose sizes have the times per call `times` (N, time): each size's
/// share, flag (and, with `subtract`, corrected time), in order, and their sum for the table.
/// None when the run recorded no probe cost for the target.
pub fn check(
    cost: Option<&ProbeCost>,
    times: &[(u64, Option<f64>)],
    subtract: bool,
) -> Option<(ProbeCostCheck, Vec<SizeCost>)> {
    let cost = cost?;
    let mut out = ProbeCostCheck {
        mechanism: cost.mechanism.clone(),
        probe_cost_ns: cost.probe_cost_ns,
        not_measured: cost.not_measured.clone(),
        flagged_n: Vec::new(),
        max_share: None,
    };
    let mut sizes = vec![SizeCost::default(); times.len()];
    let Some(c) = cost.probe_cost_ns.filter(|c| *c > 0.0) else {
        return Some((out, sizes));
    };
    for (&(n, t), size) in times.iter().zip(sizes.iter_mut()) {
        let Some(t) = t else {
            continue;
        };
        if let Some((s, flagged)) = share(t, c) {
            size.share = Some(s);
            size.flagged = flagged;
            if flagged {
                out.flagged_n.push(n);
            }
            out.max_share = Some(out.max_share.map_or(s, |m: f64| m.max(s)));
        }
        if subtract {
            // The probe cannot have cost more than the whole call: a time below its cost says
            // the calibration's figure does not hold for this call, so 0 rather than negative.
            size.corrected_ns = Some((t - c).max(0.0));
        }
    }
    Some((out, sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(ns: Option<f64>) -> ProbeCost {
        ProbeCost {
            mechanism: "tracepoint (syscall enter/exit)".into(),
            probe_cost_ns: ns,
            spread_ns: None,
            method: String::new(),
            not_measured: ns.is_none().then(|| "refused".to_string()),
        }
    }

    #[test]
    fn a_time_within_three_times_the_probe_cost_is_flagged() {
        // 300 ns of probe: 900 ns is exactly three times (flagged), 901 ns is not.
        let times = [(1, Some(150.0)), (10, Some(900.0)), (100, Some(901.0))];
        let (c, r) = check(Some(&cost(Some(300.0))), &times, false).unwrap();
        assert_eq!(c.flagged_n, vec![1, 10]);
        assert!(c.flagged());
        assert_eq!(c.max_share, Some(2.0));
        assert!(r[0].flagged && r[1].flagged && !r[2].flagged);
        assert!((r[1].share.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // Without the option nothing is corrected.
        assert!(r.iter().all(|r| r.corrected_ns.is_none()));
    }

    #[test]
    fn long_calls_are_not_flagged() {
        let times = [(1, Some(50_000.0)), (2, Some(2_000_000.0))];
        let (c, r) = check(Some(&cost(Some(300.0))), &times, false).unwrap();
        assert!(!c.flagged());
        assert!(r.iter().all(|r| !r.flagged));
        assert!((c.max_share.unwrap() - 0.006).abs() < 1e-12);
    }

    #[test]
    fn subtracting_keeps_both_times_and_never_goes_negative() {
        let times = [(1, Some(1000.0)), (2, Some(200.0)), (3, None)];
        let (_, r) = check(Some(&cost(Some(300.0))), &times, true).unwrap();
        assert_eq!(r[0].corrected_ns, Some(700.0));
        assert_eq!(r[1].corrected_ns, Some(0.0));
        // No time, nothing to correct or flag.
        assert_eq!(r[2].corrected_ns, None);
        assert!(!r[2].flagged);
    }

    #[test]
    fn no_figure_means_no_flag_and_no_correction_but_the_reason_is_kept() {
        let times = [(1, Some(10.0))];
        let (c, r) = check(Some(&cost(None)), &times, true).unwrap();
        assert!(!c.flagged());
        assert_eq!(c.not_measured.as_deref(), Some("refused"));
        assert_eq!(r[0], SizeCost::default());
        // A run recorded before probe costs were measured has nothing to say.
        assert!(check(None, &times, true).is_none());
    }
}
