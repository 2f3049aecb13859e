//! Where a policy name is found, first match wins: the administrator's
//! files in /etc/scx_sky/policies/, the installed presets (share/ beside
//! the binary's bin/, then /usr/share/scx_sky/policies/), then the presets
//! compiled in from scheds/. `NAME` is the file `NAME.toml`. A file found
//! by name must be one only root can change, in a directory only root can
//! change (file.rs): a root daemon takes a name from the command line or a
//! control request, and must not let whoever can write there choose what
//! it means.

use crate::file::{only_owner_writes, read_owned_policy_file};
use crate::{Policy, PRESETS};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The administrator's policies: found before any preset of that name.
pub const ETC_DIR: &str = "/etc/scx_sky/policies";
/// Where a package installed with prefix /usr puts the presets.
pub const SHARE_DIR: &str = "/usr/share/scx_sky/policies";
/// The presets of an install under another prefix, from the binary's
/// directory (`PREFIX/bin`): `cargo xtask install --prefix /usr/local`, or
/// a tree under `--destdir`.
const SHARE_BESIDE_BIN: &str = "../share/scx_sky/policies";

/// Where a policy is, once found by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File(PathBuf),
    /// Compiled in (the text of scheds/NAME.toml).
    BuiltIn(&'static str),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::BuiltIn(_) => write!(f, "built in"),
        }
    }
}

/// The directories searched, in order (duplicates left out). Found once
/// per process: a storm of switches by name must not walk paths each time.
pub fn policy_dirs() -> Vec<PathBuf> {
    static DIRS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    DIRS.get_or_init(search_dirs).clone()
}

fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(ETC_DIR)];
    if let Some(bin) = std::env::current_exe().ok().and_then(|exe| {
        exe.parent()
            .map(|d| d.join(SHARE_BESIDE_BIN))
            .and_then(|d| d.canonicalize().ok())
    }) {
        dirs.push(bin);
    }
    dirs.push(PathBuf::from(SHARE_DIR));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let key = d.canonicalize().unwrap_or_else(|_| d.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    dirs
}

/// Where `name` is found in `dirs`, then among the built-in presets.
pub fn find(name: &str, dirs: &[PathBuf]) -> Option<Origin> {
    dirs.iter()
        .map(|d| d.join(format!("{name}.toml")))
        .find(|path| path.symlink_metadata().is_ok())
        .map(Origin::File)
        .or_else(|| {
            PRESETS
                .iter()
                .find(|(preset, _)| *preset == name)
                .map(|(_, text)| Origin::BuiltIn(text))
        })
}

/// How long a name is remembered to be a preset no file shadows.
pub const UNSHADOWED_FOR: std::time::Duration = std::time::Duration::from_millis(100);

