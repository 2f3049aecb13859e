//! The PMU counters follow CPU hotplug. Counters are opened per CPU at
//! start; a CPU offline then has none, and BPF's read at each of its
//! context switches fails (`pmu_read_errors`) and leaves its time
//! uncounted, for good where its cache domain is known, and until the
//! reload BPF asks for where it is not (about 50 errors in the VM). The
//! kernel's list of online CPUs is read each loop (20 ms): a CPU that came
//! online, or came back, gets its counters then, handed to BPF.

use crate::bpf::intf;
use libbpf_rs::{MapCore, MapFlags};
use log::{info, warn};
use sky_classify::pmu::OpenCounters;

pub struct PmuCpus {
    /// Whether each CPU was online at the last look.
    online: Vec<bool>,
}

impl PmuCpus {
    /// `open`: the counters as opened at start, on the CPUs online then;
    /// `nr_cpus`: the possible CPUs.
    pub fn new(open: &OpenCounters, nr_cpus: usize) -> PmuCpus {
        let mut online = vec![false; nr_cpus];
        for cpu in open.cpus() {
            if let Some(o) = online.get_mut(cpu) {
                *o = true;
            }
        }
        PmuCpus { online }
    }

    /// The CPUs online now, as the kernel lists them.
    pub fn online_now() -> Option<Vec<usize>> {
        sky_topology::host_online_cpus().ok()
    }

    /// Opens the counters of every CPU that came online since the last
    /// look (`online`: the CPUs online now) and puts them in `events`
    /// (sky_pmu_events). A CPU whose counters do not open is said once and
    /// tried again only when it next comes online, not every loop.
    pub fn follow(&mut self, online: &[usize], open: &mut OpenCounters, events: &impl MapCore) {
        for cpu in 0..self.online.len() {
            let now = online.contains(&cpu);
            if std::mem::replace(&mut self.online[cpu], now) || !now {
                continue;
            }
            let handed = open
                .open_on(cpu, intf::sky_consts_SKY_MAX_CPUS as usize)
                .and_then(|entries| {
                    for (index, fd) in entries {
                        events.update(&index.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)?;
                    }
                    Ok(())
                });
            match handed {
                Ok(()) => info!("PMU: counters opened on CPU {cpu}, which came online"),
                Err(e) => warn!("PMU: no counters on CPU {cpu}, which came online: {e:#}"),
            }
        }
    }
}
