use super::*;

fn switch(ts: &str, cpu: u32, prev: (&str, u32, &str), next: (&str, u32, i32)) -> String {
    format!(
        "  {}-{} [{cpu:03}] d..2. {ts}: sched_switch: prev_comm={} prev_pid={} \
         prev_prio=120 prev_state={} ==> next_comm={} next_pid={} next_prio={}",
        prev.0, prev.1, prev.0, prev.1, prev.2, next.0, next.1, next.2
    )
}

fn wakeup(ts: &str, comm: &str, pid: u32) -> String {
    format!(
        "  kworker/u16:1-55 [000] d..3. {ts}: sched_wakeup: comm={comm} pid={pid} \
         prio=120 target_cpu=001"
    )
}

fn book(lines: &[String]) -> WaitBook {
    book_from_text(&lines.join("\n"))
}

#[test]
fn lines_parse_whatever_the_comm_holds() {
    let line = switch("100.000100", 1, ("my task-x", 7, "R+"), ("a b-c", 42, 120));
    assert_eq!(
        parse_line(&line),
        Some(Event::Switch {
            ts_ns: 100_000_100_000,
            cpu: 1,
            prev_pid: 7,
            prev_comm: "my task-x",
            prev_runnable: true,
            next_pid: 42,
            next_comm: "a b-c",
            next_prio: 120,
        })
    );
    let new = "sh-9 [002] ..... 5.5: sched_wakeup_new: comm=sh pid=10 prio=120 target_cpu=002";
    assert_eq!(
        parse_line(new),
        Some(Event::Wakeup {
            ts_ns: 5_500_000_000,
            cpu: 2,
            pid: 10,
            comm: "sh",
            target_cpu: Some(2),
            waker_pid: Some(9),
        })
    );
    assert_eq!(parse_line("CPU:3 [LOST 17 EVENTS]"), Some(Event::Lost(17)));
    // task_rename with and without the pid older kernels print.
    for line in [
        "sky-work-12 [003] ..... 6.5: task_rename: pid=12 oldcomm=sky-work newcomm=pm writer oom_score_adj=0",
        "sky-work-12 [003] ..... 6.5: task_rename: oldcomm=sky-work newcomm=pm writer oom_score_adj=0",
    ] {
        assert_eq!(
            parse_line(line),
            Some(Event::Rename {
                ts_ns: 6_500_000_000,
                cpu: 3,
                comm: "pm writer"
            }),
            "{line}"
        );
    }
    assert_eq!(
        parse_line("<idle>-0 [001] d.h1. 7.25: local_timer_entry: vector=236"),
        Some(Event::Tick {
            ts_ns: 7_250_000_000
        })
    );
    assert_eq!(
        parse_line("sh-9 [002] ..... 5.5: sched_migrate_task: pid=1"),
        None
    );
    assert_eq!(
        parse_line("sh-9 [002] ..... 5.x: sched_wakeup: comm=a pid=1"),
        None
    );
    assert_eq!(parse_line("garbage"), None);
}

#[test]
fn a_wait_runs_from_wakeup_or_preemption_to_switch_in() {
    let b = book(&[
        wakeup("100.000000", "hostile-pinned", 42),
        switch(
            "100.002000",
            1,
            ("swapper/1", 0, "R"),
            ("hostile-pinned", 42, 120),
        ),
        // Preempted while runnable: waits again until 100.009.
        switch(
            "100.004000",
            1,
            ("hostile-pinned", 42, "R+"),
            ("hog", 50, 120),
        ),
        switch(
            "100.009000",
            1,
            ("hog", 50, "S"),
            ("hostile-pinned", 42, 120),
        ),
        // The hog went to sleep (S): no wait for it.
        switch(
            "100.010000",
            1,
            ("hostile-pinned", 42, "S"),
            ("swapper/1", 0, 120),
        ),
    ]);
    assert_eq!(b.groups["hostile-pinned"].waits_us, vec![2000, 5000]);
    // Ran 2 ms, then 1 ms; the hog 5 ms.
    assert_eq!(
        b.placement.run_spread("hostile-pinned"),
        (3_000_000, 3_000_000, 1)
    );
    assert_eq!(b.placement.run_spread("hog"), (5_000_000, 5_000_000, 1));
    assert!(!b.groups.contains_key("hog"));
    assert!(b.open_waits().is_empty());
    assert!(complete(&b).is_ok());
}

#[test]
fn a_wakeup_of_a_running_task_starts_no_wait() {
    let b = book(&[
        switch("1.000000", 0, ("swapper/0", 0, "R"), ("t", 5, 120)),
        wakeup("1.001000", "t", 5),
        switch("1.003000", 0, ("t", 5, "S"), ("swapper/0", 0, 120)),
        wakeup("1.004000", "t", 5),
        switch("1.004500", 0, ("swapper/0", 0, "R"), ("t", 5, 120)),
    ]);
    assert_eq!(b.groups["t"].waits_us, vec![500]);
}

