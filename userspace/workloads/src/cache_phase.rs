//! Phase markers for the VM's cache model (the sky_cachesim QEMU plugin,
//! `xtask/cachesim/`), and the strided sweep that validates it.
//!
//! A marker is `nopl 0x5CA1000K(%rax)`: a multi-byte no-op on every x86-64
//! CPU (so a marked workload runs unchanged on real hardware), which the
//! plugin spots when it translates the code. The plugin numbers phases in
//! the order they begin; a phase's counts cover every vCPU.

use crate::pin_current_thread;
use anyhow::{bail, Result};
use std::time::Instant;

/// What a marker tells the plugin; the values are the plugin's (`enum
/// marker` in sky_cachesim.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Marker {
    /// Restart the counters: a phase begins.
    Begin,
    /// Write the phase's counts out.
    End,
    /// Empty every simulated cache.
    Flush,
    /// Start modelling without counting: the caches warm up for a phase
    /// (between phases the plugin models nothing, and begins empty).
    Warm,
}

/// `nopl 0x5CA1000K(%rax)` for the literal K.
#[cfg(target_arch = "x86_64")]
macro_rules! marker_nop {
    ($k:literal) => {
        // SAFETY: a no-op instruction; it reads no memory (nopl never
        // dereferences its operand) and touches no register.
        unsafe {
            std::arch::asm!(
                concat!(".byte 0x0f, 0x1f, 0x80, ", $k, ", 0x00, 0xa1, 0x5c"),
                options(nostack)
            )
        }
    };
}

/// Executes the marker. Outside the cache-model VM it does nothing.
pub fn mark(marker: Marker) {
    #[cfg(target_arch = "x86_64")]
    match marker {
        Marker::Begin => marker_nop!("0x01"),
        Marker::End => marker_nop!("0x02"),
        Marker::Flush => marker_nop!("0x03"),
        Marker::Warm => marker_nop!("0x04"),
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = marker;
}

/// Reads an array every `stride` bytes, `passes` times, on one CPU, inside
/// one marked phase (after a warm-up pass outside it): the known answer
/// for the cache model is a miss rate of ~0 at a level the array fits and
/// of min(1, stride / line) at one it does not. Warmed on another CPU
/// (`warm_cpu`), the phase shows which caches the two CPUs share.
#[derive(Debug, Clone, Copy)]
pub struct Sweep {
    pub bytes: usize,
    pub stride: usize,
    pub passes: u32,
    pub cpu: usize,
    pub warm_cpu: Option<usize>,
}

impl Sweep {
    pub fn validate(&self) -> Result<()> {
        if self.bytes < 64 || self.bytes > 1 << 30 {
            bail!("--kb must be from 1 to 1048576");
        }
        if !self.stride.is_power_of_two() || self.stride < 8 || self.stride > 4096 {
            bail!(
                "--stride must be a power of two from 8 to 4096, got {}",
                self.stride
            );
        }
        if self.passes == 0 {
            bail!("--passes must be at least 1");
        }
        Ok(())
    }

    /// Runs the sweep; its result line (loads counted, time taken).
    pub fn run(&self) -> Result<String> {
        self.validate()?;
        pin_current_thread(&[self.warm_cpu.unwrap_or(self.cpu)])?;
        mark(Marker::Warm);
        // Every page is touched (and so mapped) before the phase begins.
        let array = vec![1u64; self.bytes / 8];
        let step = self.stride / 8;
        let mut sum = sweep_once(&array, step);
        pin_current_thread(&[self.cpu])?;
        mark(Marker::Begin);
        let started = Instant::now();
        for _ in 0..self.passes {
            sum = sum.wrapping_add(sweep_once(&array, step));
        }
        let took = started.elapsed();
        mark(Marker::End);
        let loads = array.len().div_ceil(step) as u64 * u64::from(self.passes);
        Ok(format!(
            "result workload=cache-sweep kb={} stride={} passes={} cpu={} warm_cpu={} \
             loads={loads} ms={:.1} sum={sum}",
            self.bytes / 1024,
            self.stride,
            self.passes,
            self.cpu,
            self.warm_cpu.unwrap_or(self.cpu),
            took.as_secs_f64() * 1e3
        ))
    }
}

/// One load every `step` words, none optimised away.
fn sweep_once(array: &[u64], step: usize) -> u64 {
    let mut sum = 0u64;
    let mut i = 0;
    while i < array.len() {
        // SAFETY: i < len; the volatile read keeps each load a real one.
        sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(array.as_ptr().add(i)) });
        i += step;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_no_ops_outside_the_model() {
        mark(Marker::Warm);
        mark(Marker::Begin);
        mark(Marker::Flush);
        mark(Marker::End);
    }

    #[test]
    fn a_sweep_counts_its_loads_and_checks_its_shape() {
        let s = Sweep {
            bytes: 64 << 10,
            stride: 64,
            passes: 3,
            cpu: 0,
            warm_cpu: Some(0),
        };
        let line = s.run().unwrap();
        assert!(line.contains(" loads=3072 "), "{line}");
        assert!(line.contains(" sum=4096"), "{line}");
        for bad in [
            Sweep { stride: 24, ..s },
            Sweep { stride: 4, ..s },
            Sweep { passes: 0, ..s },
            Sweep { bytes: 8, ..s },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
