//! The folded-stack format in memory: stacks (frames root-first) with weights, identical
//! stacks merged. What a run's stack files hold, as the collector builds them and the
//! analysis reads them; the analysis adds its own readings (`analysis::stacks`).

use std::collections::BTreeMap;

use super::stacks::{FoldedLine, parse_folded};

/// A set of folded stacks (frames root-first) with weights, identical stacks merged. Ordered,
/// so everything derived from it (text, flamegraphs) is deterministic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    stacks: BTreeMap<Vec<String>, u64>,
}

impl Folded {
    pub fn new() -> Folded {
        Folded::default()
    }

    /// Parse `a;b;c weight` lines (see [`parse_folded`]); duplicate stacks are summed.
    pub fn parse(text: &str) -> Result<Folded, String> {
        Ok(Folded::from_lines(parse_folded(text)?))
    }

    pub fn from_lines(lines: impl IntoIterator<Item = FoldedLine>) -> Folded {
        let mut f = Folded::new();
        for l in lines {
            f.add(l.frames, l.weight);
        }
        f
    }

    pub fn add(&mut self, frames: Vec<String>, weight: u64) {
        if weight > 0 && !frames.is_empty() {
            *self.stacks.entry(frames).or_insert(0) += weight;
        }
    }

    pub fn total(&self) -> u64 {
        self.stacks.values().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[String], u64)> {
        self.stacks.iter().map(|(k, v)| (k.as_slice(), *v))
    }

    /// Add every stack of `other`.
    pub fn merge(&mut self, other: &Folded) {
        for (k, v) in &other.stacks {
            *self.stacks.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// Weights multiplied by `factor` and rounded; stacks that round to 0 are dropped.
    pub fn scaled(&self, factor: f64) -> Folded {
        let stacks = self
            .stacks
            .iter()
            .map(|(k, v)| (k.clone(), (*v as f64 * factor).round() as u64))
            .filter(|(_, v)| *v > 0)
            .collect();
        Folded { stacks }
    }

    /// Folded text, one `frames weight` line per stack in sorted order.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.stacks {
            out.push_str(&k.join(";"));
            out.push(' ');
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out
    }

    /// The weight of the stack `frames` (0 when absent).
    pub fn weight_of(&self, frames: &[String]) -> u64 {
        self.stacks.get(frames).copied().unwrap_or(0)
    }

    /// Rescaled to the total of `other`, so a differential shows the change of shares rather
    /// than the growth of the total.
    pub fn normalized_to(&self, other: &Folded) -> Folded {
        let total = self.total();
        if total == 0 {
            return self.clone();
        }
        self.scaled(other.total() as f64 / total as f64)
    }
}