#[test]
fn a_task_moved_off_an_offlined_cpu_is_not_left_running_there() {
    let b = book(&[
        switch("1.0", 3, ("swapper/3", 0, "R"), ("t", 5, 120)),
        // CPU 3 goes offline: t is pushed off and runs on CPU 1.
        switch("1.1", 3, ("t", 5, "R"), ("migration/3", 20, 0)),
        switch("1.2", 1, ("swapper/1", 0, "R"), ("t", 5, 120)),
        switch("1.3", 1, ("t", 5, "S"), ("swapper/1", 0, 120)),
        wakeup("1.4", "t", 5),
        switch("1.45", 1, ("swapper/1", 0, "R"), ("t", 5, 120)),
    ]);
    assert_eq!(b.groups["t"].waits_us, vec![100_000, 50_000]);
}

#[test]
fn a_task_that_never_runs_again_is_reported_open() {
    let b = book(&[
        wakeup("1.0", "starved", 9),
        switch("3.5", 2, ("swapper/2", 0, "R"), ("other", 4, 120)),
    ]);
    assert!(b.groups.is_empty());
    assert_eq!(b.open_waits(), vec![(9, "starved", 2_500_000_000)]);
    let total = b.lines().pop().unwrap();
    assert!(
        total.contains("open_waits=1 open_max_us=2500000"),
        "{total}"
    );
}

#[test]
fn real_time_waits_are_counted_apart() {
    let b = book(&[
        wakeup("1.0", "fifo", 9),
        switch("1.5", 2, ("swapper/2", 0, "R"), ("fifo", 9, 49)),
    ]);
    assert!(b.groups.is_empty());
    assert_eq!(b.rt_waits, 1);
}

#[test]
fn a_trace_that_lost_events_is_refused() {
    let mut b = book(&[wakeup("1.0", "t", 9), "CPU:1 [LOST 3 EVENTS]".to_string()]);
    assert!(complete(&b)
        .unwrap_err()
        .to_string()
        .contains("lost 3 events"));
    b.lost_events = 0;
    assert!(complete(&b).is_ok());
    assert!(complete(&WaitBook::default()).is_err());
}

#[test]
fn groups_drop_cpu_and_instance_numbers() {
    assert_eq!(group_of("kworker/3:1H"), "kworker");
    assert_eq!(group_of("ksoftirqd/12"), "ksoftirqd");
    assert_eq!(group_of("hostile-pinned"), "hostile-pinned");
    assert_eq!(group_of("cc1plus2"), "cc1plus");
}

#[test]
fn lines_put_the_worst_group_first_with_its_quantiles() {
    let mut b = WaitBook::default();
    let g = b.groups.entry("a".into()).or_default();
    for (pid, us) in [(1, 10), (2, 30), (3, 20)] {
        g.add(pid, us * 1000, false);
    }
    b.groups.entry("b".into()).or_default().add(7, 99_000, true);
    let lines = b.lines();
    assert!(lines[0].contains("group=b waits=1"), "{lines:?}");
    assert!(lines[0].contains("max_clear_wait_us=0"), "{lines:?}");
    assert!(
        lines[1].contains(
            "group=a waits=3 p50_wait_us=20 p99_wait_us=30 max_wait_us=30 \
             max_clear_wait_us=30 worst_pid=2"
        ),
        "{lines:?}"
    );
    let total = lines.last().unwrap();
    assert!(total.contains("waits=4") && total.contains("max_wait_us=99"));
    assert!(total.contains("max_clear_wait_us=30"), "{lines:?}");
}

fn marker(ts: &str, text: &str) -> String {
    format!("  sh-300 [004] ..... {ts}: tracing_mark_write: {text}")
}

#[test]
fn waits_overlapping_a_hotplug_window_are_told_apart() {
    let b = book(&[
        wakeup("1.000", "a", 1),
        marker("1.010", HOTPLUG_BEGIN),
        wakeup("1.015", "b", 2),
        switch("1.020", 0, ("swapper/0", 0, "R"), ("a", 1, 120)),
        marker("1.030", HOTPLUG_END),
        // b started waiting inside the window: still affected.
        switch("1.040", 1, ("swapper/1", 0, "R"), ("b", 2, 120)),
        // c waits after the window: clear.
        wakeup("1.050", "c", 3),
        switch("1.055", 2, ("swapper/2", 0, "R"), ("c", 3, 120)),
    ]);
    assert_eq!(b.groups["a"].max_clear_us, 0);
    assert_eq!(b.groups["b"].max_clear_us, 0);
    assert_eq!(b.groups["c"].max_clear_us, 5000);
    let worst: Vec<_> = b.worst.iter().map(|w| (w.pid, w.during_hotplug)).collect();
    assert_eq!(worst, vec![(2, true), (1, true), (3, false)]);
}

