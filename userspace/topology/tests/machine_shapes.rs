//! Three machine shapes the VM cannot give, as sysfs trees under a prefix
//! the way `SCX_SYSFS_PREFIX` takes them: a hybrid part (8 P-cores with
//! SMT and 8 E-cores whose L2 four share, as an i9-12900K), two NUMA
//! nodes (two sockets of 4 cores x 2 threads, Linux's thread-major
//! numbering), and SMT off (8 cores in two L3 complexes, as a Zen 3
//! part). They are written here from those parts' published layouts; trees
//! recorded from real machines (`scripts/record-sysfs.sh`) are checked the
//! same way by `recorded_trees_read_alike` (docs/results.md has the runs).
//!
//! Each tree is read twice in a child process with `SCX_SYSFS_PREFIX` set
//! (scx_utils reads the prefix once per process): by
//! `sky_topology::Topology::from_host` and by `scx_utils::Topology::new`.
//! They must agree on every LLC domain and every core's SMT siblings;
//! scx_utils must find the shape's NUMA nodes and little cores (what
//! sky-topology leaves to it); and SKY-1's decay must follow the shape.

use sky_topology::{format_cpulist, Topology, DEFAULT_FILL_BYTES_PER_SEC};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

/// One CPU of a shape.
struct Cpu {
    package: usize,
    core: usize,
    cluster: usize,
    node: usize,
    siblings: Vec<usize>,
    /// (level, type, size, CPUs sharing it), in sysfs index order.
    caches: Vec<(u32, &'static str, &'static str, Vec<usize>)>,
    max_khz: u64,
}

struct Shape {
    name: &'static str,
    cpus: Vec<Cpu>,
    nodes: usize,
    smt: bool,
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("{text}\n")).unwrap();
}

/// Writes `shape` under `prefix` as sysfs shows it.
fn write_tree(shape: &Shape, prefix: &Path) {
    let cpu_dir = prefix.join("sys/devices/system/cpu");
    let all = format_cpulist(&(0..shape.cpus.len()).collect::<Vec<_>>());
    write(&cpu_dir.join("possible"), &all);
    write(&cpu_dir.join("online"), &all);
    write(
        &cpu_dir.join("smt/active"),
        if shape.smt { "1" } else { "0" },
    );
    for (id, cpu) in shape.cpus.iter().enumerate() {
        let d = cpu_dir.join(format!("cpu{id}"));
        let t = d.join("topology");
        write(
            &t.join("thread_siblings_list"),
            &format_cpulist(&cpu.siblings),
        );
        write(&t.join("core_id"), &cpu.core.to_string());
        write(&t.join("physical_package_id"), &cpu.package.to_string());
        write(&t.join("cluster_id"), &cpu.cluster.to_string());
        write(
            &d.join("cpufreq/cpuinfo_max_freq"),
            &cpu.max_khz.to_string(),
        );
        for (i, (level, kind, size, shared)) in cpu.caches.iter().enumerate() {
            let c = d.join(format!("cache/index{i}"));
            write(&c.join("level"), &level.to_string());
            write(&c.join("type"), kind);
            write(&c.join("size"), size);
            write(&c.join("shared_cpu_list"), &format_cpulist(shared));
            write(&c.join("coherency_line_size"), "64");
        }
        let node = prefix.join(format!("sys/devices/system/node/node{}", cpu.node));
        write(&node.join(format!("cpu{id}/online")), "1");
    }
    for n in 0..shape.nodes {
        let distance: Vec<String> = (0..shape.nodes)
            .map(|m| if m == n { "10" } else { "21" }.to_string())
            .collect();
        write(
            &prefix.join(format!("sys/devices/system/node/node{n}/distance")),
            &distance.join(" "),
        );
    }
}

fn range(r: std::ops::Range<usize>) -> Vec<usize> {
    r.collect()
}

