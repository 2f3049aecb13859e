//! Kernel versions as Debian names them (`7.3.4+deb13-amd64`,
//! `6.1.0-56-amd64`) plus our own builds (`custom-6.12`), and selecting one
//! by an exact name or a series prefix (`6.16`: newest 6.16.x). Pure: no
//! apt, no downloads, so selection can be unit-tested.

use anyhow::{bail, Result};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Where a kernel comes from, which decides how it is downloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// 6.19 and later: image in `linux-binary-<ver>`, config in `linux-base-<ver>`.
    Split,
    /// `linux-binary-<ver>` whose `linux-base-<ver>` the archive lacks (6.19
    /// to 7.1 today): no config, sched_ext is read from the image.
    BinaryOnly,
    /// Up to 6.18: one `linux-image-<ver>` package with /boot/{vmlinuz,config}-<ver>.
    Image,
    /// Built here by `cargo xtask kernel-build` (only ever in the cache).
    Custom,
    /// In the cache, but apt no longer lists it (or apt is unavailable).
    Cached,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Available {
    pub version: String,
    pub source: Source,
}

/// Prefix of our own builds' names: `custom-6.12`.
pub const CUSTOM_PREFIX: &str = "custom-";

/// Every number in the name, for ordering: `6.1.0-56-amd64` sorts by
/// [6, 1, 0, 56, 64] so ABI bumps of one series order correctly.
fn numbers(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        // Digit runs too long for u64 cannot occur in real names; saturate
        // rather than fail so ordering stays total.
        .map(|s| s.parse().unwrap_or(u64::MAX))
        .collect()
}

/// Orders kernel versions such as `7.3.4+deb13-amd64` numerically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    numbers(a).cmp(&numbers(b))
}

/// The dotted release at the start of the name: `6.12.117+deb12-amd64` ->
/// [6, 12, 117]; `custom-6.12` -> [6, 12]. What series prefixes match.
pub fn release(v: &str) -> Vec<u64> {
    let v = v.strip_prefix(CUSTOM_PREFIX).unwrap_or(v);
    let end = v
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(v.len());
    v[..end].split('.').map_while(|p| p.parse().ok()).collect()
}

/// `major.minor`, e.g. `6.16` for `6.16.12+deb13-amd64`.
pub fn series(v: &str) -> String {
    let r = release(v);
    match r.as_slice() {
        [major, minor, ..] => format!("{major}.{minor}"),
        [major] => major.to_string(),
        [] => v.to_string(),
    }
}

/// What the user asked for with `--kernel-version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A full name as apt or the cache spells it: `6.16.12+deb13-amd64`, `custom-6.12`.
    Exact(String),
    /// Dotted numbers: every version whose release starts with them
    /// (`6.16` matches 6.16.3 and 6.16.12, not 6.1).
    Prefix(Vec<u64>),
}

impl Selector {
    pub fn parse(s: &str) -> Result<Selector> {
        let s = s.trim();
        if s.is_empty() {
            bail!("empty kernel version: give e.g. 6.16 or 6.16.12+deb13-amd64");
        }
        if s.chars().all(|c| c.is_ascii_digit() || c == '.') {
            let parts: Option<Vec<u64>> = s.split('.').map(|p| p.parse().ok()).collect();
            return match parts {
                Some(p) => Ok(Selector::Prefix(p)),
                None => bail!(
                    "kernel version {s:?} is not dotted numbers (e.g. 6.16) or a full name (e.g. 6.16.12+deb13-amd64)"
                ),
            };
        }
        // Names end up in paths and apt arguments: allow only what Debian
        // versions use.
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.~_".contains(c))
            || s.starts_with(['-', '.'])
        {
            bail!("kernel version {s:?} contains characters no kernel version has");
        }
        Ok(Selector::Exact(s.to_string()))
    }

    /// As the user would write it: `6.16`, `6.16.12+deb13-amd64`, `any`.
    pub fn describe(&self) -> String {
        match self {
            Selector::Exact(s) => s.clone(),
            Selector::Prefix(p) if p.is_empty() => "any".into(),
            Selector::Prefix(p) => p.iter().map(u64::to_string).collect::<Vec<_>>().join("."),
        }
    }

