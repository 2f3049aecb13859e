//! CPU topology as scx_sky needs it: which CPUs exist and are online, which
//! are SMT siblings, which share a last-level cache (LLC), and how big the
//! caches are. Read from sysfs, under `SCX_SYSFS_PREFIX` when set, as
//! scx_utils reads it (tests/machine_shapes.rs holds both readers to the
//! same trees).
//!
//! Not scx_utils' `Topology` itself: it leaves offline CPUs out ("hotplug
//! restarts the scheduler"), where scx_sky keeps every possible CPU and
//! takes a CPU coming online in place, and it keeps one summed cache size
//! per CPU, where SKY-1's decay needs each level's size and sharers and
//! the line size. NUMA nodes and core types, which scx_sky does not use
//! yet, are scx_utils' to read.

mod cpulist;
mod decay;

pub use cpulist::{format_cpulist, parse_cpulist, sysfs_trim};
pub use decay::{DecayThresholds, DEFAULT_FILL_BYTES_PER_SEC};

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// One cache as described by `cpuN/cache/indexM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    pub level: u32,
    pub size_bytes: u64,
    /// CPUs sharing this cache, sorted.
    pub shared_cpus: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    pub id: usize,
    pub online: bool,
    /// SMT siblings including this CPU, sorted; empty when offline.
    pub siblings: Vec<usize>,
    /// Index into [`Topology::llcs`]; `None` when it cannot be known (offline).
    pub llc: Option<usize>,
    /// The cache of SKY-1's core level: the largest private to this CPU's
    /// core (shared only by SMT siblings) or below the LLC (a cluster's).
    pub core_cache: Option<Cache>,
}

/// A last-level-cache domain: CPUs that share the LLC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlcDomain {
    pub cpus: Vec<usize>,
    /// `None` when sysfs has no cache information and the domain was taken
    /// from the physical package instead.
    pub size_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Indexed by CPU id, covering every possible CPU.
    pub cpus: Vec<Cpu>,
    pub llcs: Vec<LlcDomain>,
    /// Bytes per cache line (the first online CPU's first cache; 64 where
    /// sysfs does not say): what one cache miss brings in.
    pub line_bytes: u64,
}

/// The line size assumed where sysfs gives none (every x86 and most Arm).
pub const DEFAULT_LINE_BYTES: u64 = 64;

impl Topology {
    /// Reads the running machine's topology, or a recorded one: under
    /// `SCX_SYSFS_PREFIX` when set, as scx_utils reads it.
    pub fn from_host() -> Result<Self> {
        Self::from_sysfs(&host_cpu_dir())
    }

    /// Reads the topology from a sysfs `devices/system/cpu` directory.
    pub fn from_sysfs(root: &Path) -> Result<Self> {
        let possible = read_cpu_list(&root.join("possible"))?;
        let online = read_cpu_list(&root.join("online"))?;
        let nr_cpus = possible.iter().max().map_or(0, |m| m + 1);
        if nr_cpus == 0 {
            bail!("{} lists no CPU", root.join("possible").display());
        }

        let mut cpus = Vec::with_capacity(nr_cpus);
        let mut llc_ids: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
        let mut llcs: Vec<LlcDomain> = Vec::new();
        for id in 0..nr_cpus {
            let is_online = online.contains(&id);
            let dir = root.join(format!("cpu{id}"));
            let mut cpu = Cpu {
                id,
                online: is_online,
                siblings: Vec::new(),
                llc: None,
                core_cache: None,
            };
            if is_online {
                cpu.siblings = read_siblings(&dir, id)?;
                let caches = read_caches(&dir)?;
                let llc = caches.iter().max_by_key(|c| c.level);
                let (domain_cpus, size) = match llc {
                    Some(llc) => (llc.shared_cpus.clone(), Some(llc.size_bytes)),
                    None => (package_cpus(root, &dir, &online)?, None),
                };
                // The core's own cache, or a cluster's below the LLC (the
                // L2 four E-cores of a hybrid part share): SKY-1's core
                // level, its size shared by whoever shares it.
                let llc_level = llc.map(|c| c.level);
                cpu.core_cache = caches
                    .iter()
                    .filter(|c| {
                        c.shared_cpus.iter().all(|s| cpu.siblings.contains(s))
                            || Some(c.level) < llc_level
                    })
                    .max_by_key(|c| c.level)
                    .cloned();
                let next = llc_ids.len();
                let idx = *llc_ids.entry(domain_cpus.clone()).or_insert(next);
                if idx == llcs.len() {
                    llcs.push(LlcDomain {
                        cpus: domain_cpus,
                        size_bytes: size,
                    });
                }
                cpu.llc = Some(idx);
            }
            cpus.push(cpu);
        }
        let line_bytes = online
            .iter()
            .find_map(|cpu| {
                read_trimmed(&root.join(format!("cpu{cpu}/cache/index0/coherency_line_size")))
                    .ok()?
                    .parse()
                    .ok()
            })
            .filter(|&b| b > 0)
            .unwrap_or(DEFAULT_LINE_BYTES);
        Ok(Topology {
            cpus,
            llcs,
            line_bytes,
        })
    }

    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn online_cpus(&self) -> impl Iterator<Item = &Cpu> {
        self.cpus.iter().filter(|c| c.online)
    }

