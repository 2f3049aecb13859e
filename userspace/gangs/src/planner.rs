//! The home-domain planner (seed 003, docs/seeds.md): gives every memory-bound gang a
//! home last-level-cache (LLC) domain so that all its threads share one
//! cache ("All share", CPI ~0.5) and, while that is possible, no other
//! memory-bound gang shares it ("Partial share" in a Dirty domain costs
//! more than 2x CPI).
//!
//! The planner is pure: no I/O, no clock. The daemon calls
//! [`Planner::plan`] with the gangs it sees and the current monotonic time
//! and hands the resulting [`Plan::homes`] to BPF, which keeps a gang's
//! threads in its home domain and spills elsewhere only after a bounded
//! wait when home is overloaded. Compute (not memory-bound) gangs get no
//! home: they balance as usual and fill what is left.
//!
//! # Design
//!
//! Every placement and every move is judged by one cost, compared
//! lexicographically (smaller is better):
//!
//! 1. `excess`: memory-bound threads beyond their home's CPUs, summed over
//!    domains. Those threads spill to other domains (Partial share), which
//!    undoes what a home is for, so fitting comes first.
//! 2. `dirty`: the number of Dirty domains — the paper's state to avoid.
//! 3. `crowding`: gangs minus occupied domains, i.e. how many gangs share
//!    a domain with another one. With the Dirty count equal, spreading over
//!    Empty domains still wins (a Dirty domain with three gangs is worse
//!    than one with two).
//! 4. `pressure`: the overload ratios of the domains, largest first
//!    (leximax), so that when everything is overloaded the spill pressure is
//!    balanced and nothing starves. Zero while every domain fits.
//!
//! New gangs (and gangs whose domain went away) are placed greedily, the
//! largest first, at the domain of least cost after placement; ties go to
//! the smallest Empty domain (best fit: large domains stay free for large
//! gangs), else the least loaded domain, else the lowest id. That yields
//! the rules: an Empty domain that fits wins; with none, joining a
//! Dirty domain that fits (adds no Dirty domain) beats joining a Clean one,
//! and among Clean ones the least loaded wins; a gang bigger than every
//! domain goes to the largest one and is flagged oversized.
//!
//! An Empty domain too small for a gang is not preferred over joining a
//! domain where it fits: its surplus threads would spill after the bounded
//! wait and the gang would be in Partial share anyway (> 2x CPI), while a
//! Dirty domain under All share costs ~10 %. Load counts memory-bound
//! threads only; compute gangs fill what is left.
//!
//! Existing gangs keep their home (hysteresis) unless a single move of a
//! gang that has dwelt at least [`Settings::min_dwell`] at home strictly
//! lowers the cost — e.g. a gang leaves a Dirty domain for an Empty one
//! that fits. The best such move is made first, and each domain is the
//! source or destination of at most one move per [`Planner::plan`] call, so
//! plans never thrash. Since every move strictly lowers the cost, a fixed
//! set of gangs settles after finitely many moves. Only single moves are
//! tried, never swaps, so a placement that only a swap would improve stays
//! (best fit on arrival makes that rare). Gangs that leave free
//! their domain at once. Everything is deterministic: ties by id, input
//! order irrelevant.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// A last-level-cache domain (the LLC id the kernel reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DomainId(pub u32);

/// A gang: the tasks that share data (threads of a process, members of a
/// shared space, a cgroup, or what a rule says).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GangId(pub u64);

/// One LLC domain and the number of its CPUs that are online.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domain {
    pub id: DomainId,
    pub cpus: u32,
}

/// A gang as the daemon sees it now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gang {
    pub id: GangId,
    /// Demand in CPUs: runnable threads, best smoothed by the caller, since
    /// the planner takes each value at face value.
    pub threads: u32,
    /// From the CPI test; only memory-bound gangs get a home.
    pub memory_bound: bool,
}