    pub fn matches(&self, version: &str) -> bool {
        match self {
            Selector::Exact(name) => name == version,
            Selector::Prefix(p) => release(version).starts_with(p),
        }
    }
}

/// Versions that `sel` matches, newest first; an error listing what exists
/// when none does.
pub fn matching<'a>(sel: &Selector, all: &'a [Available]) -> Result<Vec<&'a Available>> {
    let mut found: Vec<&Available> = all.iter().filter(|a| sel.matches(&a.version)).collect();
    found.sort_by(|a, b| compare_versions(&b.version, &a.version));
    if found.is_empty() {
        let wanted = match sel {
            Selector::Exact(s) => s.clone(),
            Selector::Prefix(p) => p.iter().map(u64::to_string).collect::<Vec<_>>().join("."),
        };
        bail!(
            "no kernel {wanted} is available; there are:\n{}",
            summary(all)
        );
    }
    Ok(found)
}

/// One line per series: `  6.16: 6.16.3+deb13-amd64 6.16.12+deb13-amd64`.
pub fn summary(all: &[Available]) -> String {
    if all.is_empty() {
        return "  (none: apt lists no linux-image/linux-binary package; run scripts/setup.sh)"
            .into();
    }
    let mut by_series: BTreeMap<Vec<u64>, Vec<&str>> = BTreeMap::new();
    for a in all {
        by_series
            .entry(release(&a.version).into_iter().take(2).collect())
            .or_default()
            .push(&a.version);
    }
    by_series
        .values_mut()
        .map(|vs| {
            vs.sort_by(|a, b| compare_versions(a, b));
            format!("  {}: {}", series(vs[0]), vs.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Splits versions (newest first) into runs of one series, keeping order.
pub fn by_series<'a>(newest_first: &[&'a Available]) -> Vec<Vec<&'a Available>> {
    let mut groups: Vec<Vec<&Available>> = Vec::new();
    for a in newest_first {
        match groups.last_mut() {
            Some(g) if series(&g[0].version) == series(&a.version) => g.push(a),
            _ => groups.push(vec![a]),
        }
    }
    groups
}

/// The amd64 kernels in `apt-cache search --names-only '^linux-(binary|image|base)-'`
/// output, oldest first. Only the generic flavour: cloud kernels lack
/// drivers, rt changes timing; -dbg, -unsigned and meta packages are no
/// kernels. A version with a `linux-binary-` package uses the split
/// layout when its `linux-base-` exists too.
pub fn parse_apt_search(text: &str) -> Vec<Available> {
    #[derive(Default)]
    struct Seen {
        binary: bool,
        base: bool,
        image: bool,
    }
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for pkg in text.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some((kind, version)) = ["binary", "base", "image"]
            .iter()
            .find_map(|k| Some((*k, pkg.strip_prefix(&format!("linux-{k}-"))?)))
        else {
            continue;
        };
        let Some(base) = version.strip_suffix("-amd64") else {
            continue;
        };
        // A real kernel has a three-part release (6.1.0-56, 6.16.12+deb13);
        // `linux-image-6.12-amd64` is a meta package.
        if release(base).len() < 3 || base.ends_with("-cloud") || base.ends_with("-rt") {
            continue;
        }
        let s = seen.entry(version.to_string()).or_default();
        match kind {
            "binary" => s.binary = true,
            "base" => s.base = true,
            _ => s.image = true,
        }
    }
    let mut all: Vec<Available> = seen
        .into_iter()
        .filter_map(|(version, s)| {
            let source = match (s.binary, s.base, s.image) {
                (true, true, _) => Source::Split,
                (true, false, _) => Source::BinaryOnly,
                (false, _, true) => Source::Image,
                // A base package alone holds no kernel.
                (false, _, false) => return None,
            };
            Some(Available { version, source })
        })
        .collect();
    all.sort_by(|a, b| compare_versions(&a.version, &b.version));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    const APT: &str = "\
linux-binary-7.3.4+deb13-amd64 - Linux 7.3.4 for 64-bit PCs (kernel image)
linux-base-7.3.4+deb13-amd64 - Linux 7.3.4 for 64-bit PCs (base files)
linux-base-7.2.11+deb13-amd64 - Linux 7.2.11 for 64-bit PCs (base files)
linux-base-7.2.9+deb13-amd64 - Linux 7.2.9 for 64-bit PCs (base files)
linux-base-7.2.7+deb13-amd64 - Linux 7.2.7 for 64-bit PCs (base files)
linux-binary-7.1.13+deb13-amd64 - Linux 7.1.13 for 64-bit PCs (kernel image)
linux-image-7.1.13+deb13-amd64 - Linux 7.1.13 for 64-bit PCs
linux-binary-7.3.4+deb13-cloud-amd64 - Linux 7.3.4 for x86-64 cloud (kernel image)
linux-binary-7.2.9+deb13-amd64 - Linux 7.2.9 for 64-bit PCs (kernel image)
linux-binary-7.2.11+deb13-amd64 - Linux 7.2.11 for 64-bit PCs (kernel image)
linux-image-7.3.4+deb13-amd64 - Linux 7.3.4 for 64-bit PCs
linux-image-7.3.4+deb13-amd64-dbg - Linux 7.3.4 for 64-bit PCs (debug symbols)
linux-image-6.16.3+deb13-amd64 - Linux 6.16 for 64-bit PCs (signed)
linux-image-6.16.12+deb13-amd64 - Linux 6.16 for 64-bit PCs (signed)
linux-image-6.16.12+deb13-rt-amd64 - Linux 6.16 for 64-bit PCs (signed), PREEMPT_RT
linux-image-6.12-amd64 - Linux for 64-bit PCs (meta-package)
linux-image-6.12.117+deb12-amd64 - Linux 6.12 for 64-bit PCs (signed)
linux-image-6.12.117+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs
linux-image-6.1.0-47-amd64 - Linux 6.1 for 64-bit PCs (signed)
linux-image-6.1.0-56-amd64 - Linux 6.1 for 64-bit PCs (signed)
";

    fn names(v: &[&Available]) -> Vec<String> {
        v.iter().map(|a| a.version.clone()).collect()
    }

    #[test]
    fn versions_order_numerically() {
        let mut v = vec![
            "7.2.9+deb13-amd64",
            "7.3.4+deb13-amd64",
            "7.2.11+deb13-amd64",
            "6.12.38+deb13-amd64",
        ];
        v.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(
            v,
            [
                "7.3.4+deb13-amd64",
                "7.2.11+deb13-amd64",
                "7.2.9+deb13-amd64",
                "6.12.38+deb13-amd64"
            ]
        );
    }

    #[test]
    fn apt_listing_keeps_generic_kernels_and_their_layout() {
        let all = parse_apt_search(APT);
        let got: Vec<(&str, Source)> = all.iter().map(|a| (&a.version[..], a.source)).collect();
        assert_eq!(
            got,
            [
                ("6.1.0-47-amd64", Source::Image),
                ("6.1.0-56-amd64", Source::Image),
                ("6.12.117+deb12-amd64", Source::Image),
                ("6.16.3+deb13-amd64", Source::Image),
                ("6.16.12+deb13-amd64", Source::Image),
                ("7.1.13+deb13-amd64", Source::BinaryOnly),
                ("7.2.9+deb13-amd64", Source::Split),
                ("7.2.11+deb13-amd64", Source::Split),
                ("7.3.4+deb13-amd64", Source::Split),
            ]
        );
    }

    #[test]
    fn releases_and_series() {
        assert_eq!(release("6.12.117+deb12-amd64"), [6, 12, 117]);
        assert_eq!(release("6.1.0-56-amd64"), [6, 1, 0]);
        assert_eq!(release("custom-6.12"), [6, 12]);
        assert_eq!(series("6.16.12+deb13-amd64"), "6.16");
        assert_eq!(series("custom-6.12"), "6.12");
    }

    #[test]
    fn series_prefix_selects_that_series_newest_first() {
        let all = parse_apt_search(APT);
        let sel = Selector::parse("6.16").unwrap();
        assert_eq!(
            names(&matching(&sel, &all).unwrap()),
            ["6.16.12+deb13-amd64", "6.16.3+deb13-amd64"]
        );
        // 6.1 is not a prefix of 6.16 or 6.12.
        let sel = Selector::parse("6.1").unwrap();
        assert_eq!(
            names(&matching(&sel, &all).unwrap()),
            ["6.1.0-56-amd64", "6.1.0-47-amd64"]
        );
        let sel = Selector::parse("7").unwrap();
        assert_eq!(
            matching(&sel, &all).unwrap()[0].version,
            "7.3.4+deb13-amd64"
        );
        let sel = Selector::parse("6.16.3").unwrap();
        assert_eq!(
            names(&matching(&sel, &all).unwrap()),
            ["6.16.3+deb13-amd64"]
        );
    }

    #[test]
    fn exact_names_select_one_kernel() {
        let mut all = parse_apt_search(APT);
        all.push(Available {
            version: "custom-6.12".into(),
            source: Source::Custom,
        });
        let sel = Selector::parse("6.16.12+deb13-amd64").unwrap();
        assert_eq!(
            names(&matching(&sel, &all).unwrap()),
            ["6.16.12+deb13-amd64"]
        );
        let sel = Selector::parse("custom-6.12").unwrap();
        assert_eq!(names(&matching(&sel, &all).unwrap()), ["custom-6.12"]);
        // A series prefix also finds the custom build, after Debian's.
        let sel = Selector::parse("6.12").unwrap();
        assert_eq!(
            names(&matching(&sel, &all).unwrap()),
            ["6.12.117+deb12-amd64", "custom-6.12"]
        );
    }

    #[test]
    fn unknown_versions_fail_listing_what_exists() {
        let all = parse_apt_search(APT);
        for wanted in ["6.15", "6.16.12", "9.9.9+deb99-amd64"] {
            let sel = Selector::parse(wanted).unwrap();
            if wanted == "6.16.12" {
                assert!(matching(&sel, &all).is_ok());
                continue;
            }
            let err = matching(&sel, &all).unwrap_err().to_string();
            assert!(err.contains(&format!("no kernel {wanted}")), "{err}");
            assert!(
                err.contains("6.16: 6.16.3+deb13-amd64 6.16.12+deb13-amd64"),
                "{err}"
            );
            assert!(err.contains("7.3: 7.3.4+deb13-amd64"), "{err}");
            assert!(err.contains("7.1: 7.1.13+deb13-amd64"), "{err}");
        }
    }

    #[test]
    fn bad_selectors_are_refused_with_the_reason() {
        assert!(Selector::parse("").is_err());
        assert!(Selector::parse("6..16").is_err());
        assert!(Selector::parse("../../etc").is_err());
        assert!(Selector::parse("6.16 ; rm").is_err());
        assert!(Selector::parse("-rf").is_err());
        assert_eq!(
            Selector::parse(" 6.16 ").unwrap(),
            Selector::Prefix(vec![6, 16])
        );
    }

    #[test]
    fn runs_of_one_series() {
        let all = parse_apt_search(APT);
        let sel = Selector::Prefix(vec![]);
        let groups = by_series(&matching(&sel, &all).unwrap());
        let heads: Vec<&str> = groups.iter().map(|g| &g[0].version[..]).collect();
        assert_eq!(
            heads,
            [
                "7.3.4+deb13-amd64",
                "7.2.11+deb13-amd64",
                "7.1.13+deb13-amd64",
                "6.16.12+deb13-amd64",
                "6.12.117+deb12-amd64",
                "6.1.0-56-amd64"
            ]
        );
        assert_eq!(groups[3].len(), 2);
    }
}
