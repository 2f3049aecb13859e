//! A wakeup storm, hackbench-like: N pairs of processes bounce one byte
//! over two pipes. The driver of each pair writes a byte and waits for the
//! echo; the echo side waits for the byte and writes it back. Every round
//! trip is two sleeps and two wakeups, so throughput measures how quickly
//! a scheduler places and runs woken tasks, and the kernel's migration
//! count shows how often it moved them to do so.

use crate::child::{self, Child};
use anyhow::{bail, Context, Result};
use sky_proc::{migrations_of_self, SchedStat};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct PingPong {
    pub pairs: usize,
    pub duration: Duration,
}

/// Both sides of every pair, summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub pairs: usize,
    pub duration: Duration,
    pub round_trips: u64,
    pub migrations: u64,
    pub timeslices: u64,
}

impl Report {
    pub fn round_trips_per_s(&self) -> f64 {
        let s = self.duration.as_secs_f64();
        if s > 0.0 {
            self.round_trips as f64 / s
        } else {
            0.0
        }
    }

    pub fn line(&self) -> String {
        format!(
            "result workload=pingpong pairs={} seconds={} round_trips={} round_trips_per_s={:.1} \
             migrations={} timeslices={}",
            self.pairs,
            self.duration.as_secs_f64(),
            self.round_trips,
            self.round_trips_per_s(),
            self.migrations,
            self.timeslices,
        )
    }
}

/// One side's counters over its run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Side {
    round_trips: u64,
    migrations: u64,
    timeslices: u64,
}

impl Side {
    fn parse(text: &str) -> Result<Self> {
        let f: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("pingpong child report {text:?} is not numbers"))?;
        let [round_trips, migrations, timeslices] = f[..] else {
            bail!(
                "pingpong child report {text:?} has {} fields, expected 3",
                f.len()
            );
        };
        Ok(Side {
            round_trips,
            migrations,
            timeslices,
        })
    }
}

impl PingPong {
    pub fn validate(&self) -> Result<()> {
        if self.pairs == 0 || self.pairs > 4096 {
            bail!("--pairs must be 1..=4096, got {}", self.pairs);
        }
        if self.duration.is_zero() {
            bail!("--seconds must be more than 0");
        }
        Ok(())
    }

    /// Forks the pairs, lets them bounce for the duration, sums their
    /// reports.
    pub fn run(&self) -> Result<Report> {
        self.validate()?;
        // Every driver starts at the same instant, once all are forked.
        let start = Instant::now() + Duration::from_millis(50);
        let mut drivers = Vec::with_capacity(self.pairs);
        let mut echoes = Vec::with_capacity(self.pairs);
        for _ in 0..self.pairs {
            let (driver, echo) = self.pair(start)?;
            drivers.push(driver);
            echoes.push(echo);
        }
        let mut report = Report {
            pairs: self.pairs,
            duration: self.duration,
            ..Default::default()
        };
        // Drivers first: an echo side only exits once its driver has.
        for (c, role) in drivers
            .into_iter()
            .map(|c| (c, "driver"))
            .chain(echoes.into_iter().map(|c| (c, "echo")))
        {
            let side = Side::parse(&c.finish("pingpong")?)?;
            if role == "driver" {
                report.round_trips += side.round_trips;
            }
            report.migrations += side.migrations;
            report.timeslices += side.timeslices;
        }
        // Stopped early (SIGTERM), the pairs ran for less: rates are per
        // the time they ran.
        if crate::stop::requested() {
            report.duration = start.elapsed().min(self.duration);
        }
        Ok(report)
    }

    /// Forks one pair: (driver, echo).
    fn pair(&self, start: Instant) -> Result<(Child, Child)> {
        let (ping_r, ping_w) = child::pipe()?;
        let (pong_r, pong_w) = child::pipe()?;
        // Each side closes its copies of the other side's ends, so that
        // when one side exits the other reads end-of-file, not a hang.
        // Named, so the tracepoint observer tells them from other load.
        let echo = child::spawn("pingpong echo", |out| {
            crate::set_comm("pingpong")?;
            close(&[&ping_w, &pong_r]);
            echo(ping_r.as_raw_fd(), pong_w.as_raw_fd(), out)
        })?;
        let driver = child::spawn("pingpong driver", |out| {
            crate::set_comm("pingpong")?;
            close(&[&ping_r, &pong_w]);
            drive(
                ping_w.as_raw_fd(),
                pong_r.as_raw_fd(),
                start,
                start + self.duration,
                out,
            )
        })?;
        // The parent's copies close here, on return.
        Ok((driver, echo))
    }
}

