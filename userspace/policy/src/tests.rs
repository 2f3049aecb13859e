use super::*;

/// A machine's derived thresholds, as the topology crate would give them.
fn derived() -> DecayThresholds {
    DecayThresholds {
        core_ns: 300_000,
        llc_ns: 2_000_000,
        core_bytes: 512 << 10,
        llc_bytes: 16 << 20,
        fill_bytes_per_sec: 1_000_000_000,
    }
}

#[test]
fn every_preset_parses_and_is_named_after_its_file() {
    for (name, _) in PRESETS {
        let p = Policy::load(name).unwrap();
        assert_eq!(p.name, name);
        assert!(!p.description.is_empty());
    }
    assert!(Policy::load("sky1").unwrap().knobs.affinity);
    assert!(!Policy::load("vtime").unwrap().knobs.affinity);
    assert_eq!(
        Policy::load("sky1-strict").unwrap().knobs.affinity_grace_us,
        0
    );
}

#[test]
fn presets_differ_only_in_affinity_knobs() {
    // The baseline must keep everything that is not SKY-1 equal, or a
    // comparison measures more than affinity.
    let sky1 = Policy::load("sky1").unwrap();
    let vtime = Policy::load("vtime").unwrap();
    assert_eq!(sky1.knobs.slice_us, vtime.knobs.slice_us);
    assert_eq!(sky1.knobs.sleeper_credit_us, vtime.knobs.sleeper_credit_us);
    assert_eq!(sky1.knobs.starve_ms, vtime.knobs.starve_ms);
}

#[test]
fn derived_thresholds_fill_in_and_overrides_win() {
    let p = Policy::load("sky1").unwrap();
    let k = p.resolve(&Overrides::default(), &derived()).unwrap();
    assert_eq!(
        (k.knobs.decay_core_us, k.knobs.decay_llc_us),
        (Some(300), Some(2_000))
    );
    assert_eq!(k.knobs.slice_us, p.knobs.slice_us);
    assert_eq!(k.knobs.starve_ms, p.knobs.starve_ms);
    assert_eq!(
        (k.knobs.decay_core_kb, k.knobs.decay_llc_kb),
        (Some(512), Some(16 << 10))
    );
    assert_eq!(k.fill_bytes_per_ms, 1_000_000);
    assert_eq!(k.knobs.decay, DecayRule::Pressure);

    let over = Overrides {
        decay_core_us: Some(100),
        slice_us: Some(2000),
        walk_depth: Some(4),
        decay: Some(DecayRule::Sleep),
        ..Default::default()
    };
    let k = p.resolve(&over, &derived()).unwrap();
    assert_eq!(k.knobs.decay, DecayRule::Sleep);
    assert_eq!(k.knobs.decay_core_us, Some(100));
    assert_eq!(k.knobs.decay_llc_us, Some(2_000));
    assert_eq!(k.knobs.slice_us, 2_000);
    assert_eq!(k.knobs.walk_depth, 4);
}

#[test]
fn bad_overrides_are_refused_by_name() {
    let p = Policy::load("sky1").unwrap();
    let err = |over: Overrides| format!("{:#}", p.resolve(&over, &derived()).unwrap_err());
    assert!(err(Overrides {
        walk_depth: Some(0),
        ..Default::default()
    })
    .contains("walk_depth"));
    assert!(err(Overrides {
        slice_us: Some(10),
        ..Default::default()
    })
    .contains("slice_us"));
    let inverted = Overrides {
        decay_core_us: Some(5000),
        decay_llc_us: Some(1000),
        ..Default::default()
    };
    assert!(err(inverted).contains("must not exceed"));
    let long_grace = Overrides {
        affinity_grace_us: Some(60_000),
        ..Default::default()
    };
    assert!(err(long_grace).contains("affinity_grace_us"));
}

