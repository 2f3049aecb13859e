//! Tests of the home-domain planner.

use super::*;
use crate::test_rng::Rng;

const TICK: Duration = Duration::from_millis(100);
const DWELL: Duration = Duration::from_secs(1);

fn domains(cpus: &[u32]) -> Vec<Domain> {
    cpus.iter()
        .enumerate()
        .map(|(i, &c)| Domain {
            id: DomainId(i as u32),
            cpus: c,
        })
        .collect()
}

fn mem(id: u64, threads: u32) -> Gang {
    Gang {
        id: GangId(id),
        threads,
        memory_bound: true,
    }
}

fn compute(id: u64, threads: u32) -> Gang {
    Gang {
        id: GangId(id),
        threads,
        memory_bound: false,
    }
}

fn planner(cpus: &[u32]) -> Planner {
    Planner::new(domains(cpus), Settings { min_dwell: DWELL })
}

/// The cost of a plan's homes, computed independently of the planner.
fn cost_of(doms: &[Domain], homes: &BTreeMap<GangId, DomainId>, gangs: &[Gang]) -> Cost {
    let mut load = Load {
        cpus: doms.iter().map(|d| u64::from(d.cpus)).collect(),
        threads: vec![0; doms.len()],
        gangs: vec![0; doms.len()],
    };
    for g in gangs.iter().filter(|g| g.memory_bound) {
        let d = homes[&g.id];
        let i = doms.iter().position(|x| x.id == d).unwrap();
        load.add(i, u64::from(g.threads));
    }
    load.cost()
}

/// The least cost over every assignment of the memory-bound gangs
/// (brute force; small instances only).
fn oracle(doms: &[Domain], gangs: &[Gang]) -> Cost {
    let mem: Vec<&Gang> = gangs.iter().filter(|g| g.memory_bound).collect();
    let n = doms.len();
    let total = n.pow(mem.len() as u32);
    let mut best: Option<Cost> = None;
    for mut code in 0..total {
        let mut homes = BTreeMap::new();
        for g in &mem {
            homes.insert(g.id, doms[code % n].id);
            code /= n;
        }
        let c = cost_of(doms, &homes, gangs);
        if best.as_ref().is_none_or(|b| c < *b) {
            best = Some(c);
        }
    }
    best.unwrap()
}

fn threads_in(plan: &Plan, gangs: &[Gang], d: DomainId) -> u32 {
    gangs
        .iter()
        .filter(|g| plan.homes.get(&g.id) == Some(&d))
        .map(|g| g.threads)
        .sum()
}

fn check_reasons(plan: &Plan) {
    let homed: Vec<_> = plan.homes.keys().collect();
    let reasoned: Vec<_> = plan.reasons.keys().collect();
    assert_eq!(homed, reasoned, "a reason for every homed gang, no other");
    for g in plan.homes.keys() {
        let text = plan.explain(*g).unwrap();
        assert!(
            text.contains(&format!("home domain {}", plan.homes[g].0)),
            "{text}"
        );
    }
}

#[test]
fn two_domains_of_four_cpus_with_one_to_four_gangs_of_three() {
    // Expected Dirty domains for 0..=4 memory-bound gangs of 3 threads.
    let expected_dirty = [0, 0, 0, 1, 2];
    for n in 0..=4u64 {
        let mut gangs: Vec<Gang> = (1..=n).map(|i| mem(i, 3)).collect();
        gangs.push(compute(100, 2));
        gangs.push(compute(101, 8));
        for one_by_one in [false, true] {
            let mut p = planner(&[4, 4]);
            let mut plan = Plan::default();
            if one_by_one {
                for k in 1..=gangs.len() {
                    plan = p.plan(&gangs[..k], TICK * k as u32);
                }
            } else {
                plan = p.plan(&gangs, Duration::ZERO);
            }
            assert_eq!(plan.homes.len(), n as usize, "n={n}: only memory-bound");
            assert!(!plan.homes.contains_key(&GangId(100)));
            assert!(!plan.homes.contains_key(&GangId(101)));
            assert_eq!(plan.dirty(), expected_dirty[n as usize], "n={n}: {plan:?}");
            assert_eq!(
                cost_of(p.domains(), &plan.homes, &gangs),
                oracle(p.domains(), &gangs)
            );
            let (a, b) = (
                threads_in(&plan, &gangs, DomainId(0)),
                threads_in(&plan, &gangs, DomainId(1)),
            );
            assert!(a.abs_diff(b) <= 3, "n={n}: balanced, got {a} and {b}");
            assert!(plan.oversized.is_empty());
            check_reasons(&plan);
        }
    }
}