#[test]
fn only_the_longest_waits_are_kept_in_order() {
    let mut lines = Vec::new();
    for pid in 1..=15u32 {
        lines.push(wakeup("1.000000", "t", pid));
        lines.push(switch(
            &format!("1.{:06}", pid * 10),
            0,
            ("swapper/0", 0, "R"),
            ("t", pid, 120),
        ));
        lines.push(switch("1.5", 0, ("t", pid, "S"), ("swapper/0", 0, 120)));
    }
    let b = book(&lines);
    let pids: Vec<u32> = b.worst.iter().map(|w| w.pid).collect();
    assert_eq!(pids, (6..=15).rev().collect::<Vec<_>>());
}

#[test]
fn a_silence_of_every_cpu_inside_a_wait_is_reported() {
    let b = book(&[
        wakeup("1.000", "t", 1),
        switch("1.001", 0, ("swapper/0", 0, "R"), ("u", 2, 120)),
        // Ticks, then nothing anywhere for 20 ms.
        "<idle>-0 [001] d.h1. 1.004: local_timer_entry: vector=236".to_string(),
        "<idle>-0 [002] d.h1. 1.008: local_timer_entry: vector=236".to_string(),
        switch("1.028", 1, ("swapper/1", 0, "R"), ("v", 3, 120)),
        switch("1.029", 0, ("u", 2, "S"), ("t", 1, 120)),
    ]);
    assert_eq!(b.worst[0].pid, 1);
    assert_eq!(b.worst[0].machine_gap_ns, 20_000_000);
    assert_eq!(b.worst[0].wait_ns, 29_000_000);
}

#[test]
fn reschedule_ipis_are_timed_from_send_to_entry() {
    let b = book_from_text(
        "sh-1 [000] d..1. 2.000: ipi_send_cpu: cpu=3 callsite=resched_curr+0x5c/0xc0 callback=0x0\n\
         sh-1 [001] d..1. 2.001: ipi_send_cpu: cpu=3 callsite=resched_curr+0x5c/0xc0 callback=0x0\n\
         sh-1 [000] d..1. 2.002: ipi_send_cpu: cpu=2 callsite=x+0x1/0x2 callback=do_sync_core+0x0/0x30\n\
         <idle>-0 [003] d.h1. 2.007: reschedule_entry: vector=253\n\
         <idle>-0 [002] d.h1. 2.008: reschedule_entry: vector=253\n",
    );
    // The first send to CPU 3 counts; CPU 2's IPI carried a callback.
    assert_eq!(b.resched.waits_us, vec![7000]);
    assert!(b
        .lines()
        .iter()
        .any(|l| l.contains("resched_ipis=1 ") && l.contains("max_ipi_us=7000")));
}

#[test]
fn a_task_that_may_have_been_running_since_before_the_trace_is_not_open() {
    let mut b = WaitBook::expecting(2);
    // CPU 1 has not switched yet: pid 7 may be running there.
    for line in [
        switch("1.0", 0, ("swapper/0", 0, "R"), ("a", 5, 120)),
        wakeup("1.1", "b", 7),
        switch("1.2", 1, ("swapper/1", 0, "R"), ("c", 8, 120)),
        // Now every CPU has switched: this wait is certain.
        wakeup("1.3", "d", 9),
        switch("2.0", 0, ("a", 5, "S"), ("swapper/0", 0, 120)),
    ] {
        b.feed(parse_line(&line).unwrap());
    }
    assert_eq!(b.open_waits(), vec![(9, "d", 700_000_000)]);
}

#[test]
fn absurd_timestamps_are_not_events() {
    assert_eq!(
        parse_line("sh-9 [002] ..... 99999999999999999999.5: sched_wakeup: comm=a pid=1 prio=1"),
        None
    );
    assert_eq!(
        parse_line("sh-9 [002] ..... 18446744073.9: sched_wakeup: comm=a pid=1 prio=1"),
        None
    );
}

