//! The VM tests: which test targets boot a VM (the roster, declared here
//! once and held to tests/*.rs by a unit test), and running them one at a
//! time (the machine has 2 cores), once for `cargo xtask test` or N times
//! in a row for the flake finder (`--repeat N`, xtask/src/repeat.rs).

use crate::paths::workspace_root;
use crate::repeat::Tally;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// Every tests/*.rs target with a test that boots a VM (marked
/// `#[ignore = "boots a VM..."]`), in the order they run.
pub const ROSTER: [&str; 9] = [
    "eval", "latency", "overload", "partners", "rdma", "service", "smt", "verifier", "vm",
];

/// The mark a VM test carries (`#[ignore = "boots a VM: ..."]`).
pub const VM_MARK: &str = "#[ignore = \"boots a VM";

/// Where the shared boots of a run keep each part's output
/// (tests/scenario/boots.rs reads the same variable).
pub const SHARE_DIR: &str = "SKY_VM_SHARE_DIR";

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Runs of the whole roster in a row, tallied (None: once, as
    /// `cargo xtask test` runs them, output as it comes).
    pub repeat: Option<u32>,
    /// Only tests whose name holds one of these (libtest's filters).
    pub filters: Vec<String>,
}

/// `cargo test` of the roster's VM tests: every target even after one
/// fails (each failure is reported), one test at a time. The whole
/// workspace is selected, as for the unit tests, so that both resolve one
/// feature set and nothing is compiled again. Scenarios that can share a
/// boot do (tests/scenario/boots.rs), through a directory of this run's
/// (`run`: its number in a row).
fn cargo_test(filters: &[String], run: u32) -> Result<Command> {
    let share = workspace_root().join(format!("target/vm/share/{}-{run}", std::process::id()));
    if share.exists() {
        std::fs::remove_dir_all(&share).with_context(|| format!("emptying {}", share.display()))?;
    }
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root()).env(SHARE_DIR, &share);
    c.args(["test", "--release", "--workspace", "--no-fail-fast"]);
    for target in ROSTER {
        c.args(["--test", target]);
    }
    c.args(["--", "--ignored", "--test-threads=1"]);
    c.args(filters);
    Ok(c)
}

/// Where the flake finder keeps each run's log and its table.
fn repeat_dir() -> PathBuf {
    workspace_root().join("target/repeat")
}

/// Runs the roster: once as CI does, output as it comes; or `repeat`
/// times, each run's output to target/repeat/run-K.log, the verdicts and
/// VM times shown as they come, and after every run the table of passes
/// and of each judged figure's spread (target/repeat/flakes.md); fails if
/// any test failed in any run.
pub fn run(run: &Run) -> Result<()> {
    let Some(repeat) = run.repeat else {
        return crate::paths::run(&mut cargo_test(&run.filters, 0)?);
    };
    let dir = repeat_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tally = Tally::default();
    for k in 1..=repeat {
        let started = Instant::now();
        eprintln!("xtask: repeat: run {k} of {repeat}");
        let log = dir.join(format!("run-{k}.log"));
        let status = run_logged(&mut cargo_test(&run.filters, k)?, &log, |line| {
            tally.line(line);
            // libtest's `test NAME ... ` may begin the same line.
            for marker in [
                crate::judge::VERDICT,
                "sky-vm: scenario",
                "sky-vm: benchmark",
            ] {
                if let Some(at) = line.find(marker) {
                    eprintln!("{}", &line[at..]);
                }
            }
        })?;
        tally.end_run(k);
        eprintln!(
            "xtask: repeat: run {k} of {repeat} took {:.0} s ({status}); its log: {}",
            started.elapsed().as_secs_f64(),
            log.display()
        );
        let table = tally.table(k);
        std::fs::write(dir.join("flakes.md"), &table)?;
        if k == repeat {
            println!("{table}");
        }
    }
    let failed = tally.failed_tests();
    if !failed.is_empty() {
        bail!(
            "failed in some run: {} (target/repeat/flakes.md)",
            failed.join(", ")
        );
    }
    Ok(())
}

/// Runs `cmd` with its standard output and error, interleaved as written,
/// going to `log` and, a line at a time, to `each`.
fn run_logged(
    cmd: &mut Command,
    log: &std::path::Path,
    mut each: impl FnMut(&str),
) -> Result<std::process::ExitStatus> {
    let (reader, writer) = std::io::pipe().context("a pipe for the test output")?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    // The child holds the writing ends now; ours must go for EOF to come.
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut file =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    for line in BufReader::new(reader).lines() {
        let line = String::from_utf8_lossy(line?.as_bytes()).into_owned();
        writeln!(file, "{line}")?;
        each(&line);
    }
    Ok(child.wait()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tests/*.rs file with a VM test is in the roster, and every
    /// roster entry is such a file: a new VM test cannot be left out of
    /// `cargo xtask test`, nor a removed one named.
    #[test]
    fn the_roster_is_every_test_target_that_boots_a_vm() {
        let dir = workspace_root().join("tests");
        let mut with_vm: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .filter(|p| std::fs::read_to_string(p).unwrap().contains(VM_MARK))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        with_vm.sort();
        let mut roster: Vec<String> = ROSTER.iter().map(|s| s.to_string()).collect();
        roster.sort();
        assert_eq!(
            roster, with_vm,
            "xtask::vm_tests::ROSTER against tests/*.rs"
        );
    }

    #[test]
    fn the_cargo_command_names_every_target_and_passes_filters_on() {
        let c = cargo_test(&["gangs".into()], 0).unwrap();
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for target in ROSTER {
            assert!(
                args.windows(2).any(|w| w[0] == "--test" && w[1] == target),
                "{args:?}"
            );
        }
        assert_eq!(args.last().map(String::as_str), Some("gangs"));
        assert!(args.contains(&"--no-fail-fast".to_string()));
    }
}
