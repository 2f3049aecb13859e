//! Gang rules: which tasks form a gang. With no rule matching, the member
//! processes of a shared space are a gang ([`GangKey::Space`], the space
//! first by name if a process is in several), and the threads of any other
//! process are one ([`GangKey::Process`]). A rule makes a gang of
//!
//! - `cgroup:GLOB` — each matching cgroup, with every cgroup below it;
//! - `space:GLOB` — each matching shared space (sky_pvas registry), its
//!   member processes;
//! - `comm:GLOB` — every process whose name matches, all together;
//! - `pid:N,N,...` — those processes, all together;
//!
//! optionally followed by `=memory-bound`, `=not-memory-bound` or `=auto`
//! (the default: detect it from CPI, see [`crate::memory_bound`]). On the
//! command line a rule is `--gang FORM[=HINT]`; in a policy file it is a
//! `[[gang_rule]]` table with exactly one of `cgroup`, `space`, `comm`,
//! `pids` (a list) and optionally `memory_bound = true|false`. Rules are
//! tried in order, command line first; the first that matches wins.
//!
//! Globs are `glob` patterns. For cgroups `*`, `?` and `[...]` do not
//! match `/` (`**` does, as a whole component), and a task belongs to the
//! *shallowest* of its cgroup and that cgroup's ancestors that the glob
//! matches: `cgroup:/machine.slice/*` makes one gang of each VM's scope,
//! its vCPU sub-cgroups included. For names and spaces `*` matches
//! anything.
//!
//! A malformed rule is refused with the rule and the field named; a rule
//! whose cgroup or space glob matches nothing that exists is only a
//! warning ([`GangRules::dangling`]): the cgroup or space may come later.

use anyhow::{bail, Context, Result};
use glob::{MatchOptions, Pattern};
use serde::Deserialize;
use sky_classify::hints::pattern;
use std::collections::BTreeMap;

/// What a rule matches a task by.
#[derive(Debug, Clone, PartialEq)]
pub enum GangMatcher {
    /// Each matching cgroup (and everything below it) is one gang.
    Cgroup(Pattern),
    /// Each matching space is one gang of its member processes.
    Space(Pattern),
    /// Every process whose name matches: one gang.
    Comm(Pattern),
    /// These processes (thread-group ids): one gang. Sorted, no repeats.
    Pids(Vec<u32>),
}

/// Is a gang memory-bound: detect it, or take the operator's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Hint {
    /// Detect from CPI samples (`=auto`, or no `memory_bound` field).
    #[default]
    Auto,
    /// `=memory-bound`, `memory_bound = true`.
    MemoryBound,
    /// `=not-memory-bound`, `memory_bound = false`.
    NotMemoryBound,
}

impl Hint {
    fn parse(text: &str) -> Result<Hint> {
        Ok(match text {
            "auto" => Hint::Auto,
            "memory-bound" => Hint::MemoryBound,
            "not-memory-bound" => Hint::NotMemoryBound,
            _ => bail!("hint {text:?} is not one of memory-bound, not-memory-bound, auto"),
        })
    }
}

/// One gang rule and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct GangRule {
    pub matcher: GangMatcher,
    pub hint: Hint,
    /// How messages name the rule: `--gang "ARG"` or `gang_rule #N`.
    pub origin: String,
}

/// Which gang a task is in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GangKey {
    /// The threads of one process (its thread-group id): the default.
    Process(u32),
    /// The tasks in this cgroup and below it.
    Cgroup(String),
    /// The member processes of this space.
    Space(SpaceKey),
    /// The tasks a `comm` or `pids` rule gathers (its index among all
    /// rules, command line first, from 0).
    Rule(usize),
}

/// A shared space: rules match its name; its owner and backing file tell
/// it apart (two users' spaces called `job` are two spaces, two gangs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpaceKey {
    pub name: String,
    /// The user whose registry lists it.
    pub uid: u32,
    /// Its backing file's device and inode.
    pub dev: u64,
    pub ino: u64,
}

impl std::fmt::Display for SpaceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (uid {})", self.name, self.uid)
    }
}

/// Which gang a task is in, with the hint and the rule that said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gang {
    pub key: GangKey,
    pub hint: Hint,
    /// The index of the matching rule, if one matched.
    pub rule: Option<usize>,
}

/// What a task is known by when rules are tried.
#[derive(Debug, Clone, Copy)]
pub struct TaskInfo<'a> {
    pub pid: u32,
    /// The process (thread-group id).
    pub tgid: u32,
    /// The process's name: its thread-group leader's comm, so that a
    /// thread that renames itself stays in its process's gang.
    pub comm: &'a str,
    /// The cgroup (v2) path, `/` for the root, as in `/proc/PID/cgroup`.
    pub cgroup: &'a str,
    /// The spaces the process is a member of.
    pub spaces: &'a [SpaceKey],
}