#[test]
fn first_choices_follow_the_rules() {
    let mut p = planner(&[4, 4, 4]);
    // Two gangs in Empty domains, then a third Empty domain is taken.
    let mut gangs = vec![mem(1, 2), mem(2, 2), mem(3, 1)];
    let plan = p.plan(&gangs, Duration::ZERO);
    assert_eq!(plan.dirty(), 0);
    assert!(plan.reasons.values().all(|r| matches!(
        r,
        Reason::New(Placement {
            was: DomainState::Empty,
            fits: true
        })
    )));
    // No Empty domain left: joins the least loaded Clean domain (gang 3's).
    gangs.push(mem(4, 1));
    let plan = p.plan(&gangs, TICK);
    assert_eq!(plan.homes[&GangId(4)], plan.homes[&GangId(3)]);
    assert_eq!(
        plan.reasons[&GangId(4)],
        Reason::New(Placement {
            was: DomainState::Clean,
            fits: true
        })
    );
    // A Dirty domain that fits is joined rather than dirtying another.
    gangs.push(mem(5, 1));
    let plan = p.plan(&gangs, TICK * 2);
    assert_eq!(plan.homes[&GangId(5)], plan.homes[&GangId(3)]);
    assert_eq!(plan.dirty(), 1);
    check_reasons(&plan);
}

#[test]
fn empty_domains_are_best_fit() {
    // The small gang takes the small domain, leaving the big one whole.
    let mut p = planner(&[8, 2]);
    let plan = p.plan(&[mem(1, 2)], Duration::ZERO);
    assert_eq!(plan.homes[&GangId(1)], DomainId(1));
    let plan = p.plan(&[mem(1, 2), mem(2, 7)], TICK);
    assert_eq!(plan.homes[&GangId(2)], DomainId(0));
    assert_eq!(plan.dirty(), 0);
    assert!(plan.oversized.is_empty());
}

#[test]
fn random_small_mixes_reach_the_least_cost() {
    let mut rng = Rng::new(1);
    for case in 0..300 {
        let n_dom = 1 + rng.below(3) as usize;
        let cpus: Vec<u32> = (0..n_dom).map(|_| 2 * (1 + rng.below(4) as u32)).collect();
        let n_gang = rng.below(6);
        let gangs: Vec<Gang> = (0..n_gang)
            .map(|i| {
                if rng.below(4) == 0 {
                    compute(i, 1 + rng.below(8) as u32)
                } else {
                    mem(i, 1 + rng.below(8) as u32)
                }
            })
            .collect();
        let mut p = planner(&cpus);
        let mut now = Duration::ZERO;
        let mut plan = p.plan(&gangs, now);
        for _ in 0..20 {
            now += DWELL;
            plan = p.plan(&gangs, now);
        }
        let best = oracle(p.domains(), &gangs);
        let got = cost_of(p.domains(), &plan.homes, &gangs);
        // Single moves can get stuck where only a swap helps, so demand
        // the optimum on what matters most: threads that fit, then Dirty.
        assert_eq!(
            (got.excess, got.dirty),
            (best.excess, best.dirty),
            "case {case}: cpus {cpus:?} gangs {gangs:?} plan {plan:?}"
        );
        let settled = p.plan(&gangs, now + DWELL);
        assert_eq!(settled.homes, plan.homes, "case {case}: settled");
        check_reasons(&plan);
    }
}

