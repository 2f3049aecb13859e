use super::*;
use crate::test_rng::Rng;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn normal_cdf_and_erfc_match_known_values() {
    // Phi(x), values from a double-precision erfc.
    for (x, want) in [
        (0.0, 0.5),
        (1.0, 0.841_344_746_068_542_9),
        (1.96, 0.975_002_104_851_779_5),
        (-2.575_829_303_548_9, 0.005),
        (3.0, 0.998_650_101_968_369_9),
        (-1.5, 0.066_807_201_268_858_09),
    ] {
        let got = normal_cdf(x);
        assert!(close(got, want, 1e-6), "Phi({x}) = {got}, want {want}");
    }
    for (x, want) in [
        (0.1, 0.887_537_083_981_715_2),
        (0.5, 0.479_500_122_186_953_5),
        (1.0, 0.157_299_207_050_285_13),
        (2.0, 0.004_677_734_981_047_265),
        (-1.0, 1.842_700_792_949_715),
    ] {
        assert!(close(erfc(x), want, 1e-6), "erfc({x}) = {}", erfc(x));
    }
    // The tails: relative error, since p-values there are tiny.
    for (x, want) in [
        (5.0, 2.866_515_718_791_946e-7),
        (8.0, 6.220_960_574_271_819e-16),
        (10.0, 7.619_853_024_160_593e-24),
    ] {
        let got = 1.0 - normal_cdf(x); // loses the tail: use the symmetry
        let tail = normal_cdf(-x);
        assert!(
            ((tail - want) / want).abs() < 1e-6,
            "Q({x}) = {tail}, want {want} (1 - Phi = {got})"
        );
    }
    assert!(erfc(f64::NAN).is_nan());
}

#[test]
fn u_test_matches_a_hand_computed_example_with_ties() {
    // x = 1 2 2 3, y = 2 3 4 5 5. Mid-ranks: 1 -> 1; the three 2s -> 3;
    // the two 3s -> 5.5; 4 -> 7; the two 5s -> 8.5. R_x = 1+3+3+5.5 =
    // 12.5, U_x = 12.5 - 4*5/2 = 2.5 (by pairs: each x=2 ties one y: 2 *
    // 0.5; x=3 beats 2, ties 3: 1.5). Mean 10; ties sum (27-3)+(8-2)+(8-2)
    // = 36; variance = 20/12 * (10 - 36/72) = 15.8333; z = -(7.5-0.5) /
    // 3.97911 = -1.759186; p = erfc(1.759186 / sqrt 2) = 0.0785459.
    let t = mann_whitney_u(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 5.0, 5.0]).unwrap();
    assert_eq!(t.u, 2.5);
    assert!(close(t.z, -1.759_186_414_825_121, 1e-9), "{t:?}");
    assert!(close(t.p_value, 0.078_545_850_951_190_7, 1e-6), "{t:?}");
    // The other way round: U_y = 20 - 2.5, z positive, same p.
    let r = mann_whitney_u(&[2.0, 3.0, 4.0, 5.0, 5.0], &[1.0, 2.0, 2.0, 3.0]).unwrap();
    assert_eq!(r.u, 17.5);
    assert!(close(r.z, -t.z, 1e-12) && close(r.p_value, t.p_value, 1e-12));
    // No ties, complete separation (4 vs 5): U = 0, variance 20*10/12,
    // z = 9.5 / 4.08248 = 2.327015, p = 0.0199645.
    let s = mann_whitney_u(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0, 9.0]).unwrap();
    assert_eq!(s.u, 0.0);
    assert!(close(s.p_value, 0.019_964_453_305_216_057, 1e-6), "{s:?}");
}

