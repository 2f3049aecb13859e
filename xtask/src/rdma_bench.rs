//! `cargo xtask bench-rdma`: the queue between machines against perftest
//! on the same soft-RoCE link, one VM boot (tests/vm/rdma-bench.sh), as
//! Markdown tables of ratios: push against `ib_write_bw`, pull against
//! `ib_read_bw`, push against pull (the crossover), and the 64-byte
//! enqueue-to-dequeue latency against `ib_write_lat`.

use crate::markdown::Table;
use crate::paths::workspace_root;
use crate::report::{lines_with, Fields};
use anyhow::{ensure, Context, Result};
use std::fs;

/// The sizes the benchmark spans, 64 B to 32 MiB.
pub const SIZES: &str = "64,1024,4096,65536,262144,1048576,4194304,33554432";

fn get<'a>(f: &'a Fields, key: &str) -> &'a str {
    f.get(key).map_or("-", String::as_str)
}

fn size_name(bytes: &str) -> String {
    match bytes.parse::<u64>() {
        Ok(b) if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        Ok(b) if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        Ok(b) => format!("{b} B"),
        Err(_) => bytes.to_string(),
    }
}

/// The heading of this benchmark's section at the end of
/// docs/results.md (which `cargo xtask eval --update-docs` keeps).
pub const SECTION: &str = "## The queue between machines (RDMA)";

/// The tables from the scenario's output, one per receiver (computing
/// between dequeues, or not) and the latency; an error if it printed no
/// point (the scenario failed before measuring).
pub fn tables(output: &str) -> Result<String> {
    let points = lines_with(output, "result workload=rdma-bench ");
    ensure!(!points.is_empty(), "the benchmark printed no measurement");
    let mut out = String::new();
    for (compute, title) in [
        (
            "1",
            "The receiver computes a matrix product sized to each message between dequeues:",
        ),
        ("0", "The receiver only dequeues (the queue's own cost):"),
    ] {
        let rows: Vec<&Fields> = points
            .iter()
            .filter(|p| get(p, "compute") == compute)
            .collect();
        if !rows.is_empty() {
            out += &format!("{title}\n\n{}\n", bandwidth(&rows));
        }
    }
    Ok(format!("{out}{}", latency(output)))
}

fn bandwidth(points: &[&Fields]) -> String {
    let mut bw = Table::new(&[
        "message",
        "iterations",
        "ib_write_bw MiB/s",
        "push MiB/s",
        "push / write",
        "ib_read_bw MiB/s",
        "pull MiB/s",
        "pull / read",
        "push / pull",
    ]);
    for p in points {
        // perftest's figure, and the size it was measured at where perftest
        // could not take the message's (over 8 MiB).
        let ceiling = |key: &str| match get(p, "perf_bytes") {
            b if b == get(p, "bytes") || b == "-" => get(p, key).to_string(),
            b => format!("{} (at {})", get(p, key), size_name(b)),
        };
        bw.row(
            [
                size_name(get(p, "bytes")),
                get(p, "iters").into(),
                ceiling("write_bw"),
                get(p, "push").into(),
                get(p, "push_of_write").into(),
                ceiling("read_bw"),
                get(p, "pull").into(),
                get(p, "pull_of_read").into(),
                get(p, "push_of_pull").into(),
            ]
            .to_vec(),
        );
    }
    bw.render()
}

fn latency(output: &str) -> String {
    let mut lat = Table::new(&[
        "mode",
        "message",
        "queue p50 us",
        "queue p99 us",
        "ib_write_lat us",
        "p50 / ib_write_lat",
    ]);
    for l in lines_with(output, "result workload=rdma-bench-latency ") {
        lat.row(
            [
                get(&l, "mode").into(),
                size_name(get(&l, "bytes")),
                get(&l, "p50_us").into(),
                get(&l, "p99_us").into(),
                get(&l, "write_lat_us").into(),
                get(&l, "p50_of_write_lat").into(),
            ]
            .to_vec(),
        );
    }
    lat.render()
}

/// Where the figures come from: when, which commit, which guest kernel,
/// and what perftest measures against.
pub fn provenance(output: &str) -> String {
    let run = |cmd: &str, args: &[&str]| {
        crate::paths::output(std::process::Command::new(cmd).args(args))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let up = output
        .lines()
        .find_map(|l| {
            l.split_once("sky-vm: up, ")
                .map(|(_, rest)| rest.to_string())
        })
        .unwrap_or_else(|| "?".into());
    format!(
        "{} — `cargo xtask bench-rdma`, git {}; guest: {up}; soft-RoCE (rxe) over a veth \
         pair between two network namespaces of one VM (TCG). perftest (`ib_write_bw`, \
         `ib_read_bw`, `ib_write_lat`, RDMA CM) runs over the same link in the same \
         boot: compare ratios, not levels. MiB/s over the sender's whole run (open \
         to the last message consumed); a queue of 4 slots, messages of one size, \
         the sender enqueuing up to half the ring per call.\n",
        run("date", &["-u", "+%Y-%m-%d"]),
        run("git", &["describe", "--always", "--dirty"]),
    )
}

/// Puts `text` under [`SECTION`] at the end of docs/results.md, replacing
/// the section an earlier run left there.
pub fn update_docs(text: &str) -> Result<()> {
    let path = workspace_root().join("docs/results.md");
    let old = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let kept = old
        .split_once(SECTION)
        .map_or(old.as_str(), |(before, _)| before);
    fs::write(&path, format!("{}\n\n{SECTION}\n\n{text}", kept.trim_end()))?;
    eprintln!("xtask: bench-rdma: docs/results.md updated");
    Ok(())
}

/// This benchmark's section of `results` (an earlier docs/results.md), to
/// keep when the evaluation rewrites the rest; empty if it has none.
pub fn kept_section(results: &str) -> String {
    results
        .split_once(SECTION)
        .map_or(String::new(), |(_, section)| {
            format!("\n\n{SECTION}{section}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_become_rows_and_a_silent_run_is_an_error() {
        let out = "noise\n\
            result workload=rdma-bench compute=1 bytes=65536 iters=100 write_bw=12.5 read_bw=11.0 \
            push=9.1 pull=4.2 push_of_write=0.73 pull_of_read=0.38 push_of_pull=2.17\n\
            result workload=rdma-bench-latency mode=push bytes=64 p50_us=2900 p99_us=5100 \
            write_lat_us=1500 p50_of_write_lat=1.93\n";
        let t = tables(out).unwrap();
        assert!(t.contains("64 KiB"), "{t}");
        assert!(
            t.contains("0.73") && t.contains("2.17") && t.contains("1.93"),
            "{t}"
        );
        assert!(
            t.contains("computes a matrix product") && !t.contains("only dequeues"),
            "{t}"
        );
        assert!(tables("nothing here\n").is_err());
        let doc = format!("# results\n\ntext\n\n{SECTION}\n\nold table\n");
        assert_eq!(kept_section(&doc), format!("\n\n{SECTION}\n\nold table\n"));
        assert_eq!(kept_section("# results\n"), "");
        assert_eq!(size_name("33554432"), "32 MiB");
        assert_eq!(size_name("64"), "64 B");
    }
}
