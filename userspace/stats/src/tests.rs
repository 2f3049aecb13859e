use super::*;
use scx_stats::serde_json::json;

fn catalog() -> Catalog {
    Catalog::new(&[
        ("dispatches", "tasks handed to a CPU to run"),
        ("wait_ns", "total nanoseconds tasks spent queued"),
    ])
}

fn object(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn the_meta_names_every_stat_with_its_help() {
    let meta = catalog().meta();
    assert_eq!(meta.name, META_NAME);
    assert!(meta.attrs.top.is_some());
    let names: Vec<&str> = meta.fields.keys().map(String::as_str).collect();
    assert_eq!(names, ["dispatches", "generation", "policy", "wait_ns"]);
    let d = &meta.fields["dispatches"];
    assert_eq!(
        d.attrs.desc.as_deref(),
        Some("tasks handed to a CPU to run")
    );
    assert!(matches!(d.data, StatsData::Datum(StatsKind::U64)));
    assert!(matches!(
        meta.fields["policy"].data,
        StatsData::Datum(StatsKind::String)
    ));
}

#[test]
fn counters_become_growth_and_the_rest_stays() {
    let c = catalog();
    let before =
        object(json!({"policy": "sky1", "generation": 3, "dispatches": 10, "wait_ns": 50}));
    let now = object(json!({"policy": "vtime", "generation": 4, "dispatches": 15, "wait_ns": 20}));
    let d = c.delta(&now, &before);
    assert_eq!(d["dispatches"], json!(5));
    // Went backwards: restarted, counts whole.
    assert_eq!(d["wait_ns"], json!(20));
    assert_eq!(
        (d["policy"].clone(), d["generation"].clone()),
        (json!("vtime"), json!(4))
    );
}

#[test]
fn openmetrics_text_has_types_help_totals_and_the_end_mark() {
    let text = catalog().openmetrics(&object(json!({
        "policy": "my \"quoted\" policy",
        "generation": 7,
        "dispatches": 123,
        "wait_ns": 9
    })));
    assert!(
        text.contains("# TYPE scx_sky_dispatches counter\n"),
        "{text}"
    );
    assert!(text.contains("# HELP scx_sky_dispatches tasks handed to a CPU to run\n"));
    assert!(text.contains("scx_sky_dispatches_total 123\n"));
    assert!(text.contains("scx_sky_generation 7\n"));
    assert!(text.contains("scx_sky_policy_info{policy=\"my \\\"quoted\\\" policy\"} 1\n"));
    assert!(text.ends_with("# EOF\n"));
    // Every sample line belongs to a family declared before it.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let family = line.split(['{', ' ']).next().unwrap();
        let base = family.trim_end_matches("_total").trim_end_matches("_info");
        assert!(text.contains(&format!("# TYPE {base} ")), "{line}");
    }
}

/// The socket is 0600 under any umask (scx_stats binds with the
/// process's), and goes with the server.
#[test]
fn the_stats_socket_is_root_only_whatever_the_umask_and_removed_after() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats");
    // SAFETY: umask only swaps the process's file-creation mask.
    let before = unsafe { libc::umask(0) };
    let served = serve(&catalog(), Some(&path), std::sync::Arc::new(|| {}));
    // SAFETY: as above.
    unsafe { libc::umask(before) };
    let served = served.unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");
    assert_eq!(served.path(), path);
    drop(served);
    assert!(!path.exists(), "the socket outlived its server");
}

