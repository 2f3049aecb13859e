//! Debian's programs for the guest, from Debian's own packages, each tool
//! with its libraries in a directory of its own: `ndctl` (persistent
//! memory namespaces) and the RDMA tools (rdma-core's verbs libraries and
//! soft-RoCE provider, perftest).
//!
//! The packages are downloaded (`apt-get download`, never installed) with
//! every package they depend on. A tool from this machine's suites stops
//! at libc6: the guest's C library and loader are this machine's, as for
//! every other program in the initramfs. A tool from another suite
//! (`Tool::suite`) brings that suite's C library and loader too, read
//! from a private apt state under the cache (this machine's apt is never
//! changed): its programs run through that loader, so libraries built for
//! a newer C library work in the guest, and nothing of theirs is mixed
//! with /lib. The result is cached as a tree copied over the guest's root:
//!
//! - `usr/lib/sky-<name>/`: the programs and the libraries they load, by
//!   soname, all from the downloaded packages (checked with the loader's
//!   `--list`);
//! - `bin/<program>`: a wrapper that runs it with those libraries;
//! - `bin/sky-<name>-run` (tools with their own C library): runs any
//!   program that way (the project's binaries that dlopen the tool's
//!   libraries);
//! - the files in `Tool::keep` at their own paths (plugins a library
//!   loads by path, and their configuration).

use crate::kernel::download_debs_with;
use crate::paths::{cache_dir, output, run};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Tool {
    /// Names the cache directory and the guest's `usr/lib/sky-<name>`.
    pub name: &'static str,
    /// The Debian suite the packages come from, with its C library; None:
    /// this machine's suites and C library.
    pub suite: Option<&'static str>,
    /// The packages asked for (their dependencies come along).
    pub packages: &'static [&'static str],
    /// Programs in the packages (paths inside them) that get a wrapper in
    /// the guest's /bin.
    pub programs: &'static [&'static str],
    /// Files of the packages copied to the same path in the guest (plugins
    /// a library loads by path, and their configuration).
    pub keep: &'static [&'static str],
}

/// ndctl, from this machine's suite (the qemu NVDIMM comes up as a raw
/// namespace; `ndctl create-namespace -m fsdax` or `-m devdax` makes it
/// usable).
pub const NDCTL: Tool = Tool {
    name: "ndctl",
    suite: None,
    packages: &["ndctl"],
    programs: &["usr/bin/ndctl"],
    keep: &[],
};

/// The verbs and connection-manager libraries with the soft-RoCE (rxe)
/// provider, `ibv_devinfo`, and perftest, from trixie: rdma-core 56.
/// Debian 12's rdma-core 44 has no RDMA FLUSH in its API nor in the rxe
/// provider (both came in rdma-core 45), and the queue between machines
/// makes its entries durable with FLUSH.
pub const RDMA: Tool = Tool {
    name: "rdma",
    suite: Some("trixie"),
    packages: &["ibverbs-providers", "ibverbs-utils", "perftest"],
    programs: &[
        "usr/bin/ibv_devinfo",
        "usr/bin/ib_write_bw",
        "usr/bin/ib_read_bw",
        "usr/bin/ib_write_lat",
        "usr/bin/ib_read_lat",
    ],
    // The soft-RoCE provider alone: libibverbs tries every provider its
    // configuration names, and warns for each one missing.
    keep: &[
        "usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
        "etc/libibverbs.d/rxe.driver",
    ],
};

/// Libraries that may come from this machine for a tool of its own suite:
/// glibc's, which every program in the initramfs shares.
const GLIBC: [&str; 7] = [
    "linux-vdso.so.1",
    "libc.so.6",
    "ld-linux-x86-64.so.2",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
];

const LOADER: &str = "ld-linux-x86-64.so.2";

/// The tree to copy over the guest's root, downloading the packages the
/// first time.
pub fn ensure(tool: &Tool) -> Result<PathBuf> {
    let dir = cache_dir()?.join("tools").join(tool.name);
    let tree = dir.join("guest");
    let complete = |t: &Path| t.join(guest_dir(tool)).join("packages").is_file();
    if complete(&tree) {
        return Ok(tree);
    }
    fs::create_dir_all(&dir)?;
    // Built aside and renamed into place: tests may boot VMs in parallel.
    let work = dir.join(format!("work-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let result = build(tool, &dir, &work).and_then(|built| {
        if !complete(&tree) {
            let _ = fs::remove_dir_all(&tree);
            fs::rename(&built, &tree)
                .with_context(|| format!("moving {} into place", built.display()))?;
        }
        Ok(tree)
    });
    let _ = fs::remove_dir_all(&work);
    result
}

fn guest_dir(tool: &Tool) -> String {
    format!("usr/lib/sky-{}", tool.name)
}