#[test]
fn u_test_edge_cases() {
    assert_eq!(mann_whitney_u(&[], &[1.0]), None);
    assert_eq!(mann_whitney_u(&[1.0], &[]), None);
    assert_eq!(mann_whitney_u(&[f64::NAN], &[1.0]), None);
    // Every value equal: no variance, nothing to tell apart.
    let t = mann_whitney_u(&[2.0; 30], &[2.0; 30]).unwrap();
    assert_eq!((t.u, t.p_value), (450.0, 1.0));
    // Within half a pair of the mean, the continuity correction gives z 0.
    // x = 1 4, y = 2 3: U = 2 = the mean.
    let t = mann_whitney_u(&[1.0, 4.0], &[2.0, 3.0]).unwrap();
    assert_eq!((t.u, t.z, t.p_value), (2.0, 0.0, 1.0));
    // x = 1 3, y = 2 4: U = 1, z = -(1 - 0.5) / sqrt(20/12) = -0.387298.
    let t = mann_whitney_u(&[1.0, 3.0], &[2.0, 4.0]).unwrap();
    assert_eq!(t.u, 1.0);
    assert!(close(t.z, -0.387_298_334_620_741_7, 1e-12), "{t:?}");
}

#[test]
fn median_of_odd_even_and_empty() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    assert!(median(&[]).is_nan());
}

fn filled(
    rng: &mut Rng,
    n_all: usize,
    all: (f64, f64),
    n_partial: usize,
    partial: (f64, f64),
) -> CpiSamples {
    let mut s = CpiSamples::new();
    for _ in 0..n_all {
        s.push_all(rng.normal(all.0, all.1).max(0.01));
    }
    for _ in 0..n_partial {
        s.push_partial(rng.normal(partial.0, partial.1).max(0.01));
    }
    s
}

#[test]
fn the_papers_bimodal_cpi_is_memory_bound_with_a_tiny_p() {
    let mut rng = Rng::new(1);
    // CPI ~0.5 in All share, ~3.2 in Partial share, with noise.
    let s = filled(&mut rng, 40, (0.5, 0.1), 40, (3.2, 0.5));
    let v = s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO);
    let Verdict::MemoryBound(e) = v else {
        panic!("{v:?}")
    };
    assert!(e.p_value < 1e-12, "{e:?}");
    assert_eq!((e.n_all, e.n_partial), (40, 40));
    assert_eq!(e.u, 1600.0, "every Partial sample is above every All one");
    assert!(e.median_ratio > 5.0 && e.median_ratio < 8.0, "{e:?}");
    assert!(v.is_memory_bound() && v.evidence() == Some(&e));
}

#[test]
fn the_same_distribution_is_rarely_significant() {
    // 200 seeded trials, 40 samples a side from one distribution: at
    // alpha = 0.01 about 2 should come out significant; allow 3 %.
    let mut significant = 0;
    let mut memory_bound = 0;
    for seed in 0..200 {
        let mut rng = Rng::new(1000 + seed);
        let s = filled(&mut rng, 40, (1.2, 0.3), 40, (1.2, 0.3));
        let v = s.verdict(0.01, DEFAULT_MIN_RATIO);
        let e = *v.evidence().unwrap();
        if e.p_value < 0.01 {
            significant += 1;
        }
        if v.is_memory_bound() {
            memory_bound += 1;
        }
    }
    assert!(significant <= 6, "{significant} false positives of 200");
    assert_eq!(memory_bound, 0);
}

#[test]
fn a_significant_but_small_shift_is_not_memory_bound() {
    let mut rng = Rng::new(7);
    // 1.00 against 1.05, 256 a side: the test sees it, the ratio does not
    // make it memory-bound (a CPU-bound program's placement noise).
    let s = filled(&mut rng, 256, (1.00, 0.05), 256, (1.05, 0.05));
    let v = s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO);
    let Verdict::NotMemoryBound(e) = v else {
        panic!("{v:?}")
    };
    assert!(e.p_value < 1e-6, "the shift is significant: {e:?}");
    assert!(e.median_ratio > 1.02 && e.median_ratio < 1.08, "{e:?}");
    // With no effect threshold it would have been called memory-bound.
    assert!(s.verdict(DEFAULT_ALPHA, 1.0).is_memory_bound());
}

