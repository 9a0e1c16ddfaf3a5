//! Readings of folded stacks ([`Folded`]): restricted to the frames below a target, aligned
//! across kernels, and diffed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::rundata::{Folded, PlanUsed, StackFile};

impl Folded {
    /// Split every stack at the deepest frame matching `anchors`: the part from that frame down
    /// (frame included) goes to `below`; stacks without such a frame only add to `outside_ns`.
    pub fn restrict(&self, anchors: &Anchors) -> Restricted {
        let mut r = Restricted::default();
        for (frames, w) in self.iter() {
            match frames.iter().rposition(|f| anchors.matches(f)) {
                Some(i) => {
                    *r.anchor_frames.entry(frames[i].clone()).or_insert(0) += w;
                    r.below.add(frames[i..].to_vec(), w);
                }
                None => r.outside_ns += w,
            }
        }
        r
    }
}

impl Folded {
    /// The stacks in a form two kernels share, for a differential between them: cut at the
    /// target's outermost frame (the callers above it differ between kernels: 6.1 has a
    /// `__do_sys_wait4` frame that 5.10 inlines), and compiler-clone suffixes dropped
    /// (`finish_task_switch.isra.0` on one kernel is `finish_task_switch` on another). Stacks
    /// without the target's frame are kept whole.
    pub fn aligned(&self, anchors: &Anchors) -> Folded {
        let mut out = Folded::new();
        for (frames, w) in self.iter() {
            let start = frames.iter().position(|f| anchors.matches(f)).unwrap_or(0);
            out.add(frames[start..].iter().map(|f| clone_base(f)).collect(), w);
        }
        out
    }
}

/// The name a function has on every kernel: `name.isra.0` -> `name`, and the allocators'
/// `_noprof` names (6.10's allocation profiling renamed `kmem_cache_alloc` to
/// `kmem_cache_alloc_noprof`) -> the old ones; user-space frames (`[binary+0x10]`,
/// `[libc.so.6]`) unchanged.
pub fn clone_base(frame: &str) -> String {
    if frame.starts_with('[') {
        return frame.to_string();
    }
    let base = frame.split_once('.').map_or(frame, |(b, _)| b);
    base.strip_suffix("_noprof").unwrap_or(base).to_string()
}

/// Stacks cut at the target's frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restricted {
    /// Stacks starting at the matched frame.
    pub below: Folded,
    /// Weight of stacks in which no frame matched.
    pub outside_ns: u64,
    /// Which frame names matched, with their weight.
    pub anchor_frames: BTreeMap<String, u64>,
}

/// The frame names that stand for a target in kernel stacks: the target itself and the plan's
/// attach points. A tracepoint `syscalls:sys_enter_wait4` stands for the syscall's frames
/// (`__x64_sys_wait4`, `__do_sys_wait4`, ...). Compiler clones (`do_wait.isra.0`) match too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Anchors {
    pub names: Vec<String>,
    /// Syscall names whose `*sys_<name>` frames match.
    pub syscalls: Vec<String>,
}

impl Anchors {
    pub fn new(target: &str, plan: Option<&PlanUsed>) -> Anchors {
        let mut a = Anchors {
            names: vec![target.to_string()],
            syscalls: Vec::new(),
        };
        for p in plan.map(|p| p.attach_points.as_slice()).unwrap_or_default() {
            if let Some((group, event)) = p.split_once(':') {
                if group == "syscalls" {
                    let name = event
                        .strip_prefix("sys_enter_")
                        .or_else(|| event.strip_prefix("sys_exit_"))
                        .unwrap_or(event);
                    if !a.syscalls.iter().any(|s| s == name) {
                        a.syscalls.push(name.to_string());
                    }
                }
            } else if !a.names.iter().any(|n| n == p) {
                a.names.push(p.clone());
            }
        }
        a
    }

    pub fn matches(&self, frame: &str) -> bool {
        let base = frame.split_once('.').map_or(frame, |(b, _)| b);
        self.names.iter().any(|n| n == base)
            || self.syscalls.iter().any(|s| {
                base.strip_suffix(s.as_str())
                    .is_some_and(|head| head.ends_with("sys_"))
            })
    }
}

/// One stack of a differential: its share of each profile's total.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffLine {
    pub frames: Vec<String>,
    pub before_share: f64,
    pub after_share: f64,
}

impl DiffLine {
    pub fn change(&self) -> f64 {
        self.after_share - self.before_share
    }
}

/// Share change per stack between two profiles (each normalised by its own total), largest
/// absolute change first.
pub fn differential(before: &Folded, after: &Folded) -> Vec<DiffLine> {
    let (tb, ta) = (before.total().max(1) as f64, after.total().max(1) as f64);
    let mut keys: Vec<&[String]> = before.iter().chain(after.iter()).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<DiffLine> = keys
        .into_iter()
        .map(|k| DiffLine {
            frames: k.to_vec(),
            before_share: before.weight_of(k) as f64 / tb,
            after_share: after.weight_of(k) as f64 / ta,
        })
        .collect();
    out.sort_by(|a, b| {
        b.change()
            .abs()
            .total_cmp(&a.change().abs())
            .then(a.frames.cmp(&b.frames))
    });
    out
}

