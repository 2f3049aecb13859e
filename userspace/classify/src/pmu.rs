//! The PMU counters classes are judged by, opened on every CPU for BPF to
//! charge to the task that ran (bpf/pmu.bpf.h). Which raw event counts
//! stall cycles or stores differs by CPU vendor and model, so events come
//! from a table with generic fallbacks; an event the CPU does not offer
//! is left out (its feature stays unknown, never guessed), and a machine
//! with no usable PMU (most VMs) gets one log line and classes from hints
//! only.

use anyhow::{bail, Result};
use perf_event_open_sys::bindings as sys;
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::str::FromStr;

/// Counter slots, in `enum sky_pmu_counter` order (bpf/intf.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Cycles = 0,
    Instructions = 1,
    LlcMisses = 2,
    StallCycles = 3,
    Stores = 4,
}

impl Counter {
    /// How many there are: a task's sums are one per counter.
    pub const COUNT: usize = 5;

    pub const ALL: [Counter; Counter::COUNT] = [
        Counter::Cycles,
        Counter::Instructions,
        Counter::LlcMisses,
        Counter::StallCycles,
        Counter::Stores,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Counter::Cycles => "cycles",
            Counter::Instructions => "instructions",
            Counter::LlcMisses => "llc-misses",
            Counter::StallCycles => "stall-cycles",
            Counter::Stores => "stores",
        }
    }
}

/// Where counts come from (`--pmu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PmuSource {
    /// The hardware PMU if there is one, else none (a log line says so).
    #[default]
    Auto,
    /// No counters: classes from hints only.
    Off,
    /// Software events, for testing the plumbing where there is no PMU (a
    /// VM): clocks in place of cycles and instructions (every busy task
    /// then has a CPI of about 1 and looks like compute), page faults in
    /// place of LLC misses (so measured cache pressure runs too).
    Software,
}

impl FromStr for PmuSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(PmuSource::Auto),
            "off" => Ok(PmuSource::Off),
            "software" => Ok(PmuSource::Software),
            _ => Err(format!(
                "unknown PMU source {s:?}; use auto, off or software"
            )),
        }
    }
}

impl fmt::Display for PmuSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PmuSource::Auto => "auto",
            PmuSource::Off => "off",
            PmuSource::Software => "software",
        })
    }
}

/// One perf event: `perf_event_attr.type` and `.config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub kind: u32,
    pub config: u64,
}

/// A generic event by its perf name (`cycles`, `L1-dcache-stores`, ...),
/// through scx_utils' table of perf's names: hardware, cache and software
/// events the kernel maps to each CPU's own (x86, arm64 and others alike).
fn named(name: &str) -> Event {
    let spec = scx_utils::perf::parse_perf_event(name)
        .unwrap_or_else(|e| panic!("scx_sky names a perf event scx_utils does not know: {e}"));
    Event {
        kind: spec.type_,
        config: spec.config,
    }
}

#[cfg(test)]
const fn hw(config: u32) -> Event {
    Event {
        kind: sys::PERF_TYPE_HARDWARE,
        config: config as u64,
    }
}

const fn raw(config: u64) -> Event {
    Event {
        kind: sys::PERF_TYPE_RAW,
        config,
    }
}

#[cfg(test)]
const fn sw(config: u32) -> Event {
    Event {
        kind: sys::PERF_TYPE_SOFTWARE,
        config: config as u64,
    }
}

pub use sky_proc::CpuModel;

/// The events to try for each slot, in slot order, best first. Generic
/// hardware events are the kernel's own mapping for the CPU; the raw ones
/// are what the generic set lacks:
/// - Intel (family 6 from Skylake, model 0x4e, on): stall cycles as
///   CYCLE_ACTIVITY.STALLS_TOTAL (event 0xa3, umask 0x04, cmask 4), stores
///   as MEM_INST_RETIRED.ALL_STORES (event 0xd0, umask 0x82).
/// - AMD Zen (family 0x17 on): stores as LS_DISPATCH.STORE_DISPATCH (event
///   0x29, umask 0x02); stall cycles by the generic backend-stall event.
///
/// Elsewhere the generic events only: stores as perf's `L1-dcache-stores`
/// (the kernel's cache-event table: the retired-stores event on older
/// Intel parts, L1D writes on arm64), where the CPU has it.
pub fn event_table(cpu: &CpuModel, source: PmuSource) -> [Vec<Event>; Counter::COUNT] {
    if source == PmuSource::Software {
        return [
            vec![named("cpu-clock")],
            vec![named("task-clock")],
            vec![named("page-faults")],
            vec![],
            vec![],
        ];
    }
    let backend = named("stalled-cycles-backend");
    let stores = named("L1-dcache-stores");
    let (stalls, stores) = match cpu.vendor.as_str() {
        "GenuineIntel" if cpu.family == 6 && cpu.model >= 0x4e => {
            (vec![raw(0x0400_04a3), backend], vec![raw(0x82d0), stores])
        }
        "AuthenticAMD" | "HygonGenuine" if cpu.family >= 0x17 => (vec![backend], vec![raw(0x0229)]),
        _ => (vec![backend], vec![stores]),
    };
    [
        vec![named("cycles")],
        vec![named("instructions")],
        vec![named("cache-misses")],
        stalls,
        stores,
    ]
}