#[test]
fn more_gangs_than_domains_minimal_dirty_and_nothing_starves() {
    for n in 3..=8u64 {
        let gangs: Vec<Gang> = (1..=n).map(|i| mem(i, 3)).collect();
        let mut p = planner(&[4, 4]);
        let mut plan = Plan::default();
        for k in 1..=gangs.len() {
            plan = p.plan(&gangs[..k], TICK * k as u32);
        }
        assert_eq!(plan.homes.len(), n as usize, "every gang has a home");
        let best = oracle(p.domains(), &gangs);
        assert_eq!(cost_of(p.domains(), &plan.homes, &gangs), best, "n={n}");
        let expected_dirty = if n == 3 { 1 } else { 2 };
        assert_eq!(plan.dirty(), expected_dirty, "n={n}");
        let (a, b) = (
            threads_in(&plan, &gangs, DomainId(0)),
            threads_in(&plan, &gangs, DomainId(1)),
        );
        assert!(a.abs_diff(b) <= 3, "n={n}: no domain starves: {a} vs {b}");
    }
}

#[test]
fn a_gang_bigger_than_any_domain() {
    let mut p = planner(&[4, 8, 6]);
    let plan = p.plan(&[mem(1, 12)], Duration::ZERO);
    assert_eq!(plan.homes[&GangId(1)], DomainId(1), "the largest domain");
    assert!(plan.oversized.contains(&GangId(1)));
    assert_eq!(plan.states[&DomainId(1)], DomainState::Clean);
    assert!(plan.explain(GangId(1)).unwrap().contains("oversized"));
    // It counts for its domain: the next gangs go elsewhere, no Dirty.
    let gangs = [mem(1, 12), mem(2, 4), mem(3, 3)];
    let plan = p.plan(&gangs, TICK);
    assert_eq!(plan.dirty(), 0);
    assert_ne!(plan.homes[&GangId(2)], DomainId(1));
    assert_ne!(plan.homes[&GangId(3)], DomainId(1));
    assert_eq!(plan.oversized.len(), 1);
    // Two oversized gangs on two equal domains: one each.
    let mut p = planner(&[4, 4]);
    let plan = p.plan(&[mem(1, 9), mem(2, 9)], Duration::ZERO);
    assert_ne!(plan.homes[&GangId(1)], plan.homes[&GangId(2)]);
    assert_eq!(plan.oversized.len(), 2);
}

#[test]
fn leaving_frees_the_domain_at_once() {
    let mut p = planner(&[4, 4]);
    let plan = p.plan(&[mem(1, 3), mem(2, 3)], Duration::ZERO);
    let home2 = plan.homes[&GangId(2)];
    let plan = p.plan(&[mem(1, 3), compute(2, 3)], TICK);
    assert_eq!(plan.states[&home2], DomainState::Empty, "became compute");
    assert!(!plan.homes.contains_key(&GangId(2)));
    let plan = p.plan(&[mem(1, 3), mem(3, 3)], TICK * 2);
    assert_eq!(plan.homes[&GangId(3)], home2, "taken by a new gang at once");
    assert_eq!(plan.dirty(), 0);
}

#[test]
fn dirty_is_fixed_only_after_the_dwell() {
    let mut p = planner(&[4, 4]);
    // Three gangs: one domain Dirty. Then the lone one leaves.
    let gangs = [mem(1, 2), mem(2, 2), mem(3, 2)];
    let plan = p.plan(&gangs, Duration::ZERO);
    assert_eq!(plan.dirty(), 1);
    let lone = *[1, 2, 3]
        .iter()
        .find(|&&g| plan.states[&plan.homes[&GangId(g)]] == DomainState::Clean)
        .unwrap();
    let rest: Vec<Gang> = gangs.iter().copied().filter(|g| g.id.0 != lone).collect();
    let before = plan.homes.clone();
    let t = DWELL / 2;
    let plan = p.plan(&rest, t);
    assert_eq!(plan.dirty(), 1, "not dwelt yet: kept");
    assert!(rest.iter().all(|g| plan.homes[&g.id] == before[&g.id]));
    assert!(rest
        .iter()
        .all(|g| matches!(plan.reasons[&g.id], Reason::Waiting { .. })));
    let plan = p.plan(&rest, DWELL);
    assert_eq!(plan.dirty(), 0, "dwelt: one gang moves out");
    let moved: Vec<_> = rest
        .iter()
        .filter(|g| plan.homes[&g.id] != before[&g.id])
        .collect();
    assert_eq!(moved.len(), 1);
    assert!(matches!(
        plan.reasons[&moved[0].id],
        Reason::Moved {
            gain: Gain::FewerDirty,
            ..
        }
    ));
    check_reasons(&plan);
}