/// 8 P-cores (CPUs 0-15, siblings 2k and 2k+1: 48K L1d, 1280K L2) and 8
/// E-cores (16-23: 32K L1d, 2M L2 per cluster of four), one 30M L3.
fn hybrid() -> Shape {
    let mut cpus = Vec::new();
    for id in 0..24 {
        let p = id < 16;
        let (core, siblings, cluster) = if p {
            (id / 2, vec![id & !1, id | 1], id / 2)
        } else {
            (8 + (id - 16), vec![id], 8 + (id - 16) / 4)
        };
        let l2 = if p {
            (2, "Unified", "1280K", siblings.clone())
        } else {
            let first = 16 + (id - 16) / 4 * 4;
            (2, "Unified", "2048K", range(first..first + 4))
        };
        cpus.push(Cpu {
            package: 0,
            core,
            cluster,
            node: 0,
            caches: vec![
                (1, "Data", if p { "48K" } else { "32K" }, siblings.clone()),
                (1, "Instruction", "32K", siblings.clone()),
                l2,
                (3, "Unified", "30720K", range(0..24)),
            ],
            siblings,
            max_khz: if p { 5_200_000 } else { 3_900_000 },
        });
    }
    Shape {
        name: "hybrid",
        cpus,
        nodes: 1,
        smt: true,
    }
}

/// Two sockets, each its own node and 16M L3, of 4 cores x 2 threads:
/// CPUs 0-3 and 8-11 are socket 0, 4-7 and 12-15 socket 1.
fn two_nodes() -> Shape {
    let mut cpus = Vec::new();
    for id in 0..16 {
        let core = id % 8;
        let package = core / 4;
        let siblings = vec![core, core + 8];
        let socket: Vec<usize> = (0..16).filter(|c| (c % 8) / 4 == package).collect();
        cpus.push(Cpu {
            package,
            core: core % 4,
            cluster: core,
            node: package,
            caches: vec![
                (1, "Data", "32K", siblings.clone()),
                (1, "Instruction", "32K", siblings.clone()),
                (2, "Unified", "1024K", siblings.clone()),
                (3, "Unified", "16M", socket),
            ],
            siblings,
            max_khz: 3_000_000,
        });
    }
    Shape {
        name: "two-nodes",
        cpus,
        nodes: 2,
        smt: true,
    }
}

/// 8 cores, SMT off, in two complexes of four with a 16M L3 each.
fn smt_off() -> Shape {
    let mut cpus = Vec::new();
    for id in 0..8 {
        let ccx = id / 4;
        cpus.push(Cpu {
            package: 0,
            core: id,
            cluster: id,
            node: 0,
            caches: vec![
                (1, "Data", "32K", vec![id]),
                (1, "Instruction", "32K", vec![id]),
                (2, "Unified", "512K", vec![id]),
                (3, "Unified", "16M", range(ccx * 4..ccx * 4 + 4)),
            ],
            siblings: vec![id],
            max_khz: 4_500_000,
        });
    }
    Shape {
        name: "smt-off",
        cpus,
        nodes: 1,
        smt: false,
    }
}

/// What a child process saw of the tree under its SCX_SYSFS_PREFIX, one
/// fact a line: `sky llc CPUS`, `sky core CPUS`, `scx llc CPUS`,
/// `scx core CPUS`, `scx nodes N`, `scx little CPUS`, `sky decay ...`.
fn seen_by_child(prefix: Option<&Path>) -> Result<Vec<String>, String> {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child.args([
        "--ignored",
        "--exact",
        "child_reads_its_prefix",
        "--nocapture",
    ]);
    match prefix {
        Some(prefix) => child.env("SCX_SYSFS_PREFIX", prefix),
        None => child.env_remove("SCX_SYSFS_PREFIX"),
    };
    let out = child.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "the child failed:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("shape: "))
        .map(str::to_string)
        .collect())
}

