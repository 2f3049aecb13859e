//! The VM's cache model: the sky_cachesim QEMU plugin (`xtask/cachesim/`,
//! C against QEMU's plugin API) built here against the plugin header of
//! the QEMU installed, the geometries it is run with, and its counts read
//! back per marked phase.
//!
//! QEMU's TCG has no caches; the plugin sees every guest data access with
//! its vCPU and physical address and simulates per-core L1/L2 and a
//! per-socket LLC, so the miss rates that the SKY-1 and gang papers
//! measured can be compared across schedulers in one boot.

use crate::paths::{cache_dir, output, run, workspace_root};
use crate::vm::CpuTopology;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;

const SOURCES: [&str; 2] = ["cache_model.c", "sky_cachesim.c"];

/// The C compiler: the BPF clang, which every build here has.
fn cc() -> PathBuf {
    crate::paths::bpf_clang()
}

/// Three cache levels, each "SIZE:LINE:ASSOC" or "off", as the plugin
/// takes them (it checks them again and refuses what it cannot model),
/// and the sizes of a cache-size sweep simulated beside L1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheModel {
    pub l1: String,
    pub l2: String,
    pub llc: String,
    pub sweep: Vec<String>,
}

/// Named geometries for `--cache-model`.
pub const PRESETS: [(&str, &str); 2] = [
    // SKY-1's simulator: one 512 KB direct-mapped cache of 16-byte lines
    // per CPU, nothing shared; beside it the paper's smaller sizes.
    (
        "sky1",
        "512K:16:1/off/off/8K:16:1+16K:16:1+32K:16:1+64K:16:1+128K:16:1+256K:16:1",
    ),
    // A small modern part: private 32 KiB L1 and 512 KiB L2 per core, a
    // 4 MiB LLC per socket (scaled to the VM's workloads).
    ("modern", "32K:64:8/512K:64:8/4M:64:16"),
];

impl FromStr for CacheModel {
    type Err = anyhow::Error;

    /// A preset name, or `L1/L2/LLC[/SWEEP]` with each level
    /// `SIZE:LINE:ASSOC` or `off` (missing trailing levels are off), e.g.
    /// `8K:16:1`, and SWEEP up to 8 more L1 geometries joined by `+`.
    fn from_str(s: &str) -> Result<Self> {
        let spec = PRESETS
            .iter()
            .find(|(name, _)| *name == s)
            .map_or(s, |(_, spec)| *spec);
        let mut levels = spec.split('/').map(str::to_string);
        let model = CacheModel {
            l1: levels.next().unwrap_or_default(),
            l2: levels.next().unwrap_or_else(|| "off".into()),
            llc: levels.next().unwrap_or_else(|| "off".into()),
            sweep: levels
                .next()
                .map(|s| s.split('+').map(str::to_string).collect())
                .unwrap_or_default(),
        };
        if levels.next().is_some() {
            bail!("cache model {s:?} has more than L1/L2/LLC/SWEEP");
        }
        if model.sweep.len() > 8 {
            bail!("cache model {s:?}: a sweep has at most 8 sizes");
        }
        let named = [("l1", &model.l1), ("l2", &model.l2), ("llc", &model.llc)];
        let swept = model.sweep.iter().map(|g| ("sweep", g));
        for (name, level) in named.into_iter().chain(swept) {
            check_level(level).with_context(|| {
                let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                format!(
                    "cache model {s:?}, {name}: expected a preset ({}) or L1/L2/LLC of SIZE:LINE:ASSOC or off",
                    names.join(", ")
                )
            })?;
        }
        if model.l1 == "off" || model.sweep.iter().any(|g| g == "off") {
            bail!("cache model {s:?}: l1 and sweep sizes cannot be off");
        }
        Ok(model)
    }
}

impl std::fmt::Display for CacheModel {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.l1, self.l2, self.llc)?;
        if !self.sweep.is_empty() {
            write!(f, "/{}", self.sweep.join("+"))?;
        }
        Ok(())
    }
}

/// The shape the plugin accepts; it checks powers of two itself.
fn check_level(level: &str) -> Result<()> {
    if level == "off" {
        return Ok(());
    }
    let parts: Vec<&str> = level.split(':').collect();
    let ok = parts.len() == 3
        && parts.iter().all(|p| {
            let digits = p.strip_suffix(['K', 'M']).unwrap_or(p);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        });
    if !ok {
        bail!("{level:?} is not SIZE:LINE:ASSOC");
    }
    Ok(())
}

impl CacheModel {
    /// qemu's `-plugin` argument for a guest of `topology`, counts to `out`.
    pub fn plugin_arg(&self, plugin: &Path, topology: CpuTopology, out: &Path) -> String {
        let mut arg = format!(
            "file={},out={},l1={},l2={},llc={},threads={},sockets={}",
            plugin.display(),
            out.display(),
            self.l1,
            self.l2,
            self.llc,
            topology.threads,
            topology.sockets
        );
        if !self.sweep.is_empty() {
            arg += &format!(",sweep={}", self.sweep.join("+"));
        }
        arg
    }
}

