//! Class hints: rules that name a task's class outright, for machines
//! without a usable PMU and for operators who know better. A rule matches
//! a task by name (comm glob), cgroup path (glob) or pid; on the command
//! line it is `--class [comm:|cgroup:|pid:]PATTERN=CLASS`, in a policy file
//! a `[[class_rule]]` table with one of `comm`, `cgroup`, `pid` and a
//! `class`. Rules are tried in order, command line first; a hint beats
//! the PMU, and the PMU beats unknown (`Hints::resolve`).

use crate::class::Class;
use anyhow::{bail, Context, Result};
use glob::Pattern;
use serde::Deserialize;

/// What a rule matches a task by.
#[derive(Debug, Clone, PartialEq)]
pub enum Matcher {
    Comm(Pattern),
    Cgroup(Pattern),
    Pid(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub matcher: Matcher,
    pub class: Class,
}

/// What a task is known by when a rule is tried.
#[derive(Debug, Clone, Copy)]
pub struct TaskId<'a> {
    pub pid: u32,
    pub comm: &'a str,
    pub cgroup: &'a str,
}

/// A glob from a rule's `what` field, refused (naming the field) if empty
/// or invalid. Class hints and gang rules read their globs with it.
pub fn pattern(text: &str, what: &str) -> Result<Pattern> {
    if text.is_empty() {
        bail!("the {what} pattern is empty");
    }
    Pattern::new(text).with_context(|| format!("{what} pattern {text:?} is not a valid glob"))
}

impl Rule {
    /// Parses `--class [comm:|cgroup:|pid:]PATTERN=CLASS`.
    pub fn parse(arg: &str) -> Result<Rule> {
        let parse = || -> Result<Rule> {
            let (left, class) = arg
                .rsplit_once('=')
                .context("expected [comm:|cgroup:|pid:]PATTERN=CLASS")?;
            let class: Class = class.trim().parse()?;
            let matcher = if let Some(pid) = left.strip_prefix("pid:") {
                Matcher::Pid(
                    pid.parse()
                        .with_context(|| format!("pid {pid:?} is not a process ID"))?,
                )
            } else if let Some(glob) = left.strip_prefix("cgroup:") {
                Matcher::Cgroup(pattern(glob, "cgroup")?)
            } else {
                Matcher::Comm(pattern(left.strip_prefix("comm:").unwrap_or(left), "comm")?)
            };
            Ok(Rule { matcher, class })
        };
        parse().with_context(|| format!("--class {arg:?}"))
    }

    pub fn matches(&self, task: &TaskId<'_>) -> bool {
        match &self.matcher {
            Matcher::Comm(p) => p.matches(task.comm),
            Matcher::Cgroup(p) => p.matches(task.cgroup),
            Matcher::Pid(pid) => *pid == task.pid,
        }
    }
}

/// How a name hint's glob matches, where BPF can apply it itself: a
/// literal with `*` at neither, the end, the start or both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommShape {
    Exact,
    Prefix,
    Suffix,
    Contains,
}

/// The longest literal a task name can hold (TASK_COMM_LEN - 1).
pub const COMM_MAX: usize = 15;

impl Rule {
    /// The rule as BPF can apply it (shape, literal), if it is a name
    /// rule whose glob has one of the `CommShape` forms and a literal a
    /// task name can hold; else `None` (the daemon applies it alone).
    pub fn comm_shape(&self) -> Option<(CommShape, String)> {
        let Matcher::Comm(p) = &self.matcher else {
            return None;
        };
        let glob = p.as_str();
        let (lead, rest) = match glob.strip_prefix('*') {
            Some(rest) => (true, rest),
            None => (false, glob),
        };
        let (trail, literal) = match rest.strip_suffix('*') {
            Some(literal) => (true, literal),
            None => (false, rest),
        };
        if literal.is_empty()
            || literal.len() > COMM_MAX
            || literal.contains(['*', '?', '[', ']', '\\'])
        {
            return None;
        }
        let shape = match (lead, trail) {
            (false, false) => CommShape::Exact,
            (false, true) => CommShape::Prefix,
            (true, false) => CommShape::Suffix,
            (true, true) => CommShape::Contains,
        };
        Some((shape, literal.to_string()))
    }
}