/// Closes descriptors this process inherited but must not hold. Only for
/// a forked child: the parent's `OwnedFd`s that own them are never dropped
/// there (the child leaves with `_exit`).
fn close(fds: &[&OwnedFd]) {
    for fd in fds {
        unsafe { libc::close(fd.as_raw_fd()) };
    }
}

fn drive(ping: RawFd, pong: RawFd, start: Instant, end: Instant, out: OwnedFd) -> Result<()> {
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let before = Counters::now()?;
    let mut round_trips = 0u64;
    while Instant::now() < end && !crate::stop::requested() {
        write_byte(ping)?;
        if !read_byte(pong)? {
            bail!("the echo side closed its pipe after {round_trips} round trips");
        }
        round_trips += 1;
    }
    Counters::now()?.report_since(&before, round_trips, out)
}

fn echo(ping: RawFd, pong: RawFd, out: OwnedFd) -> Result<()> {
    let before = Counters::now()?;
    let mut echoed = 0u64;
    // End-of-file on ping: the driver is done.
    while read_byte(ping)? {
        write_byte(pong)?;
        echoed += 1;
    }
    Counters::now()?.report_since(&before, echoed, out)
}

/// The kernel's counters for this process.
struct Counters {
    stat: SchedStat,
    migrations: u64,
}

impl Counters {
    fn now() -> Result<Self> {
        Ok(Counters {
            stat: SchedStat::of_self()?,
            migrations: migrations_of_self()?,
        })
    }

    fn report_since(&self, before: &Counters, trips: u64, out: OwnedFd) -> Result<()> {
        writeln!(
            File::from(out),
            "{} {} {}",
            trips,
            self.migrations - before.migrations,
            self.stat.timeslices - before.stat.timeslices
        )
        .context("writing the report")
    }
}

fn write_byte(fd: RawFd) -> Result<()> {
    loop {
        let n = unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
        if n == 1 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if n < 0 && e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("writing to the pair's pipe");
        }
    }
}

/// One byte; false at end-of-file.
fn read_byte(fd: RawFd) -> Result<bool> {
    let mut b = 0u8;
    loop {
        let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        match n {
            1 => return Ok(true),
            0 => return Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e).context("reading from the pair's pipe");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_bounce_and_report_kernel_counters() {
        let cfg = PingPong {
            pairs: 2,
            duration: Duration::from_millis(300),
        };
        let r = cfg.run().unwrap();
        assert_eq!(r.pairs, 2);
        assert!(r.round_trips > 0, "no round trips: {r:?}");
        assert!(r.round_trips_per_s() > 0.0);
        // Every round trip blocks each side once, so each is switched out.
        assert!(
            r.timeslices >= r.round_trips,
            "fewer timeslices than round trips: {r:?}"
        );
        let line = r.line();
        assert!(
            line.starts_with("result workload=pingpong pairs=2 "),
            "{line}"
        );
        assert!(line.contains(&format!(" round_trips={} ", r.round_trips)));
    }

    #[test]
    fn bad_settings_are_refused_with_the_option_named() {
        let zero_pairs = PingPong {
            pairs: 0,
            duration: Duration::from_millis(10),
        };
        assert!(zero_pairs
            .run()
            .unwrap_err()
            .to_string()
            .contains("--pairs"));
        let too_many = PingPong {
            pairs: 5000,
            ..zero_pairs
        };
        assert!(too_many.run().unwrap_err().to_string().contains("--pairs"));
        let no_time = PingPong {
            pairs: 1,
            duration: Duration::ZERO,
        };
        assert!(no_time.run().unwrap_err().to_string().contains("--seconds"));
    }

    #[test]
    fn malformed_child_reports_are_errors() {
        assert!(Side::parse("").is_err());
        assert!(Side::parse("1 2").is_err());
        assert!(Side::parse("1 x 3").is_err());
        assert_eq!(
            Side::parse("10 1 4\n").unwrap(),
            Side {
                round_trips: 10,
                migrations: 1,
                timeslices: 4
            }
        );
    }
}