/// Run by `seen_by_child` with SCX_SYSFS_PREFIX set; by hand, it reads
/// this machine with both readers.
#[test]
#[ignore = "a child of the shape tests"]
fn child_reads_its_prefix() {
    let sky = Topology::from_host().unwrap();
    for llc in &sky.llcs {
        println!("shape: sky llc {}", format_cpulist(&llc.cpus));
    }
    let cores: BTreeSet<String> = sky
        .online_cpus()
        .map(|c| format_cpulist(&c.siblings))
        .collect();
    for core in cores {
        println!("shape: sky core {core}");
    }
    let d = sky.decay_thresholds(DEFAULT_FILL_BYTES_PER_SEC);
    println!(
        "shape: sky decay core_bytes={} llc_bytes={}",
        d.core_bytes, d.llc_bytes
    );
    let scx = scx_utils::Topology::new().unwrap();
    let list = |m: &scx_utils::Cpumask| format_cpulist(&m.iter().collect::<Vec<_>>());
    for llc in scx.all_llcs.values() {
        println!("shape: scx llc {}", list(&llc.span));
    }
    let cores: BTreeSet<String> = scx.all_cores.values().map(|c| list(&c.span)).collect();
    for core in cores {
        println!("shape: scx core {core}");
    }
    println!("shape: scx nodes {}", scx.nodes.len());
    let little: Vec<usize> = scx
        .all_cpus
        .values()
        .filter(|c| c.core_type == scx_utils::CoreType::Little)
        .map(|c| c.id)
        .collect();
    let little = match little.is_empty() {
        true => "none".to_string(),
        false => format_cpulist(&little),
    };
    println!("shape: scx little {little}");
}

/// The facts `who` (sky or scx) saw of kind `what` (llc, core).
fn facts(seen: &[String], who: &str, what: &str) -> BTreeSet<String> {
    let head = format!("{who} {what} ");
    seen.iter()
        .filter_map(|l| l.strip_prefix(&head))
        .map(str::to_string)
        .collect()
}

/// What both readers saw of the tree under `prefix`, or how they differ
/// on its LLC domains, its cores or its number of NUMA nodes.
fn compare(prefix: &Path, nodes: usize) -> Result<Vec<String>, String> {
    let seen = seen_by_child(Some(prefix))?;
    for what in ["llc", "core"] {
        let (sky, scx) = (facts(&seen, "sky", what), facts(&seen, "scx", what));
        if sky != scx {
            return Err(format!("the {what} sets differ: {seen:#?}"));
        }
        if sky.is_empty() {
            return Err(format!("no {what} seen: {seen:#?}"));
        }
    }
    if !seen.contains(&format!("scx nodes {nodes}")) {
        return Err(format!("not {nodes} NUMA nodes: {seen:#?}"));
    }
    Ok(seen)
}

/// Both readers agree on the shape's LLC domains and cores.
fn agree(shape: &Shape) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    write_tree(shape, dir.path());
    compare(dir.path(), shape.nodes).unwrap_or_else(|e| panic!("{}: {e}", shape.name))
}

/// The sysfs roots under `dir`: each directory holding
/// `sys/devices/system/cpu`, itself or one level down (hwloc's recordings
/// unpack into a directory named for the machine).
fn recorded_prefixes(dir: &Path) -> Vec<std::path::PathBuf> {
    let holds = |p: &Path| p.join("sys/devices/system/cpu").is_dir();
    let mut found = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for entry in entries {
        if holds(&entry) {
            found.push(entry);
            continue;
        }
        let mut inner: Vec<_> = fs::read_dir(&entry)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| holds(p))
            .collect();
        inner.sort();
        found.extend(inner);
    }
    found
}

/// `scripts/record-sysfs.sh` records what both readers need: this
/// machine read from its recording is this machine read live.
#[test]
fn this_machine_recorded_reads_as_it_does_live() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/record-sysfs.sh");
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("this-machine");
    let out = Command::new("sh")
        .arg(&script)
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let live = seen_by_child(None).unwrap();
    let recorded = seen_by_child(Some(&prefix)).unwrap();
    assert!(!facts(&live, "sky", "core").is_empty(), "{live:#?}");
    assert_eq!(recorded, live);
    // A second recording into the same place is refused, not merged.
    let again = Command::new("sh")
        .arg(&script)
        .arg(&prefix)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
}