    /// True when some online CPU has an SMT sibling.
    pub fn smt(&self) -> bool {
        self.online_cpus().any(|c| c.siblings.len() > 1)
    }

    /// The decay thresholds implied by this machine's cache sizes.
    pub fn decay_thresholds(&self, fill_bytes_per_sec: u64) -> DecayThresholds {
        DecayThresholds::derive(self, fill_bytes_per_sec)
    }
}

/// `/sys/devices/system/cpu`, under `SCX_SYSFS_PREFIX` if it is set (the
/// prefix scx_utils' topology reads recorded machines under).
pub fn host_cpu_dir() -> PathBuf {
    match std::env::var_os("SCX_SYSFS_PREFIX").filter(|p| !p.is_empty()) {
        Some(prefix) => PathBuf::from(prefix).join("sys/devices/system/cpu"),
        None => PathBuf::from("/sys/devices/system/cpu"),
    }
}

/// The CPUs online now on the running machine (or the recorded one under
/// `SCX_SYSFS_PREFIX`), as the kernel lists them.
pub fn host_online_cpus() -> Result<Vec<usize>> {
    read_cpu_list(&host_cpu_dir().join("online"))
}

/// A sysfs CPU list file, read and parsed; errors name the file.
fn read_cpu_list(path: &Path) -> Result<Vec<usize>> {
    parse_cpulist(&read_trimmed(path)?).with_context(|| format!("parsing {}", path.display()))
}

fn read_trimmed(path: &Path) -> Result<String> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(sysfs_trim(&text).to_string())
}

fn read_siblings(dir: &Path, id: usize) -> Result<Vec<usize>> {
    let path = dir.join("topology/thread_siblings_list");
    match fs::read_to_string(&path) {
        Ok(s) => parse_cpulist(&s).with_context(|| format!("parsing {}", path.display())),
        // Some virtual machines expose no topology directory: no SMT then.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![id]),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The data and unified caches of one CPU (instruction caches do not hold
/// the data SKY-1 is trying to keep warm).
fn read_caches(dir: &Path) -> Result<Vec<Cache>> {
    let cache_dir = dir.join("cache");
    let Ok(entries) = fs::read_dir(&cache_dir) else {
        return Ok(Vec::new());
    };
    let mut caches = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let is_index = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("index"));
        if !is_index || read_trimmed(&path.join("type"))? == "Instruction" {
            continue;
        }
        let level_path = path.join("level");
        let level = read_trimmed(&level_path)?
            .parse()
            .with_context(|| format!("parsing {}", level_path.display()))?;
        let size_path = path.join("size");
        let size_bytes = parse_size(&read_trimmed(&size_path)?)
            .with_context(|| format!("parsing {}", size_path.display()))?;
        let shared_cpus = read_cpu_list(&path.join("shared_cpu_list"))?;
        caches.push(Cache {
            level,
            size_bytes,
            shared_cpus,
        });
    }
    Ok(caches)
}

/// Online CPUs of the same physical package: the LLC stand-in when sysfs
/// describes no caches.
fn package_cpus(root: &Path, dir: &Path, online: &[usize]) -> Result<Vec<usize>> {
    let package_of = |cpu_dir: PathBuf| -> Option<String> {
        read_trimmed(&cpu_dir.join("topology/physical_package_id")).ok()
    };
    let Some(mine) = package_of(dir.to_path_buf()) else {
        return Ok(online.to_vec());
    };
    Ok(online
        .iter()
        .copied()
        .filter(|c| package_of(root.join(format!("cpu{c}"))).as_deref() == Some(mine.as_str()))
        .collect())
}

/// Parses sysfs cache sizes such as `32K`, `1024K`, `16M` or `512`.
pub fn parse_size(text: &str) -> Result<u64> {
    let text = sysfs_trim(text);
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let value: u64 = digits
        .parse()
        .with_context(|| format!("cache size {text:?} does not start with a number"))?;
    let scale = match unit {
        "" | "B" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        other => bail!("cache size {text:?} has unknown unit {other:?}"),
    };
    value
        .checked_mul(scale)
        .with_context(|| format!("cache size {text:?} overflows"))
}

#[cfg(test)]
mod tests;
