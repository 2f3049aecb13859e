//! Shared-cache gangs (seed 003, docs/seeds.md): a gang is a set of tasks that share
//! data — the threads of one process by default, the member processes of
//! one shared space, a cgroup, or what a rule says. A memory-bound gang
//! runs at less than half the CPI when all of it shares one last-level
//! cache ("All share") and no other memory-bound gang does (the domain is
//! Clean, not Dirty).
//!
//! - [`rules`]: which tasks form a gang (command line and policy file).
//! - [`memory_bound`]: is a gang memory-bound? The paper's test: do its CPI
//!   samples under All share and under Partial share differ significantly.
//! - [`detect`]: the test fed from the PMU: one CPI sample per gang per
//!   period, filed by where its threads were.
//! - [`inputs`]: what the planner is told of each gang: its verdict and by
//!   what, its demand over a window, the home its threads already run in.
//! - [`planner`]: a home LLC domain per memory-bound gang, domains kept
//!   Empty or Clean while that is possible, with hysteresis.
//! - [`table`]: the running tasks grouped by the rules, with stable IDs.
//!
//! Data flows one way: rules + counters → this crate → the gang map and
//! home domains the daemon hands to BPF.

pub mod detect;
pub mod inputs;
pub mod memory_bound;
pub mod planner;
pub mod rules;
pub mod table;

#[cfg(test)]
mod test_rng;