fn build(tool: &Tool, dir: &Path, work: &Path) -> Result<PathBuf> {
    let debs = work.join("debs");
    let root = work.join("root");
    fs::create_dir_all(&debs)?;
    fs::create_dir_all(&root)?;
    let apt = match tool.suite {
        Some(suite) => Apt::private(&dir.join("apt"), suite)?,
        None => Apt::host(),
    };
    let packages = apt.closure(tool.packages, tool.suite.is_none())?;
    eprintln!("xtask: downloading {}", packages.join(" "));
    let mut names = Vec::new();
    for deb in apt
        .download(&packages, &debs)
        .with_context(|| format!("downloading {} and its libraries", tool.name))?
    {
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
        names.push(deb.file_name().unwrap().to_string_lossy().into_owned());
    }

    let guest = work.join("guest");
    let lib_dir = guest.join(guest_dir(tool));
    fs::create_dir_all(&lib_dir)?;
    fs::create_dir_all(guest.join("bin"))?;
    let search = ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
        .map(|d| root.join(d).display().to_string())
        .join(":");
    let own_loader = match tool.suite {
        Some(suite) => Some(
            ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
                .map(|d| root.join(d).join(LOADER))
                .into_iter()
                .find(|l| l.is_file())
                .with_context(|| format!("the packages of Debian {suite} hold no {LOADER}"))?,
        ),
        None => None,
    };
    let mut objects: Vec<PathBuf> = tool.programs.iter().map(|p| root.join(p)).collect();
    for keep in tool.keep {
        let (from, to) = (root.join(keep), guest.join(keep));
        if !from.is_file() {
            bail!("the {} packages hold no {keep}", tool.name);
        }
        fs::create_dir_all(to.parent().context("kept file has no parent")?)?;
        fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
        if is_shared_object(&from) {
            objects.push(from);
        }
    }
    for object in &objects {
        if !object.is_file() {
            bail!("the {} packages hold no {}", tool.name, object.display());
        }
        let listed = match &own_loader {
            Some(loader) => output(
                Command::new(loader)
                    .args(["--list", "--library-path", &search])
                    .arg(object),
            )?,
            None => output(
                Command::new("ldd")
                    .arg(object)
                    .env("LD_LIBRARY_PATH", &search),
            )?,
        };
        for (soname, path) in crate::initramfs::parse_ldd(&listed)? {
            let name = Path::new(&soname)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(soname.clone());
            match path {
                Some(p) if p.starts_with(&root) => {
                    fs::copy(&p, lib_dir.join(&name))
                        .with_context(|| format!("copying {}", p.display()))?;
                }
                // The loader lists itself under the program's
                // interpreter path; the tool's own is copied below.
                _ if own_loader.is_some() && name == LOADER => {}
                _ if own_loader.is_none() && GLIBC.contains(&name.as_str()) => {}
                _ if name == "linux-vdso.so.1" => {}
                Some(p) => bail!(
                    "{} would load {} from this machine: add its package to the download",
                    object.display(),
                    p.display()
                ),
                None => bail!(
                    "{} needs {soname}, which no downloaded package holds",
                    object.display()
                ),
            }
        }
    }
    if let Some(loader) = &own_loader {
        fs::copy(loader, lib_dir.join(LOADER))
            .with_context(|| format!("copying {}", loader.display()))?;
        fs::set_permissions(lib_dir.join(LOADER), fs::Permissions::from_mode(0o755))?;
    }
    let run_with = |program: &str| match tool.suite {
        Some(_) => format!(
            "exec /{lib}/{LOADER} --library-path /{lib} {program} \"$@\"",
            lib = guest_dir(tool)
        ),
        None => format!(
            "LD_LIBRARY_PATH=/{lib} exec {program} \"$@\"",
            lib = guest_dir(tool)
        ),
    };
    let header = format!(
        "#!/bin/sh\n# Debian's {} with its own libraries (xtask/src/guest_tools.rs).\n",
        tool.name
    );
    for program in tool.programs {
        let name = Path::new(program).file_name().unwrap();
        let bin = lib_dir.join(name);
        fs::copy(root.join(program), &bin)?;
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755))?;
        let guest_path = format!("/{}/{}", guest_dir(tool), name.to_string_lossy());
        write_exec(
            &guest.join("bin").join(name),
            &format!("{header}{}\n", run_with(&guest_path)),
        )?;
    }
    if tool.suite.is_some() {
        write_exec(
            &guest.join(format!("bin/sky-{}-run", tool.name)),
            &format!("{header}{}\n", run_with("")),
        )?;
    }
    // Written last: its presence marks a complete tree.
    fs::write(lib_dir.join("packages"), names.join("\n") + "\n")?;
    Ok(guest)
}