#[test]
fn bad_policy_files_name_the_problem() {
    let base = PRESETS[0].1;
    let typo = base.replace("walk_depth", "walk_dept");
    let e = format!("{:#}", Policy::parse(&typo, "typo.toml").unwrap_err());
    assert!(e.contains("typo.toml") && e.contains("walk_dept"), "{e}");

    let huge = base.replace("slice_us = 5000", "slice_us = 5000000");
    let e = format!("{:#}", Policy::parse(&huge, "huge.toml").unwrap_err());
    assert!(e.contains("slice_us"), "{e}");

    let e = format!(
        "{:#}",
        Policy::parse("affinity = \"yes\"", "x").unwrap_err()
    );
    assert!(e.contains("policy x"), "{e}");

    let e = format!("{:#}", Policy::load("nosuch").unwrap_err());
    assert!(e.contains("nosuch") && e.contains("sky1"), "{e}");

    let e = format!("{:#}", Policy::load("/nonexistent/p.toml").unwrap_err());
    assert!(e.contains("/nonexistent/p.toml"), "{e}");
}

#[test]
fn policy_files_load_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    let text = PRESETS[0].1.replace("name = \"sky1\"", "name = \"mine\"") + "decay_core_us = 250\n";
    std::fs::write(&path, text).unwrap();
    let p = Policy::load(path.to_str().unwrap()).unwrap();
    assert_eq!(p.name, "mine");
    assert_eq!(p.knobs.decay_core_us, Some(250));
}

#[test]
fn settings_that_break_the_wait_bound_are_refused() {
    let p = Policy::load("sky1").unwrap();
    // 4 x 5 ms slices of patience + 1 ms grace = 21 ms of affinity: a
    // 28 ms starve bound would rescue at 6/8 of it, 21 ms, before
    // affinity lets go.
    let e = format!(
        "{:#}",
        p.resolve(
            &Overrides {
                starve_ms: Some(28),
                ..Default::default()
            },
            &derived()
        )
        .unwrap_err()
    );
    assert!(
        e.contains("starve_ms = 28") && e.contains("must be at least 29 ms"),
        "{e}"
    );
    assert!(p
        .resolve(
            &Overrides {
                starve_ms: Some(29),
                ..Default::default()
            },
            &derived()
        )
        .is_ok());
    let text = PRESETS[0]
        .1
        .replace("slice_min_us = 250", "slice_min_us = 6000");
    let e = format!("{:#}", Policy::parse(&text, "p.toml").unwrap_err());
    assert!(e.contains("slice_min_us = 6000"), "{e}");
}

#[test]
fn decay_rules_parse_and_bad_ones_are_named() {
    let sleep = PRESETS[0]
        .1
        .replace("decay = \"pressure\"", "decay = \"sleep\"");
    assert_eq!(
        Policy::parse(&sleep, "s").unwrap().knobs.decay,
        DecayRule::Sleep
    );
    let bad = PRESETS[0]
        .1
        .replace("decay = \"pressure\"", "decay = \"clock\"");
    let e = format!("{:#}", Policy::parse(&bad, "bad.toml").unwrap_err());
    assert!(e.contains("bad.toml") && e.contains("clock"), "{e}");
    assert!(e.contains("sleep") && e.contains("pressure"), "{e}");
    let inverted = PRESETS[0].1.to_string() + "decay_core_kb = 4096\ndecay_llc_kb = 1024\n";
    let p = Policy::parse(&inverted, "inv").unwrap();
    let e = format!(
        "{:#}",
        p.resolve(&Overrides::default(), &derived()).unwrap_err()
    );
    assert!(e.contains("decay_core_kb"), "{e}");
}

#[test]
fn classify_thresholds_come_from_the_policy_and_bad_ones_are_named() {
    let p = Policy::load("sky1").unwrap();
    assert_eq!(p.classify, sky_classify::Thresholds::default());
    let text = format!("{}\n[classify]\ndwell_periods = 5\n", PRESETS[0].1);
    assert_eq!(
        Policy::parse(&text, "p.toml")
            .unwrap()
            .classify
            .dwell_periods,
        5
    );
    let text = format!("{}\n[classify]\npm_stall_leave = 0.9\n", PRESETS[0].1);
    let e = format!("{:#}", Policy::parse(&text, "p.toml").unwrap_err());
    assert!(
        e.contains("p.toml") && e.contains("classify.pm_stall_leave"),
        "{e}"
    );
    let text = format!("{}\n[classify]\nstall = 0.9\n", PRESETS[0].1);
    let e = format!("{:#}", Policy::parse(&text, "p.toml").unwrap_err());
    assert!(e.contains("stall"), "{e}");
}

