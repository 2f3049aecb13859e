use super::*;
use crate::replay::{parse, run, Decision, SHIPPED};
use crate::thresholds::Thresholds;

fn shipped(name: &str) -> Vec<replay::Record> {
    let text = SHIPPED.iter().find(|(n, _)| *n == name).unwrap().1;
    parse(text, name).unwrap()
}

fn decisions(name: &str) -> (Vec<Decision>, Classifier<String>) {
    run(&shipped(name), Thresholds::default()).unwrap()
}

fn changes_of(d: &[Decision], task: &str) -> Vec<(u64, Class)> {
    d.iter()
        .filter(|d| d.task == task)
        .map(|d| (d.period, d.transition.to))
        .collect()
}

/// The dwell is 3 periods: a steady task is classed at its third period
/// (period 2), and never changes again, outliers and all.
#[test]
fn steady_tasks_are_classed_after_the_dwell_and_stay() {
    let (d, c) = decisions("compute");
    assert_eq!(changes_of(&d, "idiv"), vec![(2, Class::Compute)]);
    assert_eq!(changes_of(&d, "matmul"), vec![(2, Class::Compute)]);
    let (d, c2) = decisions("pm-writer");
    assert_eq!(changes_of(&d, "pmw-a"), vec![(2, Class::PmWriter)]);
    // Its stall dips between the leave and the enter threshold: it stays.
    assert_eq!(changes_of(&d, "pmw-b"), vec![(2, Class::PmWriter)]);
    let (d, c3) = decisions("memory-streamer");
    assert_eq!(changes_of(&d, "stream"), vec![(2, Class::MemoryBound)]);
    assert_eq!(c.class_of(&"idiv".to_string()), Class::Compute);
    assert_eq!(c2.class_of(&"pmw-b".to_string()), Class::PmWriter);
    assert_eq!(c3.class_of(&"stream".to_string()), Class::MemoryBound);
}

#[test]
fn a_phase_change_is_followed_within_the_dwell() {
    let (d, _) = decisions("phase-change");
    assert_eq!(
        changes_of(&d, "phases"),
        vec![
            (2, Class::Compute),
            (12, Class::PmWriter),
            (22, Class::Compute)
        ]
    );
}

#[test]
fn one_odd_period_does_not_flap_the_class() {
    let mut c = Classifier::new(Thresholds::default()).unwrap();
    let compute = Counters {
        cycles: 1_000_000,
        instructions: 800_000,
        llc_misses: Some(100),
        stall_cycles: Some(100_000),
        stores: Some(1_000),
    };
    let pm = Counters {
        llc_misses: Some(30_000),
        stall_cycles: Some(800_000),
        stores: Some(200_000),
        ..compute
    };
    let task = 7u32;
    let mut changes = 0;
    // Two pm-like periods in every three never make a dwell of three.
    for i in 0..30 {
        let counters = if i >= 3 && i % 3 != 0 { pm } else { compute };
        changes += usize::from(c.observe(&task, &counters).is_some());
    }
    assert_eq!(c.class_of(&task), Class::Compute);
    assert_eq!(changes, 1, "only the first classification");
    assert_eq!(c.census()[1], (Class::Compute, 1));
    c.forget(&task);
    assert_eq!(c.class_of(&task), Class::Unknown);
}

#[test]
fn missing_events_degrade_to_what_is_counted() {
    let t = Thresholds::default();
    // Only cycles and instructions: CPI decides compute; nothing can be
    // a PM writer or memory-bound.
    let generic = Counters {
        cycles: 1_000_000,
        instructions: 1_000_000,
        ..Default::default()
    };
    let f = generic.features(t.min_instructions.min(1000)).unwrap();
    assert!(t.is_compute(&f, thresholds::Side::Enter));
    assert!(!t.is_pm_writer(&f, thresholds::Side::Enter));
    assert!(!t.is_memory_bound(&f, thresholds::Side::Enter));
    let slow = Counters {
        cycles: 5_000_000,
        ..generic
    };
    let f = slow.features(1000).unwrap();
    assert!(!t.is_compute(&f, thresholds::Side::Enter));
    // A period in which the task hardly ran says nothing.
    assert_eq!(generic.features(2_000_000), None);
}

#[test]
fn multiplexed_counts_are_scaled_up() {
    let c = Counters {
        cycles: 100,
        instructions: 50,
        llc_misses: Some(10),
        stall_cycles: None,
        stores: Some(4),
    };
    let s = c.scaled(400, 100);
    assert_eq!(
        (s.cycles, s.instructions, s.llc_misses),
        (400, 200, Some(40))
    );
    assert_eq!((s.stall_cycles, s.stores), (None, Some(16)));
    assert_eq!(c.scaled(100, 100), c);
    assert_eq!(c.scaled(100, 0), Counters::default());
}