/// The installed QEMU's version as Debian's source package spells it
/// (`1:7.2+dfsg-7+deb12u18`: a binNMU suffix `+bN` names no source).
fn installed_qemu_source_version() -> Result<String> {
    let v = output(Command::new("dpkg-query").args(["-W", "-f=${Version}", "qemu-system-x86"]))
        .context("asking dpkg for qemu-system-x86's version (run scripts/setup.sh)")?;
    let v = v.trim();
    Ok(match v.rfind("+b") {
        Some(i) if v[i + 2..].bytes().all(|b| b.is_ascii_digit()) && i + 2 < v.len() => {
            v[..i].to_string()
        }
        _ => v.to_string(),
    })
}

/// The directory holding `qemu-plugin.h` for the installed QEMU, fetched
/// once from Debian's `qemu` source package (scripts/setup.sh adds the
/// deb-src entries) into the cache. Only the header is kept.
pub fn plugin_header_dir() -> Result<PathBuf> {
    let version = installed_qemu_source_version()?;
    let dir = cache_dir()?
        .join("qemu-plugin-api")
        .join(version.replace(':', "_"));
    if dir.join("qemu-plugin.h").exists() {
        return Ok(dir);
    }
    let work = dir.with_extension("download");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    eprintln!("xtask: fetching the QEMU plugin API header (qemu {version} source, ~24 MB)");
    // Quiet: apt's progress would print the mirror's address into logs.
    output(
        Command::new("apt-get")
            .args(["-qq", "-o", "APT::Sandbox::User=root", "source", "--download-only"])
            .arg(format!("qemu={version}"))
            .current_dir(&work),
    )
    .with_context(|| {
        format!("downloading Debian's qemu {version} source (needs the deb-src entries scripts/setup.sh adds)")
    })?;
    let orig = fs::read_dir(&work)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().contains(".orig.tar"))
        .context("the qemu source download has no .orig tarball")?;
    run(Command::new("tar")
        .arg("-xf")
        .arg(&orig)
        .args([
            "--wildcards",
            "--strip-components=3",
            "*/include/qemu/qemu-plugin.h",
        ])
        .current_dir(&work))
    .context("extracting include/qemu/qemu-plugin.h")?;
    let header = fs::read_to_string(work.join("qemu-plugin.h"))?;
    if !header.contains("#define QEMU_PLUGIN_VERSION") {
        bail!("{} has no QEMU_PLUGIN_VERSION", orig.display());
    }
    fs::create_dir_all(&dir)?;
    fs::rename(work.join("qemu-plugin.h"), dir.join("qemu-plugin.h"))?;
    fs::remove_dir_all(&work)?;
    Ok(dir)
}

fn source_dir() -> PathBuf {
    workspace_root().join("xtask/cachesim")
}

/// Builds the plugin into target/cachesim and returns its path.
pub fn build_plugin() -> Result<PathBuf> {
    let header = plugin_header_dir()?;
    let out_dir = workspace_root().join("target/cachesim");
    fs::create_dir_all(&out_dir)?;
    let plugin = out_dir.join("libsky_cachesim.so");
    run(Command::new(cc())
        .args(["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"])
        .args(["-fPIC", "-shared", "-fvisibility=hidden"])
        .arg("-I")
        .arg(&header)
        .args(SOURCES.iter().map(|s| source_dir().join(s)))
        .arg("-o")
        .arg(&plugin))
    .context("building the sky_cachesim QEMU plugin (run scripts/setup.sh)")?;
    Ok(plugin)
}

/// One vCPU's counts in one address space over one phase, as the plugin
/// wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub vcpu: u32,
    pub kernel: bool,
    pub insns: u64,
    pub accesses: u64,
    pub stores: u64,
    pub l1_misses: u64,
    pub l2_misses: u64,
    pub llc_misses: u64,
    pub invalidations: u64,
    /// Misses of each cache-size sweep size, in the model's order.
    pub sweep_misses: Vec<u64>,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        if self.sweep_misses.len() < o.sweep_misses.len() {
            self.sweep_misses.resize(o.sweep_misses.len(), 0);
        }
        for (a, b) in self.sweep_misses.iter_mut().zip(&o.sweep_misses) {
            *a += b;
        }
        self.insns += o.insns;
        self.accesses += o.accesses;
        self.stores += o.stores;
        self.l1_misses += o.l1_misses;
        self.l2_misses += o.l2_misses;
        self.llc_misses += o.llc_misses;
        self.invalidations += o.invalidations;
    }
}

