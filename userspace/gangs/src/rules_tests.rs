use super::*;

fn task<'a>(tgid: u32, comm: &'a str, cgroup: &'a str, spaces: &[&str]) -> TaskInfo<'a> {
    // A test's tasks live as long as the test: the keys may too.
    let spaces: &'a [SpaceKey] = Box::leak(spaces.iter().map(|n| space(n)).collect());
    TaskInfo {
        pid: tgid + 1,
        tgid,
        comm,
        cgroup,
        spaces,
    }
}

/// User 1000's space `name` (its file told apart by the name).
fn space(name: &str) -> SpaceKey {
    SpaceKey {
        name: name.into(),
        uid: 1000,
        dev: 1,
        ino: name.bytes().map(u64::from).sum(),
    }
}

fn err(arg: &str) -> String {
    format!("{:#}", GangRule::parse(arg).unwrap_err())
}

fn spec_err(spec: &GangRuleSpec, index: usize) -> String {
    format!("{:#}", spec.rule(index).unwrap_err())
}

fn cli(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn every_command_line_form_parses() {
    let r = GangRule::parse("cgroup:/machine.slice/*").unwrap();
    assert_eq!(
        r.matcher,
        GangMatcher::Cgroup(Pattern::new("/machine.slice/*").unwrap())
    );
    assert_eq!(r.hint, Hint::Auto);
    assert_eq!(r.origin, "--gang \"cgroup:/machine.slice/*\"");
    let r = GangRule::parse("space:db-*=memory-bound").unwrap();
    assert_eq!(r.matcher, GangMatcher::Space(Pattern::new("db-*").unwrap()));
    assert_eq!(r.hint, Hint::MemoryBound);
    let r = GangRule::parse("comm:stream?=not-memory-bound").unwrap();
    assert_eq!(
        r.matcher,
        GangMatcher::Comm(Pattern::new("stream?").unwrap())
    );
    assert_eq!(r.hint, Hint::NotMemoryBound);
    let r = GangRule::parse("pid:30, 10,20,10=auto").unwrap();
    assert_eq!(r.matcher, GangMatcher::Pids(vec![10, 20, 30]));
    assert_eq!(r.hint, Hint::Auto);
    // The last '=' starts the hint: a pattern may hold '=' before one.
    let r = GangRule::parse("cgroup:/a=b=auto").unwrap();
    assert_eq!(
        r.matcher,
        GangMatcher::Cgroup(Pattern::new("/a=b").unwrap())
    );
}

#[test]
fn bad_command_line_rules_name_the_rule_and_field() {
    let e = err("cgroup:[");
    assert!(
        e.starts_with("--gang \"cgroup:[\": cgroup pattern \"[\" is not a valid glob"),
        "{e}"
    );
    let e = err("space:");
    assert!(
        e.contains("--gang \"space:\"") && e.contains("space pattern is empty"),
        "{e}"
    );
    let e = err("comm:[z-");
    assert!(
        e.contains("comm pattern \"[z-\" is not a valid glob"),
        "{e}"
    );
    let e = err("pid:12,x");
    assert!(
        e.contains("--gang \"pid:12,x\"") && e.contains("pid \"x\" is not a process ID"),
        "{e}"
    );
    let e = err("pid:");
    assert!(e.contains("pid \"\" is not a process ID"), "{e}");
    let e = err("pid:0");
    assert!(e.contains("pid 0 is not a process ID"), "{e}");
    let e = err("user:root");
    assert!(e.contains("unknown kind \"user\""), "{e}");
    let e = err("/batch/*");
    assert!(e.contains("expected cgroup:GLOB"), "{e}");
    let e = err("comm:x=memory_bound");
    assert!(
        e.contains("--gang \"comm:x=memory_bound\"")
            && e.contains("hint \"memory_bound\" is not one of"),
        "{e}"
    );
    // A bad hint is named even if the pattern held an '=' meant literally.
    assert!(err("cgroup:/a=b").contains("hint \"b\""));
}

#[test]
fn policy_tables_parse_from_toml() {
    #[derive(Deserialize)]
    struct Policy {
        gang_rule: Vec<GangRuleSpec>,
    }
    let p: Policy = toml::from_str(
        r#"
        [[gang_rule]]
        cgroup = "/machine.slice/*"
        memory_bound = true

        [[gang_rule]]
        space = "*"

        [[gang_rule]]
        comm = "stream*"
        memory_bound = false

        [[gang_rule]]
        pids = [7, 3]
        "#,
    )
    .unwrap();
    let rules = GangRules::new(&[], &p.gang_rule).unwrap();
    let r = rules.rules();
    assert_eq!(rules.len(), 4);
    assert_eq!(
        (&r[0].matcher, r[0].hint, r[0].origin.as_str()),
        (
            &GangMatcher::Cgroup(Pattern::new("/machine.slice/*").unwrap()),
            Hint::MemoryBound,
            "gang_rule #1"
        )
    );
    assert_eq!(
        (&r[1].matcher, r[1].hint),
        (&GangMatcher::Space(Pattern::new("*").unwrap()), Hint::Auto)
    );
    assert_eq!(
        (&r[2].matcher, r[2].hint),
        (
            &GangMatcher::Comm(Pattern::new("stream*").unwrap()),
            Hint::NotMemoryBound
        )
    );
    assert_eq!(
        (&r[3].matcher, r[3].origin.as_str()),
        (&GangMatcher::Pids(vec![3, 7]), "gang_rule #4")
    );
    assert!(rules.by_cgroup() && rules.by_space());

    // An unknown field is kept so that the error can name the table.
    let p: Policy = toml::from_str(
        "[[gang_rule]]\ncomm = \"a\"\n\n[[gang_rule]]\ncomm = \"b\"\nmemory_bund = true\n",
    )
    .unwrap();
    let e = format!("{:#}", GangRules::new(&[], &p.gang_rule).unwrap_err());
    assert!(
        e.starts_with("gang_rule #2: unknown field \"memory_bund\""),
        "{e}"
    );
}

#[test]
fn bad_policy_tables_name_the_table_and_field() {
    let spec = |f: fn(&mut GangRuleSpec)| {
        let mut s = GangRuleSpec::default();
        f(&mut s);
        s
    };
    let both = spec(|s| {
        s.comm = Some("a".into());
        s.space = Some("b".into());
    });
    assert_eq!(
        spec_err(&both, 2),
        "gang_rule #2: has both \"space\" and \"comm\" (give exactly one)"
    );
    let three = spec(|s| {
        s.cgroup = Some("/a".into());
        s.comm = Some("a".into());
        s.pids = Some(vec![1]);
    });
    assert_eq!(
        spec_err(&three, 5),
        "gang_rule #5: has \"cgroup\", \"comm\" and \"pids\" (give exactly one)"
    );
    let none = spec(|s| s.memory_bound = Some(true));
    assert_eq!(
        spec_err(&none, 1),
        "gang_rule #1: has none of cgroup, space, comm, pids (give exactly one)"
    );
    let e = spec_err(&spec(|s| s.cgroup = Some("[".into())), 3);
    assert!(
        e.starts_with("gang_rule #3: field cgroup: cgroup pattern \"[\" is not a valid glob"),
        "{e}"
    );
    let e = spec_err(&spec(|s| s.space = Some(String::new())), 4);
    assert_eq!(e, "gang_rule #4: field space: the space pattern is empty");
    let e = spec_err(&spec(|s| s.comm = Some("[".into())), 1);
    assert!(
        e.starts_with("gang_rule #1: field comm: comm pattern"),
        "{e}"
    );
    let e = spec_err(&spec(|s| s.pids = Some(vec![])), 6);
    assert_eq!(e, "gang_rule #6: field pids: the pid list is empty");
    let e = spec_err(&spec(|s| s.pids = Some(vec![4, 0])), 6);
    assert_eq!(e, "gang_rule #6: field pids: pid 0 is not a process ID");
    // GangRules::new stops at the first bad rule, command line first.
    let good = spec(|s| s.comm = Some("a".into()));
    let e = GangRules::new(&cli(&["pid:x"]), &[good.clone(), both.clone()]).unwrap_err();
    assert!(format!("{e:#}").starts_with("--gang \"pid:x\""));
    let e = GangRules::new(&cli(&["pid:1"]), &[good, both]).unwrap_err();
    assert!(format!("{e:#}").starts_with("gang_rule #2: has both"));
}

#[test]
fn with_no_rule_a_process_is_a_gang() {
    let rules = GangRules::new(&[], &[]).unwrap();
    assert!(rules.is_empty() && !rules.by_cgroup() && !rules.by_space());
    let t = task(42, "sh", "/user.slice", &[]);
    assert_eq!(
        rules.gang(&t),
        Gang {
            key: GangKey::Process(42),
            hint: Hint::Auto,
            rule: None
        }
    );
    // Two threads of one process: one gang, keyed by tgid, not pid.
    let mut t2 = t;
    t2.pid = 99;
    assert_eq!(rules.resolve(&t2), GangKey::Process(42));
}

#[test]
fn resolution_follows_each_kind() {
    let rules = GangRules::new(
        &cli(&["cgroup:/machine.slice/*=memory-bound", "pid:7,8"]),
        &[
            GangRuleSpec {
                space: Some("db-*".into()),
                ..Default::default()
            },
            GangRuleSpec {
                comm: Some("stream*".into()),
                memory_bound: Some(false),
                ..Default::default()
            },
        ],
    )
    .unwrap();
    // A cgroup rule: the shallowest matching cgroup, sub-cgroups included.
    let vm = rules.gang(&task(1, "qemu", "/machine.slice/vm1.scope/vcpu0", &[]));
    assert_eq!(
        vm,
        Gang {
            key: GangKey::Cgroup("/machine.slice/vm1.scope".into()),
            hint: Hint::MemoryBound,
            rule: Some(0)
        }
    );
    assert_eq!(
        rules.resolve(&task(2, "qemu", "/machine.slice/vm2.scope", &[])),
        GangKey::Cgroup("/machine.slice/vm2.scope".into())
    );
    // `*` does not match /machine.slice itself.
    assert_eq!(
        rules.resolve(&task(3, "x", "/machine.slice", &[])),
        GangKey::Process(3)
    );
    // pids: those processes together (by tgid), others by themselves.
    assert_eq!(rules.resolve(&task(7, "a", "/", &[])), GangKey::Rule(1));
    assert_eq!(rules.resolve(&task(8, "b", "/", &[])), GangKey::Rule(1));
    assert_eq!(rules.resolve(&task(9, "c", "/", &[])), GangKey::Process(9));
    // A space: its members; of two matching spaces the least name.
    assert_eq!(
        rules.resolve(&task(10, "w", "/", &["other", "db-b", "db-a"])),
        GangKey::Space(space("db-a"))
    );
    // A space no rule matches is still a gang of its members (the
    // default), ahead of the process.
    let g = rules.gang(&task(11, "w", "/", &["other"]));
    assert_eq!(
        (g.key, g.hint, g.rule),
        (GangKey::Space(space("other")), Hint::Auto, None)
    );
    // comm: every matching process together, with the rule's hint.
    let s = rules.gang(&task(12, "stream3", "/", &[]));
    assert_eq!(
        (s.key, s.hint, s.rule),
        (GangKey::Rule(3), Hint::NotMemoryBound, Some(3))
    );
    assert_eq!(
        rules.resolve(&task(13, "streamx", "/u", &[])),
        GangKey::Rule(3)
    );
}

#[test]
fn with_no_rule_a_spaces_members_are_one_gang_and_others_their_process() {
    let none = GangRules::new(&[], &[]).unwrap();
    assert_eq!(
        none.resolve(&task(5, "a", "/", &["job-b", "job-a"])),
        GangKey::Space(space("job-a"))
    );
    assert_eq!(none.resolve(&task(6, "b", "/", &[])), GangKey::Process(6));
    // A rule that matches comes first.
    let comm = GangRules::new(&cli(&["comm:a"]), &[]).unwrap();
    assert_eq!(
        comm.resolve(&task(5, "a", "/", &["job-a"])),
        GangKey::Rule(0)
    );
}

#[test]
fn first_matching_rule_wins_command_line_first() {
    let policy = [GangRuleSpec {
        comm: Some("*".into()),
        memory_bound: Some(true),
        ..Default::default()
    }];
    let rules = GangRules::new(&cli(&["comm:db*", "cgroup:/batch/**"]), &policy).unwrap();
    // Matches the first and the policy's: the first.
    assert_eq!(
        rules.resolve(&task(1, "db1", "/batch/x", &[])),
        GangKey::Rule(0)
    );
    // The second (`**` crosses '/': the shallowest below /batch).
    assert_eq!(
        rules.resolve(&task(2, "sh", "/batch/j1/step", &[])),
        GangKey::Cgroup("/batch/j1".into())
    );
    // Only the policy's: it is after both command-line rules.
    let g = rules.gang(&task(3, "sh", "/", &[]));
    assert_eq!((g.key, g.hint), (GangKey::Rule(2), Hint::MemoryBound));
}

#[test]
fn cgroup_ancestors_are_listed_shallowest_first() {
    assert_eq!(
        cgroup_and_ancestors("/a/b/c"),
        ["/", "/a", "/a/b", "/a/b/c"]
    );
    assert_eq!(cgroup_and_ancestors("/a/b/"), ["/", "/a", "/a/b"]);
    assert_eq!(cgroup_and_ancestors("/"), ["/"]);
    assert!(cgroup_and_ancestors("").is_empty());
    // The root is a cgroup a rule can name.
    let rules = GangRules::new(&cli(&["cgroup:/"]), &[]).unwrap();
    assert_eq!(
        rules.resolve(&task(5, "x", "/a/b", &[])),
        GangKey::Cgroup("/".into())
    );
}

#[test]
fn rules_matching_nothing_are_warnings() {
    let rules = GangRules::new(
        &cli(&[
            "cgroup:/machine.slice/*",
            "space:db-*",
            "comm:nothing-has-this-name",
        ]),
        &[
            GangRuleSpec {
                cgroup: Some("/gone/*".into()),
                ..Default::default()
            },
            GangRuleSpec {
                pids: Some(vec![999_999]),
                ..Default::default()
            },
        ],
    )
    .unwrap();
    let cgroups = ["/", "/machine.slice", "/user.slice"];
    let spaces = ["web"];
    assert_eq!(
        rules.dangling(&cgroups, &spaces),
        [
            "--gang \"cgroup:/machine.slice/*\": cgroup pattern \"/machine.slice/*\" matches no cgroup (yet)",
            "--gang \"space:db-*\": space pattern \"db-*\" matches no space (yet)",
            "gang_rule #1: cgroup pattern \"/gone/*\" matches no cgroup (yet)",
        ]
        .map(String::from)
    );
    // Once they exist, nothing dangles (comm and pid rules never do).
    let cgroups = ["/", "/machine.slice", "/machine.slice/vm1.scope", "/gone/x"];
    assert!(rules.dangling(&cgroups, &["db-1"]).is_empty());
}
