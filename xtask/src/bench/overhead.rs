//! Added cost per traced call: interleaved rounds of every configuration (ABCDE ABCDE ...),
//! medians with spread, and the figures of merit tracer/bpftrace and tracer/floor.

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};

use super::measure::{Attach, Config, EXACT_PATH, Sample, Tools, Workload, run_config};
use super::stats::{Summary, paired_diff, ratio};

/// One configuration over all rounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConfigResult {
    pub name: String,
    /// Workload ns per op, one per round.
    pub ns_per_op: Vec<f64>,
    pub summary: Option<Summary>,
    /// Paired with the same round's untraced run: ns added per traced call.
    pub added_ns: Option<Summary>,
    /// What the tool counted per round (None for untraced).
    pub counted: Vec<Option<u64>>,
    pub ops_per_run: u64,
}

/// `numerator added cost / denominator added cost`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RatioResult {
    pub numerator: String,
    pub denominator: String,
    /// Ratio of the median added costs: the figure of merit.
    pub of_medians: Option<f64>,
    /// The per-round ratios (rounds where the denominator's added cost was positive).
    pub per_round: Option<Summary>,
    /// The target for this ratio (at most this).
    pub limit: f64,
    pub met: Option<bool>,
}

/// The added-cost comparison for one workload and mechanism.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OverheadSet {
    /// e.g. "getpid, tracepoint (host)".
    pub title: String,
    pub workload: Workload,
    pub attach: Attach,
    pub rounds: usize,
    pub configs: Vec<ConfigResult>,
    pub ratios: Vec<RatioResult>,
    pub notes: Vec<String>,
}

impl OverheadSet {
    pub fn config(&self, name: &str) -> Option<&ConfigResult> {
        self.configs.iter().find(|c| c.name == name)
    }

    /// The median added cost of configuration `name`, if measured.
    pub fn added_median(&self, name: &str) -> Option<f64> {
        self.config(name)?.added_ns.map(|a| a.median)
    }

    #[cfg(test)]
    pub fn ratio(&self, num: &str, den: &str) -> Option<&RatioResult> {
        self.ratios
            .iter()
            .find(|r| r.numerator == num && r.denominator == den)
    }
}

/// Run `rounds` interleaved rounds of `configs` (the first must be untraced) and summarise.
pub fn measure(
    tools: &Tools,
    title: &str,
    w: &Workload,
    attach: &Attach,
    configs: &[Config],
    rounds: usize,
) -> Result<OverheadSet> {
    ensure!(configs.first() == Some(&Config::Untraced), "untraced first");
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); configs.len()];
    let mut progress =
        xtask::progress::Progress::new(&format!("xtask bench: {title}"), rounds as u64);
    for r in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            let tag = format!("{}-{}-r{r}", slug(title), c.name());
            progress.message(&format!("round {}: {}", r + 1, c.name()));
            samples[i].push(run_config(tools, w, attach, c, &tag)?);
        }
        progress.inc(&format!("round {} of every configuration done", r + 1));
    }
    progress.finish();
    let names: Vec<String> = configs.iter().map(Config::name).collect();
    let pairs = ratio_pairs(&names, w);
    Ok(assemble(title, w, attach, &names, &samples, &pairs))
}

/// The ratios worth reporting among the configurations present, with the targets of the
/// performance issue: against bpftrace, and against the *timed* floor (a counter, two clock
/// reads and the entry time carried: the least any timing probe can cost), where the lean
/// tracer is held to 1.3x and the default options to 2x. The timed floor against the bare
/// floor is kept to show what timing itself costs on this machine (issue 6's 1.5x target,
/// which no timing probe can meet where that ratio is above it). Discover is held to
/// `perf record` at the limit of the workload `w` ([`Workload::discover_limit`]).
pub fn ratio_pairs(names: &[String], w: &Workload) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    let has = |n: &str| names.iter().any(|x| x == n);
    // The exact-path configuration is there for comparison with the fast path, under no goal.
    for num in names
        .iter()
        .filter(|n| n.starts_with("tracer") && !n.ends_with(EXACT_PATH))
    {
        let timed_limit = if num.starts_with("tracer-lean") {
            1.3
        } else {
            2.0
        };
        // Each against the timed floor of its own mechanism.
        let timed = if num.ends_with(PERF_EVENTS) {
            format!("timed-floor{PERF_EVENTS}")
        } else {
            "timed-floor".to_string()
        };
        for (den, limit) in [("bpftrace".to_string(), 0.5), (timed, timed_limit)] {
            if has(&den) {
                out.push((num.clone(), den, limit));
            }
        }
    }
    for sfx in ["", PERF_EVENTS] {
        let (t, f) = (format!("timed-floor{sfx}"), format!("floor{sfx}"));
        if has(&t) && has(&f) {
            out.push((t, f, 1.5));
        }
    }
    // Discover against what a user would run instead: perf's own sampler, same frequency.
    if has("discover") && has("perf-record") {
        out.push(("discover".into(), "perf-record".into(), w.discover_limit()));
    }
    out
}

