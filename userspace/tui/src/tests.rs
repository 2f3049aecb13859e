use super::*;
use model::{CpuView, GangFigures, Scheduler, SortKey, TaskRow, ThreadSample};
use sky_proc::SchedStat;
use sky_topology::{Cpu, LlcDomain, Topology};
use std::collections::HashMap;

/// 2 cache domains x 2 cores x 2 threads, Linux x86 numbering (siblings
/// c and c + 4).
fn topo() -> Topology {
    let cpus = (0..8)
        .map(|id| Cpu {
            id,
            online: id != 7,
            siblings: if id == 7 {
                vec![]
            } else {
                vec![id % 4, id % 4 + 4]
            },
            llc: (id != 7).then_some((id % 4) / 2),
            core_cache: None,
        })
        .collect();
    Topology {
        cpus,
        llcs: vec![
            LlcDomain {
                cpus: vec![0, 1, 4, 5],
                size_bytes: None,
            },
            LlcDomain {
                cpus: vec![2, 3, 6, 7],
                size_bytes: None,
            },
        ],
        line_bytes: 64,
    }
}

fn model() -> Model {
    let mut m = Model::new(TopoView::from_topology(&topo()));
    m.scheduler = Scheduler::Running {
        policy: "sky1".into(),
        generation: 7,
        last_cpu_share: Some(0.973),
        mean_wait_us: Some(1820.0),
    };
    m.tasks = vec![
        TaskRow {
            tid: 42,
            comm: "pm-writer".into(),
            cpu: 1,
            busy: 0.9,
            last_cpu_share: Some(0.98),
            wait_us: Some(120.0),
            class: Some("pm-writer".into()),
            wait_p99_us: None,
        },
        TaskRow {
            tid: 7,
            comm: "cpu-idiv".into(),
            cpu: 5,
            busy: 0.5,
            last_cpu_share: None,
            wait_us: Some(900.0),
            class: None,
            wait_p99_us: None,
        },
    ];
    for cpu in m.topo.cpus_mut() {
        if cpu.id == 1 {
            cpu.busy = 0.9;
            cpu.current = Some("pm-writer".into());
            cpu.class = Some("pm-writer".into());
        }
    }
    for i in 0..50 {
        m.record(Some(0.9 + i as f64 / 1000.0), Some(100.0 * i as f64), i);
    }
    m
}

fn screen(m: &Model, width: u16, height: u16) -> String {
    render_text(m, width, height)
}

#[test]
fn the_topology_groups_threads_by_core_and_domain() {
    let v = TopoView::from_topology(&topo());
    let ids: Vec<Vec<Vec<usize>>> = v
        .llcs
        .iter()
        .map(|l| l.iter().map(|c| c.iter().map(|t| t.id).collect()).collect())
        .collect();
    assert_eq!(
        ids,
        vec![
            vec![vec![0, 4], vec![1, 5]],
            vec![vec![2, 6], vec![3], vec![7]]
        ]
    );
    assert!(!v.llcs[1][2][0].online);
}

#[test]
fn an_80_by_24_screen_shows_policy_topology_tasks_and_history() {
    let mut m = model();
    m.gangs = GangFigures {
        home_share: Some(0.998),
        domains: vec![("dirty".into(), 2), ("empty".into(), 0)],
    };
    let s = screen(&m, 80, 24);
    assert!(s.contains("policy sky1 (generation 7)"), "{s}");
    assert!(s.contains("last-CPU 97.3%"), "{s}");
    assert!(s.contains("gangs home 99.8%"), "{s}");
    assert!(s.contains("cache domain 0 dirty, 2 gangs"), "{s}");
    assert!(s.contains("cache domain 1 empty"), "{s}");
    // Without gang figures the domains are just numbered.
    let s = screen(&model(), 80, 24);
    assert!(!s.contains("gangs home"), "{s}");
    assert!(
        s.contains("cache domain 1\n") || s.lines().any(|l| l.starts_with("cache domain 1 ")),
        "{s}"
    );
    assert!(s.contains("cpu1"), "{s}");
    assert!(s.contains("90% P pm-writer"), "{s}");
    // The class column: the PM writer's, and none known for the other.
    assert!(s.contains("class"), "{s}");
    let row = |comm: &str| {
        s.lines()
            .find(|l| l.contains(comm) && l.contains('│'))
            .unwrap_or("")
    };
    assert!(row("cpu-idi").trim_end().ends_with('-'), "{s}");
    assert!(s.contains("P pmw"), "{s}");
    assert!(s.contains("offline"), "{s}");
    assert!(s.contains("pm-writer") && s.contains("cpu-idiv"), "{s}");
    assert!(s.contains("last-CPU share 94.9%"), "{s}");
    assert!(s.contains("q quit"), "{s}");
}

