use super::*;
use std::fs;
use std::path::Path;

struct Machine {
    sockets: usize,
    cores: usize,
    threads: usize,
    l2: &'static str,
    l3: Option<&'static str>,
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Writes a sysfs cpu tree numbered like Linux on x86: CPU = thread-major,
/// so siblings are (c, c + sockets*cores).
fn fake_sysfs(m: &Machine, offline: &[usize]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let per_thread = m.sockets * m.cores;
    let n = per_thread * m.threads;
    write(&root.join("possible"), &format!("0-{}\n", n - 1));
    let online: Vec<usize> = (0..n).filter(|c| !offline.contains(c)).collect();
    write(
        &root.join("online"),
        &format!("{}\n", format_cpulist(&online)),
    );
    for cpu in online.iter().copied() {
        let core = cpu % per_thread;
        let socket = core / m.cores;
        let siblings: Vec<usize> = (0..m.threads)
            .map(|t| core + t * per_thread)
            .filter(|c| online.contains(c))
            .collect();
        let socket_cpus: Vec<usize> = online
            .iter()
            .copied()
            .filter(|c| (c % per_thread) / m.cores == socket)
            .collect();
        let d = root.join(format!("cpu{cpu}"));
        write(
            &d.join("topology/thread_siblings_list"),
            &format_cpulist(&siblings),
        );
        write(&d.join("topology/physical_package_id"), &socket.to_string());
        let mut caches = vec![
            ("index0", "1", "Data", "32K", format_cpulist(&siblings)),
            (
                "index1",
                "1",
                "Instruction",
                "32K",
                format_cpulist(&siblings),
            ),
            ("index2", "2", "Unified", m.l2, format_cpulist(&siblings)),
        ];
        if let Some(l3) = m.l3 {
            caches.push(("index3", "3", "Unified", l3, format_cpulist(&socket_cpus)));
        }
        for (idx, level, kind, size, shared) in caches {
            let c = d.join("cache").join(idx);
            write(&c.join("level"), level);
            write(&c.join("type"), kind);
            write(&c.join("size"), size);
            write(&c.join("shared_cpu_list"), &shared);
            if cpu == 1 {
                write(&c.join("coherency_line_size"), "128");
            }
        }
    }
    dir
}

const TWO_BY_TWO_BY_TWO: Machine = Machine {
    sockets: 2,
    cores: 2,
    threads: 2,
    l2: "1024K",
    l3: Some("16M"),
};

#[test]
fn two_sockets_give_two_llc_domains_of_smt_pairs() {
    let dir = fake_sysfs(&TWO_BY_TWO_BY_TWO, &[]);
    let topo = Topology::from_sysfs(dir.path()).unwrap();
    assert_eq!(topo.nr_cpus(), 8);
    assert!(topo.smt());
    assert_eq!(topo.llcs.len(), 2);
    assert_eq!(topo.llcs[0].cpus, vec![0, 1, 4, 5]);
    assert_eq!(topo.llcs[1].cpus, vec![2, 3, 6, 7]);
    assert_eq!(topo.llcs[0].size_bytes, Some(16 << 20));
    assert_eq!(topo.cpus[5].siblings, vec![1, 5]);
    assert_eq!(topo.cpus[5].llc, Some(0));
    assert_eq!(topo.cpus[6].llc, Some(1));
    let core = topo.cpus[3].core_cache.as_ref().unwrap();
    assert_eq!((core.level, core.size_bytes), (2, 1 << 20));
    // Only CPU 1 gives its line size: the first online CPU that does.
    assert_eq!(topo.line_bytes, 128);
}

#[test]
fn offline_cpus_have_no_domain_but_stay_listed() {
    let dir = fake_sysfs(&TWO_BY_TWO_BY_TWO, &[3, 7]);
    let topo = Topology::from_sysfs(dir.path()).unwrap();
    assert_eq!(topo.nr_cpus(), 8);
    assert!(!topo.cpus[3].online);
    assert_eq!(topo.cpus[3].llc, None);
    assert_eq!(topo.online_cpus().count(), 6);
    assert_eq!(topo.llcs[1].cpus, vec![2, 6]);
}

#[test]
fn without_cache_info_the_package_is_the_domain() {
    let dir = fake_sysfs(&TWO_BY_TWO_BY_TWO, &[]);
    for cpu in 0..8 {
        fs::remove_dir_all(dir.path().join(format!("cpu{cpu}/cache"))).unwrap();
    }
    let topo = Topology::from_sysfs(dir.path()).unwrap();
    assert_eq!(topo.llcs.len(), 2);
    assert_eq!(topo.llcs[1].cpus, vec![2, 3, 6, 7]);
    assert_eq!(topo.llcs[1].size_bytes, None);
    assert_eq!(topo.line_bytes, DEFAULT_LINE_BYTES);
    let t = topo.decay_thresholds(DEFAULT_FILL_BYTES_PER_SEC);
    assert_eq!((t.core_ns, t.llc_ns), (500_000, 2_000_000));
    assert_eq!((t.core_bytes, t.llc_bytes), (512 << 10, 2 << 20));
}

#[test]
fn thresholds_follow_cache_size_and_sharing() {
    let dir = fake_sysfs(&TWO_BY_TWO_BY_TWO, &[]);
    let topo = Topology::from_sysfs(dir.path()).unwrap();
    let t = topo.decay_thresholds(DEFAULT_FILL_BYTES_PER_SEC);
    // 1 MiB L2 refilled by 2 threads at 1 GB/s each; 16 MiB L3 by 4 CPUs.
    assert_eq!(t.core_ns, (1u64 << 20) / 2);
    assert_eq!(t.llc_ns, (16u64 << 20) / 4);
    // Twice the fill rate halves both.
    let fast = topo.decay_thresholds(2 * DEFAULT_FILL_BYTES_PER_SEC);
    assert_eq!(fast.core_ns, t.core_ns / 2);
    assert_eq!(fast.llc_ns, t.llc_ns / 2);
    // By pressure: a thread's half of the L2, the whole L3, whatever the rate.
    assert_eq!((t.core_bytes, t.llc_bytes), (512 << 10, 16 << 20));
    assert_eq!(
        (fast.core_bytes, fast.llc_bytes),
        (t.core_bytes, t.llc_bytes)
    );
    assert_eq!(fast.fill_bytes_per_sec, 2 * DEFAULT_FILL_BYTES_PER_SEC);
}

#[test]
fn l2_as_last_level_gives_equal_thresholds() {
    let m = Machine {
        sockets: 1,
        cores: 4,
        threads: 1,
        l2: "512K",
        l3: None,
    };
    let dir = fake_sysfs(&m, &[]);
    let topo = Topology::from_sysfs(dir.path()).unwrap();
    assert!(!topo.smt());
    assert_eq!(
        topo.llcs.len(),
        4,
        "a private L2 as LLC gives one domain per core"
    );
    let t = topo.decay_thresholds(DEFAULT_FILL_BYTES_PER_SEC);
    assert_eq!(t.core_ns, t.llc_ns);
    assert_eq!(t.core_ns, 512 * 1024);
    assert_eq!((t.core_bytes, t.llc_bytes), (512 << 10, 512 << 10));
}

#[test]
fn thresholds_are_clamped() {
    let m = Machine {
        sockets: 1,
        cores: 2,
        threads: 1,
        l2: "1K",
        l3: Some("4G"),
    };
    let dir = fake_sysfs(&m, &[]);
    let topo = Topology::from_sysfs(dir.path()).unwrap();
    let t = topo.decay_thresholds(DEFAULT_FILL_BYTES_PER_SEC);
    assert_eq!(t.core_ns, 50_000);
    assert_eq!(t.llc_ns, 1_000_000_000);
}

#[test]
fn broken_sysfs_is_reported_with_the_path() {
    let dir = fake_sysfs(&TWO_BY_TWO_BY_TWO, &[]);
    write(&dir.path().join("cpu2/cache/index2/size"), "lots");
    let err = format!("{:#}", Topology::from_sysfs(dir.path()).unwrap_err());
    assert!(err.contains("cpu2/cache/index2/size"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = format!("{:#}", Topology::from_sysfs(empty.path()).unwrap_err());
    assert!(err.contains("possible"), "{err}");
}

#[test]
fn cpulists_parse_and_format() {
    assert_eq!(
        parse_cpulist("0-3,8,10-11").unwrap(),
        vec![0, 1, 2, 3, 8, 10, 11]
    );
    assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
    assert_eq!(parse_cpulist("5,1,5").unwrap(), vec![1, 5]);
    assert!(parse_cpulist("3-1").is_err());
    assert!(parse_cpulist("0-x").is_err());
    assert!(parse_cpulist("0-999999").is_err());
    for list in ["0", "0-7", "0-3,8,10-11", "1,3,5"] {
        assert_eq!(format_cpulist(&parse_cpulist(list).unwrap()), list);
    }
}

#[test]
fn cache_sizes_parse() {
    assert_eq!(parse_size("32K").unwrap(), 32 << 10);
    assert_eq!(parse_size("16M").unwrap(), 16 << 20);
    assert_eq!(parse_size("512").unwrap(), 512);
    assert!(parse_size("12X").is_err());
    assert!(parse_size("K").is_err());
    assert!(parse_size("99999999999999999999G").is_err());
}

#[test]
fn an_empty_cpulist_is_an_empty_list_where_scx_utils_refuses_it() {
    assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
    assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
    assert!(scx_utils::read_cpulist("").is_err());
    assert_eq!(parse_cpulist("3,1-2,2").unwrap(), vec![1, 2, 3]);
    assert!(parse_cpulist("0-4294967295").is_err());
}

#[test]
fn a_topology_list_ending_in_a_nul_is_read_as_the_kernel_meant_it() {
    // As Linux 5.15 wrote cpuN/topology/*_list (a Kunpeng 920's tree).
    assert_eq!(parse_cpulist("0-3\n\0").unwrap(), vec![0, 1, 2, 3]);
    assert_eq!(sysfs_trim("3\n\0"), "3");
    assert_eq!(parse_size("512K\n\0").unwrap(), 512 << 10);
    assert!(parse_cpulist("0\0,1").is_err());
}