/// The counters open on every CPU: `fds[slot]` holds (cpu, fd) pairs.
#[derive(Debug, Default)]
pub struct OpenCounters {
    pub fds: [Vec<(usize, OwnedFd)>; Counter::COUNT],
    /// The event each open slot counts, to open it on a CPU that comes
    /// online later.
    events: [Option<Event>; Counter::COUNT],
}

impl OpenCounters {
    /// Bit N set if slot N is open (bpf/pmu.bpf.h `sky_pmu_counters`).
    pub fn mask(&self) -> u32 {
        (0..5)
            .filter(|&s| !self.fds[s].is_empty())
            .fold(0, |m, s| m | 1 << s)
    }

    pub fn is_open(&self, counter: Counter) -> bool {
        !self.fds[counter as usize].is_empty()
    }

    /// Every (index in sky_pmu_events, fd): slot × max_cpus + cpu.
    pub fn map_entries(&self, max_cpus: usize) -> Vec<(u32, RawFd)> {
        let mut entries = Vec::new();
        for (slot, fds) in self.fds.iter().enumerate() {
            for (cpu, fd) in fds {
                entries.push(((slot * max_cpus + cpu) as u32, fd.as_raw_fd()));
            }
        }
        entries
    }

    /// Opens every open slot's event on `cpu` anew (a CPU that came
    /// online: offline when the counters were opened, or taken down and
    /// brought back) and returns its (index in sky_pmu_events, fd)
    /// entries. Nothing changes unless every slot opens.
    pub fn open_on(&mut self, cpu: usize, max_cpus: usize) -> Result<Vec<(u32, RawFd)>> {
        let mut opened = Vec::new();
        for (slot, event) in self.events.iter().enumerate() {
            if let Some(event) = event {
                opened.push((slot, open_event(*event, cpu)?));
            }
        }
        let mut entries = Vec::new();
        for (slot, fd) in opened {
            entries.push(((slot * max_cpus + cpu) as u32, fd.as_raw_fd()));
            let fds = &mut self.fds[slot];
            fds.retain(|(c, _)| *c != cpu);
            fds.push((cpu, fd));
        }
        Ok(entries)
    }

    /// The CPUs the counters are open on.
    pub fn cpus(&self) -> Vec<usize> {
        self.fds[Counter::Cycles as usize]
            .iter()
            .map(|(cpu, _)| *cpu)
            .collect()
    }

