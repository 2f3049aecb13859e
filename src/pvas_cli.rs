//! `scx_sky pvas ...`: shared spaces from the command line.

use crate::cli::PvasCommand;
use anyhow::{bail, Context, Result};
use sky_pvas::space::path_for;
use sky_pvas::{hints, CreateOptions, Space};
use std::os::unix::process::CommandExt;

pub fn run(cmd: PvasCommand) -> Result<()> {
    match cmd {
        PvasCommand::Create {
            name,
            members,
            segment_mb,
            dir,
            group,
        } => {
            let opts = CreateOptions {
                dir,
                max_members: members,
                segment_size: segment_mb
                    .checked_mul(1 << 20)
                    .context("--segment-mb is too large")?,
                base: None,
                group_access: group,
            };
            let space = Space::create(&name, &opts)?;
            let h = space.header();
            println!(
                "{}: {} members x {} MiB at {:#x}",
                space.path().display(),
                h.max_members,
                h.segment_size >> 20,
                h.base
            );
            Ok(())
        }
        PvasCommand::Run {
            name,
            id,
            dir,
            command,
        } => {
            let path = path_for(&dir, &name);
            let space = Space::open(&path)?;
            // The slot is held from here on; the program attaches with the
            // lock it inherits (Space::attach_from_env).
            let lock_fd = space.reserve_for_exec(id)?;
            drop(space);
            let err = std::process::Command::new(&command[0])
                .args(&command[1..])
                .env("SKY_PVAS_PATH", &path)
                .env("SKY_PVAS_ID", id.to_string())
                .env("SKY_PVAS_LOCK_FD", lock_fd.to_string())
                .exec();
            bail!("running {}: {err}", command[0])
        }
        PvasCommand::Ls => {
            for s in hints::read_all() {
                let (header, members) = hints::read_members(&s.path)?;
                println!(
                    "{} {} ({} members max, {} MiB segments)",
                    s.name,
                    s.path.display(),
                    header.max_members,
                    header.segment_size >> 20
                );
                for m in members {
                    println!(
                        "  id {:>2} pid {:>7}{}{}{}",
                        m.id,
                        m.pid,
                        if m.alive { "" } else { " (dead)" },
                        if m.pm_writer { " pm-writer" } else { "" },
                        if m.memory_bound { " memory-bound" } else { "" }
                    );
                }
            }
            Ok(())
        }
        PvasCommand::Destroy { name, dir, kill } => {
            let path = path_for(&dir, &name);
            let space = Space::open(&path)?;
            let members = space.members();
            // Pids read from the member table are only labels any member
            // can write: signal only those the kernel shows holding their
            // slot's lock on this very file.
            let verified: Vec<u32> = if kill {
                members
                    .iter()
                    .filter_map(|m| space.verified_pid(m.id))
                    .collect()
            } else {
                Vec::new()
            };
            space.destroy()?;
            if kill {
                for &pid in &verified {
                    // SAFETY: plain kill(2).
                    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                }
                let unverified = members.iter().filter(|m| m.alive).count() - verified.len();
                if unverified > 0 {
                    eprintln!(
                        "{unverified} live member(s) not signalled: their pid could not be verified"
                    );
                }
            }
            println!(
                "destroyed {} ({} live members told)",
                path.display(),
                members.iter().filter(|m| m.alive).count()
            );
            Ok(())
        }
    }
}