/// Cgroup globs do not cross `/`.
const CGROUP_MATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

fn pids(list: &[u32]) -> Result<Vec<u32>> {
    if list.is_empty() {
        bail!("the pid list is empty");
    }
    if list.contains(&0) {
        bail!("pid 0 is not a process ID");
    }
    let mut v = list.to_vec();
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// `path` and its ancestors, shallowest first: `/a/b` gives `/`, `/a`,
/// `/a/b`.
fn cgroup_and_ancestors(path: &str) -> Vec<&str> {
    let trimmed = path.trim_end_matches('/');
    let mut out = Vec::new();
    if path.starts_with('/') {
        out.push("/");
    }
    out.extend(
        trimmed
            .char_indices()
            .filter(|&(i, c)| c == '/' && i > 0)
            .map(|(i, _)| &trimmed[..i]),
    );
    if !trimmed.is_empty() {
        out.push(trimmed);
    }
    out
}

impl GangRule {
    /// Parses `--gang FORM[=HINT]`, `FORM` one of `cgroup:GLOB`,
    /// `space:GLOB`, `comm:GLOB`, `pid:N,N,...`. The last `=` starts the
    /// hint, so a pattern holding `=` needs a hint after it (`=auto`).
    pub fn parse(arg: &str) -> Result<GangRule> {
        let parse = || -> Result<GangRule> {
            let (form, hint) = match arg.rsplit_once('=') {
                Some((form, hint)) => (form, Hint::parse(hint.trim())?),
                None => (arg, Hint::Auto),
            };
            let Some((kind, value)) = form.split_once(':') else {
                bail!("expected cgroup:GLOB, space:GLOB, comm:GLOB or pid:N,N,... (then =memory-bound, =not-memory-bound or =auto)");
            };
            let matcher = match kind {
                "cgroup" => GangMatcher::Cgroup(pattern(value, "cgroup")?),
                "space" => GangMatcher::Space(pattern(value, "space")?),
                "comm" => GangMatcher::Comm(pattern(value, "comm")?),
                "pid" => {
                    let list = value
                        .split(',')
                        .map(|p| {
                            p.trim()
                                .parse::<u32>()
                                .with_context(|| format!("pid {p:?} is not a process ID"))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    GangMatcher::Pids(pids(&list)?)
                }
                _ => bail!("unknown kind {kind:?} (expected cgroup, space, comm or pid)"),
            };
            Ok(GangRule {
                matcher,
                hint,
                origin: format!("--gang {arg:?}"),
            })
        };
        parse().with_context(|| format!("--gang {arg:?}"))
    }

    /// The gang this rule (at `index` among all rules) puts `task` in, if
    /// it matches.
    pub fn gang_key(&self, index: usize, task: &TaskInfo<'_>) -> Option<GangKey> {
        match &self.matcher {
            GangMatcher::Cgroup(p) => cgroup_and_ancestors(task.cgroup)
                .into_iter()
                .find(|c| p.matches_with(c, CGROUP_MATCH))
                .map(|c| GangKey::Cgroup(c.to_string())),
            GangMatcher::Space(p) => task
                .spaces
                .iter()
                .filter(|s| p.matches(&s.name))
                .min()
                .map(|s| GangKey::Space(s.clone())),
            GangMatcher::Comm(p) => p.matches(task.comm).then_some(GangKey::Rule(index)),
            GangMatcher::Pids(list) => list
                .binary_search(&task.tgid)
                .is_ok()
                .then_some(GangKey::Rule(index)),
        }
    }
}

/// A `[[gang_rule]]` table of a policy file. Unknown fields are kept (not
/// refused by serde) so that [`GangRuleSpec::rule`] can name the table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct GangRuleSpec {
    pub cgroup: Option<String>,
    pub space: Option<String>,
    pub comm: Option<String>,
    pub pids: Option<Vec<u32>>,
    pub memory_bound: Option<bool>,
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde::de::IgnoredAny>,
}

impl GangRuleSpec {
    /// The rule, or an error naming the table (`gang_rule #index`, from
    /// 1) and the field.
    pub fn rule(&self, index: usize) -> Result<GangRule> {
        let origin = format!("gang_rule #{index}");
        let build = || -> Result<GangRule> {
            if let Some(field) = self.unknown.keys().next() {
                bail!("unknown field {field:?} (expected cgroup, space, comm, pids, memory_bound)");
            }
            let given: Vec<&str> = [
                ("cgroup", self.cgroup.is_some()),
                ("space", self.space.is_some()),
                ("comm", self.comm.is_some()),
                ("pids", self.pids.is_some()),
            ]
            .iter()
            .filter(|f| f.1)
            .map(|f| f.0)
            .collect();
            let matcher = match (given.as_slice(), self) {
                (
                    [_],
                    GangRuleSpec {
                        cgroup: Some(c), ..
                    },
                ) => GangMatcher::Cgroup(pattern(c, "cgroup").context("field cgroup")?),
                ([_], GangRuleSpec { space: Some(s), .. }) => {
                    GangMatcher::Space(pattern(s, "space").context("field space")?)
                }
                ([_], GangRuleSpec { comm: Some(c), .. }) => {
                    GangMatcher::Comm(pattern(c, "comm").context("field comm")?)
                }
                ([_], GangRuleSpec { pids: Some(p), .. }) => {
                    GangMatcher::Pids(pids(p).context("field pids")?)
                }
                ([], _) => bail!("has none of cgroup, space, comm, pids (give exactly one)"),
                ([a, b], _) => bail!("has both {a:?} and {b:?} (give exactly one)"),
                (many, _) => bail!("has {} (give exactly one)", quoted(many)),
            };
            let hint = match self.memory_bound {
                None => Hint::Auto,
                Some(true) => Hint::MemoryBound,
                Some(false) => Hint::NotMemoryBound,
            };
            Ok(GangRule {
                matcher,
                hint,
                origin: origin.clone(),
            })
        };
        build().with_context(|| origin.clone())
    }
}

/// `"a", "b" and "c"`.
fn quoted(fields: &[&str]) -> String {
    let q: Vec<String> = fields.iter().map(|f| format!("{f:?}")).collect();
    match q.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => q.join(""),
    }
}

/// The rules, command line first, then the policy's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GangRules {
    rules: Vec<GangRule>,
}