#[test]
fn hotplug_rehomes_only_gangs_of_vanished_domains() {
    let mut p = planner(&[4, 4, 4, 4]);
    let gangs = [mem(1, 3), mem(2, 3), mem(3, 3)];
    let plan = p.plan(&gangs, Duration::ZERO);
    assert_eq!(plan.dirty(), 0);
    let victim = plan.homes[&GangId(2)];
    let mut doms = domains(&[4, 4, 4, 4]);
    doms.retain(|d| d.id != victim);
    p.set_domains(doms.clone());
    assert_eq!(p.home(GangId(2)), None);
    let after = p.plan(&gangs, TICK);
    for g in [1, 3] {
        assert_eq!(after.homes[&GangId(g)], plan.homes[&GangId(g)]);
        assert!(matches!(after.reasons[&GangId(g)], Reason::Kept { .. }));
    }
    assert_ne!(after.homes[&GangId(2)], victim);
    assert_eq!(after.dirty(), 0, "the Empty domain left is used");
    assert!(matches!(
        after.reasons[&GangId(2)],
        Reason::Rehomed { from, .. } if from == victim
    ));
    assert!(!after.states.contains_key(&victim));
    // A domain whose CPUs all went offline counts as gone.
    let last = after.homes[&GangId(3)];
    for d in doms.iter_mut().filter(|d| d.id == last) {
        d.cpus = 0;
    }
    p.set_domains(doms);
    let again = p.plan(&gangs, TICK * 2);
    assert_ne!(again.homes[&GangId(3)], last);
    assert_eq!(again.homes[&GangId(1)], after.homes[&GangId(1)]);
    assert_eq!(again.homes[&GangId(2)], after.homes[&GangId(2)]);
    // No domain at all: no homes, no panic; back again: homes again.
    p.set_domains(Vec::new());
    assert!(p.plan(&gangs, TICK * 3).homes.is_empty());
    p.set_domains(domains(&[4]));
    let plan = p.plan(&gangs, TICK * 4);
    assert_eq!(plan.homes.len(), 3);
    assert!(matches!(plan.reasons[&GangId(1)], Reason::Rehomed { .. }));
}

#[test]
fn churn_is_damped_and_settles_to_the_optimum() {
    let doms = [4, 4];
    let mut p = planner(&doms);
    let mut rng = Rng::new(2);
    let mut live: Vec<Gang> = Vec::new();
    let mut next_id = 1u64;
    let mut now = Duration::ZERO;
    let mut prev: BTreeMap<GangId, DomainId> = BTreeMap::new();
    let mut last_change: BTreeMap<GangId, Duration> = BTreeMap::new();
    let (mut moves, mut departures) = (0usize, 0usize);
    for _ in 0..1000 {
        now += TICK;
        // One arrival or departure per tick, 0..=5 memory-bound gangs.
        let mems = live.iter().filter(|g| g.memory_bound).count();
        if live.is_empty() || (rng.below(2) == 0 && mems < 5) {
            let g = if rng.below(4) == 0 {
                compute(next_id, 2)
            } else {
                mem(next_id, 3)
            };
            live.push(g);
            next_id += 1;
        } else {
            let i = rng.below(live.len() as u64) as usize;
            if live[i].memory_bound {
                departures += 1;
            }
            live.remove(i);
        }
        rng.shuffle(&mut live);
        let plan = p.plan(&live, now);
        // Input order is irrelevant.
        let mut sorted = live.clone();
        sorted.sort_by_key(|g| g.id);
        assert_eq!(p.clone().plan(&sorted, now).homes, plan.homes);
        check_reasons(&plan);
        let mut out = BTreeMap::new();
        let mut into = BTreeMap::new();
        for (g, d) in &plan.homes {
            match prev.get(g) {
                Some(old) if old != d => {
                    moves += 1;
                    let since = last_change.get(g).copied().unwrap_or_default();
                    assert!(now - since >= DWELL, "gang {g:?} moved before its dwell");
                    *out.entry(*old).or_insert(0) += 1;
                    *into.entry(*d).or_insert(0) += 1;
                    last_change.insert(*g, now);
                }
                Some(_) => {}
                None => {
                    last_change.insert(*g, now);
                }
            }
        }
        assert!(
            out.values().chain(into.values()).all(|&n| n <= 1),
            "one move per domain"
        );
        prev = plan.homes;
    }
    // Every move was made possible by a departure (arrivals never need one).
    assert!(
        moves <= departures,
        "{moves} moves for {departures} departures"
    );
    assert!(
        moves > 0,
        "the churn did need moves (or the test is vacuous)"
    );

    // Churn stops: within min_dwell (plus one plan per domain) the plan is
    // optimal, and then it stays put.
    let stop = now;
    let mut plan = Plan::default();
    while now < stop + DWELL + TICK * doms.len() as u32 {
        now += TICK;
        plan = p.plan(&live, now);
    }
    let best = oracle(p.domains(), &live);
    assert_eq!(cost_of(p.domains(), &plan.homes, &live), best);
    let mems = live.iter().filter(|g| g.memory_bound).count();
    assert_eq!(plan.dirty() == 0, mems <= doms.len());
    for _ in 0..50 {
        now += TICK;
        assert_eq!(p.plan(&live, now).homes, plan.homes, "settled");
    }
}

