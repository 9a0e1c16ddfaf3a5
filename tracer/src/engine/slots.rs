//! The attach slots: run-time-configured programs (fentry/fexit, kprobe/kretprobe,
//! tracepoint, uprobe/uretprobe) that time a target. A table of their kinds gives each
//! slot's program names and `SLOTS` index, so a new kernel function needs no eBPF rebuild.
use tracer_ebpf::*;

/// One attach slot in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// fentry_i/fexit_i pair.
    Fentry(usize),
    /// kprobe_i/kretprobe_i pair.
    Kprobe(usize),
    /// tp_i.
    Tracepoint(usize),
    /// uprobe_i/uretprobe_i pair.
    Uprobe(usize),
    /// site_call_i/site_return_i pair: kprobes on a call instruction and the one after it.
    Site(usize),
}

/// What to do at a tracepoint slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpRole {
    Enter,
    Exit,
    Point,
}

/// The kinds of slot, in `SLOTS` order; `kind as usize` indexes `SlotKind::ALL` and
/// `SlotsInUse`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SlotKind {
    Fentry,
    Kprobe,
    Tracepoint,
    Uprobe,
    Site,
}

/// What the attach sequence needs to know of a slot kind.
pub(super) struct KindSpec {
    /// As named in "no free ... attach slot".
    pub(super) name: &'static str,
    /// Program names are `{prefix}_{i}`: the entry side, and the exit side of pairs.
    entry: &'static str,
    exit: Option<&'static str>,
    /// Index of the kind's first slot in the `SLOTS` map.
    base: u32,
    /// Slots of this kind in the object.
    pub(super) count: usize,
}

impl SlotKind {
    pub(super) const ALL: [SlotKind; 5] = [
        SlotKind::Fentry,
        SlotKind::Kprobe,
        SlotKind::Tracepoint,
        SlotKind::Uprobe,
        SlotKind::Site,
    ];

    pub(super) fn spec(self) -> &'static KindSpec {
        match self {
            SlotKind::Fentry => &KindSpec {
                name: "fentry",
                entry: "fentry",
                exit: Some("fexit"),
                base: SLOT_BASE_FENTRY,
                count: FN_SLOTS,
            },
            SlotKind::Kprobe => &KindSpec {
                name: "kprobe",
                entry: "kprobe",
                exit: Some("kretprobe"),
                base: SLOT_BASE_KPROBE,
                count: FN_SLOTS,
            },
            SlotKind::Tracepoint => &KindSpec {
                name: "tracepoint",
                entry: "tp",
                exit: None,
                base: SLOT_BASE_TP,
                count: TP_SLOTS,
            },
            SlotKind::Uprobe => &KindSpec {
                name: "uprobe",
                entry: "uprobe",
                exit: Some("uretprobe"),
                base: SLOT_BASE_UPROBE,
                count: UPROBE_SLOTS,
            },
            SlotKind::Site => &KindSpec {
                name: "call-site",
                entry: "site_call",
                exit: Some("site_return"),
                base: SLOT_BASE_SITE,
                count: SITE_SLOTS,
            },
        }
    }
}

impl Slot {
    pub(super) fn new(kind: SlotKind, i: usize) -> Slot {
        match kind {
            SlotKind::Fentry => Slot::Fentry(i),
            SlotKind::Kprobe => Slot::Kprobe(i),
            SlotKind::Tracepoint => Slot::Tracepoint(i),
            SlotKind::Uprobe => Slot::Uprobe(i),
            SlotKind::Site => Slot::Site(i),
        }
    }

    fn kind_index(&self) -> (SlotKind, usize) {
        match *self {
            Slot::Fentry(i) => (SlotKind::Fentry, i),
            Slot::Kprobe(i) => (SlotKind::Kprobe, i),
            Slot::Tracepoint(i) => (SlotKind::Tracepoint, i),
            Slot::Uprobe(i) => (SlotKind::Uprobe, i),
            Slot::Site(i) => (SlotKind::Site, i),
        }
    }

    /// Index of the slot's configuration in the `SLOTS` map.
    pub(super) fn conf_index(&self) -> u32 {
        let (kind, i) = self.kind_index();
        kind.spec().base + i as u32
    }

    /// The slot's program names, entry side first: the order they are detached in.
    pub(super) fn programs(&self) -> Vec<String> {
        let (kind, i) = self.kind_index();
        let spec = kind.spec();
        std::iter::once(spec.entry)
            .chain(spec.exit)
            .map(|prefix| format!("{prefix}_{i}"))
            .collect()
    }
}

/// Which slots of each kind are taken.
pub(super) struct SlotsInUse([Vec<bool>; SlotKind::ALL.len()]);

impl SlotsInUse {
    pub(super) fn new() -> SlotsInUse {
        SlotsInUse(SlotKind::ALL.map(|k| vec![false; k.spec().count]))
    }

    pub(super) fn free(&self, kind: SlotKind) -> Option<usize> {
        self.0[kind as usize].iter().position(|u| !u)
    }

    pub(super) fn set(&mut self, slot: &Slot, used: bool) {
        let (kind, i) = slot.kind_index();
        self.0[kind as usize][i] = used;
    }
}

/// Programs `detach_all` closes after all others: the exit side of every slot pair, the raw
/// syscall exits (they end what the raw entries began), and the scheduler's (a switch or exit
/// ends what an entry began).
pub(super) fn detached_last(name: &str) -> bool {
    name.starts_with("sched_")
        || name.starts_with("rsched_")
        || name == "raw_sys_exit"
        || SlotKind::ALL
            .iter()
            .filter_map(|k| k.spec().exit)
            .any(|exit| name.strip_prefix(exit).is_some_and(|i| i.starts_with('_')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_slot() -> impl Iterator<Item = Slot> {
        SlotKind::ALL
            .into_iter()
            .flat_map(|k| (0..k.spec().count).map(move |i| Slot::new(k, i)))
    }

    /// The table names programs that exist, and gives each slot its own configuration.
    #[test]
    fn slots_name_programs_of_the_object() {
        let names = super::super::program_names();
        let mut confs = Vec::new();
        for slot in every_slot() {
            for p in slot.programs() {
                assert!(names.contains(&p), "{slot:?}: no program {p}");
            }
            confs.push(slot.conf_index());
        }
        assert_eq!(confs, (0..SLOT_COUNT).collect::<Vec<_>>());
    }

    #[test]
    fn exits_are_attached_first_and_detached_last() {
        assert_eq!(Slot::Kprobe(3).programs(), ["kprobe_3", "kretprobe_3"]);
        assert_eq!(Slot::Tracepoint(7).programs(), ["tp_7"]);
        for slot in every_slot() {
            let programs = slot.programs();
            let (entry, exits) = programs.split_first().expect("a program");
            assert!(!detached_last(entry), "{entry}");
            for exit in exits {
                assert!(detached_last(exit), "{exit}");
            }
        }
        for name in [
            "sched_switch",
            "sched_exit",
            "sched_fork",
            "rsched_switch",
            "raw_sys_exit",
        ] {
            assert!(detached_last(name), "{name}");
        }
        for name in [
            "floor_fexit",
            "floor_kretprobe",
            "phase_fn_exit",
            "sampler",
            "raw_sys_enter",
        ] {
            assert!(!detached_last(name), "{name}");
        }
    }
}