#[test]
fn class_rules_are_read_and_bad_ones_named() {
    let text = format!(
        "{}\n[[class_rule]]\ncomm = \"pmw*\"\nclass = \"pm-writer\"\n",
        PRESETS[0].1
    );
    let p = Policy::parse(&text, "p.toml").unwrap();
    assert_eq!(p.class_rule.len(), 1);
    let text = format!(
        "{}\n[[class_rule]]\ncomm = \"pmw*\"\nclass = \"pm-writer\"\n[[class_rule]]\npid = 3\nclass = \"writer\"\n",
        PRESETS[0].1
    );
    let e = format!("{:#}", Policy::parse(&text, "p.toml").unwrap_err());
    assert!(
        e.contains("p.toml") && e.contains("class_rule 2: field class"),
        "{e}"
    );
}

#[test]
fn gang_knobs_resolve_and_a_spill_past_the_rescue_is_refused() {
    let k = Policy::load("sky1")
        .unwrap()
        .resolve(&Overrides::default(), &derived())
        .unwrap();
    assert!(k.knobs.gangs);
    assert_eq!(k.knobs.gang_spill_us, Some(20_000));
    let off = Overrides {
        gangs: Some(false),
        ..Default::default()
    };
    assert!(
        !Policy::load("sky1")
            .unwrap()
            .resolve(&off, &derived())
            .unwrap()
            .knobs
            .gangs
    );
    // The baselines leave gangs off; left out, the spill is the patience.
    for name in ["vtime", "sky1-strict"] {
        let p = Policy::load(name).unwrap();
        let k = p.resolve(&Overrides::default(), &derived()).unwrap();
        assert!(!k.knobs.gangs, "{name}");
        assert_eq!(k.knobs.gang_spill_us, Some(k.patience_us), "{name}");
    }
    // starve_ms 50: the rescue takes a task at 37.5 ms.
    let text = PRESETS[0]
        .1
        .replace("gang_spill_us = 20000", "gang_spill_us = 37500");
    let e = format!("{:#}", Policy::parse(&text, "p.toml").unwrap_err());
    assert!(
        e.contains("p.toml") && e.contains("gang_spill_us = 37500"),
        "{e}"
    );
    let text = PRESETS[0]
        .1
        .replace("gang_spill_us = 20000", "gang_spill_us = 37499");
    assert!(Policy::parse(&text, "p.toml").is_ok());
}

#[test]
fn gang_rules_are_read_and_bad_ones_named() {
    let text = format!(
        "{}\n[[gang_rule]]\nspace = \"job-*\"\nmemory_bound = true\n",
        PRESETS[0].1
    );
    assert_eq!(Policy::parse(&text, "p.toml").unwrap().gang_rule.len(), 1);
    let text = format!(
        "{}\n[[gang_rule]]\nspace = \"job-*\"\ncomm = \"x\"\n",
        PRESETS[0].1
    );
    let e = format!("{:#}", Policy::parse(&text, "p.toml").unwrap_err());
    assert!(e.contains("p.toml") && e.contains("gang_rule #1"), "{e}");
}

/// The sky1 preset padded with a comment to `len` bytes.
fn padded_to(len: usize) -> String {
    let mut text = PRESETS[0].1.to_string() + "#";
    assert!(text.len() < len);
    text.push_str(&"x".repeat(len - text.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), len);
    text
}

/// `Policy::load` on a thread, so that a load that blocks fails the test
/// instead of hanging it.
fn load_within_2s(path: &std::path::Path) -> Result<Policy, String> {
    let path = path.to_str().unwrap().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Policy::load(&path).map_err(|e| format!("{e:#}")));
    });
    rx.recv_timeout(std::time::Duration::from_secs(2))
        .expect("loading the policy file blocked for 2 s")
}

#[test]
fn a_fifo_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fifo.toml");
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let e = load_within_2s(&path).unwrap_err();
    assert!(
        e.contains(path.to_str().unwrap()) && e.contains("is a FIFO, not a regular file"),
        "{e}"
    );
}

