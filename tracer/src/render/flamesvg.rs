//! Flamegraph SVGs through inferno: one per stack kind × target × case × N, the differential
//! between the smallest and largest N, and the differential between two kernels at one N.

use std::io::BufReader;
use std::str::FromStr;

use inferno::flamegraph::{self, Options, Palette};

use crate::rundata::Folded;
use crate::rundata::{PlanUsed, StackKind};

use super::fmt::ns;

/// What a flamegraph shows, for its title and subtitle.
pub struct FlameInfo<'a> {
    pub kind: StackKind,
    pub target: &'a str,
    pub case_name: &'a str,
    pub kernel: &'a str,
    pub plan: Option<&'a PlanUsed>,
    /// Fixed width in pixels (inferno's default 1200 when None).
    pub width: Option<usize>,
}

pub fn kind_title(kind: StackKind) -> &'static str {
    match kind {
        StackKind::Oncpu => "on-CPU stacks inside",
        StackKind::Offcpu => "off-CPU (blocked) stacks inside",
        StackKind::Callers => "caller stacks of",
        StackKind::Profile => "every sampled stack of the",
        StackKind::ProfileOffcpu => "where it blocked: the",
        StackKind::Entry => "kernel samples under the entry",
    }
}

/// Short name of a stack kind for link lists.
pub fn kind_label(kind: StackKind) -> &'static str {
    match kind {
        StackKind::Oncpu => "on-CPU stacks",
        StackKind::Offcpu => "off-CPU stacks",
        StackKind::Callers => "caller stacks",
        StackKind::Profile => "whole-process profile",
        StackKind::ProfileOffcpu => "whole-process off-CPU",
        StackKind::Entry => "kernel entry",
    }
}

fn palette(kind: StackKind) -> Palette {
    let name = match kind {
        StackKind::Oncpu => "hot",
        StackKind::Offcpu => "io",
        StackKind::Callers => "aqua",
        StackKind::Profile => "hot",
        StackKind::ProfileOffcpu => "io",
        StackKind::Entry => "hot",
    };
    Palette::from_str(name).expect("inferno knows its palettes")
}

fn plan_text(plan: Option<&PlanUsed>) -> String {
    match plan {
        Some(p) => format!(
            "plan {} ({}: {})",
            p.plan,
            p.mechanism,
            p.attach_points.join(", ")
        ),
        None => "no plan".to_string(),
    }
}

fn options<'a>(info: &FlameInfo<'_>, title: String, subtitle: String) -> Options<'a> {
    let mut o = Options::default();
    o.title = title;
    o.subtitle = Some(subtitle);
    o.count_name = "ns".to_string();
    o.colors = palette(info.kind);
    // Colour by name hash, so re-rendering the same data gives the same bytes.
    o.deterministic = true;
    o.image_width = info.width;
    o
}

/// Flamegraph of one N. Errors (as io::Error) when the stacks are empty.
/// `samples`: how many samples (or spans, or blocking episodes) the stacks rest on.
pub fn flamegraph(
    info: &FlameInfo<'_>,
    n: u64,
    stacks: &Folded,
    samples: u64,
) -> std::io::Result<Vec<u8>> {
    let title = format!(
        "{} {} · {} · N={n}",
        kind_title(info.kind),
        info.target,
        info.case_name
    );
    let subtitle = format!(
        "kernel {} · {} · {} from {samples} samples, {} distinct stacks",
        info.kernel,
        plan_text(info.plan),
        ns(stacks.total() as f64),
        stacks.len()
    );
    let mut opt = options(info, title, subtitle);
    let text = stacks.to_text();
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opt, text.lines(), &mut out)?;
    Ok(out)
}

/// Differential flamegraph from `n0` to `n1`: `before` is first rescaled to the total of
/// `after`, so colours show the change in *share* (red: larger share at `n1`), and widths are
/// those at `n1`. The two profiles are folded together by inferno's differential folding.
pub fn differential(
    info: &FlameInfo<'_>,
    n0: u64,
    before: &Folded,
    n1: u64,
    after: &Folded,
) -> std::io::Result<Vec<u8>> {
    let title = format!(
        "{} {} · {} · N={n0} → N={n1} (differential)",
        kind_title(info.kind),
        info.target,
        info.case_name
    );
    let subtitle = format!(
        "kernel {} · {} · red: larger share of the time at N={n1}, blue: smaller; widths at N={n1}; totals normalised",
        info.kernel,
        plan_text(info.plan)
    );
    diff_svg(info, before, after, title, subtitle)
}

