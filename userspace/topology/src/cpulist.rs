//! The kernel's CPU list format: `0-3,8,10-11`.
//!
//! Not scx_utils' `read_cpulist`/`Cpumask::from_cpulist`: sysfs writes an
//! empty list (`offline` with every CPU online), which `read_cpulist`
//! refuses, and the daemon wants the ids sorted, without duplicates and
//! a backwards or absurd range named (see the test below).

use anyhow::{bail, Context, Result};

/// A sysfs value without its line end. Linux 5.15's topology lists (then
/// binary attributes) end in a NUL after the newline, as a Kunpeng 920's
/// recorded tree shows: that is dropped too.
pub fn sysfs_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

/// Parses a CPU list into sorted, de-duplicated CPU ids. An empty string is
/// an empty list (sysfs writes that for, e.g., no offline CPUs).
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in sysfs_trim(text).split(',').filter(|p| !p.is_empty()) {
        let num = |s: &str| -> Result<usize> {
            s.trim()
                .parse()
                .with_context(|| format!("{s:?} in CPU list {text:?} is not a CPU number"))
        };
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo > hi {
                    bail!("range {part:?} in CPU list {text:?} runs backwards");
                }
                if hi - lo >= 1 << 16 {
                    bail!("range {part:?} in CPU list {text:?} is implausibly large");
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Formats sorted CPU ids back into the compact kernel form.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}
