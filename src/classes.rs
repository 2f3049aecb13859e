//! Feeds task classes to BPF: on every refresh the running tasks' classes
//! (from class hints; from PMU counters once those are attributed) are
//! written to the `sky_pid_class` map and entries of tasks gone removed.

use crate::bpf::intf;
use crate::bpf::skel::types::sky_comm_rule;
use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};
use log::{info, warn};
use sky_classify::{live, ClassTable, CommShape, Hints, TaskId};
use sky_policy::Policy;
use std::path::Path;

pub struct ClassFeed {
    hints: Hints,
    table: ClassTable,
    warned: bool,
}

impl ClassFeed {
    /// A feed if any hint is given (`--class`, the policy's
    /// `[[class_rule]]`); with none there is nothing to feed yet.
    pub fn new(command_line: &[String], policy: &Policy) -> Result<Option<Self>> {
        let hints = Hints::new(command_line, &policy.class_rule)?;
        Ok((!hints.is_empty()).then(|| ClassFeed {
            hints,
            table: ClassTable::default(),
            warned: false,
        }))
    }

    /// The name hints BPF applies itself, the moment a task is named, into
    /// `rules`; returns how many. Hints it cannot express (other globs)
    /// are the daemon's alone, within 100 ms; a log line names them.
    pub fn bpf_comm_rules(&self, rules: &mut [sky_comm_rule]) -> u32 {
        let (bpf, daemon_only) = self.hints.bpf_comm_rules(rules.len());
        if !daemon_only.is_empty() {
            info!(
                "class hints applied within 100 ms, not at once (BPF matches only \
                 NAME, NAME*, *NAME, *NAME* of up to 15 bytes, in order): {}",
                daemon_only.join(", ")
            );
        }
        for ((shape, literal, class), rule) in bpf.iter().zip(rules.iter_mut()) {
            rule.pattern = [0; 16];
            for (dst, src) in rule.pattern.iter_mut().zip(literal.bytes()) {
                *dst = src as _;
            }
            rule.len = literal.len() as u32;
            rule.shape = shape_value(*shape);
            rule.class = class.bpf_value();
        }
        bpf.len() as u32
    }

    /// Brings the map in step with the tasks running now.
    pub fn refresh(&mut self, map: &impl MapCore) {
        let tasks = live::scan_tasks(Path::new("/proc"));
        let classes = tasks.iter().map(|t| {
            let id = TaskId {
                pid: t.tid,
                comm: &t.comm,
                cgroup: &t.cgroup,
            };
            (t.tid, self.hints.resolve(&id, sky_classify::Class::Unknown))
        });
        let changes = self.table.update(classes.collect::<Vec<_>>());
        for (tid, class) in changes.set {
            let value = class.bpf_value().to_ne_bytes();
            if let Err(e) = map.update(&tid.to_ne_bytes(), &value, MapFlags::ANY) {
                self.table.forget_failed(tid);
                if !self.warned {
                    warn!("could not give task {tid} its class {class}: {e} (map full?)");
                    self.warned = true;
                }
            }
        }
        for tid in changes.clear {
            // Gone already is fine: the entry is what we wanted removed.
            let _ = map.delete(&tid.to_ne_bytes());
        }
    }

    /// `compute=2 pm-writer=2 memory-bound=0`: tasks per known class.
    pub fn census(&self) -> String {
        self.table
            .census()
            .iter()
            .filter(|(c, _)| *c != sky_classify::Class::Unknown)
            .map(|(c, n)| format!("{c}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn shape_value(shape: CommShape) -> u32 {
    match shape {
        CommShape::Exact => intf::sky_comm_shape_SKY_COMM_EXACT,
        CommShape::Prefix => intf::sky_comm_shape_SKY_COMM_PREFIX,
        CommShape::Suffix => intf::sky_comm_shape_SKY_COMM_SUFFIX,
        CommShape::Contains => intf::sky_comm_shape_SKY_COMM_CONTAINS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sky_classify::Class;

    #[test]
    fn classes_have_the_values_bpf_knows_them_by() {
        let bpf = [
            (Class::Unknown, intf::sky_class_SKY_CLASS_UNKNOWN),
            (Class::Compute, intf::sky_class_SKY_CLASS_COMPUTE),
            (Class::PmWriter, intf::sky_class_SKY_CLASS_PM_WRITER),
            (Class::MemoryBound, intf::sky_class_SKY_CLASS_MEMORY_BOUND),
        ];
        for (class, value) in bpf {
            assert_eq!(class.bpf_value(), value, "{class}");
        }
        assert_eq!(Class::ALL.len(), intf::sky_class_SKY_NR_CLASSES as usize);
    }

    #[test]
    fn name_hints_are_written_for_bpf_in_order() {
        let policy = Policy::load("sky1").unwrap();
        let cli = ["cpu-*=compute", "*pm*=pm-writer", "c?x=compute"].map(String::from);
        let feed = ClassFeed::new(&cli, &policy).unwrap().unwrap();
        let mut rules = [sky_comm_rule::default(); 4];
        assert_eq!(feed.bpf_comm_rules(&mut rules), 2);
        let name: Vec<u8> = rules[0].pattern[..5].iter().map(|&b| b as u8).collect();
        assert_eq!(name, b"cpu-\0");
        assert_eq!(
            (rules[0].len, rules[0].shape, rules[0].class),
            (
                4,
                intf::sky_comm_shape_SKY_COMM_PREFIX,
                Class::Compute.bpf_value()
            )
        );
        assert_eq!(
            (rules[1].len, rules[1].shape, rules[1].class),
            (
                2,
                intf::sky_comm_shape_SKY_COMM_CONTAINS,
                Class::PmWriter.bpf_value()
            )
        );
        assert!(ClassFeed::new(&[], &policy).unwrap().is_none());
    }
}
