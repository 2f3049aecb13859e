//! A hostile member of a shared space, for the trust test
//! (tests/vm/trust.sh): it joins as a member, says it is memory-bound,
//! then overwrites its own label in the member table with another
//! process's pid and start time, as any member can (the table is in a file
//! its owner may write). A scheduler that believed the table would gang
//! and class that other process, which may be root's or another user's.

use anyhow::{bail, Context, Result};
use sky_pvas::{hints, proc, Space};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

/// Joins the space at `path` as member `id`, labels the slot with
/// `victim`, and holds it for `hold`. Returns what it wrote.
pub fn relabel(path: &Path, id: u32, victim: u32, hold: Duration) -> Result<u64> {
    let space = Space::attach(path, id).with_context(|| format!("joining as member {id}"))?;
    space.set_memory_bound(true)?;
    let (_, members) = hints::read_members(path)?;
    let own = members
        .iter()
        .find(|m| m.id == id)
        .map(|m| m.owner_word)
        .context("this member is not in the member table")?;
    let start = proc::start_time(victim).with_context(|| format!("no process {victim}"))?;
    let forged = proc::owner_word(victim, start);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let at = own_label_offset(&file, own)?;
    file.write_all_at(&forged.to_ne_bytes(), at)?;
    // Held until `hold` passes or SIGINT/SIGTERM (`crate::stop`) comes.
    let held = std::time::Instant::now();
    while held.elapsed() < hold && !crate::stop::requested() {
        std::thread::sleep(Duration::from_millis(20).min(hold));
    }
    drop(space);
    Ok(forged)
}

/// Where this member's label is: the one aligned word of the file's first
/// page that holds it (a member need not know the layout to forge it).
fn own_label_offset(file: &std::fs::File, own: u64) -> Result<u64> {
    let mut page = vec![0u8; 1 << 16];
    let n = file.read_at(&mut page, 0)?;
    let hits: Vec<u64> = page[..n]
        .chunks_exact(8)
        .enumerate()
        .filter(|(_, w)| u64::from_ne_bytes((*w).try_into().unwrap_or_default()) == own)
        .map(|(i, _)| i as u64 * 8)
        .collect();
    match hits.as_slice() {
        [at] => Ok(*at),
        _ => bail!("found this member's label {} times, not once", hits.len()),
    }
}