/// A domain's state from the memory-bound gangs in it (paper's terms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DomainState {
    /// No memory-bound gang.
    Empty,
    /// Exactly one memory-bound gang.
    Clean,
    /// More than one memory-bound gang.
    Dirty,
}

impl DomainState {
    /// The state of a domain holding `gangs` memory-bound gangs.
    pub fn from_gangs(gangs: usize) -> Self {
        match gangs {
            0 => DomainState::Empty,
            1 => DomainState::Clean,
            _ => DomainState::Dirty,
        }
    }
}

impl fmt::Display for DomainState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DomainState::Empty => "empty",
            DomainState::Clean => "clean",
            DomainState::Dirty => "dirty",
        })
    }
}

/// Tuning of the planner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// A gang keeps a home at least this long before the planner moves it
    /// for a better one (a move costs a cache refill). Gangs whose domain
    /// goes away are re-homed at once regardless.
    pub min_dwell: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            min_dwell: Duration::from_secs(2),
        }
    }
}

/// How a gang was placed when it got a home without having one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The domain's state before the gang joined it.
    pub was: DomainState,
    /// Whether the domain's memory-bound threads fit its CPUs afterwards.
    pub fits: bool,
}

/// Why a gang has its current improvement move, by the first cost term it
/// lowers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Gain {
    /// Fewer memory-bound threads beyond their home's CPUs.
    LessExcess,
    /// Fewer Dirty domains.
    FewerDirty,
    /// Fewer gangs sharing a domain (e.g. out of a three-gang Dirty domain
    /// into an Empty one).
    LessCrowded,
    /// Overload spread more evenly.
    Balance,
}

/// Why a gang has its home; [`Plan::explain`] renders it for a human.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Reason {
    /// A new gang (or one that just became memory-bound), placed now.
    New(Placement),
    /// Its home domain went away (CPU hotplug); placed anew now.
    Rehomed {
        from: DomainId,
        placement: Placement,
    },
    /// Kept its home; no single move would improve the plan.
    Kept { since: Duration },
    /// Kept its home although moving to `better` would improve the plan:
    /// it has not dwelt `min_dwell` yet, or a domain involved already had a
    /// move in this plan (hysteresis).
    Waiting { since: Duration, better: DomainId },
    /// Moved now from `from`; `gain` says what improved.
    Moved { from: DomainId, gain: Gain },
    /// A new gang whose first thread BPF placed before the daemon saw it
    /// (a provisional home, so its threads land together from the start);
    /// the plan keeps it there: no single move would improve it.
    Confirmed { was: DomainState },
}

/// The planner's answer for one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Home domain of each memory-bound gang (none for compute gangs, and
    /// none at all while no domain has a CPU online).
    pub homes: BTreeMap<GangId, DomainId>,
    /// State of every domain under `homes`.
    pub states: BTreeMap<DomainId, DomainState>,
    /// Gangs with more threads than their home has CPUs; BPF spills their
    /// surplus after the bounded wait.
    pub oversized: BTreeSet<GangId>,
    /// Why each homed gang is where it is.
    pub reasons: BTreeMap<GangId, Reason>,
}

impl Plan {
    /// Number of Dirty domains.
    pub fn dirty(&self) -> usize {
        self.states
            .values()
            .filter(|s| **s == DomainState::Dirty)
            .count()
    }