/// One marked phase: every vCPU's counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phase {
    pub number: u64,
    /// "marked" (ended by its marker), "restarted" (another began first)
    /// or "unfinished" (the VM stopped inside it).
    pub how: String,
    pub counts: Vec<Counts>,
}

impl Phase {
    /// The sum over the vCPUs `vcpu` picks, user space only or all.
    pub fn total(&self, vcpu: impl Fn(u32) -> bool, user_only: bool) -> Counts {
        let mut t = Counts::default();
        for c in self
            .counts
            .iter()
            .filter(|c| vcpu(c.vcpu) && !(user_only && c.kernel))
        {
            t.add(c);
        }
        t
    }
}

/// What one boot's plugin wrote: its configuration line and the phases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub config: String,
    pub phases: Vec<Phase>,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

fn number(line: &str, key: &str) -> Result<u64> {
    field(line, key)
        .with_context(|| format!("no {key}= in {line:?}"))?
        .parse()
        .with_context(|| format!("{key}= is not a number in {line:?}"))
}

/// Reads the plugin's output file.
pub fn parse(text: &str) -> Result<Report> {
    let mut report = Report::default();
    let mut open: Vec<Counts> = Vec::new();
    for line in text.lines() {
        let kind = line.split_whitespace().next().unwrap_or("");
        match kind {
            "cachesim-config" => report.config = line["cachesim-config".len()..].trim().into(),
            "cachesim-counts" => open.push(Counts {
                vcpu: number(line, "vcpu")? as u32,
                kernel: field(line, "space") == Some("kernel"),
                insns: number(line, "insns")?,
                accesses: number(line, "accesses")?,
                stores: number(line, "stores")?,
                l1_misses: number(line, "l1_misses")?,
                l2_misses: number(line, "l2_misses")?,
                llc_misses: number(line, "llc_misses")?,
                invalidations: number(line, "invalidations")?,
                sweep_misses: match field(line, "sweep_misses") {
                    None => Vec::new(),
                    Some(v) => v
                        .split('+')
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .with_context(|| format!("sweep_misses= is not numbers in {line:?}"))?,
                },
            }),
            "cachesim-end" => report.phases.push(Phase {
                number: number(line, "phase")?,
                how: field(line, "how").unwrap_or("").into(),
                counts: std::mem::take(&mut open),
            }),
            _ => {}
        }
    }
    if report.config.is_empty() {
        bail!("the cache model wrote no configuration line (did the plugin load?)");
    }
    Ok(report)
}

impl Report {
    /// A level's geometry as the plugin wrote it ("l1", "l2", "llc":
    /// bytes:line:assoc or off; "sweep": geometries joined by `+`).
    pub fn level(&self, name: &str) -> Option<&str> {
        field(&self.config, name)
    }

    /// Whether the model had this level ("l2" or "llc"); l1 always.
    pub fn has_level(&self, name: &str) -> bool {
        self.level(name).is_some_and(|v| v != "off")
    }

    /// The cache-size sweep's geometries, in the order of
    /// `Counts::sweep_misses`.
    pub fn sweep(&self) -> Vec<&str> {
        self.level("sweep")
            .map_or(Vec::new(), |v| v.split('+').collect())
    }
}

/// Miss rates of `c` at each level the model has, as `l1 2.50% ...`.
pub fn rates(report: &Report, c: &Counts) -> String {
    let pct = |r: Option<f64>| r.map_or("-".into(), |r| format!("{:.2}%", r * 100.0));
    let mut text = format!("l1 {}", pct(rate(c.l1_misses, c.accesses)));
    let mut above = c.l1_misses;
    if report.has_level("l2") {
        text += &format!("  l2 {}", pct(rate(c.l2_misses, above)));
        above = c.l2_misses;
    }
    if report.has_level("llc") {
        text += &format!("  llc {}", pct(rate(c.llc_misses, above)));
    }
    for (geom, misses) in report.sweep().iter().zip(&c.sweep_misses) {
        text += &format!("  {} {}", size_label(geom), pct(rate(*misses, c.accesses)));
    }
    text
}