/// A `[[class_rule]]` table of a policy file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    pub pid: Option<u32>,
    pub class: String,
}

impl RuleSpec {
    /// The rule, or an error naming the table (`index`, from 1) and field.
    pub fn rule(&self, index: usize) -> Result<Rule> {
        let build = || -> Result<Rule> {
            let class: Class = self.class.parse().context("field class")?;
            let matcher = match (&self.comm, &self.cgroup, self.pid) {
                (Some(c), None, None) => Matcher::Comm(pattern(c, "comm").context("field comm")?),
                (None, Some(c), None) => {
                    Matcher::Cgroup(pattern(c, "cgroup").context("field cgroup")?)
                }
                (None, None, Some(pid)) => Matcher::Pid(pid),
                _ => bail!("give exactly one of comm, cgroup, pid"),
            };
            Ok(Rule { matcher, class })
        };
        build().with_context(|| format!("class_rule {index}"))
    }
}

/// The rules, command line first, then the policy's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hints {
    rules: Vec<Rule>,
}

impl Hints {
    pub fn new(command_line: &[String], policy: &[RuleSpec]) -> Result<Hints> {
        let mut rules = command_line
            .iter()
            .map(|a| Rule::parse(a))
            .collect::<Result<Vec<_>>>()?;
        for (i, spec) in policy.iter().enumerate() {
            rules.push(spec.rule(i + 1)?);
        }
        Ok(Hints { rules })
    }

    /// The class the first matching rule names, if any.
    pub fn class_for(&self, task: &TaskId<'_>) -> Option<Class> {
        self.rules.iter().find(|r| r.matches(task)).map(|r| r.class)
    }

    /// A task's class: the first hint rule that matches; else pm-writer if
    /// its process is a shared space's PM writer (`in_space_pm_writer`, the
    /// flag sky_pvas sets on persistent-queue writers); else what its
    /// counters say. Hints beat the PMU, the PMU beats unknown.
    pub fn resolve(
        &self,
        task: &TaskId<'_>,
        in_space_pm_writer: bool,
        from_counters: Class,
    ) -> Class {
        self.class_for(task)
            .or(in_space_pm_writer.then_some(Class::PmWriter))
            .unwrap_or(from_counters)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Does any rule give `class`?
    pub fn gives(&self, class: Class) -> bool {
        self.rules.iter().any(|r| r.class == class)
    }

    /// Does any rule match by cgroup (so tasks' cgroups must be read)?
    pub fn by_cgroup(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.matcher, Matcher::Cgroup(_)))
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// The name rules BPF can apply itself, in order, up to `max`, and
    /// the name rules it cannot (their globs, for a log line). BPF stops
    /// at the first rule it cannot apply (another glob, or a cgroup or pid
    /// rule): a later rule must not win over an earlier one the daemon
    /// would have applied.
    pub fn bpf_comm_rules(&self, max: usize) -> (Vec<(CommShape, String, Class)>, Vec<String>) {
        let mut bpf = Vec::new();
        let mut daemon_only = Vec::new();
        let mut stopped = false;
        for rule in &self.rules {
            match rule.comm_shape() {
                Some((shape, literal)) if !stopped && bpf.len() < max => {
                    bpf.push((shape, literal, rule.class))
                }
                _ => {
                    stopped = true;
                    if let Matcher::Comm(p) = &rule.matcher {
                        daemon_only.push(p.as_str().to_string());
                    }
                }
            }
        }
        (bpf, daemon_only)
    }
}

#[cfg(test)]
#[path = "hints_tests.rs"]
mod tests;