/// Trees recorded from real machines, under the directory named by
/// `SKY_RECORDED_TREES` (one tree per entry): both readers must agree on
/// each one's LLC domains, cores and NUMA nodes (counted from the tree's
/// own node directories). Every tree's verdict is printed; any
/// disagreement fails. Record a machine with `scripts/record-sysfs.sh
/// DIR/NAME`, then `SKY_RECORDED_TREES=DIR cargo test --release -p
/// sky-topology --test machine_shapes -- --ignored recorded --nocapture`.
#[test]
#[ignore = "reads the trees under SKY_RECORDED_TREES"]
fn recorded_trees_read_alike() {
    let dir = std::env::var_os("SKY_RECORDED_TREES")
        .expect("SKY_RECORDED_TREES names no directory of recorded trees");
    let prefixes = recorded_prefixes(Path::new(&dir));
    assert!(!prefixes.is_empty(), "no sysfs tree under {dir:?}");
    let mut failed = Vec::new();
    for prefix in &prefixes {
        let nodes = fs::read_dir(prefix.join("sys/devices/system/node"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.strip_prefix("node")
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count()
            .max(1);
        let name = prefix.display();
        match compare(prefix, nodes) {
            Ok(seen) => {
                let count = |what| facts(&seen, "sky", what).len();
                let line = |head: &str| {
                    seen.iter()
                        .find_map(|l| l.strip_prefix(head))
                        .unwrap_or("?")
                        .to_string()
                };
                println!(
                    "recorded {name}: agree on {} LLCs, {} cores, {nodes} nodes; little {}; decay {}",
                    count("llc"),
                    count("core"),
                    line("scx little "),
                    line("sky decay ")
                );
            }
            Err(e) => {
                println!("recorded {name}: {e}");
                failed.push(name.to_string());
            }
        }
    }
    assert!(failed.is_empty(), "the readers differ on {failed:?}");
}

#[test]
fn a_hybrid_part_has_one_llc_little_e_cores_and_decay_from_their_cluster_l2() {
    let seen = agree(&hybrid());
    assert!(seen.contains(&"sky llc 0-23".to_string()), "{seen:#?}");
    assert!(seen.contains(&"sky core 0-1".to_string()), "{seen:#?}");
    assert!(seen.contains(&"sky core 23".to_string()), "{seen:#?}");
    assert!(seen.contains(&"scx little 16-23".to_string()), "{seen:#?}");
    // An E-core's core level is its cluster's 2M L2 shared by four (512K
    // each), less than a P-core thread's half of 1280K: not its 32K L1.
    assert!(
        seen.contains(&format!(
            "sky decay core_bytes={} llc_bytes={}",
            512 << 10,
            30 << 20
        )),
        "{seen:#?}"
    );
}

#[test]
fn two_nodes_give_two_llcs_of_thread_major_smt_pairs() {
    let seen = agree(&two_nodes());
    assert!(seen.contains(&"sky llc 0-3,8-11".to_string()), "{seen:#?}");
    assert!(seen.contains(&"sky llc 4-7,12-15".to_string()), "{seen:#?}");
    assert!(seen.contains(&"sky core 5,13".to_string()), "{seen:#?}");
    assert!(seen.contains(&"scx little none".to_string()), "{seen:#?}");
}

#[test]
fn with_smt_off_each_core_is_one_cpu_and_each_complex_an_llc() {
    let seen = agree(&smt_off());
    assert!(seen.contains(&"sky llc 0-3".to_string()), "{seen:#?}");
    assert!(seen.contains(&"sky llc 4-7".to_string()), "{seen:#?}");
    for cpu in 0..8 {
        assert!(seen.contains(&format!("sky core {cpu}")), "{seen:#?}");
    }
    assert!(
        seen.contains(&format!(
            "sky decay core_bytes={} llc_bytes={}",
            512 << 10,
            16 << 20
        )),
        "{seen:#?}"
    );
}