fn write_exec(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn is_shared_object(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.ends_with(".so") || name.contains(".so.")
}

/// apt as it downloads: this machine's configuration, or a private state
/// that knows one suite of this machine's Debian mirror and nothing else.
struct Apt {
    options: Vec<String>,
}

impl Apt {
    fn host() -> Apt {
        Apt {
            options: Vec::new(),
        }
    }

    /// A private apt state in `state` for `suite` (main), from the mirror
    /// this machine's apt uses, its lists fetched the first time.
    fn private(state: &Path, suite: &str) -> Result<Apt> {
        let lists = state.join("lists");
        fs::create_dir_all(lists.join("partial"))?;
        fs::create_dir_all(state.join("cache/archives/partial"))?;
        let sources = state.join("sources.list");
        fs::write(
            &sources,
            format!(
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {} {suite} main\n",
                debian_uri()?
            ),
        )?;
        let status = state.join("status");
        fs::write(&status, "")?;
        let options = [
            format!("Dir::Etc::sourcelist={}", sources.display()),
            "Dir::Etc::sourceparts=-".to_string(),
            format!("Dir::State::Lists={}", lists.display()),
            format!("Dir::State::status={}", status.display()),
            format!("Dir::Cache={}", state.join("cache").display()),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect();
        let apt = Apt { options };
        let fetched = state.join("lists-fetched");
        if !fetched.exists() {
            eprintln!("xtask: fetching the package lists of Debian {suite}");
            run(Command::new("apt-get").args(&apt.options).args([
                "-qq",
                "-o",
                "APT::Sandbox::User=root",
                "update",
            ]))
            .with_context(|| format!("fetching the package lists of Debian {suite}"))?;
            fs::write(&fetched, "")?;
        }
        Ok(apt)
    }

    /// `roots` and everything they depend on; down to (not including)
    /// libc6 when `stop_at_libc`.
    fn closure(&self, roots: &[&str], stop_at_libc: bool) -> Result<Vec<String>> {
        let mut seen: BTreeSet<String> = roots.iter().map(|r| r.to_string()).collect();
        let mut todo: Vec<String> = seen.iter().cloned().collect();
        while let Some(p) = todo.pop() {
            let text = output(Command::new("apt-cache").args(&self.options).args([
                "depends",
                "--no-recommends",
                "--no-suggests",
                "--no-conflicts",
                "--no-breaks",
                "--no-replaces",
                "--no-enhances",
                "--no-pre-depends",
                &p,
            ]))
            .with_context(|| format!("apt does not know {p} (run apt-get update)"))?;
            for dep in depends(&text) {
                if !(stop_at_libc && dep == "libc6") && seen.insert(dep.clone()) {
                    todo.push(dep);
                }
            }
        }
        Ok(seen.into_iter().collect())
    }

    /// Downloads `packages` (never installs them) into `dir`; the .deb
    /// files there, sorted.
    fn download(&self, packages: &[String], dir: &Path) -> Result<Vec<PathBuf>> {
        download_debs_with(&self.options, packages, dir)
    }
}

/// The project's own apt entry scripts/setup.sh writes for trixie-backports
/// (with the mirror this machine's apt uses, so that no host name is
/// written into the project): the private states take their mirror from it.
const SETUP_SOURCES: &str = "/etc/apt/sources.list.d/scx-sky-trixie-backports.sources";

fn debian_uri() -> Result<String> {
    let text = fs::read_to_string(SETUP_SOURCES)
        .with_context(|| format!("reading {SETUP_SOURCES}: run scripts/setup.sh"))?;
    mirror_uri(&text).with_context(|| format!("{SETUP_SOURCES} names no URIs"))
}

/// The first `URIs:` of a deb822 sources file.
fn mirror_uri(deb822: &str) -> Option<String> {
    deb822
        .lines()
        .find_map(|l| l.strip_prefix("URIs:"))
        .and_then(|u| u.split_whitespace().next())
        .map(str::to_string)
}

/// The package names on `Depends:` lines of `apt-cache depends` output
/// (virtual packages, shown as `<name>`, are left out).
fn depends(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().trim_start_matches('|').strip_prefix("Depends:"))
        .map(str::trim)
        .filter(|d| !d.starts_with('<') && !d.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_lines_are_read() {
        let text = "ndctl\n  PreDepends: init-system-helpers\n  Depends: libc6\n  Depends: libndctl6\n |Depends: liba\n  Depends: <virtual>\n  Recommends: x\n";
        assert_eq!(depends(text), ["libc6", "libndctl6", "liba"]);
    }

    #[test]
    fn the_mirror_is_the_first_uri_of_the_entry() {
        let deb822 = "Types: deb\nURIs: http://mirror.invalid/debian http://b.invalid/\nSuites: trixie-backports\n";
        assert_eq!(
            mirror_uri(deb822).as_deref(),
            Some("http://mirror.invalid/debian")
        );
        assert_eq!(mirror_uri("Types: deb\n"), None);
    }
}