    /// A one-line explanation of a gang's placement, or `None` if the gang
    /// has no home (not memory-bound, or unknown).
    pub fn explain(&self, gang: GangId) -> Option<String> {
        let home = self.homes.get(&gang)?;
        let reason = self.reasons.get(&gang)?;
        let state = self.states.get(home).copied().unwrap_or(DomainState::Empty);
        let mut s = format!("gang {} home domain {} ({}): ", gang.0, home.0, state);
        s += &reason.to_string();
        if self.oversized.contains(&gang) {
            s += "; oversized: more threads than the domain has CPUs, BPF spills after the bounded wait";
        }
        Some(s)
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.was, self.fits) {
            (DomainState::Empty, true) => f.write_str("an empty domain that fits it"),
            (DomainState::Dirty, true) => f.write_str(
                "no empty domain fits; joined a dirty domain that fits, adding no dirty domain",
            ),
            (DomainState::Clean, true) => f.write_str(
                "no empty or dirty domain fits; joined the least loaded clean domain that fits (now dirty)",
            ),
            (was, false) => write!(
                f,
                "fits no domain; the one with the fewest threads beyond its CPUs (was {was})"
            ),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::New(p) => write!(f, "new: {p}"),
            Reason::Rehomed { from, placement } => {
                write!(f, "domain {} went away; re-homed: {placement}", from.0)
            }
            Reason::Kept { since } => write!(
                f,
                "kept (home since {:.3}s; no single move improves the plan)",
                since.as_secs_f64()
            ),
            Reason::Waiting { since, better } => write!(
                f,
                "kept for now (hysteresis: home since {:.3}s); domain {} would be better: it moves once it has dwelt min_dwell and no domain involved had a move in the same plan",
                since.as_secs_f64(),
                better.0
            ),
            Reason::Confirmed { was } => write!(
                f,
                "new: BPF chose this home at the gang's first placement (domain was {was}); \
                 the plan confirmed it, no single move improves it"
            ),
            Reason::Moved { from, gain } => {
                let why = match gain {
                    Gain::LessExcess => "fewer threads beyond their domain's CPUs",
                    Gain::FewerDirty => "fewer dirty domains",
                    Gain::LessCrowded => "fewer gangs sharing a domain",
                    Gain::Balance => "overload spread more evenly",
                };
                write!(f, "moved from domain {}: {why}", from.0)
            }
        }
    }
}

/// The state of every domain given where memory-bound gangs are.
///
/// `placement` lists (gang, domain) pairs; a gang observed in several
/// domains (spread, Partial share) may appear once per domain, so a
/// scheduler-independent observer can compute Dirty time from observed
/// placement the same way the planner does. Only gangs that `gangs` lists
/// as memory-bound count; pairs naming an unknown domain are ignored.
pub fn states(
    domains: &[Domain],
    placement: impl IntoIterator<Item = (GangId, DomainId)>,
    gangs: &[Gang],
) -> BTreeMap<DomainId, DomainState> {
    let memory_bound: BTreeSet<GangId> = gangs
        .iter()
        .filter(|g| g.memory_bound)
        .map(|g| g.id)
        .collect();
    let mut per: BTreeMap<DomainId, BTreeSet<GangId>> =
        domains.iter().map(|d| (d.id, BTreeSet::new())).collect();
    for (g, d) in placement {
        if memory_bound.contains(&g) {
            if let Some(set) = per.get_mut(&d) {
                set.insert(g);
            }
        }
    }
    per.into_iter()
        .map(|(d, set)| (d, DomainState::from_gangs(set.len())))
        .collect()
}

/// A non-negative fraction compared exactly (cross-multiplication).
#[derive(Clone, Copy, Debug)]
struct Ratio {
    num: u64,
    den: u64,
}

impl Ord for Ratio {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.num as u128 * o.den as u128).cmp(&(o.num as u128 * self.den as u128))
    }
}
impl PartialOrd for Ratio {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Ratio {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ratio {}

/// The cost of a whole placement; field order is priority order (see the
/// module doc for why).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Cost {
    excess: u64,
    dirty: u32,
    crowding: u32,
    /// Overload ratios (excess / CPUs), largest first.
    pressure: Vec<Ratio>,
}

/// Per-domain totals of the memory-bound gangs homed there.
#[derive(Clone, Debug)]
struct Load {
    cpus: Vec<u64>,
    threads: Vec<u64>,
    gangs: Vec<u32>,
}

impl Load {
    fn cost(&self) -> Cost {
        let mut c = Cost {
            excess: 0,
            dirty: 0,
            crowding: 0,
            pressure: Vec::with_capacity(self.cpus.len()),
        };
        for i in 0..self.cpus.len() {
            let ex = self.threads[i].saturating_sub(self.cpus[i]);
            c.excess += ex;
            c.dirty += u32::from(self.gangs[i] > 1);
            c.crowding += self.gangs[i].saturating_sub(1);
            c.pressure.push(Ratio {
                num: ex,
                den: self.cpus[i],
            });
        }
        c.pressure.sort_by(|a, b| b.cmp(a));
        c
    }

