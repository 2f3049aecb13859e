//! Per-task classes from period after period of counters, with
//! hysteresis: a task keeps its class while the class's (looser) stay
//! test holds; another class, or none, must then hold for the dwell
//! before the task changes.

use crate::class::Class;
use crate::counters::{Counters, Features};
use crate::thresholds::{Side, Thresholds};
use std::collections::HashMap;
use std::hash::Hash;

/// Where a class is tested in `Classifier::candidate`: lower first.
fn precedence(class: Class) -> u8 {
    match class {
        Class::PmWriter => 0,
        Class::MemoryBound => 1,
        Class::Compute => 2,
        Class::Unknown => 3,
    }
}

/// A task changed class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: Class,
    pub to: Class,
}

#[derive(Debug, Clone, Copy, Default)]
struct TaskState {
    class: Class,
    pending: Class,
    pending_periods: u32,
}

/// Classes of the tasks seen, keyed by whatever names a task (a pid live,
/// a name in a replayed stream).
#[derive(Debug)]
pub struct Classifier<K> {
    thresholds: Thresholds,
    tasks: HashMap<K, TaskState>,
}

impl<K: Eq + Hash + Clone> Classifier<K> {
    pub fn new(thresholds: Thresholds) -> anyhow::Result<Self> {
        thresholds.validate()?;
        Ok(Classifier {
            thresholds,
            tasks: HashMap::new(),
        })
    }

    /// The thresholds it judges by.
    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    /// The class the features point to, tested with `side`'s thresholds;
    /// pm-writer first (a PM writer misses the LLC too), compute last.
    fn candidate(&self, f: &Features, side: Side) -> Class {
        let t = &self.thresholds;
        if t.is_pm_writer(f, side) {
            Class::PmWriter
        } else if t.is_memory_bound(f, side) {
            Class::MemoryBound
        } else if t.is_compute(f, side) {
            Class::Compute
        } else {
            Class::Unknown
        }
    }

    fn holds(&self, class: Class, f: &Features) -> bool {
        let t = &self.thresholds;
        match class {
            Class::PmWriter => t.is_pm_writer(f, Side::Stay),
            Class::MemoryBound => t.is_memory_bound(f, Side::Stay),
            Class::Compute => t.is_compute(f, Side::Stay),
            Class::Unknown => false,
        }
    }

    /// One period of `task`'s counters; the transition if its class
    /// changed. A period in which it hardly ran changes nothing.
    pub fn observe(&mut self, task: &K, counters: &Counters) -> Option<Transition> {
        let features = counters.features(self.thresholds.min_instructions)?;
        let mut state = self.tasks.get(task).copied().unwrap_or_default();
        let candidate = self.candidate(&features, Side::Enter);
        // The current class holds unless a class tested before it enters
        // (a memory-bound task that starts writing persistent memory
        // still misses the LLC: it must not stay memory-bound for good).
        let outranked = precedence(candidate) < precedence(state.class);
        let result = if self.holds(state.class, &features) && !outranked {
            state.pending_periods = 0;
            None
        } else {
            if candidate == state.class {
                state.pending_periods = 0;
                None
            } else {
                if candidate == state.pending {
                    state.pending_periods += 1;
                } else {
                    state.pending = candidate;
                    state.pending_periods = 1;
                }
                (state.pending_periods >= self.thresholds.dwell_periods).then(|| {
                    let t = Transition {
                        from: state.class,
                        to: candidate,
                    };
                    state.class = candidate;
                    state.pending_periods = 0;
                    t
                })
            }
        };
        self.tasks.insert(task.clone(), state);
        result
    }

    pub fn class_of(&self, task: &K) -> Class {
        self.tasks.get(task).map(|s| s.class).unwrap_or_default()
    }

    /// The task is gone: its state with it.
    pub fn forget(&mut self, task: &K) {
        self.tasks.remove(task);
    }

    /// How many known tasks are in each class, in `Class::ALL` order.
    pub fn census(&self) -> [(Class, usize); 4] {
        Class::ALL.map(|c| (c, self.tasks.values().filter(|s| s.class == c).count()))
    }
}