#[test]
fn dev_zero_is_refused_as_a_character_device() {
    let e = load_within_2s(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(
        e.contains("/dev/zero is a character device, not a regular file"),
        "{e}"
    );
}

#[test]
fn a_directory_and_a_socket_are_refused_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("d.toml");
    std::fs::create_dir(&sub).unwrap();
    let e = load_within_2s(&sub).unwrap_err();
    assert!(
        e.contains(sub.to_str().unwrap()) && e.contains("is a directory, not a regular file"),
        "{e}"
    );
    let sock = dir.path().join("s.toml");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let e = load_within_2s(&sock).unwrap_err();
    assert!(
        e.contains(sock.to_str().unwrap()) && e.contains("is a socket, not a regular file"),
        "{e}"
    );
}

#[test]
fn a_10_mb_policy_file_is_refused_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    // A valid policy, padded with a comment: only its size is wrong.
    std::fs::write(&path, padded_to(10 << 20)).unwrap();
    let e = load_within_2s(&path).unwrap_err();
    assert!(
        e.contains(path.to_str().unwrap())
            && e.contains("is 10485760 bytes, more than the cap of 65536 bytes"),
        "{e}"
    );
}

#[test]
fn a_policy_file_up_to_64_kib_is_read_and_one_byte_more_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("padded.toml");
    for len in [65_535, 65_536] {
        std::fs::write(&path, padded_to(len)).unwrap();
        assert_eq!(load_within_2s(&path).unwrap().name, "sky1", "{len} bytes");
    }
    std::fs::write(&path, padded_to(65_537)).unwrap();
    let e = load_within_2s(&path).unwrap_err();
    assert!(e.contains("is 65537 bytes"), "{e}");
}

#[test]
fn a_policy_file_that_is_not_utf8_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.toml");
    let mut bytes = PRESETS[0].1.as_bytes().to_vec();
    bytes.extend_from_slice(b"# caf\xe9\n");
    std::fs::write(&path, &bytes).unwrap();
    let e = load_within_2s(&path).unwrap_err();
    assert!(
        e.contains(path.to_str().unwrap())
            && e.contains(&format!(
                "is not UTF-8 text (invalid byte at offset {})",
                PRESETS[0].1.len() + 5
            )),
        "{e}"
    );
}

#[test]
fn starve_ms_below_10_is_refused() {
    // vtime with 1 ms slices: 4 ms of patience, so the wait bound alone
    // would allow starve_ms down to 6.
    let text = |starve_ms: u64| {
        PRESETS[2]
            .1
            .replace("slice_us = 5000", "slice_us = 1000")
            .replace("starve_ms = 50", &format!("starve_ms = {starve_ms}"))
    };
    let e = format!("{:#}", Policy::parse(&text(9), "p.toml").unwrap_err());
    assert!(
        e.contains("p.toml") && e.contains("starve_ms = 9 is outside 10..=10000"),
        "{e}"
    );
    assert_eq!(
        Policy::parse(&text(10), "p.toml").unwrap().knobs.starve_ms,
        10
    );
    let over = Overrides {
        starve_ms: Some(9),
        slice_us: Some(1000),
        ..Default::default()
    };
    let e = format!(
        "{:#}",
        Policy::load("vtime")
            .unwrap()
            .resolve(&over, &derived())
            .unwrap_err()
    );
    assert!(e.contains("starve_ms = 9 is outside 10..=10000"), "{e}");
}

#[test]
fn policy_names_are_one_plain_word() {
    let named = |name: &str| {
        PRESETS[2]
            .1
            .replace("name = \"vtime\"", &format!("name = {name:?}"))
    };
    let long = "n".repeat(65);
    for bad in ["a b", "x\ny", long.as_str(), "", "caf\u{e9}", "a=b"] {
        let e = format!("{:#}", Policy::parse(&named(bad), "p.toml").unwrap_err());
        assert!(
            e.contains("p.toml")
                && e.contains(&format!("name = {bad:?} is not allowed"))
                && e.contains("1 to 64 characters"),
            "{e}"
        );
    }
    let longest = "n".repeat(64);
    for good in ["my-policy_1.2", longest.as_str(), "X"] {
        assert_eq!(Policy::parse(&named(good), "p.toml").unwrap().name, good);
    }
}