#[test]
fn without_a_scheduler_the_screen_says_so() {
    let mut m = model();
    m.scheduler = Scheduler::Absent("no scx_sky is running".into());
    let s = screen(&m, 80, 24);
    assert!(s.contains("no scx_sky is running"), "{s}");
    assert!(!s.contains("generation"), "{s}");
}

#[test]
fn tiny_and_huge_terminals_draw_without_panicking() {
    for (w, h) in [(1, 1), (20, 5), (80, 24), (250, 80)] {
        let _ = screen(&model(), w, h);
    }
}

#[test]
fn keys_quit_sort_and_switch() {
    let mut m = model();
    // scx_sky's wait p99s, in the opposite order to the kernel's means:
    // while scx_sky runs, the order by wait follows the p99s.
    m.tasks[0].wait_p99_us = Some(2048);
    m.tasks[1].wait_p99_us = Some(64);
    let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
    assert_eq!(on_key(&mut m, key('q')), Action::Quit);
    assert_eq!(
        on_key(
            &mut m,
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
        ),
        Action::Quit
    );
    assert_eq!(on_key(&mut m, key('p')), Action::NextPolicy);
    assert_eq!(on_key(&mut m, key('s')), Action::Redraw);
    assert_eq!(m.sort, SortKey::Wait);
    assert_eq!(m.tasks[0].tid, 42, "the longest wait p99 first");
    on_key(&mut m, key('s'));
    assert_eq!(m.tasks[0].tid, 42, "a known last-CPU share before none");
    on_key(&mut m, key('s'));
    assert_eq!((m.sort, m.tasks[0].tid), (SortKey::Pid, 7));
}

#[test]
fn kernel_counters_become_rows_and_cpu_loads() {
    let stat = "cpu  9 9 9 9\ncpu0 10 0 10 70 10 0 0 0 0 0\ncpu1 50 0 0 50 0 0 0 0\nintr 5\n";
    let before = model::cpu_times(stat);
    assert_eq!(before[&0], (20, 100));
    let after = model::cpu_times("cpu0 20 0 20 140 20 0 0 0\ncpu1 100 0 0 50 0 0 0 0\n");
    let sample = |comm: &str, cpu, run, wait, slices, sw, mig| ThreadSample {
        comm: comm.into(),
        cpu,
        stat: SchedStat {
            run_ns: run,
            wait_ns: wait,
            timeslices: slices,
        },
        switches: Some(sw),
        migrations: Some(mig),
    };
    let t0: HashMap<u32, ThreadSample> = [
        (1, sample("a", 0, 0, 0, 0, 10, 2)),
        (2, sample("idle", 1, 5, 0, 1, 1, 0)),
    ]
    .into();
    let t1: HashMap<u32, ThreadSample> = [
        (1, sample("a", 0, 500_000_000, 4_000_000, 4, 20, 3)),
        (2, sample("idle", 1, 5, 0, 1, 1, 0)),
        (3, sample("new", 1, 9, 0, 1, 1, 0)),
    ]
    .into();
    let rows = model::task_rows(&t0, &t1, 1_000_000_000);
    assert_eq!(rows.len(), 1, "only threads seen twice that ran: {rows:?}");
    let r = &rows[0];
    assert_eq!(
        (r.tid, r.busy, r.last_cpu_share, r.wait_us),
        (1, 0.5, Some(0.9), Some(1000.0))
    );
    let mut v = TopoView::from_topology(&topo());
    model::fill_cpus(&mut v, &before, &after, &rows);
    let cpu = |id| {
        v.llcs
            .iter()
            .flatten()
            .flatten()
            .find(|c: &&CpuView| c.id == id)
            .unwrap()
            .clone()
    };
    assert_eq!((cpu(0).busy, cpu(0).current.as_deref()), (0.2, Some("a")));
    assert_eq!((cpu(1).busy, cpu(1).current), (1.0, None));
}

