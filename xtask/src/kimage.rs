//! Reads sched_ext support from a kernel image itself, for kernels whose
//! config is not in the archive (Debian's 6.19–7.1 `linux-binary-<ver>`
//! packages have no `linux-base-<ver>` beside them). A bzImage carries the
//! compressed vmlinux; a kernel built with CONFIG_SCHED_CLASS_EXT=y has
//! `struct sched_ext_ops` in its BTF, so the name is among its strings, and
//! a kernel without it has no such string (checked on Debian's 6.12,
//! which lacks sched_ext, and 7.1, which has it).

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Compressed-payload magic numbers and the tool that inflates each, as in
/// the kernel's scripts/extract-vmlinux.
const PAYLOADS: [(&[u8], &str); 4] = [
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x1f\x8b\x08", "gzip"),
    (b"\x02\x21\x4c\x18", "lz4"),
];

/// The type only a sched_ext kernel's BTF has.
const SCHED_EXT_MARK: &[u8] = b"sched_ext_ops";

/// True when the image's vmlinux has sched_ext.
pub fn has_sched_ext(vmlinuz: &Path) -> Result<bool> {
    let image = std::fs::read(vmlinuz).with_context(|| format!("reading {}", vmlinuz.display()))?;
    let elf = vmlinux(&image)
        .with_context(|| format!("finding the kernel inside {}", vmlinuz.display()))?;
    Ok(contains(&elf, SCHED_EXT_MARK))
}

/// The uncompressed vmlinux (an ELF file) inside a bzImage.
fn vmlinux(image: &[u8]) -> Result<Vec<u8>> {
    for (magic, tool) in PAYLOADS {
        // A magic number may also occur by chance before the payload.
        for start in find_all(image, magic).into_iter().take(8) {
            if let Some(elf) = inflate(tool, &image[start..])? {
                return Ok(elf);
            }
        }
    }
    bail!("no zstd, xz, gzip or lz4 payload in it inflates to an ELF kernel")
}

/// Runs `tool -dc` on `data`; Some(output) when it is an ELF file. The
/// payload is followed by other data, so the tool's complaint about
/// trailing garbage (and its exit status) is expected and ignored.
fn inflate(tool: &str, data: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut child = match Command::new(tool)
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        // Debian's kernels are zstd (setup.sh installs it); a missing tool
        // only means that kind of payload cannot be tried.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot run {tool}: {e}"),
    };
    let mut stdin = child.stdin.take().context("decompressor stdin")?;
    let owned = data.to_vec();
    // Feed from a thread: the tool's output must be read at the same time.
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&owned);
    });
    let out = child.wait_with_output()?;
    let _ = feeder.join();
    Ok(out.stdout.starts_with(b"\x7fELF").then_some(out.stdout))
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compress(tool: &str, data: &[u8]) -> Vec<u8> {
        let mut child = Command::new(tool)
            .arg("-c")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("compressor");
        child.stdin.take().unwrap().write_all(data).unwrap();
        child.wait_with_output().unwrap().stdout
    }

    #[test]
    fn the_payload_is_found_after_a_false_magic_and_before_trailing_data() {
        let elf_with = b"\x7fELF....struct sched_ext_ops....".to_vec();
        let elf_without = b"\x7fELF....struct sched_class....".to_vec();
        for (elf, want) in [(elf_with, true), (elf_without, false)] {
            // A setup header that happens to contain zstd's magic, the
            // payload, then trailing data, as in a real bzImage.
            let mut image = b"MZ setup \x28\xb5\x2f\xfd junk ".to_vec();
            image.extend(compress("zstd", &elf));
            image.extend(b"trailing .data of the decompressor");
            let dir = std::env::temp_dir().join(format!("kimage-test-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("vmlinuz-{want}"));
            std::fs::write(&path, &image).unwrap();
            assert_eq!(has_sched_ext(&path).unwrap(), want);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn an_image_without_a_kernel_is_an_error() {
        let err = vmlinux(b"not a kernel at all").unwrap_err().to_string();
        assert!(err.contains("ELF kernel"), "{err}");
    }
}