#[test]
fn left_out_knobs_take_their_documented_defaults() {
    // sky1 without the knobs that have defaults: what a user's older
    // policy file gets.
    let text: String = PRESETS[0]
        .1
        .lines()
        .filter(|l| {
            !["slice_min_us", "latency_burst_us", "latency_min_run_us"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let p = Policy::parse(&text, "older.toml").unwrap();
    assert_eq!(p.knobs.slice_min_us, 250);
    assert_eq!(
        (p.knobs.latency_burst_us, p.knobs.latency_min_run_us),
        (500, 500)
    );
}

#[test]
fn latency_knobs_resolve_and_bad_ones_are_named() {
    let sky1 = Policy::load("sky1").unwrap();
    let k = sky1.resolve(&Overrides::default(), &derived()).unwrap();
    assert_eq!(
        (k.knobs.latency_burst_us, k.knobs.latency_min_run_us),
        (500, 500)
    );
    for off in ["sky1-strict", "vtime"] {
        assert_eq!(
            Policy::load(off).unwrap().knobs.latency_burst_us,
            0,
            "{off}"
        );
    }
    let off = Overrides {
        latency_burst_us: Some(0),
        ..Default::default()
    };
    assert_eq!(
        sky1.resolve(&off, &derived())
            .unwrap()
            .knobs
            .latency_burst_us,
        0
    );
    let bad = |over: Overrides| format!("{:#}", sky1.resolve(&over, &derived()).unwrap_err());
    let e = bad(Overrides {
        latency_burst_us: Some(5001),
        ..Default::default()
    });
    assert!(
        e.contains("latency_burst_us = 5001") && e.contains("slice_us"),
        "{e}"
    );
    let e = bad(Overrides {
        latency_min_run_us: Some(49),
        ..Default::default()
    });
    assert!(e.contains("latency_min_run_us = 49"), "{e}");
}

#[test]
fn a_policy_of_only_a_name_takes_every_default() {
    let p = Policy::parse("name = \"bare\"\ndescription = \"d\"\n", "bare.toml").unwrap();
    assert_eq!(p.knobs, Knobs::default());
    // sky1 is the defaults but for a spill it sets: a file that changes
    // one knob of sky1 need write only that one.
    let sky1 = Policy::load("sky1").unwrap().knobs;
    assert_eq!(
        sky1,
        Knobs {
            gang_spill_us: Some(20_000),
            ..Knobs::default()
        }
    );
    let e = format!(
        "{:#}",
        Policy::parse("description = \"d\"\n", "nameless.toml").unwrap_err()
    );
    assert!(e.contains("nameless.toml") && e.contains("name"), "{e}");
}

#[test]
fn overrides_replace_only_what_they_give() {
    let k = Knobs::default().overridden(&Overrides {
        slice_us: Some(2000),
        affinity: Some(false),
        decay_llc_kb: Some(64),
        ..Default::default()
    });
    assert_eq!(
        k,
        Knobs {
            slice_us: 2000,
            affinity: false,
            decay_llc_kb: Some(64),
            ..Knobs::default()
        }
    );
    assert_eq!(
        Knobs::default().unset(),
        [
            "gang_spill_us",
            "decay_core_us",
            "decay_llc_us",
            "decay_core_kb",
            "decay_llc_kb"
        ]
    );
}

#[test]
fn every_knob_is_in_the_table_and_docs_knobs_md_is_current() {
    let table = knob_table();
    for name in Knobs::NAMES {
        let option = format!("`--{}", name.replace('_', "-"));
        assert!(
            table.contains(&format!("| `{name}` | {option}")),
            "{name}: {table}"
        );
    }
    assert!(table.contains("| `slice_us` | `--slice-us US` | `5000` | 100–100000 |"));
    assert!(table.contains("| `decay_core_kb` | `--decay-core-kb KB` | derived |"));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/knobs.md");
    let want = knobs_doc();
    if std::env::var_os("SKY_WRITE_DOCS").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/knobs.md is not what the knob list makes: run \
         `SKY_WRITE_DOCS=1 cargo test -p sky-policy` and commit it"
    );
}