/// A link that answers from a script, for the snapshot.
struct Scripted(Vec<Result<PeriodStats, String>>, u64);

impl SchedulerLink for Scripted {
    fn period(&mut self) -> Result<PeriodStats, String> {
        self.0
            .pop()
            .unwrap_or_else(|| Err("no scx_sky is running".into()))
    }
    fn next_policy(&mut self) -> Result<String, String> {
        Err("permission denied".into())
    }
    /// Every thread asked about is a compute task that waited 100 us
    /// (bucket 27: 96-112 us) once more each time it is asked.
    fn threads(&mut self, tids: &[u32]) -> std::collections::HashMap<u32, model::ThreadView> {
        assert!(tids.len() <= THREADS_ASKED);
        self.1 += 1;
        tids.iter()
            .map(|&t| {
                let view = model::ThreadView {
                    class: Some("compute".into()),
                    waits: vec![(27, self.1)],
                };
                (t, view)
            })
            .collect()
    }
}

#[test]
fn a_snapshot_of_this_machine_shows_its_cpus_and_the_policy() {
    let stats = PeriodStats {
        policy: "vtime".into(),
        generation: 3,
        last_cpu_share: Some(0.5),
        mean_wait_us: None,
        moves: 4,
        gangs: GangFigures {
            home_share: Some(0.5),
            domains: vec![("clean".into(), 1), ("empty".into(), 0)],
        },
    };
    let mut link = Scripted(vec![Ok(stats.clone()), Ok(stats)], 0);
    // A thread busy through every look, so it is among the busiest both
    // times the scheduler is asked about threads.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spin = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let s = snapshot(&mut link, 80, 24).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spin.join().unwrap();
    assert!(s.contains("policy vtime (generation 3)"), "{s}");
    // The classes the scheduler gives land in the table and on the CPUs,
    // and the period's wait p99 from its histograms (one 100 us wait).
    assert!(s.contains("C cpu"), "{s}");
    assert!(s.contains(" 112 "), "{s}");
    assert!(s.contains("% C "), "{s}");
    assert!(
        s.contains("cache domain 0 clean, 1 gang") && s.contains("cpu0"),
        "{s}"
    );
    assert!(s.contains("gangs home 50.0%"), "{s}");
    assert_eq!(s.lines().count(), 24);
    let s = snapshot(&mut Scripted(vec![], 0), 80, 24).unwrap();
    assert!(s.contains("no scx_sky is running"), "{s}");
}

#[test]
fn a_periods_wait_p99_comes_from_the_histograms_growth() {
    // Bucket 27 is 96-112 us, bucket 44 is 1792-2048 us.
    let before = vec![(27, 10), (44, 5)];
    let now = vec![(27, 110), (44, 5)];
    let grown = model::histogram_growth(&now, &before);
    assert_eq!(grown, vec![(27, 100)]);
    assert_eq!(sky_stats::wait_percentile_us(&grown, 99.0), Some(112));
    // A reused thread ID (counts went down): the new thread's counts whole.
    assert_eq!(model::histogram_growth(&[(27, 3)], &before), vec![(27, 3)]);
    // The table shows the p99 while scx_sky runs, the kernel's mean without it.
    let mut m = model();
    m.tasks[0].wait_p99_us = Some(112);
    let s = screen(&m, 80, 24);
    assert!(s.contains("p99_us") && s.contains(" 112 "), "{s}");
    assert!(
        !s.contains(" 900 "),
        "the kernel's mean shown as a p99:\n{s}"
    );
    m.scheduler = Scheduler::Absent("no scx_sky is running".into());
    let s = screen(&m, 80, 24);
    assert!(s.contains("wait_us") && s.contains(" 900 "), "{s}");
}

/// A scheduler that answers nothing for a minute, and says when it is
/// asked.
struct Stuck(mpsc::Sender<()>);

