//! `scx_sky policy set|get|list`: a client of the running scheduler's
//! control socket (root), or of its D-Bus service (anyone else; a switch
//! as polkit allows, by name only).

use crate::cli::PolicyCommand;
use anyhow::Result;
use sky_control::Request;
use std::io::Write;
use std::path::Path;

pub fn run(cmd: PolicyCommand, socket_dir: &Path, over_dbus: bool) -> Result<()> {
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
    let answer = if over_dbus {
        if let Request::Set(name) = &req {
            if sky_policy::names_a_file(name) {
                anyhow::bail!(
                    "a policy file needs root (sudo scx_sky policy set {name}); as another \
                     user, switch by name: put the file in /etc/scx_sky/policies/"
                );
            }
        }
        sky_dbus::Client::connect(&sky_dbus::Bus::System)?.request(&req)?
    } else {
        sky_control::request(socket_dir, &req)?
    };
    if !answer.is_empty() {
        // A reader that stops early (`| head -1`) is not an error.
        let _ = writeln!(std::io::stdout(), "{answer}");
    }
    Ok(())
}
