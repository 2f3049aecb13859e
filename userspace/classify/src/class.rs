//! The classes placement knows (`enum sky_class` in bpf/intf.h, once the
//! BPF side reads them).

use anyhow::{bail, Result};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Deserialize)]
#[serde(try_from = "String")]
#[repr(u32)]
pub enum Class {
    /// Not known yet, or no counters: placed as SKY-1 places any task.
    #[default]
    Unknown = 0,
    /// Busy in the core's execution units, little memory traffic.
    Compute = 1,
    /// Stalls on stores and cache-line flushes to persistent memory.
    PmWriter = 2,
    /// Stalls on loads that miss the last-level cache.
    MemoryBound = 3,
}

impl Class {
    pub const ALL: [Class; 4] = [
        Class::Unknown,
        Class::Compute,
        Class::PmWriter,
        Class::MemoryBound,
    ];

    /// The value BPF knows it by (`enum sky_class`).
    pub fn bpf_value(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::Unknown => "unknown",
            Class::Compute => "compute",
            Class::PmWriter => "pm-writer",
            Class::MemoryBound => "memory-bound",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Class {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match Class::ALL.into_iter().find(|c| c.name() == s) {
            Some(c) => Ok(c),
            None => {
                let names: Vec<_> = Class::ALL.iter().map(|c| c.name()).collect();
                bail!("unknown class {s:?}: the classes are {}", names.join(", "))
            }
        }
    }
}

impl TryFrom<String> for Class {
    type Error = anyhow::Error;

    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}