impl GangRules {
    /// Every rule, or the first error (naming its rule and field).
    pub fn new(command_line: &[String], policy: &[GangRuleSpec]) -> Result<GangRules> {
        let mut rules = command_line
            .iter()
            .map(|a| GangRule::parse(a))
            .collect::<Result<Vec<_>>>()?;
        for (i, spec) in policy.iter().enumerate() {
            rules.push(spec.rule(i + 1)?);
        }
        Ok(GangRules { rules })
    }

    /// The task's gang, hint and rule: the first matching rule's, else its
    /// shared space's (the first by name), else its process's, with the
    /// hint [`Hint::Auto`].
    pub fn gang(&self, task: &TaskInfo<'_>) -> Gang {
        self.rules
            .iter()
            .enumerate()
            .find_map(|(i, r)| {
                r.gang_key(i, task).map(|key| Gang {
                    key,
                    hint: r.hint,
                    rule: Some(i),
                })
            })
            .unwrap_or_else(|| Gang {
                key: match task.spaces.iter().min() {
                    Some(space) => GangKey::Space(space.clone()),
                    None => GangKey::Process(task.tgid),
                },
                hint: Hint::Auto,
                rule: None,
            })
    }

    /// The task's gang (see [`GangRules::gang`]).
    pub fn resolve(&self, task: &TaskInfo<'_>) -> GangKey {
        self.gang(task).key
    }

    /// Warnings, one per cgroup or space rule whose glob matches none of
    /// the cgroups or spaces that exist (not errors: they may come later).
    pub fn dangling(&self, existing_cgroups: &[&str], existing_spaces: &[&str]) -> Vec<String> {
        self.rules
            .iter()
            .filter_map(|r| match &r.matcher {
                GangMatcher::Cgroup(p)
                    if !existing_cgroups
                        .iter()
                        .any(|c| p.matches_with(c, CGROUP_MATCH)) =>
                {
                    Some(format!(
                        "{}: cgroup pattern {:?} matches no cgroup (yet)",
                        r.origin,
                        p.as_str()
                    ))
                }
                GangMatcher::Space(p) if !existing_spaces.iter().any(|s| p.matches(s)) => {
                    Some(format!(
                        "{}: space pattern {:?} matches no space (yet)",
                        r.origin,
                        p.as_str()
                    ))
                }
                _ => None,
            })
            .collect()
    }

    pub fn rules(&self) -> &[GangRule] {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Does any rule match by cgroup (so tasks' cgroups must be read)?
    pub fn by_cgroup(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.matcher, GangMatcher::Cgroup(_)))
    }

    /// Does any rule match by space (so the space registry must be read)?
    pub fn by_space(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.matcher, GangMatcher::Space(_)))
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