    fn add(&mut self, i: usize, threads: u64) {
        self.threads[i] += threads;
        self.gangs[i] += 1;
    }

    fn remove(&mut self, i: usize, threads: u64) {
        self.threads[i] -= threads;
        self.gangs[i] -= 1;
    }

    /// Cost after moving a gang of `threads` from `from` (if any) to `to`.
    fn cost_with(&mut self, from: Option<usize>, to: usize, threads: u64) -> Cost {
        if let Some(f) = from {
            self.remove(f, threads);
        }
        self.add(to, threads);
        let c = self.cost();
        self.remove(to, threads);
        if let Some(f) = from {
            self.add(f, threads);
        }
        c
    }
}

#[derive(Clone, Copy, Debug)]
struct Homed {
    domain: DomainId,
    since: Duration,
}

/// Keeps the homes between calls; see the module doc.
#[derive(Clone, Debug)]
pub struct Planner {
    /// Sorted by id, unique ids, every one with CPUs online.
    domains: Vec<Domain>,
    settings: Settings,
    homes: BTreeMap<GangId, Homed>,
    /// Gangs whose home went away, with that home, until re-homed.
    displaced: BTreeMap<GangId, DomainId>,
    /// Gangs adopted since the last plan, with their domain's state then.
    adopted: BTreeMap<GangId, DomainState>,
}

impl Planner {
    /// A planner over `domains` (see [`Planner::set_domains`] for how the
    /// list is cleaned).
    pub fn new(domains: Vec<Domain>, settings: Settings) -> Self {
        let mut p = Planner {
            domains: Vec::new(),
            settings,
            homes: BTreeMap::new(),
            displaced: BTreeMap::new(),
            adopted: BTreeMap::new(),
        };
        p.set_domains(domains);
        p
    }