#[test]
fn observer_states_count_spread_gangs_per_domain() {
    let doms = domains(&[4, 4, 4]);
    let gangs = [mem(1, 4), mem(2, 4), compute(3, 4)];
    let observed = [
        (GangId(1), DomainId(0)),
        (GangId(1), DomainId(1)),
        (GangId(2), DomainId(1)),
        (GangId(3), DomainId(2)),
        (GangId(2), DomainId(9)),
    ];
    let s = states(&doms, observed, &gangs);
    assert_eq!(s[&DomainId(0)], DomainState::Clean);
    assert_eq!(s[&DomainId(1)], DomainState::Dirty);
    assert_eq!(
        s[&DomainId(2)],
        DomainState::Empty,
        "compute gangs do not count"
    );
    assert_eq!(s.len(), 3);
    // The planner's own states agree with the observer's.
    let mut p = Planner::new(doms.clone(), Settings::default());
    let plan = p.plan(
        &[mem(1, 2), mem(2, 2), mem(4, 2), mem(5, 2)],
        Duration::ZERO,
    );
    let gangs = [mem(1, 2), mem(2, 2), mem(4, 2), mem(5, 2)];
    let observed = states(&doms, plan.homes.iter().map(|(g, d)| (*g, *d)), &gangs);
    assert_eq!(observed, plan.states);
}

#[test]
fn duplicate_ids_count_once() {
    let mut p = planner(&[4, 4]);
    let plan = p.plan(
        &[mem(1, 3), mem(1, 3), compute(2, 1), mem(2, 3)],
        Duration::ZERO,
    );
    assert_eq!(plan.homes.len(), 1);
    assert_eq!(plan.dirty(), 0);
}

#[test]
fn new_domains_are_used_one_move_per_domain_per_plan() {
    // All three gangs share the only domain; then two more come online.
    let mut p = planner(&[8]);
    let gangs = [mem(1, 2), mem(2, 2), mem(3, 2)];
    let plan = p.plan(&gangs, Duration::ZERO);
    assert_eq!(plan.dirty(), 1);
    p.set_domains(domains(&[8, 8, 8]));
    let plan = p.plan(&gangs, DWELL / 2);
    assert_eq!(plan.homes.values().filter(|d| d.0 == 0).count(), 3, "dwell");
    // Dwelt: only one gang leaves domain 0 in this plan (less crowded,
    // still Dirty), the second in the next one (no Dirty left).
    let plan = p.plan(&gangs, DWELL);
    assert_eq!(plan.homes.values().filter(|d| d.0 == 0).count(), 2);
    assert_eq!(plan.dirty(), 1);
    let first = plan.reasons.values().filter(|r| {
        matches!(
            r,
            Reason::Moved {
                gain: Gain::LessCrowded,
                ..
            }
        )
    });
    assert_eq!(first.count(), 1);
    let plan = p.plan(&gangs, DWELL + TICK);
    assert_eq!(plan.dirty(), 0);
    assert_eq!(
        plan.states
            .values()
            .filter(|s| **s == DomainState::Clean)
            .count(),
        3
    );
}

