//! Reading a policy file. The root daemon reads whatever path `policy set`
//! or `-p` names, so no file may stall it (a FIFO with no writer blocks
//! `open` and `read` for ever, and the run loop's SIGTERM handler only sets
//! a flag) or exhaust its memory (`/dev/zero` never ends). Every path that
//! reads a policy file comes through [`read_policy_file`].

use anyhow::{anyhow, bail, Context, Result};
use std::fs::{Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest policy file read. The presets are 2 KiB at most; a file
/// many times larger is a wrong path or an attempt to make root allocate.
pub const MAX_POLICY_FILE_BYTES: u64 = 64 << 10;

/// The text of the policy file at `path`: a regular file of at most
/// [`MAX_POLICY_FILE_BYTES`] of UTF-8. Errors name the path and the reason.
pub fn read_policy_file(path: &Path) -> Result<String> {
    read(path, false)
}

/// The same, for a file found by name in a policy directory
/// (`lookup.rs`): no one but root (or this process's user) may be able to
/// change it, or whoever can would steer a root daemon by a name someone
/// else typed. Checked on the opened file, not the path.
pub(crate) fn read_owned_policy_file(path: &Path) -> Result<String> {
    read(path, true)
}

fn read(path: &Path, owned_only: bool) -> Result<String> {
    let shown = path.display();
    // O_NONBLOCK: a FIFO's open (and read) would wait for a writer, a
    // serial line's open for carrier; regular files ignore it. O_NOCTTY: a
    // terminal named by mistake must not become the daemon's controlling
    // terminal. O_CLOEXEC: the control threads run concurrently with
    // anything the daemon may spawn.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) => {
            // A socket cannot be opened at all (ENXIO): say what it is
            // rather than "no such device or address".
            if let Some(kind) = std::fs::metadata(path).ok().as_ref().and_then(not_regular) {
                bail!("policy file {shown} is {kind}, not a regular file");
            }
            return Err(e).with_context(|| format!("opening policy file {shown}"));
        }
    };
    // The opened descriptor's type, not the path's: the path may name
    // something else by now.
    let meta = file
        .metadata()
        .with_context(|| format!("policy file {shown}: fstat"))?;
    if let Some(kind) = not_regular(&meta) {
        bail!("policy file {shown} is {kind}, not a regular file");
    }
    if owned_only {
        only_owner_writes(&meta, &format!("policy file {shown}"))?;
    }
    if meta.len() > MAX_POLICY_FILE_BYTES {
        bail!(
            "policy file {shown} is {} bytes, more than the cap of {MAX_POLICY_FILE_BYTES} \
             bytes (64 KiB)",
            meta.len()
        );
    }
    // The size fstat gave may be stale (the file may grow while read, and
    // /proc files say 0): read one byte past the cap at most, so a file
    // that grew past it is told from one exactly at it.
    let mut bytes = Vec::new();
    file.take(MAX_POLICY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading policy file {shown}"))?;
    if bytes.len() as u64 > MAX_POLICY_FILE_BYTES {
        bail!(
            "policy file {shown} grew past the cap of {MAX_POLICY_FILE_BYTES} bytes (64 KiB) \
             while being read"
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "policy file {shown} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Fails unless `meta` is owned by root or this process's user and no one
/// else may write it (no group or other write bit).
pub(crate) fn only_owner_writes(meta: &Metadata, what: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mode = meta.mode() & 0o7777;
    if meta.uid() != 0 && meta.uid() != euid {
        bail!(
            "{what} belongs to uid {}, not root: policies found by name are taken only \
             from files root alone can change",
            meta.uid()
        );
    }
    if mode & 0o022 != 0 {
        bail!(
            "{what} may be written by {} (mode {mode:04o}): policies found by name are \
             taken only from files root alone can change (chmod go-w)",
            if mode & 0o002 != 0 {
                "anyone"
            } else {
                "its group"
            }
        );
    }
    Ok(())
}

/// What a file that is not a regular file is, for an error message.
fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("of an unknown type")
    }
}