    /// `cycles instructions llc-misses`: the counters open.
    pub fn describe(&self) -> String {
        Counter::ALL
            .iter()
            .filter(|c| self.is_open(**c))
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Opens the table's first working event for each slot on every CPU of
/// `cpus`. Cycles and instructions are needed (an error says why they
/// could not be opened); any other slot whose events all fail on some CPU
/// is left out everywhere, and named in the returned notes.
pub fn open(
    cpus: &[usize],
    table: &[Vec<Event>; Counter::COUNT],
) -> Result<(OpenCounters, Vec<String>)> {
    let mut open = OpenCounters::default();
    let mut notes = Vec::new();
    for counter in Counter::ALL {
        let slot = counter as usize;
        let mut last_err = None;
        for event in &table[slot] {
            match open_on_all(*event, cpus) {
                Ok(fds) => {
                    open.fds[slot] = fds;
                    open.events[slot] = Some(*event);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        if open.fds[slot].is_empty() {
            let why = match last_err {
                Some(e) => format!("{e}"),
                None => "no event for it on this CPU".to_string(),
            };
            if matches!(counter, Counter::Cycles | Counter::Instructions) {
                bail!("cannot count {}: {why}", counter.name());
            }
            notes.push(format!("{} not counted: {why}", counter.name()));
        }
    }
    Ok((open, notes))
}

fn open_on_all(event: Event, cpus: &[usize]) -> Result<Vec<(usize, OwnedFd)>> {
    cpus.iter()
        .map(|&cpu| open_event(event, cpu).map(|fd| (cpu, fd)))
        .collect()
}

/// One counting (not sampling) event on `cpu` for every task, enabled.
fn open_event(event: Event, cpu: usize) -> Result<OwnedFd> {
    let mut attr = sys::perf_event_attr {
        type_: event.kind,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: event.config,
        ..Default::default()
    };
    attr.read_format =
        (sys::PERF_FORMAT_TOTAL_TIME_ENABLED | sys::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    // SAFETY: attr is a valid, fully initialised perf_event_attr that
    // outlives the call; pid -1 with a CPU counts every task on that CPU.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu as i32,
            -1,
            sys::PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        bail!(
            "perf_event_open(type {}, config {:#x}) on CPU {cpu}: {err}",
            event.kind,
            event.config
        );
    }
    // SAFETY: fd was just returned by the kernel and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKYLAKE: &str =
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n\
                           model name\t: Intel(R) Xeon(R)\n\nprocessor\t: 1\nvendor_id\t: Other\n";

    #[test]
    fn the_cpu_is_read_from_its_first_entry() {
        let cpu = CpuModel::parse(SKYLAKE);
        assert_eq!(
            cpu,
            CpuModel {
                vendor: "GenuineIntel".into(),
                family: 6,
                model: 85
            }
        );
        assert_eq!(CpuModel::parse("garbage\nmodel : x"), CpuModel::default());
    }

    #[test]
    fn events_are_chosen_by_vendor_and_model_with_generic_fallbacks() {
        let skylake = event_table(&CpuModel::parse(SKYLAKE), PmuSource::Auto);
        assert_eq!(skylake[Counter::StallCycles as usize][0], raw(0x0400_04a3));
        assert_eq!(
            skylake[Counter::StallCycles as usize][1],
            hw(sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND)
        );
        let l1_stores = Event {
            kind: sys::PERF_TYPE_HW_CACHE,
            config: (sys::PERF_COUNT_HW_CACHE_L1D
                | sys::PERF_COUNT_HW_CACHE_OP_WRITE << 8
                | sys::PERF_COUNT_HW_CACHE_RESULT_ACCESS << 16) as u64,
        };
        assert_eq!(
            skylake[Counter::Stores as usize],
            vec![raw(0x82d0), l1_stores]
        );
        let old_intel = CpuModel {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0x3c,
        };
        assert_eq!(
            event_table(&old_intel, PmuSource::Auto)[Counter::Stores as usize],
            vec![l1_stores]
        );
        let zen = CpuModel {
            vendor: "AuthenticAMD".into(),
            family: 0x19,
            model: 1,
        };
        assert_eq!(
            event_table(&zen, PmuSource::Auto)[Counter::Stores as usize],
            vec![raw(0x0229)]
        );
        let arm = event_table(&CpuModel::default(), PmuSource::Auto);
        assert_eq!(
            arm[Counter::Cycles as usize],
            vec![hw(sys::PERF_COUNT_HW_CPU_CYCLES)]
        );
        assert_eq!(
            arm[Counter::LlcMisses as usize],
            vec![hw(sys::PERF_COUNT_HW_CACHE_MISSES)]
        );
        assert_eq!(arm[Counter::Stores as usize], vec![l1_stores]);
        assert_eq!(
            arm[Counter::StallCycles as usize],
            vec![hw(sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND)]
        );
        let soft = event_table(&CpuModel::default(), PmuSource::Software);
        assert_eq!(soft[0], vec![sw(sys::PERF_COUNT_SW_CPU_CLOCK)]);
        assert_eq!(soft[1], vec![sw(sys::PERF_COUNT_SW_TASK_CLOCK)]);
        assert_eq!(soft[2], vec![sw(sys::PERF_COUNT_SW_PAGE_FAULTS)]);
        assert!(soft[3].is_empty());
    }

    #[test]
    fn sources_parse_and_bad_ones_name_the_choices() {
        assert_eq!("software".parse(), Ok(PmuSource::Software));
        assert_eq!("off".parse::<PmuSource>().unwrap().to_string(), "off");
        let e = "pmu".parse::<PmuSource>().unwrap_err();
        assert!(e.contains("auto, off or software"), "{e}");
    }

    #[test]
    fn a_missing_required_counter_is_an_error_naming_it() {
        // An event no CPU has: raw config on a software type id that does
        // not exist fails with ENOENT or EINVAL, never opens.
        let bogus = Event {
            kind: sys::PERF_TYPE_SOFTWARE,
            config: 0xdead,
        };
        let table = [vec![bogus], vec![], vec![], vec![], vec![]];
        let e = open(&[0], &table).unwrap_err().to_string();
        assert!(e.contains("cannot count cycles"), "{e}");
        assert!(e.contains("0xdead"), "{e}");
    }

    #[test]
    fn masks_and_map_indices_follow_the_slots() {
        let mut open = OpenCounters::default();
        // /dev/null stands in for a perf fd: only the numbers matter here.
        let null = || OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        open.fds[0] = vec![(0, null()), (3, null())];
        open.fds[2] = vec![(3, null())];
        assert_eq!(open.mask(), 0b101);
        let idx: Vec<u32> = open.map_entries(1024).iter().map(|e| e.0).collect();
        assert_eq!(idx, vec![0, 3, 2 * 1024 + 3]);
        assert_eq!(open.describe(), "cycles llc-misses");
    }
}