    /// The domains now planned over: sorted by id, one per id (the first
    /// listed wins), none without online CPUs.
    pub fn domains(&self) -> &[Domain] {
        &self.domains
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The current home of a gang, as of the last plan.
    pub fn home(&self, gang: GangId) -> Option<DomainId> {
        self.homes.get(&gang).map(|h| h.domain)
    }

    /// Takes `domain` as the home of a gang the planner does not know yet:
    /// BPF placed its first thread there before any plan (a provisional
    /// home), and moving it costs a cache refill. The next [`Planner::plan`]
    /// keeps it there unless a single move improves the plan, which it may
    /// make at once (an adopted gang has no dwell to wait out). Ignored for
    /// a gang with a home, or a domain not planned over, or one that would
    /// turn Dirty while a domain is Empty: then the gang is placed as new
    /// (its few threads move once now rather than share a domain).
    pub fn adopt(&mut self, gang: GangId, domain: DomainId, now: Duration) {
        if self.homes.contains_key(&gang) || !self.domains.iter().any(|d| d.id == domain) {
            return;
        }
        let gangs_in = |d: DomainId| self.homes.values().filter(|h| h.domain == d).count();
        let was = DomainState::from_gangs(gangs_in(domain));
        if was != DomainState::Empty && self.domains.iter().any(|d| gangs_in(d.id) == 0) {
            return;
        }
        self.homes.insert(gang, Homed { domain, since: now });
        self.displaced.remove(&gang);
        self.adopted.insert(gang, was);
    }

    /// CPU hotplug: replace the domain list. A domain without online CPUs
    /// counts as gone. Gangs homed on a domain that is gone lose their home
    /// and the next [`Planner::plan`] re-homes them (at once, whatever their
    /// dwell); every other gang keeps its home.
    pub fn set_domains(&mut self, mut domains: Vec<Domain>) {
        domains.retain(|d| d.cpus > 0);
        let mut seen = BTreeSet::new();
        domains.retain(|d| seen.insert(d.id));
        domains.sort_by_key(|d| d.id);
        self.domains = domains;
        let ids: BTreeSet<DomainId> = self.domains.iter().map(|d| d.id).collect();
        let gone: Vec<(GangId, DomainId)> = self
            .homes
            .iter()
            .filter(|(_, h)| !ids.contains(&h.domain))
            .map(|(g, h)| (*g, h.domain))
            .collect();
        for (g, d) in gone {
            self.homes.remove(&g);
            self.displaced.entry(g).or_insert(d);
        }
    }

    /// Plan homes for `gangs` at monotonic time `now`.
    ///
    /// A gang id listed twice counts once (the first entry). Gangs not
    /// listed, or no longer memory-bound, lose their home now.
    pub fn plan(&mut self, gangs: &[Gang], now: Duration) -> Plan {
        let mut demand: BTreeMap<GangId, u64> = BTreeMap::new();
        let mut listed = BTreeSet::new();
        for g in gangs {
            if listed.insert(g.id) && g.memory_bound {
                demand.insert(g.id, u64::from(g.threads));
            }
        }
        self.homes.retain(|g, _| demand.contains_key(g));
        self.displaced.retain(|g, _| demand.contains_key(g));

        let index: BTreeMap<DomainId, usize> = self
            .domains
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id, i))
            .collect();
        let mut load = Load {
            cpus: self.domains.iter().map(|d| u64::from(d.cpus)).collect(),
            threads: vec![0; self.domains.len()],
            gangs: vec![0; self.domains.len()],
        };
        for (g, h) in &self.homes {
            load.add(index[&h.domain], demand[g]);
        }

        let mut reasons = BTreeMap::new();
        let mut placed_now = BTreeSet::new();
        if !self.domains.is_empty() {
            // Place the homeless, largest first (they are the hardest to fit).
            let mut homeless: Vec<(u64, GangId)> = demand
                .iter()
                .filter(|(g, _)| !self.homes.contains_key(g))
                .map(|(g, t)| (*t, *g))
                .collect();
            homeless.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for (threads, g) in homeless {
                let (i, placement) = self.place(&mut load, threads);
                load.add(i, threads);
                let domain = self.domains[i].id;
                self.homes.insert(g, Homed { domain, since: now });
                placed_now.insert(g);
                let reason = match self.displaced.remove(&g) {
                    Some(from) => Reason::Rehomed { from, placement },
                    None => Reason::New(placement),
                };
                reasons.insert(g, reason);
            }
            self.improve(&mut load, &demand, &index, &placed_now, now, &mut reasons);
        }

        let mut plan = Plan::default();
        for (i, d) in self.domains.iter().enumerate() {
            plan.states
                .insert(d.id, DomainState::from_gangs(load.gangs[i] as usize));
        }
        for (g, h) in &self.homes {
            plan.homes.insert(*g, h.domain);
            if demand[g] > load.cpus[index[&h.domain]] {
                plan.oversized.insert(*g);
            }
        }
        for (g, was) in std::mem::take(&mut self.adopted) {
            if matches!(reasons.get(&g), Some(Reason::Kept { .. })) {
                reasons.insert(g, Reason::Confirmed { was });
            }
        }
        plan.reasons = reasons;
        plan
    }

