//! Feeds task classes to BPF: on every refresh the running tasks' classes
//! (from class hints; from PMU counters once those are attributed) are
//! written to the `sky_pid_class` map and entries of tasks gone removed.

use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};
use log::warn;
use sky_classify::{live, ClassTable, Hints, TaskId};
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

#[cfg(test)]
mod tests {
    use crate::bpf::intf;
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
}