impl SchedulerLink for Stuck {
    fn period(&mut self) -> Result<PeriodStats, String> {
        let _ = self.0.send(());
        std::thread::sleep(Duration::from_secs(60));
        Err("too late".into())
    }
    fn next_policy(&mut self) -> Result<String, String> {
        self.period().map(|p| p.policy)
    }
    fn threads(&mut self, _: &[u32]) -> HashMap<u32, model::ThreadView> {
        HashMap::new()
    }
}

/// The screen's loop with keys from `keys` (None: nothing pressed in the
/// wait) and the sampler reading `link` on its own thread.
fn drive(
    link: Box<dyn SchedulerLink + Send>,
    m: &mut Model,
    draw: &mut dyn FnMut(&Model) -> anyhow::Result<()>,
    keys: &mut dyn FnMut(Duration) -> anyhow::Result<Option<KeyEvent>>,
) -> anyhow::Result<()> {
    let (asks, asked) = mpsc::channel();
    let (updated, updates) = mpsc::channel();
    std::thread::spawn(move || sampler::sample(link, asked, updated));
    event_loop(m, draw, keys, &asks, &updates)
}

#[test]
fn keys_are_acted_on_at_once_while_the_scheduler_takes_its_time() {
    let (asked, inside) = mpsc::channel();
    let stuck = Box::new(Stuck(asked));
    let mut m = model();
    let mut pressed = vec![KeyCode::Char('q'), KeyCode::Char('s')];
    let mut started = None;
    drive(stuck, &mut m, &mut |_| Ok(()), &mut |_| {
        // The first key once the sampler is inside a reading.
        if started.is_none() {
            inside.recv_timeout(Duration::from_secs(30)).unwrap();
            started = Some(std::time::Instant::now());
        }
        Ok(pressed.pop().map(|c| KeyEvent::new(c, KeyModifiers::NONE)))
    })
    .unwrap();
    let took = started.unwrap().elapsed();
    assert!(took < Duration::from_secs(2), "q took {took:?}");
    assert_eq!(m.sort, SortKey::Wait, "s was not acted on");
}

/// A scheduler whose switch takes a moment, and says when it is done.
struct SlowSwitch(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl SchedulerLink for SlowSwitch {
    fn period(&mut self) -> Result<PeriodStats, String> {
        Err("no figures".into())
    }
    fn next_policy(&mut self) -> Result<String, String> {
        std::thread::sleep(Duration::from_millis(300));
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok("policy=vtime".into())
    }
    fn threads(&mut self, _: &[u32]) -> HashMap<u32, model::ThreadView> {
        HashMap::new()
    }
}

#[test]
fn a_switch_asked_for_is_done_before_q_ends_the_screen() {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut m = model();
    let mut pressed = vec![KeyCode::Char('q'), KeyCode::Char('p')];
    let mut shown = String::new();
    drive(
        Box::new(SlowSwitch(done.clone())),
        &mut m,
        &mut |m| {
            shown = m.status.clone();
            Ok(())
        },
        &mut |_| Ok(pressed.pop().map(|c| KeyEvent::new(c, KeyModifiers::NONE))),
    )
    .unwrap();
    assert!(shown.contains("switching"), "p showed {shown:?}");
    assert!(
        done.load(std::sync::atomic::Ordering::SeqCst),
        "q ended the screen before the switch"
    );
}

#[test]
fn the_samplers_figures_reach_the_screen() {
    let stats = PeriodStats {
        policy: "vtime".into(),
        generation: 7,
        last_cpu_share: Some(0.5),
        mean_wait_us: Some(10.0),
        moves: 1,
        gangs: GangFigures::default(),
    };
    let link = Box::new(Scripted(vec![Ok(stats)], 0));
    let mut m = model();
    let shown = std::cell::Cell::new(false);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    drive(
        link,
        &mut m,
        &mut |m| {
            shown.set(render_text(m, 80, 24).contains("policy vtime (generation 7)"));
            Ok(())
        },
        &mut |wait| {
            assert!(std::time::Instant::now() < deadline, "no figures came");
            if shown.get() {
                return Ok(Some(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)));
            }
            std::thread::sleep(wait);
            Ok(None)
        },
    )
    .unwrap();
    assert!(matches!(
        m.scheduler,
        Scheduler::Running { generation: 7, .. }
    ));
}
