//! The benchmark's tables: percentiles of half round trips and the
//! handshake, bandwidth and other-transport tables with their ratios.

use super::{bw_sizes, Transport, OTHER_SIZES};
use sky_pvas::msg::SPLIT_MIN;
use std::collections::HashMap;
use std::time::Duration;

/// Half round trips of one (transport, size), and for splits the bytes
/// the parent copied itself as receiver.
#[derive(Default)]
pub(super) struct Samples {
    pub(super) halves: Vec<Duration>,
    pub(super) received: u64,
    pub(super) copied_here: u64,
}

#[derive(Clone, Copy)]
pub(super) struct Stats {
    p50: Duration,
    p99: Duration,
}

impl Samples {
    pub(super) fn stats(&self) -> Stats {
        let mut v = self.halves.clone();
        v.sort();
        let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Stats {
            p50: at(0.50),
            p99: at(0.99),
        }
    }

    /// Bytes over the time of all its half round trips: what a stream
    /// of such messages gets, time-slice waits included.
    pub(super) fn mean_gbps(&self, size: usize) -> f64 {
        let total: Duration = self.halves.iter().sum();
        size as f64 * self.halves.len() as f64 / total.as_secs_f64().max(1e-12) / 1e9
    }

    pub(super) fn gbps(&self, size: usize) -> f64 {
        size as f64 / self.stats().p50.as_secs_f64() / 1e9
    }
}

pub(super) fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

pub(super) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub(super) fn print_handshake(samples: &HashMap<(Transport, usize), Samples>, probe: Duration) {
    println!("Handshake: 8-byte messages (no copy to speak of), half a round trip");
    println!("{:<34} {:>8} {:>8}", "", "p50 us", "p99 us");
    for t in [
        Transport::Eager,
        Transport::EagerAsleep,
        Transport::Sender,
        Transport::CtsLate,
        Transport::Split,
        Transport::Ring,
    ] {
        let st = samples[&(t, 8)].stats();
        println!("{:<34} {:>8.2} {:>8.2}", t.name(), us(st.p50), us(st.p99));
    }
    println!(
        "{:<34} {:>8.2} {:>8}",
        "liveness probe (F_OFD_GETLK)",
        us(probe),
        "-"
    );
    let early = samples[&(Transport::Sender, 8)].stats().p50;
    let late = samples[&(Transport::CtsLate, 8)].stats().p50;
    let eager = samples[&(Transport::Eager, 8)].stats().p50;
    let asleep = samples[&(Transport::EagerAsleep, 8)].stats().p50;
    println!(
        "rendezvous handshake: {:.2} us over eager with the CTS posted early, {:.2} us with it posted late",
        us(early.saturating_sub(eager)),
        us(late.saturating_sub(eager))
    );
    println!(
        "waking a receiver asleep on its futex: {:.2} us (why message waits spin 0.5 ms before they sleep)",
        us(2 * asleep.saturating_sub(eager))
    );
}

pub(super) fn print_bandwidth(
    samples: &HashMap<(Transport, usize), Samples>,
    memcpy: &HashMap<usize, f64>,
) {
    println!(
        "Bandwidth, GB/s (size / half round trip, p50); x: ratio to the ring and to memcpy; * = what CopyBy::Auto does (split from {})",
        human(SPLIT_MIN)
    );
    println!(
        "{:>7} {:>7} | {:>8} {:>6} {:>6} | {:>8} {:>6} {:>6} {:>6} | {:>7} {:>7}",
        "size",
        "eager",
        "1-copy",
        "x ring",
        "x mcpy",
        "split",
        "x ring",
        "x mcpy",
        "rcvr%",
        "ring",
        "memcpy"
    );
    let mut worst: Option<(f64, usize)> = None;
    for size in bw_sizes() {
        let g = |t| samples.get(&(t, size)).map(|s: &Samples| s.gbps(size));
        let ring = g(Transport::Ring).unwrap();
        let mc = memcpy.get(&size).copied().unwrap_or(f64::NAN);
        let auto_split = size >= SPLIT_MIN;
        let cell = |v: f64, chosen: bool| format!("{v:.2}{}", if chosen { "*" } else { " " });
        let sender = g(Transport::Sender).unwrap();
        let split = g(Transport::Split).unwrap();
        let split_s = &samples[&(Transport::Split, size)];
        let share = 100.0 * split_s.copied_here as f64 / split_s.received.max(1) as f64;
        println!(
            "{:>7} {:>7} | {:>8} {:>6.2} {:>6.2} | {:>8} {:>6.2} {:>6.2} {:>6.0} | {:>7.2} {:>7.2}",
            human(size),
            g(Transport::Eager).map_or("-".into(), |v| format!("{v:.2}")),
            cell(sender, !auto_split),
            sender / ring,
            sender / mc,
            cell(split, auto_split),
            split / ring,
            split / mc,
            share,
            ring,
            mc
        );
        if size >= 8 << 10 {
            let auto = if auto_split { split } else { sender };
            let r = auto / ring;
            if worst.is_none_or(|(w, _)| r < w) {
                worst = Some((r, size));
            }
        }
    }
    if let Some((r, size)) = worst {
        println!(
            "one-copy (Auto) vs the ring, 8 KiB..64 MiB: worst {r:.2}x at {}",
            human(size)
        );
    }
    let mib = 1 << 20;
    let auto = samples[&(Transport::Split, mib)].gbps(mib);
    println!(
        "one-copy (Auto) at 1 MiB: {:.0} % of memcpy",
        100.0 * auto / memcpy[&mib]
    );
}

pub(super) fn print_others(samples: &HashMap<(Transport, usize), Samples>) {
    println!("Other transports (one-copy: what CopyBy::Auto does)");
    println!(
        "{:<34} {:>8} {:>11} {:>11} {:>9} {:>9}",
        "transport", "size", "p50 us", "p99 us", "GB/s", "vs pipe"
    );
    for size in OTHER_SIZES {
        let pipe = samples[&(Transport::Pipe, size)].stats().p50;
        let auto = if size >= SPLIT_MIN {
            Transport::Split
        } else {
            Transport::Sender
        };
        for t in [
            auto,
            Transport::Ring,
            Transport::Pipe,
            Transport::Socket,
            Transport::VmWritev,
        ] {
            let st = samples[&(t, size)].stats();
            println!(
                "{:<34} {:>8} {:>11.2} {:>11.2} {:>9.3} {:>8.2}x",
                t.name(),
                human(size),
                us(st.p50),
                us(st.p99),
                size as f64 / st.p50.as_secs_f64() / 1e9,
                pipe.as_secs_f64() / st.p50.as_secs_f64()
            );
        }
    }
}
