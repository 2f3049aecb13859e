//! The classes placement knows (`enum sky_class` in bpf/intf.h, once the
//! BPF side reads them).

use anyhow::{bail, Result};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum Class {
    /// Not known yet, or no counters: placed as SKY-1 places any task.
    #[default]
    Unknown,
    /// Busy in the core's execution units, little memory traffic.
    Compute,
    /// Stalls on stores and cache-line flushes to persistent memory.
    PmWriter,
    /// Stalls on loads that miss the last-level cache.
    MemoryBound,
}

impl Class {
    pub const ALL: [Class; 4] = [
        Class::Unknown,
        Class::Compute,
        Class::PmWriter,
        Class::MemoryBound,
    ];

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