/// The suffix of the configurations that attach one perf event per tracepoint.
const PERF_EVENTS: &str = "-perf-events";

/// Summaries and ratios from per-round samples (`samples[config][round]`, config 0 untraced).
pub fn assemble(
    title: &str,
    w: &Workload,
    attach: &Attach,
    names: &[String],
    samples: &[Vec<Sample>],
    pairs: &[(String, String, f64)],
) -> OverheadSet {
    let base: Vec<f64> = samples[0].iter().map(|s| s.ns_per_op).collect();
    let configs: Vec<ConfigResult> = names
        .iter()
        .zip(samples)
        .enumerate()
        .map(|(i, (name, s))| {
            let v: Vec<f64> = s.iter().map(|x| x.ns_per_op).collect();
            ConfigResult {
                name: name.clone(),
                summary: Summary::of(&v),
                added_ns: if i == 0 {
                    None
                } else {
                    Summary::of(&paired_diff(&v, &base))
                },
                counted: s.iter().map(|x| x.counted).collect(),
                ops_per_run: s.first().map_or(0, |x| x.ops),
                ns_per_op: v,
            }
        })
        .collect();
    // (median added cost, per-round added costs, whether the added cost is clearly above
    // the noise: its lower quartile is positive and its interquartile range narrower than
    // itself; a fork + waitpid op of 1.4 ms under TCG, ±100 µs from round to round, once
    // "added" 52..383 µs per call for a probe that costs a few µs).
    let added = |name: &str| -> Option<(f64, Vec<f64>, bool)> {
        let c = configs.iter().find(|c| c.name == name)?;
        let a = c.added_ns?;
        let clear = a.q1 > 0.0 && a.q3 - a.q1 < a.median;
        Some((a.median, paired_diff(&c.ns_per_op, &base), clear))
    };
    let ratios = pairs
        .iter()
        .filter_map(|(num, den, limit)| {
            let (nm, nv, num_clear) = added(num)?;
            let (dm, dv, den_clear) = added(den)?;
            let per: Vec<f64> = nv
                .iter()
                .zip(&dv)
                .filter_map(|(n, d)| ratio(*n, *d))
                .collect();
            // A ratio to a cost lost in the noise would be any number, and one of a cost lost
            // in the noise could be negative: neither is measurable.
            let of_medians = if num_clear && den_clear {
                ratio(nm, dm)
            } else {
                None
            };
            Some(RatioResult {
                numerator: num.clone(),
                denominator: den.clone(),
                of_medians,
                per_round: Summary::of(&per),
                limit: *limit,
                met: of_medians.map(|r| r <= *limit),
            })
        })
        .collect();
    OverheadSet {
        title: title.to_string(),
        workload: w.clone(),
        attach: attach.clone(),
        rounds: base.len(),
        configs,
        ratios,
        notes: Vec::new(),
    }
}

/// The same set recomputed from its stored per-round figures (after a change to the rules).
pub fn reassemble(set: &OverheadSet) -> OverheadSet {
    let names: Vec<String> = set.configs.iter().map(|c| c.name.clone()).collect();
    let samples: Vec<Vec<Sample>> = set
        .configs
        .iter()
        .map(|c| {
            c.ns_per_op
                .iter()
                .zip(&c.counted)
                .map(|(&ns_per_op, &counted)| Sample {
                    ns_per_op,
                    ops: c.ops_per_run,
                    counted,
                })
                .collect()
        })
        .collect();
    // The pairs and limits of today's rules, not the stored ones: a re-render applies them.
    let pairs = ratio_pairs(&names, &set.workload);
    let mut out = assemble(
        &set.title,
        &set.workload,
        &set.attach,
        &names,
        &samples,
        &pairs,
    );
    out.notes = set.notes.clone();
    out
}

/// `--discover`'s cost as a share of the command's own time per op, one figure per round
/// (paired with the same round's untraced run, so a slow round cancels out).
pub fn discover_overhead(set: &OverheadSet) -> Option<Summary> {
    let base = &set.configs.iter().find(|c| c.name == "untraced")?.ns_per_op;
    let with = &set.configs.iter().find(|c| c.name == "discover")?.ns_per_op;
    let per_round: Vec<f64> = with
        .iter()
        .zip(base)
        .filter(|(_, b)| **b > 0.0)
        .map(|(w, b)| (w / b - 1.0) * 100.0)
        .collect();
    Summary::of(&per_round)
}

pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|x| x.to_string()).collect()
    }

    /// A getpid set on a tracepoint with these configurations and samples.
    fn set_of(names: &[String], samples: &[Vec<Sample>]) -> OverheadSet {
        let a = Attach {
            mechanism: "tracepoint".into(),
            plan: "p".into(),
            points: vec![],
        };
        let w = Workload::getpid(10, 1);
        assemble("t", &w, &a, names, samples, &ratio_pairs(names, &w))
    }

    fn s(ns: f64) -> Sample {
        Sample {
            ns_per_op: ns,
            ops: 1000,
            counted: Some(1000),
        }
    }

    #[test]
    fn added_costs_are_paired_per_round_and_ratios_use_medians() {
        let names = names(&["untraced", "tracer", "bpftrace", "timed-floor"]);
        // Round 2 is slower for everyone (a noisy neighbour): pairing removes it.
        let samples = vec![
            vec![s(100.0), s(200.0), s(100.0)],
            vec![s(400.0), s(500.0), s(400.0)],
            vec![s(300.0), s(400.0), s(300.0)],
            vec![s(150.0), s(250.0), s(150.0)],
        ];
        let set = set_of(&names, &samples);
        let tracer = set.config("tracer").unwrap();
        let added = tracer.added_ns.unwrap();
        assert_eq!((added.median, added.min, added.max), (300.0, 300.0, 300.0));
        assert_eq!(tracer.summary.unwrap().median, 400.0);
        assert!(set.config("untraced").unwrap().added_ns.is_none());
        let rb = set.ratio("tracer", "bpftrace").unwrap();
        assert_eq!(
            (rb.of_medians, rb.limit, rb.met),
            (Some(1.5), 0.5, Some(false))
        );
        let rf = set.ratio("tracer", "timed-floor").unwrap();
        assert_eq!(
            (rf.of_medians, rf.limit, rf.met),
            (Some(6.0), 2.0, Some(false))
        );
        assert_eq!(set.rounds, 3);
    }

    #[test]
    fn ratio_to_a_cost_lost_in_noise_is_none() {
        let names = names(&["untraced", "tracer", "timed-floor"]);
        // The floor's added cost: +5, -4, +1 over three rounds: its lower quartile is not
        // above zero, so the median (+1) is noise and no ratio is claimed.
        let samples = vec![
            vec![s(100.0), s(100.0), s(100.0)],
            vec![s(150.0), s(150.0), s(150.0)],
            vec![s(105.0), s(96.0), s(101.0)],
        ];
        let set = set_of(&names, &samples);
        let r = set.ratio("tracer", "timed-floor").unwrap();
        assert_eq!((r.of_medians, r.met), (None, None));
        assert_eq!(
            set.config("timed-floor").unwrap().added_ns.unwrap().median,
            1.0
        );
        assert!(set.ratio("tracer", "bpftrace").is_none());

        // The other way round: a tracer whose added cost is lost in the noise (-35, +10, -2)
        // is not "met" against a clear floor, even though its median ratio is below the limit.
        let samples = vec![
            vec![s(100.0), s(100.0), s(100.0)],
            vec![s(65.0), s(110.0), s(98.0)],
            vec![s(120.0), s(120.0), s(120.0)],
        ];
        let set = set_of(&names, &samples);
        let r = set.ratio("tracer", "timed-floor").unwrap();
        assert_eq!((r.of_medians, r.met), (None, None));

        // Positive in every round but spread wider than itself (+10, +40, +90): noise too.
        let samples = vec![
            vec![s(100.0), s(100.0), s(100.0), s(100.0)],
            vec![s(150.0), s(150.0), s(150.0), s(150.0)],
            vec![s(110.0), s(140.0), s(190.0), s(104.0)],
        ];
        let set = set_of(&names, &samples);
        let a = set.config("timed-floor").unwrap().added_ns.unwrap();
        assert!(a.q1 > 0.0 && a.q3 - a.q1 >= a.median, "{a:?}");
        let r = set.ratio("tracer", "timed-floor").unwrap();
        assert_eq!((r.of_medians, r.met), (None, None));
    }

    #[test]
    fn reassembling_stored_figures_gives_the_same_set() {
        let names = names(&["untraced", "tracer", "tracer-lean", "timed-floor", "floor"]);
        let samples = vec![
            vec![s(100.0), s(110.0)],
            vec![s(300.0), s(320.0)],
            vec![s(255.0), s(265.0)],
            vec![s(150.0), s(160.0)],
            vec![s(120.0), s(130.0)],
        ];
        let mut set = set_of(&names, &samples);
        set.notes.push("kept".into());
        assert_eq!(reassemble(&set), set);
        assert_eq!(
            set.ratio("tracer", "timed-floor").unwrap().of_medians,
            Some(4.1)
        );
        let lean = set.ratio("tracer-lean", "timed-floor").unwrap();
        assert_eq!((lean.of_medians, lean.limit), (Some(3.1), 1.3));
        assert!(
            set.ratio("tracer", "floor").is_none(),
            "the bare floor is no target now"
        );
        assert!(set.ratio("timed-floor", "floor").is_some());
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("getpid, tracepoint (host)"), "getpid-tracepoint-host");
        assert_eq!(slug("fork+waitpid"), "fork-waitpid");
    }
}