/// [`find`] for a daemon switching by name: it remembers for `ttl` that no
/// file shadows a preset, so a storm of switches costs no path lookups
/// (under TCG, two failed lookups per switch halved a storm's rate); a
/// file put in a policy directory is found within `ttl`. Files found are
/// read afresh every time.
pub struct Finder {
    dirs: Vec<PathBuf>,
    ttl: std::time::Duration,
    /// Preset names last found unshadowed, and when (at most one entry
    /// per preset).
    unshadowed: std::sync::Mutex<Vec<(&'static str, std::time::Instant)>>,
}

impl Finder {
    pub fn new(dirs: Vec<PathBuf>, ttl: std::time::Duration) -> Self {
        Finder {
            dirs,
            ttl,
            unshadowed: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub fn find(&self, name: &str) -> Option<Origin> {
        let preset = PRESETS.iter().find(|(p, _)| *p == name);
        let mut seen = self.unshadowed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((p, text)) = preset {
            if seen.iter().any(|(n, at)| n == p && at.elapsed() < self.ttl) {
                return Some(Origin::BuiltIn(text));
            }
        }
        let found = find(name, &self.dirs);
        seen.retain(|(n, _)| *n != name);
        if let (Some((p, _)), Some(Origin::BuiltIn(_))) = (preset, &found) {
            seen.push((p, std::time::Instant::now()));
        }
        found
    }
}

/// Reads and validates the policy `origin` holds.
pub fn load(origin: &Origin, name: &str) -> Result<Policy> {
    match origin {
        Origin::BuiltIn(text) => Policy::parse(text, &format!("preset {name}")),
        Origin::File(path) => {
            let dir = path.parent().unwrap_or(Path::new("/"));
            let meta = std::fs::metadata(dir)
                .with_context(|| format!("policy directory {}", dir.display()))?;
            only_owner_writes(&meta, &format!("policy directory {}", dir.display()))?;
            let text = read_owned_policy_file(path)?;
            Policy::parse(&text, &path.display().to_string())
        }
    }
}

/// Every name `dirs` and the built-ins answer to, in lookup order, with
/// where it is found: what `scx_sky policies` and `policy list` show. A
/// name found twice shows once, where the lookup finds it.
pub fn names(dirs: &[PathBuf]) -> Vec<(String, Origin)> {
    let mut found: Vec<(String, Origin)> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut here: Vec<(String, Origin)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let path = e.path();
                let name = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".toml")?
                    .to_string();
                (!name.is_empty() && !name.starts_with('.')).then_some((name, Origin::File(path)))
            })
            .collect();
        here.sort_by(|a, b| a.0.cmp(&b.0));
        found.extend(here);
    }
    found.extend(
        PRESETS
            .iter()
            .map(|(name, text)| (name.to_string(), Origin::BuiltIn(text))),
    );
    let mut seen = Vec::new();
    found.retain(|(name, _)| {
        let new = !seen.contains(name);
        seen.push(name.clone());
        new
    });
    found
}

/// One policy a name finds: its name, where it is, and its description
/// or what is wrong with it (a broken file is listed, not skipped, so it
/// is noticed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub origin: Origin,
    pub description: Result<String, String>,
}

/// Every policy [`names`] finds, each read and validated.
pub fn entries(dirs: &[PathBuf]) -> Vec<Entry> {
    names(dirs)
        .into_iter()
        .map(|(name, origin)| Entry {
            description: load(&origin, &name)
                .map(|p| p.description)
                .map_err(|e| format!("{e:#}")),
            name,
            origin,
        })
        .collect()
}

/// `NAME  description  (where)`, or `NAME  unusable: why`: the lines of
/// a policy list.
pub fn listing(dirs: &[PathBuf]) -> Vec<String> {
    entries(dirs)
        .iter()
        .map(|e| {
            let description = e.description.as_deref().map_err(String::as_str);
            line(&e.name, description, &e.origin.to_string())
        })
        .collect()
}

/// One line of a policy list (also for a list that came over D-Bus).
pub fn line(name: &str, description: Result<&str, &str>, origin: &str) -> String {
    match description {
        Ok(d) => format!("{name:<12} {d}  ({origin})"),
        Err(why) => format!("{name:<12} {UNUSABLE}{why}"),
    }
}