#[test]
fn slow_wakeups_are_explained_and_preempted_tasks_are_not_wakeups() {
    let lines = [
        // ping (pid 9) woken from CPU 0 for CPU 1, runs there 20 ms later
        // after the hog.
        wakeup("1.000000", "ping", 9),
        switch("1.020000", 1, ("burn", 4, "R"), ("ping", 9, 120)),
        // The hog was preempted (runnable), not woken: it runs again on
        // CPU 2 much later, and is no slow wakeup.
        switch("1.090000", 2, ("swapper/2", 0, "R"), ("burn", 4, 120)),
    ];
    let b = book(&lines);
    let g = &b.slow_wakes.groups["ping"];
    assert_eq!((g.count, g.on_target, g.target_was_waker), (1, 1, 0));
    assert_eq!(g.behind["burn"], 1);
    assert!(!b.slow_wakes.groups.contains_key("burn"));
    assert!(
        b.lines().iter().any(
            |l| l.starts_with("result observer=trace slow_wakes group=ping over_ms=5 count=1 ")
        ),
        "{:?}",
        b.lines()
    );
}

#[test]
fn a_partner_ahead_on_the_cpu_while_another_idles_is_stacked() {
    let text = [
        // CPU 1 goes idle; CPU 0 runs member 10, and member 11 wakes.
        switch("1.000000", 1, ("x", 5, "S"), ("swapper/1", 0, 120)),
        switch("1.000000", 0, ("swapper/0", 0, "R"), ("pvas", 10, 120)),
        wakeup("1.001000", "pvas", 11),
        // It waits behind its partner on CPU 0 for 3 ms, CPU 1 idle all along.
        switch("1.004000", 0, ("pvas", 10, "R"), ("pvas", 11, 120)),
        // CPU 1 wakes up; member 10 waits 2 ms behind member 11 on CPU 0
        // while nothing is idle: stacked, but no CPU idled meanwhile.
        switch("1.004000", 1, ("swapper/1", 0, "R"), ("hog", 7, 120)),
        switch("1.006000", 0, ("pvas", 11, "S"), ("pvas", 10, 120)),
        // A wait behind another group's task is not stacked.
        wakeup("1.007000", "pvas", 11),
        switch("1.009000", 1, ("hog", 7, "R"), ("pvas", 11, 120)),
    ];
    let b = book(&text);
    let g = &b.partners.groups["pvas"];
    assert_eq!(g.stacked, 2);
    assert_eq!(g.stacked_ns, 5_000_000);
    assert_eq!(g.stacked_idle_ns, 3_000_000);
    let line = b
        .lines()
        .into_iter()
        .find(|l| l.contains(" partners "))
        .expect("a partners line");
    assert!(
        line.contains("group=pvas stacked=2 stacked_ms=5 stacked_idle_ms=3 "),
        "{line}"
    );
    assert!(!b.partners.groups.contains_key("hog"));
}

#[test]
fn a_worst_wait_names_where_it_began_and_where_the_task_was_moved() {
    let migrate = "  sky-work-3 [004] d..2. 1.050000: sched_migrate_task: comm=b pid=8 \
                   prio=120 orig_cpu=1 dest_cpu=5";
    let b = book(&[
        switch("1.000000", 1, ("b", 8, "R"), ("a", 7, 120)),
        migrate.to_string(),
        switch("1.300000", 6, ("c", 9, "S"), ("b", 8, 120)),
        wakeup("2.000000", "d", 10),
        switch("2.010000", 2, ("e", 11, "S"), ("d", 10, 120)),
    ]);
    let lines = b.lines();
    let worst: Vec<_> = lines.iter().filter(|l| l.contains(" worst ")).collect();
    assert!(
        worst[0].contains("pid=8 ")
            && worst[0].contains("wait_us=300000 ")
            && worst[0].contains(" cpu=6 began=preempted from_cpu=1 moved_to=5 "),
        "{worst:?}"
    );
    assert!(
        worst[1].contains("pid=10 ")
            && worst[1].contains(" cpu=2 began=woken from_cpu=1 moved_to=- "),
        "{worst:?}"
    );
    // CPU 6 had switched to nothing traced before: no history to show.
    assert!(
        worst[0].ends_with(" cpu_switches=0 cpu_longest_run_us=0 cpu_longest_by=-"),
        "{worst:?}"
    );
}

#[test]
fn a_worst_wait_says_what_its_cpu_ran_meanwhile() {
    let b = book(&[
        switch("1.000000", 3, ("w", 8, "R"), ("hog", 7, 120)),
        switch("1.040000", 3, ("hog", 7, "R"), ("x", 9, 120)),
        switch("1.050000", 3, ("x", 9, "S"), ("hog", 7, 120)),
        switch("1.200000", 3, ("hog", 7, "R"), ("w", 8, 120)),
    ]);
    let lines = b.lines();
    let worst = lines
        .iter()
        .find(|l| l.contains(" worst pid=8 "))
        .expect("w's wait is among the worst");
    assert!(
        worst.contains(" wait_us=200000 ")
            && worst.ends_with(" cpu_switches=2 cpu_longest_run_us=150000 cpu_longest_by=hog"),
        "{worst}"
    );
}
