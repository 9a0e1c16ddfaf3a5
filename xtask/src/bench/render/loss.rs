//! Section 2: loss in aggregate mode and in raw-event mode, per ring size.

use std::fmt::Write;

use crate::bench::loss::Loss;

/// Section 2: whether every call was counted, and where raw-event mode starts to drop.
pub(super) fn loss_section(md: &mut String, l: &Loss) {
    md.push_str("## 2. Loss\n\n");
    let _ = writeln!(
        md,
        "Aggregate mode (the default: in-kernel counts and histograms): `workloads {}`, \
         the highest call rate the workloads drive (raw getpid syscalls). The count must \
         equal the workload's ops exactly, or the bench fails.\n",
        l.workload.args.join(" ")
    );
    md.push_str(
        "| options | calls counted | workload ops | rate | aggregate_map_full | thread_map_full | exact |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for a in &l.aggregate {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} M/s | {} | {} | {} |",
            a.options,
            a.counted,
            a.workload_ops,
            a.rate_per_s / 1e6,
            a.aggregate_map_full,
            a.thread_map_full,
            if a.exact { "yes" } else { "**NO**" }
        );
    }
    let _ = writeln!(
        md,
        "\nRaw-event mode (`--raw-events SIZE`, lean options, `workloads {}`): every call \
         also goes through a BPF ring buffer to `events.csv`. Offered = calls per second \
         in the phase; delivered = offered × (1 − loss).\n",
        l.raw_workload.args.join(" ")
    );
    md.push_str(
        "| ring | calls | events written | ringbuf_drops | loss | offered | delivered | csv rows = written, written + drops = calls |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for x in &l.raw {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.2}% | {:.2} M/s | {:.2} M/s | {} |",
            x.ring,
            x.calls,
            x.events_written,
            x.ringbuf_drops,
            x.loss_fraction * 100.0,
            x.offered_per_s / 1e6,
            x.delivered_per_s / 1e6,
            if x.consistent { "yes" } else { "**no**" }
        );
    }
    let first_lossless = l.raw.iter().find(|x| x.ringbuf_drops == 0);
    let lossy: Vec<&str> = l
        .raw
        .iter()
        .filter(|x| x.ringbuf_drops > 0)
        .map(|x| x.ring.as_str())
        .collect();
    md.push('\n');
    match (first_lossless, lossy.is_empty()) {
        (_, true) => {
            let _ = writeln!(
                md,
                "No ring size lost an event at this rate: raw-event mode sustains at least \
                 {:.2} M events/s here.\n",
                l.raw.iter().map(|x| x.delivered_per_s).fold(0.0, f64::max) / 1e6
            );
        }
        (Some(ok), false) => {
            let _ = writeln!(
                md,
                "Loss begins below a {} ring at this rate (lossy: {}): the consumer \
                 (userspace formatting CSV lines) falls behind bursts that smaller rings \
                 cannot absorb. With {} it sustained {:.2} M events/s without loss.\n",
                ok.ring,
                lossy.join(", "),
                ok.ring,
                ok.delivered_per_s / 1e6
            );
        }
        (None, false) => {
            let best = l.raw.iter().map(|x| x.delivered_per_s).fold(0.0, f64::max);
            let _ = writeln!(
                md,
                "Every ring size lost events at this rate: raw-event mode delivers at most \
                 {:.2} M events/s here; above that it drops (and counts) the excess.\n",
                best / 1e6
            );
        }
    }
}