/// A folded-stack file of one run (held by its [`super::analyze::RunInfo`]), loaded and
/// checked.
#[derive(Clone, Debug, PartialEq)]
pub struct StackData {
    pub file: StackFile,
    pub folded: Folded,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_named_as_on_every_kernel() {
        assert_eq!(
            clone_base("finish_task_switch.isra.0"),
            "finish_task_switch"
        );
        assert_eq!(clone_base("kmem_cache_alloc_noprof"), "kmem_cache_alloc");
        assert_eq!(clone_base("mas_store"), "mas_store");
        assert_eq!(clone_base("[libc.so.6]"), "[libc.so.6]");
    }

    fn f(text: &str) -> Folded {
        Folded::parse(text).unwrap()
    }

    #[test]
    fn parse_merges_duplicates_and_round_trips() {
        let a = f("x;y 5\nx;z 3\nx;y 2\n");
        assert_eq!(a.total(), 10);
        assert_eq!(a.len(), 2);
        assert_eq!(a.to_text(), "x;y 7\nx;z 3\n");
        assert_eq!(Folded::parse(&a.to_text()).unwrap(), a);
        assert!(Folded::parse("x;y").is_err());
    }

    #[test]
    fn merge_and_scale() {
        let mut a = f("x;y 5\n");
        a.merge(&f("x;y 1\nq 4\n"));
        assert_eq!(a.to_text(), "q 4\nx;y 6\n");
        let s = a.scaled(0.5);
        assert_eq!(s.to_text(), "q 2\nx;y 3\n");
        assert!(a.scaled(0.01).is_empty());
    }

    #[test]
    fn aligned_stacks_of_two_kernels_meet_at_the_target() {
        let old = f(
            "entry;do_syscall_64;kernel_wait4;do_wait;wait_consider_task 10\n\
                     entry;do_syscall_64;kernel_wait4;do_wait;schedule;finish_task_switch 2\n\
                     [prog+0x10];[libc.so.6] 1\n",
        );
        let new = f(
            "entry;do_syscall_64;__do_sys_wait4;kernel_wait4;do_wait;wait_consider_task 3\n\
                     entry;do_syscall_64;__do_sys_wait4;kernel_wait4;do_wait.isra.0;schedule;finish_task_switch.isra.0 9\n",
        );
        let a = Anchors::new("do_wait", None);
        assert_eq!(
            old.aligned(&a).to_text(),
            "[prog+0x10];[libc.so.6] 1\ndo_wait;schedule;finish_task_switch 2\ndo_wait;wait_consider_task 10\n"
        );
        assert_eq!(
            new.aligned(&a).to_text(),
            "do_wait;schedule;finish_task_switch 9\ndo_wait;wait_consider_task 3\n"
        );
    }

    #[test]
    fn restrict_cuts_at_the_deepest_match() {
        let stacks = f("entry;do_syscall_64;do_wait;wait_consider_task 10\n\
                        entry;do_wait;x;do_wait.isra.0;y 4\n\
                        entry;schedule 6\n");
        let r = stacks.restrict(&Anchors::new("do_wait", None));
        assert_eq!(
            r.below.to_text(),
            "do_wait;wait_consider_task 10\ndo_wait.isra.0;y 4\n"
        );
        assert_eq!(r.outside_ns, 6);
        assert_eq!(r.anchor_frames.get("do_wait"), Some(&10));
        // No match at all: everything is outside.
        let r = stacks.restrict(&Anchors::new("dup_mmap", None));
        assert!(r.below.is_empty());
        assert_eq!(r.outside_ns, 20);
    }

    #[test]
    fn anchors_from_plans() {
        let plan = PlanUsed {
            plan: "syscall-bracket".into(),
            mechanism: "tracepoint".into(),
            attach_points: vec![
                "syscalls:sys_enter_wait4".into(),
                "syscalls:sys_exit_wait4".into(),
                "copy_process".into(),
            ],
            timed: true,
            note: String::new(),
        };
        let a = Anchors::new("do_wait", Some(&plan));
        assert_eq!(a.syscalls, vec!["wait4"]);
        assert!(a.matches("__do_sys_wait4"));
        assert!(a.matches("__x64_sys_wait4"));
        assert!(a.matches("copy_process"));
        assert!(a.matches("do_wait.constprop.0"));
        assert!(!a.matches("__x64_sys_waitid"));
        assert!(!a.matches("wait4"));
        assert!(!a.matches("do_wait_thread"));
    }

    #[test]
    fn differential_reports_share_change() {
        let small = f("t;a 90\nt;b 10\n");
        let large = f("t;a 100\nt;b 900\n");
        let d = differential(&small, &large);
        assert_eq!(d[0].frames.last().unwrap(), "a");
        assert!((d[0].before_share - 0.9).abs() < 1e-12 && (d[0].after_share - 0.1).abs() < 1e-12);
        assert!((d[1].change() - 0.8).abs() < 1e-12);
        let n = small.normalized_to(&large);
        assert_eq!(n.total(), 1000);
        assert_eq!(n.to_text(), "t;a 900\nt;b 100\n");
    }
}
