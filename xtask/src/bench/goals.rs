//! The goals a bench run is held to (the issues' figures of merit), each met, missed or
//! stated, from the figures it measured.

use super::{Results, TargetCheck, overhead, startup};

/// One target per figure of merit of `set`, its added cost counted per `per` (call, op).
fn ratio_targets<'a>(
    set: &'a overhead::OverheadSet,
    per: &'a str,
) -> impl Iterator<Item = TargetCheck> + 'a {
    set.ratios.iter().map(move |ratio| TargetCheck {
        target: format!(
            "{}: {} / {} added ns per {per} <= {}",
            set.title, ratio.numerator, ratio.denominator, ratio.limit
        ),
        measured: ratio
            .of_medians
            .map_or("n/a (an added cost not above noise)".into(), |v| {
                format!("{v:.2}")
            }),
        met: ratio.met,
        info: false,
    })
}

/// The targets against the figures.
pub fn evaluate(r: &Results) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for set in r
        .overhead
        .iter()
        .chain(r.vm.iter().flat_map(|v| v.sets.iter()))
    {
        out.extend(ratio_targets(set, "call"));
    }
    if let Some(l) = &r.loss {
        for a in &l.aggregate {
            out.push(TargetCheck {
                target: format!("zero loss in aggregate mode, {}", a.options),
                measured: format!(
                    "{} of {} calls counted at {:.2} M calls/s",
                    a.counted,
                    a.workload_ops,
                    a.rate_per_s / 1e6
                ),
                met: Some(a.exact),
                info: false,
            });
        }
    }
    if let Some(s) = &r.startup {
        out.extend(startup_targets(s));
    }
    for set in &r.discover {
        if let Some(p) = overhead::discover_overhead(set) {
            out.push(TargetCheck {
                target: format!("{}: added to the command's time per op", set.title),
                measured: format!("{:+.1}% ({:+.1}% to {:+.1}%)", p.median, p.min, p.max),
                met: None,
                info: true,
            });
        }
        out.extend(ratio_targets(set, "op"));
    }
    if let Some(m) = &r.memory {
        let peak = m.peak_rss_kib.max(m.sampled_peak_rss_kib);
        out.push(TargetCheck {
            target: format!("peak RSS < 100 MiB during a {} s record", m.seconds),
            measured: format!("{:.1} MiB", peak as f64 / 1024.0),
            met: Some(peak > 0 && peak < 100 * 1024),
            info: false,
        });
    }
    if let Some(a) = &r.analysis
        && let Some(t) = a.timings.first()
    {
        out.push(TargetCheck {
            target: format!(
                "tracer report on {} M spans + {} M samples < 10 s",
                a.synth.spans as f64 / 1e6,
                a.synth.samples as f64 / 1e6
            ),
            measured: format!(
                "{:.2} s (exact percentiles from the raw spans in {} of {} rows)",
                t.wall_s, a.exact_rows, a.table_rows
            ),
            met: Some(t.wall_s < 10.0),
            info: false,
        });
    }
    out
}

/// The start-up goals: every probe attached within half a second of launch, detached within
/// 0.3 s, for the configurations measured.
fn startup_targets(s: &startup::Startup) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for name in [
        "tracer record (default targets, verified)",
        "tracer record --no-verify (default targets)",
        "tracer record --targets getpid --no-verify",
    ] {
        if let Ok(x) = startup::find(s, name) {
            let ext = x.to_attached_ms.map(|m| m.median);
            out.push(TargetCheck {
                target: format!("all probes attached in < 0.5 s: {name}"),
                measured: format!(
                    "{} ms launch -> command starts (attach_ms {})",
                    ext.map_or("?".into(), |v| format!("{v:.0}")),
                    x.attach_ms
                        .map_or("?".into(), |m| format!("{:.0}", m.median))
                ),
                met: ext.map(|v| v < 500.0),
                info: false,
            });
        }
    }
    for name in [
        "tracer record (default targets, verified)",
        "tracer record --targets getpid --no-verify",
    ] {
        if let Ok(x) = startup::find(s, name) {
            let d = x.detach_ms.map(|m| m.median);
            out.push(TargetCheck {
                target: format!("detached in < 0.3 s: {name}"),
                measured: format!(
                    "detach_ms {} (command starts -> exit {} ms)",
                    d.map_or("?".into(), |v| format!("{v:.0}")),
                    x.to_exit_ms
                        .map_or("?".into(), |m| format!("{:.0}", m.median))
                ),
                met: d.map(|v| v < 300.0),
                info: false,
            });
        }
    }
    out
}