#[test]
fn a_served_catalog_answers_meta_totals_and_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats");
    let wakes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let woken = wakes.clone();
    let wake: Waker = std::sync::Arc::new(move || {
        woken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let server = serve(&catalog(), Some(&path), wake).unwrap();
    let (res, req) = server.channels();
    // The "scheduler": a sample per request, dispatches growing by 10.
    let answer = std::thread::spawn(move || {
        let mut n = 0u64;
        while req.recv().is_ok() {
            n += 10;
            let sample = json!({"policy": "sky1", "generation": 1, "dispatches": n, "wait_ns": 0});
            if res.send(sample).is_err() {
                break;
            }
        }
    });
    let mut reader = Reader::connect(Some(&path)).unwrap();
    let meta = reader.meta().unwrap();
    assert!(meta.get(META_NAME).is_some(), "{meta}");
    assert_eq!(reader.read("totals").unwrap()["dispatches"], json!(10));
    // top: growth since this client's previous read (opened at 20).
    assert_eq!(reader.read("top").unwrap()["dispatches"], json!(10));
    assert_eq!(reader.read("top").unwrap()["dispatches"], json!(10));
    // Every request woke the scheduler's loop: totals, top's open and
    // its two reads.
    assert_eq!(wakes.load(std::sync::atomic::Ordering::Relaxed), 4);
    let e = reader.read("nonsense").unwrap_err();
    assert!(format!("{e:#}").contains("nonsense"), "{e:#}");
    drop(reader);
    drop(server);
    drop(answer);
    let e = Reader::connect(Some(&dir.path().join("none")))
        .err()
        .unwrap();
    assert!(e.to_string().contains("is scx_sky running?"), "{e}");
}

#[test]
fn class_requests_name_threads_and_bad_ones_say_why() {
    assert_eq!(parse_tids("12,7,,3").unwrap(), vec![12, 7, 3]);
    assert!(parse_tids("").unwrap().is_empty());
    let e = format!("{:#}", parse_tids("12,x").unwrap_err());
    assert!(e.contains("\"x\" is not a thread ID"), "{e}");
    let many: Vec<String> = (0..=MAX_CLASS_TIDS).map(|t| t.to_string()).collect();
    let e = format!("{:#}", parse_tids(&many.join(",")).unwrap_err());
    assert!(e.contains("at most 512"), "{e}");
}

/// The bucket BPF's sky_wait_record() counts a wait of `us` in (the rule
/// in bpf/intf.h, restated to check the bounds against it).
fn bucket_of_us(us: u64) -> usize {
    if us == 0 {
        return 0;
    }
    let msb = 63 - us.leading_zeros();
    let sub = if msb >= WAIT_SUB_SHIFT {
        us >> (msb - WAIT_SUB_SHIFT)
    } else {
        us << (WAIT_SUB_SHIFT - msb)
    } & ((1 << WAIT_SUB_SHIFT) - 1);
    (1 + (msb << WAIT_SUB_SHIFT) as usize + sub as usize).min(87)
}

#[test]
fn every_wait_lies_within_its_buckets_bounds() {
    let mut us = 0u64;
    while us < 1_500_000 {
        let b = bucket_of_us(us);
        let (low, high) = wait_bucket_bounds_us(b);
        assert!(
            low <= us && us < high,
            "{us} us in bucket {b}: [{low}, {high})"
        );
        // A bucket is at most a quarter of its lower bound wide (above 4 us).
        if us >= 4 {
            assert!(high - low <= low / 4 + 1, "bucket {b}: [{low}, {high})");
        }
        us += 1 + us / 97;
    }
}

#[test]
fn wait_percentiles_come_from_the_histogram() {
    assert_eq!(wait_percentile_us(&[], 99.0), None);
    // 99 waits of 10 us and one of 1000 us: p50 in 10's bucket, p99 too,
    // p100 in 1000's.
    let h = [(bucket_of_us(10), 99), (bucket_of_us(1000), 1)];
    let p99 = wait_percentile_us(&h, 99.0).unwrap();
    assert!((10..=13).contains(&p99), "{p99}");
    let max = wait_percentile_us(&h, 100.0).unwrap();
    assert!((1000..=1250).contains(&max), "{max}");
    // Order of the pairs does not matter.
    let rev = [h[1], h[0]];
    assert_eq!(wait_percentile_us(&rev, 99.0), Some(p99));
}