/// Differential flamegraph between two kernels at the same N: `before` (kernel `a`) is
/// rescaled to the total of `after` (kernel `b`), so red frames take a larger share of the
/// time on `b`; widths are those on `b`. `info.kernel` is ignored: both are named. The stacks
/// should be [`Folded::aligned`] first, or frames that differ only in their callers or clone
/// suffixes never meet.
pub fn cross_kernel(
    info: &FlameInfo<'_>,
    n: u64,
    a: &str,
    before: &Folded,
    b: &str,
    after: &Folded,
) -> std::io::Result<Vec<u8>> {
    let title = format!(
        "{} {} · {} · N={n} · {a} → {b} (differential)",
        kind_title(info.kind),
        info.target,
        info.case_name
    );
    let subtitle = format!(
        "stacks from {} down, clone suffixes merged · red: larger share on {b}, blue: smaller; widths on {b}; totals normalised ({} → {})",
        info.target,
        ns(before.total() as f64),
        ns(after.total() as f64)
    );
    diff_svg(info, before, after, title, subtitle)
}

fn diff_svg(
    info: &FlameInfo<'_>,
    before: &Folded,
    after: &Folded,
    title: String,
    subtitle: String,
) -> std::io::Result<Vec<u8>> {
    let before = before.normalized_to(after);
    let mut folded = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        BufReader::new(before.to_text().as_bytes()),
        BufReader::new(after.to_text().as_bytes()),
        &mut folded,
    )?;
    let mut opt = options(info, title, subtitle);
    // inferno's differential output is in hash order: sort it for deterministic bytes.
    let text = String::from_utf8_lossy(&folded).into_owned();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opt, lines, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::xml::check_well_formed;

    fn info() -> FlameInfo<'static> {
        FlameInfo {
            kind: StackKind::Oncpu,
            target: "do_wait",
            case_name: "waitpid-pid",
            kernel: "5.10.0-28-cloud-amd64",
            plan: None,
            width: Some(1200),
        }
    }

    #[test]
    fn flamegraph_is_well_formed_with_titles_and_frames() {
        let stacks = Folded::parse(
            "entry_SYSCALL_64;do_syscall_64;do_wait;wait_consider_task 9000\nentry_SYSCALL_64;do_syscall_64;do_wait 1000\n",
        )
        .unwrap();
        let svg = String::from_utf8(flamegraph(&info(), 8000, &stacks, 10).unwrap()).unwrap();
        assert_eq!(check_well_formed(&svg), Ok("svg".to_string()));
        for needle in [
            "wait_consider_task",
            "do_wait",
            "N=8000",
            "5.10.0-28-cloud-amd64",
            " ns",
            "from 10 samples, 2 distinct stacks",
        ] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        // Deterministic.
        assert_eq!(
            svg.as_bytes(),
            flamegraph(&info(), 8000, &stacks, 10).unwrap().as_slice()
        );
        assert!(flamegraph(&info(), 1, &Folded::new(), 0).is_err());
    }

    #[test]
    fn differential_is_well_formed_and_deterministic() {
        let small =
            Folded::parse("k;do_wait;wait_consider_task 10\nk;do_wait;release_task 90\n").unwrap();
        let large =
            Folded::parse("k;do_wait;wait_consider_task 9500\nk;do_wait;release_task 500\n")
                .unwrap();
        let a = differential(&info(), 10, &small, 8000, &large).unwrap();
        let b = differential(&info(), 10, &small, 8000, &large).unwrap();
        assert_eq!(a, b);
        let svg = String::from_utf8(a).unwrap();
        check_well_formed(&svg).unwrap();
        assert!(svg.contains("N=10 → N=8000"));
        assert!(svg.contains("wait_consider_task") && svg.contains("release_task"));
        // The growing frame is drawn red (r=255), the shrinking one blue (b=255).
        assert!(svg.contains("rgb(255,"), "no red frame");
        assert!(svg.contains(",255)"), "no blue frame");
    }

    #[test]
    fn cross_kernel_names_both_kernels_and_colours_the_change() {
        let old = Folded::parse("k;do_wait;wait_consider_task 9000\nk;do_wait;release_task 1000\n")
            .unwrap();
        let new = Folded::parse("k;do_wait;wait_consider_task 100\nk;do_wait;release_task 900\n")
            .unwrap();
        let a = cross_kernel(&info(), 4000, "5.10", &old, "6.1", &new).unwrap();
        assert_eq!(
            a,
            cross_kernel(&info(), 4000, "5.10", &old, "6.1", &new).unwrap()
        );
        let svg = String::from_utf8(a).unwrap();
        check_well_formed(&svg).unwrap();
        assert!(svg.contains("N=4000 · 5.10 → 6.1"), "title");
        // release_task takes a larger share on 6.1 (red), wait_consider_task a smaller (blue).
        assert!(svg.contains("rgb(255,") && svg.contains(",255)"), "colours");
    }
}