#[test]
fn overload_is_balanced_when_every_domain_is_overloaded() {
    // Six gangs of 3 threads on one 4-CPU domain; a second domain appears.
    let mut p = planner(&[4]);
    let gangs: Vec<Gang> = (1..=6).map(|i| mem(i, 3)).collect();
    p.plan(&gangs, Duration::ZERO);
    p.set_domains(domains(&[4, 4]));
    let mut now = Duration::ZERO;
    let mut plan = Plan::default();
    let mut gains = Vec::new();
    for _ in 0..10 {
        now += DWELL;
        plan = p.plan(&gangs, now);
        gains.extend(plan.reasons.values().filter_map(|r| match r {
            Reason::Moved { gain, .. } => Some(*gain),
            _ => None,
        }));
    }
    assert_eq!(threads_in(&plan, &gangs, DomainId(0)), 9);
    assert_eq!(threads_in(&plan, &gangs, DomainId(1)), 9);
    assert_eq!(gains.last(), Some(&Gain::Balance), "{gains:?}");
    assert_eq!(
        cost_of(p.domains(), &plan.homes, &gangs),
        oracle(p.domains(), &gangs)
    );
}

#[test]
fn adopted_provisional_homes_are_confirmed_or_moved_at_once() {
    let mut p = planner(&[4, 4, 4]);
    // BPF put gang 1 in domain 1 and, racing, gang 2 there too: the first
    // is confirmed; the second is not adopted (domain 1 would turn Dirty
    // while domains 0 and 2 are Empty) and is placed as new.
    p.adopt(GangId(1), DomainId(1), Duration::ZERO);
    p.adopt(GangId(2), DomainId(1), Duration::ZERO);
    let plan = p.plan(&[mem(1, 3), mem(2, 3)], Duration::ZERO);
    assert_eq!(plan.dirty(), 0);
    assert_eq!(plan.homes[&GangId(1)], DomainId(1), "{plan:?}");
    assert_ne!(plan.homes[&GangId(2)], DomainId(1));
    assert!(
        matches!(plan.reasons[&GangId(1)], Reason::Confirmed { .. }),
        "{plan:?}"
    );
    assert!(
        matches!(plan.reasons[&GangId(2)], Reason::New(_)),
        "{plan:?}"
    );
    check_reasons(&plan);
    // A gang with a home, or an unknown domain, is not adopted.
    p.adopt(GangId(1), DomainId(0), TICK);
    p.adopt(GangId(3), DomainId(9), TICK);
    let plan = p.plan(&[mem(1, 3), mem(2, 3)], TICK);
    assert_eq!(plan.homes[&GangId(1)], DomainId(1));
    assert!(!plan.homes.contains_key(&GangId(3)));
    assert!(plan.explain(GangId(1)).unwrap().contains("home domain 1"));

    // With no domain Empty a Dirty adoption stands; an adopted gang moves
    // at once (no dwell) when one move improves the plan: here two gangs of
    // 3 threads in one domain of 4 CPUs, the other domain holding 1 thread.
    let mut q = planner(&[4, 4]);
    q.adopt(GangId(1), DomainId(0), Duration::ZERO);
    q.adopt(GangId(2), DomainId(1), Duration::ZERO);
    q.adopt(GangId(3), DomainId(1), Duration::ZERO);
    let plan = q.plan(&[mem(1, 1), mem(2, 3), mem(3, 3)], Duration::ZERO);
    assert!(
        [2, 3].iter().any(|g| matches!(
            plan.reasons[&GangId(*g)],
            Reason::Moved {
                gain: Gain::LessExcess,
                ..
            }
        )),
        "{plan:?}"
    );
    assert_eq!(
        threads_in(&plan, &[mem(1, 1), mem(2, 3), mem(3, 3)], DomainId(1)),
        3
    );
    check_reasons(&plan);
}