    /// Where a homeless gang of `threads` goes: least cost after placement;
    /// ties to the smallest Empty domain (best fit), else the least loaded,
    /// else the lowest id.
    fn place(&self, load: &mut Load, threads: u64) -> (usize, Placement) {
        let mut best: Option<(Cost, (u64, Ratio), usize)> = None;
        for i in 0..self.domains.len() {
            let cost = load.cost_with(None, i, threads);
            // Equal costs never mix Empty and occupied domains (crowding
            // differs), so one tie-break key serves both.
            let load_after = Ratio {
                num: load.threads[i] + threads,
                den: load.cpus[i],
            };
            let key = (
                cost,
                tie_break(load.gangs[i] == 0, load.cpus[i], load_after),
                i,
            );
            if best.as_ref().is_none_or(|b| key < *b) {
                best = Some(key);
            }
        }
        let (_, _, i) = best.expect("at least one domain");
        let was = DomainState::from_gangs(load.gangs[i] as usize);
        let fits = load.threads[i] + threads <= load.cpus[i];
        (i, Placement { was, fits })
    }

    /// Make the improving single moves (see the module doc) and give every
    /// gang not placed now its reason.
    fn improve(
        &mut self,
        load: &mut Load,
        demand: &BTreeMap<GangId, u64>,
        index: &BTreeMap<DomainId, usize>,
        placed_now: &BTreeSet<GangId>,
        now: Duration,
        reasons: &mut BTreeMap<GangId, Reason>,
    ) {
        let n = self.domains.len();
        let mut used = vec![false; n];
        let mut moved = BTreeSet::new();
        loop {
            let current = load.cost();
            let mut best: Option<(Cost, GangId, usize, usize)> = None;
            for (g, h) in &self.homes {
                let from = index[&h.domain];
                if placed_now.contains(g)
                    || moved.contains(g)
                    || used[from]
                    || (now.saturating_sub(h.since) < self.settings.min_dwell
                        && !self.adopted.contains_key(g))
                {
                    continue;
                }
                for to in (0..n).filter(|&to| to != from && !used[to]) {
                    let cost = load.cost_with(Some(from), to, demand[g]);
                    if cost < current && best.as_ref().is_none_or(|b| cost < b.0) {
                        best = Some((cost, *g, from, to));
                    }
                }
            }
            let Some((cost, g, from, to)) = best else {
                break;
            };
            load.remove(from, demand[&g]);
            load.add(to, demand[&g]);
            used[from] = true;
            used[to] = true;
            moved.insert(g);
            let gain = gain(&current, &cost);
            let from = self.domains[from].id;
            self.homes.insert(
                g,
                Homed {
                    domain: self.domains[to].id,
                    since: now,
                },
            );
            reasons.insert(g, Reason::Moved { from, gain });
        }

        // Explain the kept ones: is there a move they are waiting for?
        let current = load.cost();
        for (g, h) in &self.homes {
            if placed_now.contains(g) || moved.contains(g) {
                continue;
            }
            let from = index[&h.domain];
            let mut better: Option<(Cost, usize)> = None;
            for to in (0..n).filter(|&to| to != from) {
                let cost = load.cost_with(Some(from), to, demand[g]);
                if cost < current && better.as_ref().is_none_or(|b| cost < b.0) {
                    better = Some((cost, to));
                }
            }
            let reason = match better {
                Some((_, to)) => Reason::Waiting {
                    since: h.since,
                    better: self.domains[to].id,
                },
                None => Reason::Kept { since: h.since },
            };
            reasons.insert(*g, reason);
        }
    }
}

/// Tie-break key after cost: best fit (fewest CPUs) among Empty domains,
/// least load after among the others.
fn tie_break(empty: bool, cpus: u64, load_after: Ratio) -> (u64, Ratio) {
    if empty {
        (cpus, Ratio { num: 0, den: 1 })
    } else {
        (0, load_after)
    }
}

/// The first cost term a move lowers.
fn gain(before: &Cost, after: &Cost) -> Gain {
    if after.excess < before.excess {
        Gain::LessExcess
    } else if after.dirty < before.dirty {
        Gain::FewerDirty
    } else if after.crowding < before.crowding {
        Gain::LessCrowded
    } else {
        Gain::Balance
    }
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