/// How a list's description says a policy cannot be used.
pub const UNUSABLE: &str = "unusable: ";

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A preset's text under another description, as an administrator's
    /// copy would be.
    fn copy_of(preset: &str, description: &str) -> String {
        let text = PRESETS.iter().find(|(n, _)| *n == preset).unwrap().1;
        let old = Policy::parse(text, preset).unwrap().description;
        text.replace(&old, description)
    }

    fn dirs(n: usize) -> (Vec<tempfile::TempDir>, Vec<PathBuf>) {
        let held: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let paths = held.iter().map(|d| d.path().to_path_buf()).collect();
        (held, paths)
    }

    #[test]
    fn the_first_directory_with_the_name_wins_then_the_presets() {
        let (_held, d) = dirs(2);
        std::fs::write(d[0].join("sky1.toml"), copy_of("sky1", "site copy")).unwrap();
        std::fs::write(d[1].join("sky1.toml"), copy_of("sky1", "shadowed")).unwrap();
        std::fs::write(d[1].join("fast.toml"), copy_of("vtime", "a site policy")).unwrap();
        assert_eq!(
            Policy::load_from("sky1", &d).unwrap().description,
            "site copy"
        );
        assert_eq!(
            Policy::load_from("fast", &d).unwrap().description,
            "a site policy"
        );
        assert_eq!(find("vtime", &d), Some(Origin::BuiltIn(PRESETS[2].1)));
        let listed = listing(&d);
        let names: Vec<&str> = listed
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(
            names,
            ["sky1", "fast", "sky1-strict", "vtime"],
            "{listed:#?}"
        );
        assert!(listed[0].ends_with(&format!("({}/sky1.toml)", d[0].display())));
        assert!(listed[3].ends_with("(built in)"), "{}", listed[3]);
    }

    #[test]
    fn a_file_others_can_change_is_refused_naming_why() {
        let (_held, d) = dirs(1);
        let path = d[0].join("open.toml");
        std::fs::write(&path, copy_of("sky1", "x")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = format!("{:#}", Policy::load_from("open", &d).unwrap_err());
        assert!(
            e.contains("open.toml") && e.contains("anyone") && e.contains("0666"),
            "{e}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Policy::load_from("open", &d).unwrap();
        std::fs::set_permissions(&d[0], std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = format!("{:#}", Policy::load_from("open", &d).unwrap_err());
        assert!(
            e.contains("policy directory") && e.contains("its group"),
            "{e}"
        );
        // Listed as unusable, not left out.
        assert!(listing(&d)[0].contains("unusable"), "{:?}", listing(&d));
    }

    #[test]
    fn an_unknown_name_says_where_it_was_looked_for_and_what_is_known() {
        let (_held, d) = dirs(1);
        std::fs::write(d[0].join("mine.toml"), copy_of("sky1", "x")).unwrap();
        let e = Policy::load_from("nope", &d).unwrap_err().to_string();
        assert!(
            e.contains("nope") && e.contains(&d[0].display().to_string()),
            "{e}"
        );
        assert!(e.contains("mine, sky1, sky1-strict, vtime"), "{e}");
    }

    #[test]
    fn a_finder_sees_a_new_file_within_its_ttl_and_a_gone_one_at_once() {
        let (_held, d) = dirs(1);
        let ttl = std::time::Duration::from_millis(200);
        let finder = Finder::new(d.clone(), ttl);
        assert!(matches!(finder.find("sky1"), Some(Origin::BuiltIn(_))));
        let file = d[0].join("sky1.toml");
        std::fs::write(&file, copy_of("sky1", "site copy")).unwrap();
        // Remembered as unshadowed for the ttl...
        assert!(matches!(finder.find("sky1"), Some(Origin::BuiltIn(_))));
        std::thread::sleep(ttl);
        // ...then the file is found, and found every time after.
        assert_eq!(finder.find("sky1"), Some(Origin::File(file.clone())));
        assert_eq!(finder.find("sky1"), Some(Origin::File(file.clone())));
        std::fs::remove_file(&file).unwrap();
        assert!(matches!(finder.find("sky1"), Some(Origin::BuiltIn(_))));
        // A name no preset has is never remembered.
        assert_eq!(finder.find("mine"), None);
        std::fs::write(d[0].join("mine.toml"), copy_of("vtime", "x")).unwrap();
        assert!(matches!(finder.find("mine"), Some(Origin::File(_))));
    }

    #[test]
    fn a_broken_file_is_listed_with_its_error() {
        let (_held, d) = dirs(1);
        std::fs::write(d[0].join("bad.toml"), "slice_us = \"long\"\n").unwrap();
        let listed = listing(&d);
        assert!(
            listed[0].starts_with("bad") && listed[0].contains("unusable"),
            "{listed:?}"
        );
        assert_eq!(listed.len(), 1 + PRESETS.len());
    }
}
