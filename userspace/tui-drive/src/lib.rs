//! `sky-tui-drive`: runs a full-screen terminal program on a
//! pseudo-terminal, types a script of keys into it and reads its screen
//! back through a terminal emulator (vt100), so a VM test can check what a
//! person would see of `scx_sky top` without a person, tmux or a display.

use anyhow::{bail, Context, Result};
use std::io::{self, Write};
use std::time::Duration;

mod pty;
pub use pty::Driver;

/// How long the program gets to exit by itself after a completed script.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// One step of a `--keys` script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait until the text appears on some row of the screen.
    Wait(String),
    /// Send the bytes of one key.
    Key(Vec<u8>),
    Sleep(Duration),
    /// Print every row of the screen.
    Screen,
}

/// The step as a script spells it, for errors.
impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Step::Wait(text) => write!(f, "wait:{text}"),
            Step::Key(k) if k == b"\r" => write!(f, "key:enter"),
            Step::Key(k) if k == b"\x1b" => write!(f, "key:esc"),
            Step::Key(k) => write!(f, "key:{}", String::from_utf8_lossy(k)),
            Step::Sleep(time) => write!(f, "sleep:{}", time.as_millis()),
            Step::Screen => write!(f, "screen"),
        }
    }
}

/// Parses a `;`-separated script; an error names the step (1-based) and
/// its text. All of it is parsed before a program starts, so a typo never
/// leaves a half-driven program behind.
pub fn parse_script(script: &str) -> Result<Vec<Step>> {
    script
        .split(';')
        .enumerate()
        .map(|(i, raw)| parse_step(raw).with_context(|| format!("step {} {raw:?}", i + 1)))
        .collect()
}

fn parse_step(raw: &str) -> Result<Step> {
    let (verb, arg) = match raw.split_once(':') {
        Some((verb, arg)) => (verb, Some(arg)),
        None => (raw, None),
    };
    match (verb, arg) {
        ("wait", Some(text)) if !text.is_empty() => Ok(Step::Wait(text.to_string())),
        ("wait", _) => bail!("wait needs the text to wait for (wait:TEXT)"),
        // Enter sends CR, as a real terminal's Enter key does (a program in
        // raw mode sees CR; in cooked mode the tty turns it into a newline).
        ("key", Some("enter")) => Ok(Step::Key(b"\r".to_vec())),
        ("key", Some("esc")) => Ok(Step::Key(b"\x1b".to_vec())),
        ("key", arg) => {
            let mut chars = arg.unwrap_or("").chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(Step::Key(c.to_string().into_bytes())),
                _ => bail!("key needs one character, `esc` or `enter` (key:C)"),
            }
        }
        // At most an hour: a longer sleep is a typo, not a test.
        ("sleep", Some(ms)) => match ms.parse() {
            Ok(ms) if ms <= 3_600_000 => Ok(Step::Sleep(Duration::from_millis(ms))),
            _ => bail!("sleep needs milliseconds, 0 to 3600000 (sleep:MS)"),
        },
        ("screen", None) => Ok(Step::Screen),
        _ => bail!("unknown step: the steps are wait:TEXT, key:C, sleep:MS and screen"),
    }
}

/// Runs `steps`, printing `screen` steps to `out`; returns how many steps
/// were done, and the first failure (naming its step).
pub fn run_steps(
    d: &mut Driver,
    steps: &[Step],
    step_timeout: Duration,
    out: &mut dyn Write,
) -> (usize, Result<()>) {
    for (i, step) in steps.iter().enumerate() {
        let done = match step {
            Step::Wait(text) => d.wait_for(text, step_timeout),
            Step::Key(bytes) => d.send(bytes),
            Step::Sleep(time) => d.idle(*time),
            Step::Screen => print_screen(out, &d.rows()).context("printing the screen"),
        };
        if let Err(e) = done {
            return (i, Err(e.context(format!("step {} \"{step}\"", i + 1))));
        }
    }
    (steps.len(), Ok(()))
}

fn print_screen(out: &mut dyn Write, rows: &[String]) -> io::Result<()> {
    for row in rows {
        writeln!(out, "screen| {row}")?;
    }
    out.flush()
}

/// `sky-tui-drive`: drives `program` with `keys` and prints the result
/// line; fails when a step failed (the screen then goes to stderr).
pub fn run(
    program: &[String],
    cols: u16,
    rows: u16,
    keys: &str,
    step_timeout: Duration,
) -> Result<()> {
    let steps = parse_script(keys).context("--keys")?;
    let mut d = Driver::spawn(program, cols, rows)?;
    let (done, outcome) = run_steps(&mut d, &steps, step_timeout, &mut io::stdout().lock());
    let grace = if outcome.is_ok() {
        EXIT_GRACE
    } else {
        // The screen as it was when the step failed, before the kill.
        print_screen(&mut io::stderr().lock(), &d.rows())?;
        Duration::ZERO
    };
    d.finish(grace)?;
    let (exited, status) = d.exit_fields();
    println!(
        "result workload=tui-drive steps_done={done} steps={} exited={exited} \
         status={status} restored={}",
        steps.len(),
        d.restored()
    );
    outcome
}

#[cfg(test)]
mod tests;
