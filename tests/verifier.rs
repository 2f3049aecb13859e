//! The BPF programs' verifier cost against a checked-in baseline
//! (tests/verifier-baseline.txt): scx_sky loads with `--verifier-stats`
//! in the VM and each program's instructions processed and states must
//! stay within [`GROWTH_MAX_PERCENT`] of what the baseline recorded on the same
//! kernel and topology. The verifier is deterministic for a given
//! program, kernel and load-time constants, so the margin is for
//! deliberate change, not noise: a change that grows a program past it
//! updates the baseline in the same commit, saying why:
//! `SKY_UPDATE_VERIFIER_BASELINE=1 cargo test --release --test verifier
//! -- --ignored`. Boots a VM, so #[ignore]d in a plain `cargo test`.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::boots::{self, run_part};
use scenario::{assert_clean_exit, check, checks, on_a_quiet_host};
use std::collections::BTreeMap;
use std::path::PathBuf;
use xtask::report::{self, Fields};

/// Most a program's processed instructions or states may grow over the
/// baseline before the test fails, in percent.
const GROWTH_MAX_PERCENT: u64 = 10;

/// The topology the baseline was recorded on: the shared boot
/// `boots::VERIFIER` runs in.
const TOPOLOGY: &str = "2x2x2";

/// What the baseline holds per (kernel, program): processed, total
/// states, peak states.
type Costs = BTreeMap<(String, String), [u64; 3]>;

const FIGURES: [&str; 3] = ["processed", "total_states", "peak_states"];

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/verifier-baseline.txt")
}

/// `kernel=K topology=T program=P processed=N total_states=N
/// peak_states=N` lines; `#` starts a comment.
fn parse_baseline(text: &str) -> Costs {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(report::fields)
        .filter(|f| f.get("topology").map(String::as_str) == Some(TOPOLOGY))
        .filter_map(|f| {
            Some((
                (f.get("kernel")?.clone(), f.get("program")?.clone()),
                figures(&f)?,
            ))
        })
        .collect()
}

fn figures(f: &Fields) -> Option<[u64; 3]> {
    let n = |k: &str| f.get(k)?.parse().ok();
    Some([n(FIGURES[0])?, n(FIGURES[1])?, n(FIGURES[2])?])
}

fn render_baseline(costs: &Costs) -> String {
    let mut out = String::from(
        "# scx_sky's BPF programs' verifier cost (scx_sky --verifier-stats in the\n\
         # VM), checked by tests/verifier.rs; rewritten by\n\
         # SKY_UPDATE_VERIFIER_BASELINE=1 cargo test --release --test verifier -- --ignored\n",
    );
    for ((kernel, program), [p, t, k]) in costs {
        out += &format!(
            "kernel={kernel} topology={TOPOLOGY} program={program} processed={p} total_states={t} peak_states={k}\n"
        );
    }
    out
}

/// Programs that cost more than the baseline allows, with their figures.
fn grown(now: &Costs, baseline: &Costs) -> Vec<String> {
    let mut out = Vec::new();
    for (key, figs) in now {
        let Some(base) = baseline.get(key) else {
            out.push(format!("{}: {} is not in the baseline", key.0, key.1));
            continue;
        };
        for (i, name) in FIGURES.iter().enumerate() {
            let limit = base[i] + base[i] * GROWTH_MAX_PERCENT / 100;
            if figs[i] > limit {
                out.push(format!(
                    "{}: {} {name} {} against {} ({:.2}x)",
                    key.0,
                    key.1,
                    figs[i],
                    base[i],
                    figs[i] as f64 / base[i].max(1) as f64
                ));
            }
        }
    }
    out
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn no_bpf_program_costs_the_verifier_more_than_its_baseline() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::VERIFIER);
        let c = checks(&out);
        assert_clean_exit(&c);
        let kernel = check(&c, "kernel").to_string();
        let now: Costs = report::lines_with(&out, "verifier: ")
            .iter()
            .filter_map(|f| Some(((kernel.clone(), f.get("program")?.clone()), figures(f)?)))
            .collect();
        assert!(
            now.len() >= 10,
            "--verifier-stats reported {} programs:\n{out}",
            now.len()
        );
        let text = std::fs::read_to_string(baseline_path()).unwrap_or_default();
        let mut baseline = parse_baseline(&text);
        for ((_, program), [p, t, k]) in &now {
            eprintln!("{kernel} {program}: processed {p}, states {t} (peak {k})");
        }
        if std::env::var_os("SKY_UPDATE_VERIFIER_BASELINE").is_some() {
            baseline.retain(|(k, _), _| *k != kernel);
            baseline.extend(now);
            std::fs::write(baseline_path(), render_baseline(&baseline)).unwrap();
            return;
        }
        assert!(
            baseline.keys().any(|(k, _)| *k == kernel),
            "no baseline for kernel {kernel} in {}: record one with SKY_UPDATE_VERIFIER_BASELINE=1",
            baseline_path().display()
        );
        let grown = grown(&now, &baseline);
        assert!(
            grown.is_empty(),
            "verification grew past {GROWTH_MAX_PERCENT}% over the baseline:\n{}",
            grown.join("\n")
        );
    });
}

#[test]
fn the_baseline_reads_back_and_growth_is_caught() {
    let key = |p: &str| ("7.3.4".to_string(), p.to_string());
    let base: Costs = [(key("a"), [1000, 100, 50]), (key("b"), [10, 2, 2])].into();
    assert_eq!(parse_baseline(&render_baseline(&base)), base);
    // Within the margin, smaller, or equal: nothing.
    let fine: Costs = [(key("a"), [1100, 90, 55]), (key("b"), [10, 2, 2])].into();
    assert!(grown(&fine, &base).is_empty());
    // Past it, or a program the baseline never saw: named.
    let worse: Costs = [(key("a"), [1101, 100, 50]), (key("c"), [1, 1, 1])].into();
    let g = grown(&worse, &base);
    assert_eq!(g.len(), 2, "{g:?}");
    assert!(g[0].contains("a processed 1101 against 1000"), "{g:?}");
    assert!(g[1].contains("c is not in the baseline"), "{g:?}");
}
