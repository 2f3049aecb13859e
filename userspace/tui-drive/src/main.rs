//! `sky-tui-drive`: the command line of the driver (see the library).

use anyhow::Result;
use clap::Parser;
use std::time::Duration;

/// Drive a full-screen terminal program on a pseudo-terminal: type a
/// script of keys, wait for text on its screen (read back through a
/// terminal emulator), then print a result line saying whether it
/// exited and left the terminal restored. Fails when a step fails,
/// with the screen on stderr. Example:
/// `sky-tui-drive --keys 'wait:policy;key:p;wait:generation 3;key:q' -- scx_sky top`.
#[derive(Parser, Debug)]
#[command(name = "sky-tui-drive")]
struct Cli {
    /// Terminal width, in columns.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u16).range(1..))]
    cols: u16,
    /// Terminal height, in rows.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u16).range(1..))]
    rows: u16,
    /// The script: `;`-separated steps, `wait:TEXT` (until TEXT is on
    /// the screen), `key:C` (one character, or `esc` or `enter`),
    /// `sleep:MS`, `screen` (print every row, prefixed `screen| `).
    #[arg(long)]
    keys: String,
    /// Longest a `wait:` step may take, in seconds.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    step_timeout_secs: u64,
    /// The program to drive and its arguments, after `--`.
    #[arg(last = true, required = true)]
    program: Vec<String>,
}

fn run(cli: Cli) -> Result<()> {
    sky_tui_drive::run(
        &cli.program,
        cli.cols,
        cli.rows,
        &cli.keys,
        Duration::from_secs(cli.step_timeout_secs),
    )
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("sky-tui-drive: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_refused_naming_them() {
        let cli = Cli::try_parse_from(["sky-tui-drive", "--keys", "wait:x;frob:1", "--", "true"])
            .expect("arguments parse");
        let bad_step = format!("{:#}", run(cli).expect_err("bad script accepted"));
        assert!(
            bad_step.starts_with(r#"--keys: step 2 "frob:1""#),
            "{bad_step}"
        );
        for (args, named) in [
            (
                &["--keys", "key:q", "--cols", "0", "--", "true"][..],
                "--cols",
            ),
            (
                &["--keys", "key:q", "--step-timeout-secs", "0", "--", "true"],
                "--step-timeout-secs",
            ),
            (&["--keys", "key:q"], "PROGRAM"),
        ] {
            let err =
                Cli::try_parse_from(std::iter::once("sky-tui-drive").chain(args.iter().copied()))
                    .expect_err("bad arguments accepted")
                    .to_string();
            assert!(err.contains(named), "{args:?}: {err}");
        }
    }
}