#[test]
fn faster_when_spread_is_not_memory_bound() {
    let mut rng = Rng::new(9);
    let s = filled(&mut rng, 40, (3.2, 0.3), 40, (0.5, 0.1));
    let v = s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO);
    let e = v.evidence().unwrap();
    assert!(
        !v.is_memory_bound() && e.p_value < 1e-9 && e.median_ratio < 0.3,
        "{v:?}"
    );
    assert!(!s.verdict(f64::NAN, DEFAULT_MIN_RATIO).is_memory_bound());
}

#[test]
fn too_few_samples_is_insufficient_with_the_counts() {
    let mut rng = Rng::new(3);
    let s = filled(
        &mut rng,
        MIN_SAMPLES,
        (0.5, 0.1),
        MIN_SAMPLES - 1,
        (3.2, 0.3),
    );
    assert_eq!(
        s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO),
        Verdict::Insufficient {
            all: MIN_SAMPLES,
            partial: MIN_SAMPLES - 1,
            needed: MIN_SAMPLES
        }
    );
    assert_eq!(s.verdict(0.01, 1.5).evidence(), None);
    let mut s = s;
    s.push_partial(3.2);
    assert!(s
        .verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO)
        .is_memory_bound());
    s.clear();
    assert_eq!((s.len_all(), s.len_partial()), (0, 0));
}

#[test]
fn many_ties_are_handled() {
    // CPI rounded to one decimal: heavy ties on both sides.
    let mut s = CpiSamples::new();
    for i in 0..60 {
        s.push_all([0.5, 0.5, 0.6][i % 3]);
        s.push_partial([3.2, 3.2, 0.6][i % 3]);
    }
    let v = s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO);
    let e = *v.evidence().unwrap();
    // Pairs: partial 3.2 (40) beats all 60 = 2400; partial 0.6 (20) beats
    // the 40 at 0.5 = 800 and ties the 20 at 0.6 = 200.
    assert_eq!(e.u, 3400.0);
    assert!(v.is_memory_bound() && e.p_value < 1e-10, "{v:?}");
    assert!(close(e.median_ratio, 3.2 / 0.5, 1e-12));
    // Identical tied samples: p is 1, not NaN.
    let mut s = CpiSamples::new();
    for i in 0..40 {
        s.push_all([1.0, 2.0][i % 2]);
        s.push_partial([1.0, 2.0][i % 2]);
    }
    let e = *s.verdict(0.01, 1.5).evidence().unwrap();
    assert_eq!((e.u, e.p_value, e.median_ratio), (800.0, 1.0, 1.0));
}

#[test]
fn bad_samples_are_skipped_and_counted() {
    let mut s = CpiSamples::new();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0, -0.0] {
        assert!(!s.push_all(bad) && !s.push_partial(bad));
    }
    assert_eq!(s.rejected(), 12);
    assert_eq!((s.len_all(), s.len_partial()), (0, 0));
    assert!(s.push_all(0.5) && s.push_partial(f64::MIN_POSITIVE));
    assert_eq!((s.len_all(), s.len_partial(), s.rejected()), (1, 1, 12));
}

#[test]
fn the_window_keeps_only_the_latest_samples() {
    let mut s = CpiSamples::new();
    assert_eq!(s.capacity(), WINDOW);
    // An old phase at CPI 3.2, then WINDOW samples of a new phase at 0.5.
    for _ in 0..100 {
        s.push_all(3.2);
        s.push_partial(3.2);
    }
    for _ in 0..WINDOW {
        s.push_all(0.5);
        s.push_partial(3.2);
    }
    assert_eq!((s.len_all(), s.len_partial()), (WINDOW, WINDOW));
    let e = *s
        .verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO)
        .evidence()
        .unwrap();
    assert_eq!(e.median_ratio, 6.4, "the old phase has left the window");
    assert_eq!(e.u, (WINDOW * WINDOW) as f64);
    assert_eq!(CpiSamples::with_capacity(3).capacity(), MIN_SAMPLES);
    let mut small = CpiSamples::with_capacity(30);
    for i in 0..50 {
        small.push_all(f64::from(i) + 1.0);
    }
    assert_eq!(small.len_all(), 30);
    assert_eq!(
        median(&small.all_share.iter().copied().collect::<Vec<_>>()),
        35.5
    );
}
