//! Analysis of saved run data: pure functions from [`crate::rundata::Run`] and folded stacks to
//! tables, scaling verdicts, root causes and comparisons. Nothing here renders or needs root.

pub mod advice;
pub mod analyze;
pub mod compare;
pub mod comparerows;
pub mod countable;
pub mod countchange;
pub mod discover;
pub mod entries;
pub mod exact;
pub mod fit;
pub mod frameshift;
pub mod growers;
pub mod hist;
mod joins;
pub mod load;
pub mod loopchange;
pub mod populations;
pub mod probecost;
pub mod raw;
pub mod rootcause;
pub mod runlength;
pub mod spread;
pub mod stacks;
pub mod stats;
pub mod table;
pub mod timeline;
pub mod trips;
pub mod verdict;
pub mod warnings;

#[cfg(test)]
pub(crate) mod testdata;
#[cfg(test)]
pub(crate) mod testutil;

pub use analyze::{Analysis, AnalysisOptions, CaseResult, CaseRootCause, analyze};
pub use compare::{Comparison, compare};
pub use load::{Dataset, LoadError, LoadedRun, load};
pub use stacks::StackData;
pub use verdict::Verdict;