#[test]
fn bad_streams_name_the_line_and_field() {
    let err = |text: &str| format!("{:#}", parse(text, "s.csv").unwrap_err());
    let e = err("period,task,cycles,instructions\n0,a,12x,5\n");
    assert!(
        e.contains("s.csv line 2") && e.contains("\"cycles\"") && e.contains("12x"),
        "{e}"
    );
    let e = err("period,task,cycles\n");
    assert!(e.contains("no \"instructions\" column"), "{e}");
    let e = err("period,task,cycles,instructions,flushes\n");
    assert!(e.contains("unknown column \"flushes\""), "{e}");
    let e = err("# c\n\nperiod,task,cycles,instructions\n0,a,1\n");
    assert!(
        e.contains("line 4") && e.contains("3 fields where the header has 4"),
        "{e}"
    );
    let e = err("period,task,cycles,instructions,enabled_ns\n0,a,1,1,5\n");
    assert!(e.contains("enabled_ns and running_ns go together"), "{e}");
    let e = err("period,task,cycles,instructions\n0,,1,1\n");
    assert!(e.contains("\"task\" is empty"), "{e}");
    assert!(err("").contains("no header"));
    // Empty optional fields are events the CPU does not count.
    let r = parse(
        "period,task,cycles,instructions,stores\n3,a,10,5,\n",
        "ok.csv",
    )
    .unwrap();
    assert_eq!(r[0].counters.stores, None);
    assert_eq!(r[0].period, 3);
}

#[test]
fn unknown_class_names_list_the_valid_ones() {
    let e = "pm_writer".parse::<Class>().unwrap_err().to_string();
    assert!(
        e.contains("pm_writer") && e.contains("compute, pm-writer, memory-bound"),
        "{e}"
    );
    for c in Class::ALL {
        assert_eq!(c.name().parse::<Class>().unwrap(), c);
    }
}

#[test]
fn thresholds_that_would_flap_or_mean_nothing_are_refused_by_name() {
    let bad = |edit: &str| {
        let t: Thresholds = toml::from_str(edit).unwrap();
        format!("{:#}", t.validate().unwrap_err())
    };
    let e = bad("pm_stall_leave = 0.5");
    assert!(e.contains("classify.pm_stall_leave must be looser"), "{e}");
    let e = bad("pm_stall_enter = 1.5");
    assert!(e.contains("classify.pm_stall_enter = 1.5"), "{e}");
    let e = bad("memory_mpki_enter = -1.0");
    assert!(e.contains("classify.memory_mpki_enter = -1"), "{e}");
    assert!(bad("dwell_periods = 0").contains("dwell_periods"));
    assert!(toml::from_str::<Thresholds>("pm_stall = 0.4").is_err());
    assert!(Thresholds::default().validate().is_ok());
    assert!(Classifier::<u32>::new(toml::from_str("compute_cpi_leave = 1.0").unwrap()).is_err());
}

#[test]
fn a_class_tested_first_takes_over_while_the_current_one_still_holds() {
    let mut c = Classifier::new(Thresholds::default()).unwrap();
    let memory = Counters {
        cycles: 3_000_000,
        instructions: 1_000_000,
        llc_misses: Some(20_000),
        stall_cycles: Some(2_000_000),
        stores: Some(5_000),
    };
    // Starts writing persistent memory: still misses the LLC.
    let pm = Counters {
        stores: Some(200_000),
        ..memory
    };
    let task = 1u32;
    for _ in 0..3 {
        c.observe(&task, &memory);
    }
    assert_eq!(c.class_of(&task), Class::MemoryBound);
    let changes: Vec<_> = (0..3).filter_map(|_| c.observe(&task, &pm)).collect();
    assert_eq!(
        changes,
        vec![Transition {
            from: Class::MemoryBound,
            to: Class::PmWriter
        }]
    );
}

#[test]
fn running_sums_become_per_period_deltas() {
    let mut d = Deltas::default();
    let open = [true, true, true, false, false];
    let first = d.take(7, 100, [10, 20, 3, 0, 0], open);
    assert_eq!((first.cycles, first.instructions), (10, 20));
    assert_eq!((first.llc_misses, first.stall_cycles), (Some(3), None));
    let next = d.take(7, 100, [15, 40, 3, 0, 0], open);
    assert_eq!(
        (next.cycles, next.instructions, next.llc_misses),
        (5, 20, Some(0))
    );
    // The ID now belongs to a new thread: its sums count whole.
    let reused = d.take(7, 999, [4, 8, 1, 0, 0], open);
    assert_eq!((reused.cycles, reused.instructions), (4, 8));
    // A sum that went backwards restarted: it counts from 0.
    let restarted = d.take(7, 999, [2, 9, 1, 0, 0], open);
    assert_eq!((restarted.cycles, restarted.instructions), (2, 1));
    d.forget(7);
    assert_eq!(d.take(7, 999, [3, 10, 1, 0, 0], open).cycles, 3);
    let features = next.features(1).unwrap();
    assert_eq!(
        features.to_string(),
        "cpi=0.25 llc_mpki=0.0 stall=- stores_pki=-"
    );
}

#[test]
fn recorded_rows_parse_back_whatever_the_task_calls_itself() {
    let counters = Counters {
        cycles: 9,
        instructions: 4,
        llc_misses: Some(1),
        stall_cycles: None,
        stores: Some(0),
    };
    let text = [
        replay::HEADER.to_string(),
        replay::row(3, "a,b\nc 42", &counters),
        replay::row(4, " ", &counters),
    ]
    .join("\n");
    let records = parse(&text, "recorded").unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].task, "a_b_c 42");
    assert_eq!((records[0].period, records[0].counters), (3, counters));
    assert_eq!(records[1].task, "_");
}