/// "8192:16:1" as "8K": a sweep size's name.
pub fn size_label(geom: &str) -> String {
    let bytes: u64 = geom.split(':').next().unwrap_or("").parse().unwrap_or(0);
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// Each phase's user-space figures, in total and per vCPU.
pub fn summary(report: &Report) -> String {
    let mut out = format!("cache model: {}\n", report.config);
    if report.phases.is_empty() {
        out += "no marked phases (sky-work cache-phase begin|end)\n";
    }
    for p in &report.phases {
        let all = p.total(|_| true, true);
        out += &format!(
            "phase {} ({}): user accesses {} of {} instructions; {}\n",
            p.number,
            p.how,
            all.accesses,
            all.insns,
            rates(report, &all)
        );
        for c in p.counts.iter().filter(|c| !c.kernel && c.accesses > 0) {
            out += &format!(
                "  vcpu {:>2}: accesses {:>12}  {}\n",
                c.vcpu,
                c.accesses,
                rates(report, c)
            );
        }
    }
    out
}

/// misses / accesses, or None when there were no accesses.
pub fn rate(misses: u64, accesses: u64) -> Option<f64> {
    (accesses > 0).then(|| misses as f64 / accesses as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_parse_from_presets_and_levels() {
        let sky1: CacheModel = "sky1".parse().unwrap();
        assert!(sky1.to_string().starts_with("512K:16:1/off/off/8K:16:1+"));
        let small: CacheModel = "8K:16:1".parse().unwrap();
        assert_eq!((small.l2.as_str(), small.llc.as_str()), ("off", "off"));
        let arg = "modern".parse::<CacheModel>().unwrap().plugin_arg(
            Path::new("/p.so"),
            "2x2x2".parse().unwrap(),
            Path::new("/o"),
        );
        assert_eq!(
            arg,
            "file=/p.so,out=/o,l1=32K:64:8,l2=512K:64:8,llc=4M:64:16,threads=2,sockets=2"
        );
        let swept: CacheModel = "sky1".parse().unwrap();
        assert_eq!(swept.sweep.len(), 6);
        assert!(swept
            .plugin_arg(Path::new("/p"), "1x4x1".parse().unwrap(), Path::new("/o"))
            .ends_with(",sweep=8K:16:1+16K:16:1+32K:16:1+64K:16:1+128K:16:1+256K:16:1"));
        assert_eq!(
            "8K:16:1/off/off/1K:16:1"
                .parse::<CacheModel>()
                .unwrap()
                .to_string(),
            "8K:16:1/off/off/1K:16:1"
        );
        for bad in [
            "",
            "off",
            "32K:64",
            "32K:64:8/a/b",
            "1/2/3/4",
            "32K:64:8,x=1",
            "big",
            "8K:16:1/off/off/off",
            "8K:16:1/off/off/1K:16:1/x",
            "8K:16:1/off/off/1K:16:1+",
        ] {
            assert!(bad.parse::<CacheModel>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_plugin_output_reads_back_per_phase() {
        let text = "cachesim-config vcpus=2 threads=1 sockets=1 l1=32768:64:8 l2=off llc=off sweep=8192:64:1+16384:64:1\n\
            cachesim-begin phase=1 vcpu=0\n\
            cachesim-counts phase=1 vcpu=0 space=user insns=10 accesses=100 stores=5 l1_misses=25 l2_misses=0 llc_misses=0 invalidations=1 sweep_misses=40+30\n\
            cachesim-counts phase=1 vcpu=0 space=kernel insns=3 accesses=7 stores=1 l1_misses=7 l2_misses=0 llc_misses=0 invalidations=0 sweep_misses=7+7\n\
            cachesim-counts phase=1 vcpu=1 space=user insns=1 accesses=50 stores=0 l1_misses=5 l2_misses=0 llc_misses=0 invalidations=0 sweep_misses=9+6\n\
            cachesim-end phase=1 how=marked unmapped=0\n\
            cachesim-exit phases=1\n";
        let r = parse(text).unwrap();
        assert_eq!(r.phases.len(), 1);
        let p = &r.phases[0];
        assert_eq!((p.number, p.how.as_str(), p.counts.len()), (1, "marked", 3));
        let user = p.total(|_| true, true);
        assert_eq!((user.accesses, user.l1_misses), (150, 30));
        assert_eq!(user.sweep_misses, [49, 36]);
        assert_eq!(r.sweep(), ["8192:64:1", "16384:64:1"]);
        assert!(!r.has_level("l2"));
        assert!(parse(&text.replace("40+30", "40+x")).is_err());
        let cpu0 = p.total(|v| v == 0, false);
        assert_eq!((cpu0.accesses, cpu0.insns), (107, 13));
        assert_eq!(rate(cpu0.l1_misses, cpu0.accesses), Some(32.0 / 107.0));
        assert_eq!(rate(1, 0), None);
        assert!(parse("cachesim-exit phases=0\n").is_err());
        assert!(parse(&text.replace("accesses=100", "accesses=x")).is_err());
    }

    /// The model against strided sweeps, LRU, coherence and sharing with
    /// known answers: cache_model_test.c, built and run on this machine.
    #[test]
    fn the_cache_model_gives_textbook_miss_rates() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("cache_model_test");
        run(Command::new(cc())
            .args(["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror"])
            .arg(source_dir().join("cache_model.c"))
            .arg(source_dir().join("cache_model_test.c"))
            .arg("-o")
            .arg(&exe))
        .unwrap();
        let out = Command::new(&exe).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("ok: 0 failed"), "{text}");
    }
}
