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
            // One space's bad file is a line of its own, not the end of
            // the listing; names and paths are users' text: escaped.
            for listed in hints::list() {
                match listed {
                    hints::Listed::Refused { path, why } => {
                        println!("? {}: {}", shown(&path.to_string_lossy()), shown(&why))
                    }
                    hints::Listed::Space(s) => print_space(&s),
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
            // Held by pidfd from before the destroy: the signal reaches
            // that process or none, never one that reused its pid.
            let verified: Vec<sky_pvas::Process> = if kill {
                members
                    .iter()
                    .filter_map(|m| space.verified_process(m.id))
                    .collect()
            } else {
                Vec::new()
            };
            space.destroy()?;
            if kill {
                for p in &verified {
                    if let Err(e) = p.signal(libc::SIGTERM) {
                        eprintln!("member pid {} not signalled: {e}", p.pid());
                    }
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

fn print_space(s: &hints::SpaceHints) {
    println!(
        "{} {} (uid {}, {} members max, {} MiB segments)",
        shown(&s.name),
        shown(&s.path.to_string_lossy()),
        s.id.uid,
        s.header.max_members,
        s.header.segment_size >> 20
    );
    for (m, proven) in &s.members {
        println!(
            "  id {:>2} pid {:>7}{}{}{}",
            m.id,
            m.pid,
            match (m.alive, proven) {
                (false, _) => " (dead)",
                (true, false) => " (pid not proven: not a member to the scheduler)",
                (true, true) => "",
            },
            if m.pm_writer { " pm-writer" } else { "" },
            if m.memory_bound { " memory-bound" } else { "" }
        );
    }
}

/// `text` with control characters escaped: a name a user chose must not
/// drive the reader's terminal.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_in_names_are_escaped() {
        assert_eq!(super::shown("job-1"), "job-1");
        assert_eq!(super::shown("a\x1b[2Jb\nc"), "a\\u{1b}[2Jb\\nc");
        assert_eq!(super::shown("späce"), "späce");
    }
}
