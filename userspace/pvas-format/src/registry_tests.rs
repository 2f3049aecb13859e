use super::*;
use crate::fixture::TestSpace;
use std::os::unix::fs::PermissionsExt;

/// A registry base of its own (no other test's), with this user's
/// directory made as `register` makes it.
struct Scratch {
    dir: tempfile::TempDir,
    base: PathBuf,
    mine: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let base = dir.path().join("reg");
    // SAFETY: geteuid has no preconditions.
    let mine = hints::user_registry(&base, unsafe { libc::geteuid() });
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
    Scratch { dir, base, mine }
}

impl Scratch {
    /// An entry for `target`, named as `register` names it.
    fn add(&self, target: &Path) {
        std::os::unix::fs::symlink(target, self.mine.join(hints::entry_name(target))).unwrap();
    }

    fn space(&self, name: &str) -> (TestSpace, PathBuf) {
        let space = TestSpace::create(
            self.dir.path(),
            &format!("{name}-{}", std::process::id()),
            2,
        );
        let path = std::fs::canonicalize(&space.path).unwrap();
        self.add(&path);
        (space, path)
    }
}

fn refused(listed: &[Listed]) -> Vec<(PathBuf, String)> {
    listed
        .iter()
        .filter_map(|l| match l {
            Listed::Refused { path, why } => Some((path.clone(), why.clone())),
            Listed::Space(_) => None,
        })
        .collect()
}

/// A user's registry of many entries costs the daemon MAX_PER_USER reads
/// at most, and says how many it left; entries whose files are gone
/// (spaces never destroyed) crowd no live space out.
#[test]
fn a_users_entries_beyond_the_cap_are_not_read_and_are_counted() {
    let s = scratch();
    for i in 0..500 {
        s.add(&s.dir.path().join(format!("a-gone-{i:04}")));
    }
    let extra = 36;
    for i in 0..MAX_PER_USER + extra {
        let file = s.dir.path().join(format!("b-there-{i:04}"));
        std::fs::write(&file, b"not a space").unwrap();
        s.add(&file);
    }
    let mut r = Registry::polled_at(s.base.clone());
    assert!(r.refresh());
    let listed = r.read();
    let refused = refused(&listed);
    // The kept entries are read (and refused: not spaces), none of the
    // gone, plus one line for the rest.
    assert_eq!(refused.len(), MAX_PER_USER + 1, "{refused:?}");
    assert!(refused[..MAX_PER_USER]
        .iter()
        .all(|(p, _)| p.to_string_lossy().contains("b-there-")));
    let (path, why) = refused.last().unwrap();
    assert_eq!(path, &s.mine);
    assert!(
        why.starts_with(&format!("{extra} more entries not read")),
        "{why}"
    );
    // SAFETY: geteuid has no preconditions.
    assert_eq!(r.over_caps(), vec![(unsafe { libc::geteuid() }, extra)]);
    // Told once, not on every refresh.
    let news = r.over_caps_news().expect("the caps are told");
    assert!(news.contains(&format!(": {extra}")), "{news}");
    r.refresh();
    assert_eq!(r.over_caps_news(), None);
}

/// Watched, the registry is listed again only when a directory changes:
/// a new entry and a removed one are seen at the next refresh; with no
/// change, nothing is listed.
#[test]
fn a_watched_registry_follows_entries_as_they_come_and_go() {
    let s = scratch();
    let (_a, a) = s.space("reg-a");
    let mut r = Registry::watched_at(s.base.clone());
    assert!(r.is_watched(), "inotify unavailable");
    assert!(r.refresh());
    let names = |r: &Registry| -> Vec<PathBuf> { r.spaces().into_iter().map(|h| h.path).collect() };
    assert_eq!(names(&r), vec![a.clone()]);
    assert!(!r.refresh(), "nothing changed, nothing listed again");
    let (_b, b) = s.space("reg-b");
    assert!(r.refresh(), "a new entry is an event");
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    let mut seen = names(&r);
    seen.sort();
    assert_eq!(seen, both);
    std::fs::remove_file(s.mine.join(hints::entry_name(&a))).unwrap();
    assert!(r.refresh());
    assert_eq!(names(&r), vec![b.clone()]);
    // The user's directory itself goes: so do its entries.
    std::fs::remove_dir_all(&s.mine).unwrap();
    assert!(r.refresh());
    assert!(r.spaces().is_empty());
}

/// A space whose path holds a symlink (its user swapped a directory on
/// the way for a link, say to a FUSE mount) is refused without the link
/// being followed.
#[test]
fn a_space_behind_a_symlinked_directory_is_refused() {
    let s = scratch();
    let (_space, real) = s.space("reg-link");
    let link = s.dir.path().join("via");
    std::os::unix::fs::symlink(s.dir.path(), &link).unwrap();
    let behind = std::fs::canonicalize(s.dir.path())
        .unwrap()
        .join("via")
        .join(real.file_name().unwrap());
    s.add(&behind);
    let mut r = Registry::polled_at(s.base.clone());
    r.refresh();
    let listed = r.read();
    let why = refused(&listed)
        .into_iter()
        .find(|(p, _)| p == &behind)
        .map(|(_, why)| why)
        .expect("the entry behind the link is not listed");
    assert!(why.contains("symlink on its path"), "{why}");
    assert_eq!(
        r.spaces().into_iter().map(|h| h.path).collect::<Vec<_>>(),
        vec![real]
    );
}
