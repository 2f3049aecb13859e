//! Task classes for scx_sky's SMT pairing (docs/design.md, "Classes"):
//! per-task PMU counter deltas over a period become features (CPI, LLC
//! misses per kilo-instruction, stall share, stores per kilo-instruction),
//! features become a class, and hysteresis (separate enter and leave
//! thresholds, a minimum dwell) keeps the class from flapping. The same
//! classifier runs on live counters and on a recorded or synthetic stream
//! (`replay`), so its decisions are tested without a PMU.

pub mod class;
pub mod classifier;
pub mod counters;
pub mod hints;
pub mod live;
pub mod pmu;
pub mod replay;
pub mod thresholds;

pub use class::Class;
pub use classifier::{Classifier, Transition};
pub use counters::{Counters, Deltas, Features};
pub use hints::{CommShape, Hints, Rule, RuleSpec, TaskId};
pub use live::{ClassTable, LiveTask};
pub use thresholds::Thresholds;

#[cfg(test)]
mod tests;
