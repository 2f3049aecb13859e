//! `scx_sky policy set|get|list`: a client of the running scheduler's
//! control socket.

use crate::cli::PolicyCommand;
use anyhow::Result;
use sky_control::Request;
use std::io::Write;
use std::path::Path;

pub fn run(cmd: PolicyCommand, socket_dir: &Path) -> Result<()> {
    let req = match cmd {
        PolicyCommand::Set { policy } => {
            // A file is read by the scheduler: give it the full path.
            let name = if sky_policy::names_a_file(&policy) {
                std::fs::canonicalize(&policy)
                    .map_err(|e| anyhow::anyhow!("policy file {policy}: {e}"))?
                    .display()
                    .to_string()
            } else {
                policy
            };
            Request::Set(name)
        }
        PolicyCommand::Get => Request::Get,
        PolicyCommand::List => Request::List,
    };
    let answer = sky_control::request(socket_dir, &req)?;
    if !answer.is_empty() {
        // A reader that stops early (`| head -1`) is not an error.
        let _ = writeln!(std::io::stdout(), "{answer}");
    }
    Ok(())
}
