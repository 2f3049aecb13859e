use super::*;

fn task<'a>(pid: u32, comm: &'a str, cgroup: &'a str) -> TaskId<'a> {
    TaskId { pid, comm, cgroup }
}

#[test]
fn rules_match_by_comm_cgroup_or_pid_in_order() {
    let cli = [
        "pmw*=pm-writer",
        "cgroup:/batch/*=compute",
        "pid:42=memory-bound",
    ]
    .map(String::from);
    let policy = [RuleSpec {
        comm: Some("cpu?".into()),
        cgroup: None,
        pid: None,
        class: "compute".into(),
    }];
    let h = Hints::new(&cli, &policy).unwrap();
    assert_eq!(h.class_for(&task(1, "pmw-a", "/")), Some(Class::PmWriter));
    assert_eq!(
        h.class_for(&task(1, "sh", "/batch/j1")),
        Some(Class::Compute)
    );
    assert_eq!(h.class_for(&task(42, "sh", "/")), Some(Class::MemoryBound));
    assert_eq!(h.class_for(&task(1, "cpu1", "/")), Some(Class::Compute));
    assert_eq!(h.class_for(&task(1, "cpu12", "/")), None);
    // Which classes any rule gives (BPF skips a class lookup otherwise).
    assert!(h.gives(Class::MemoryBound) && h.gives(Class::PmWriter));
    assert!(!h.gives(Class::Unknown));
    assert!(!Hints::new(&cli[..1], &[])
        .unwrap()
        .gives(Class::MemoryBound));
    // The command line comes first: a pmw task in /batch is a PM writer.
    assert_eq!(
        h.class_for(&task(1, "pmw", "/batch/x")),
        Some(Class::PmWriter)
    );
    // A hint beats a shared space's flag, which beats the counters; the
    // counters beat unknown.
    let c = |comm, in_space, measured| h.resolve(&task(1, comm, "/"), in_space, measured);
    assert_eq!(c("pmw", false, Class::Compute), Class::PmWriter);
    assert_eq!(c("cpu1", true, Class::MemoryBound), Class::Compute);
    assert_eq!(c("sh", true, Class::Compute), Class::PmWriter);
    assert_eq!(c("sh", false, Class::MemoryBound), Class::MemoryBound);
    assert_eq!(c("sh", false, Class::Unknown), Class::Unknown);
    assert!(Hints::default().is_empty() && !h.is_empty());
}

#[test]
fn bad_rules_are_refused_naming_the_rule_and_what_is_wrong() {
    let e = |arg: &str| format!("{:#}", Rule::parse(arg).unwrap_err());
    assert!(e("pmw*").contains("--class \"pmw*\"") && e("pmw*").contains("PATTERN=CLASS"));
    let bad_class = e("pmw*=pm_writer");
    assert!(
        bad_class.contains("unknown class \"pm_writer\"") && bad_class.contains("pm-writer"),
        "{bad_class}"
    );
    assert!(e("pid:abc=compute").contains("not a process ID"));
    assert!(e("[x=compute").contains("not a valid glob"));
    assert!(e("=compute").contains("comm pattern is empty"));
    let spec = |comm: Option<&str>, pid: Option<u32>, class: &str| RuleSpec {
        comm: comm.map(String::from),
        cgroup: None,
        pid,
        class: class.into(),
    };
    let e = |s: RuleSpec| {
        format!(
            "{:#}",
            Hints::new(&[], &[spec(Some("a"), None, "compute"), s]).unwrap_err()
        )
    };
    assert!(e(spec(Some("a"), Some(3), "compute")).contains("class_rule 2: give exactly one"));
    assert!(e(spec(None, None, "compute")).contains("exactly one"));
    let bad = e(spec(Some("a"), None, "io"));
    assert!(
        bad.contains("class_rule 2: field class: unknown class \"io\""),
        "{bad}"
    );
}

#[test]
fn name_rules_bpf_can_apply_are_told_apart() {
    let shape = |arg: &str| Rule::parse(arg).unwrap().comm_shape();
    assert_eq!(shape("cpu=compute"), Some((CommShape::Exact, "cpu".into())));
    assert_eq!(
        shape("cpu-*=compute"),
        Some((CommShape::Prefix, "cpu-".into()))
    );
    assert_eq!(
        shape("*-pm=compute"),
        Some((CommShape::Suffix, "-pm".into()))
    );
    assert_eq!(
        shape("*pm*=compute"),
        Some((CommShape::Contains, "pm".into()))
    );
    assert_eq!(shape("c?u=compute"), None);
    assert_eq!(shape("a*b=compute"), None);
    assert_eq!(shape("*=compute"), None);
    assert_eq!(shape("a-name-longer-than-15=compute"), None);
    assert_eq!(shape("pid:3=compute"), None);
    let cli = [
        "pmw*=pm-writer",
        "pid:9=compute",
        "c?u=compute",
        "cpu*=compute",
    ]
    .map(String::from);
    let (bpf, daemon) = Hints::new(&cli, &[]).unwrap().bpf_comm_rules(16);
    // pmw* first; after c?u, which BPF cannot apply, BPF applies none.
    assert_eq!(
        bpf,
        vec![(CommShape::Prefix, "pmw".into(), Class::PmWriter)]
    );
    assert_eq!(daemon, vec!["c?u".to_string(), "cpu*".to_string()]);
    let (bpf, _) = Hints::new(&cli[..1], &[]).unwrap().bpf_comm_rules(0);
    assert!(bpf.is_empty());
}
