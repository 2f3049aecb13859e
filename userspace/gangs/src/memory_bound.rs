//! Is a gang memory-bound? The paper's test (seed 003, docs/seeds.md): sample the
//! gang's CPI (cycles / instructions) while it is in *All share* (all its
//! threads on one last-level cache) and while it is in *Partial share*
//! (spread over domains another memory-bound gang uses), and call it
//! memory-bound when the two distributions differ significantly — the
//! paper saw CPI ~0.5 against ~3.2.
//!
//! The test is a two-sample Mann–Whitney U test (two-sided; normal
//! approximation with tie and continuity corrections): it assumes nothing
//! about the shape of the CPI distributions (which are skewed and often
//! bimodal), only that samples are independent. Significance alone is not
//! enough: with a few hundred samples per side a 5 % shift is
//! "significant", yet the paper measured < 5 % for CPU- and IO-bound
//! programs, and a home domain is only worth its migrations when the gang
//! runs far slower spread out. So the verdict also asks the *effect*, the
//! ratio of the medians (Partial / All), to reach `min_ratio`.
//!
//! ```
//! use sky_gangs::memory_bound::{CpiSamples, Verdict, DEFAULT_ALPHA, DEFAULT_MIN_RATIO};
//! let mut s = CpiSamples::new();
//! for i in 0..40 {
//!     s.push_all(0.5 + 0.001 * f64::from(i));
//!     s.push_partial(3.2 + 0.001 * f64::from(i));
//! }
//! assert!(s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO).is_memory_bound());
//! ```

use std::collections::VecDeque;

/// Samples kept per side: the last `WINDOW` of each (a ring; the oldest
/// goes first). 256 follows a gang through a phase change within a few
/// hundred sampling periods, costs 2 KiB a side, and keeps a verdict (one
/// sort of at most 512 values) cheap; it is also far above
/// [`MIN_SAMPLES`], so the test has power for shifts much smaller than the
/// paper's.
pub const WINDOW: usize = 256;

/// Fewest samples on *each* side before there is any verdict. The normal
/// approximation of U's null distribution is usually trusted from about 20
/// per side (its error in p near 0.01 is then well under 10 % of p), which
/// is why no exact test is needed; and fewer CPI samples than that cannot
/// tell a bimodal gang from one caught in a noisy moment.
pub const MIN_SAMPLES: usize = 20;

/// Suggested significance level: 0.01, so that at most about one gang in
/// a hundred that is not memory-bound passes the U test by chance (and
/// then it must also pass the median-ratio test).
pub const DEFAULT_ALPHA: f64 = 0.01;

/// Suggested least median ratio (Partial / All) for memory-bound: 1.5.
/// The paper measured ~6.4 (3.2 / 0.5) for memory-bound programs, < 1.05
/// for CPU- and IO-bound ones and ~1.1 for Clean against Dirty under All
/// share; 1.5 is far from both.
pub const DEFAULT_MIN_RATIO: f64 = 1.5;

/// A gang's CPI samples under All share and under Partial share, the last
/// [`WINDOW`] (or the capacity given) of each.
#[derive(Debug, Clone, PartialEq)]
pub struct CpiSamples {
    all_share: VecDeque<f64>,
    partial_share: VecDeque<f64>,
    capacity: usize,
    rejected: u64,
}

impl Default for CpiSamples {
    fn default() -> Self {
        Self::new()
    }
}

/// A CPI a sample can have: finite and above zero.
fn valid(cpi: f64) -> bool {
    cpi.is_finite() && cpi > 0.0
}

fn push_ring(ring: &mut VecDeque<f64>, capacity: usize, value: f64) {
    if ring.len() == capacity {
        ring.pop_front();
    }
    ring.push_back(value);
}

impl CpiSamples {
    /// Keeps the last [`WINDOW`] samples of each side.
    pub fn new() -> Self {
        Self::with_capacity(WINDOW)
    }

    /// Keeps the last `capacity` samples of each side; a capacity below
    /// [`MIN_SAMPLES`] is raised to it (else there would never be a
    /// verdict).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(MIN_SAMPLES);
        CpiSamples {
            all_share: VecDeque::with_capacity(capacity),
            partial_share: VecDeque::with_capacity(capacity),
            capacity,
            rejected: 0,
        }
    }

    /// Records a CPI measured under All share. NaN, infinite, zero or
    /// negative samples are skipped and counted ([`Self::rejected`]);
    /// returns whether the sample was kept.
    pub fn push_all(&mut self, cpi: f64) -> bool {
        self.push(cpi, true)
    }

    /// Records a CPI measured under Partial share, as [`Self::push_all`].
    pub fn push_partial(&mut self, cpi: f64) -> bool {
        self.push(cpi, false)
    }

    fn push(&mut self, cpi: f64, all: bool) -> bool {
        if !valid(cpi) {
            self.rejected += 1;
            return false;
        }
        let ring = if all {
            &mut self.all_share
        } else {
            &mut self.partial_share
        };
        push_ring(ring, self.capacity, cpi);
        true
    }

    /// Samples skipped as not a CPI (NaN, infinite, zero or negative).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Samples held under All share.
    pub fn len_all(&self) -> usize {
        self.all_share.len()
    }

    /// Samples held under Partial share.
    pub fn len_partial(&self) -> usize {
        self.partial_share.len()
    }

    /// Samples held per side at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forgets every sample (say, after the gang's program changed); the
    /// rejected count stays.
    pub fn clear(&mut self) {
        self.all_share.clear();
        self.partial_share.clear();
    }

    /// Memory-bound when the U test finds the sides differ (p < `alpha`)
    /// *and* the median CPI under Partial share is at least `min_ratio`
    /// times that under All share; [`Verdict::Insufficient`] while either
    /// side has fewer than [`MIN_SAMPLES`]. A NaN `alpha` or `min_ratio`
    /// never gives memory-bound.
    ///
    /// The ratio also gives the direction: a gang that runs significantly
    /// *faster* under Partial share is not memory-bound. So, though the
    /// test is two-sided at `alpha`, a verdict of memory-bound by chance
    /// has probability at most about `alpha / 2`.
    pub fn verdict(&self, alpha: f64, min_ratio: f64) -> Verdict {
        let (n_all, n_partial) = (self.len_all(), self.len_partial());
        if n_all < MIN_SAMPLES || n_partial < MIN_SAMPLES {
            return Verdict::Insufficient {
                all: n_all,
                partial: n_partial,
                needed: MIN_SAMPLES,
            };
        }
        let all: Vec<f64> = self.all_share.iter().copied().collect();
        let partial: Vec<f64> = self.partial_share.iter().copied().collect();
        // Both sides are non-empty and hold only valid samples.
        let test = mann_whitney_u(&partial, &all).expect("both sides hold samples");
        let median_ratio = median(&partial) / median(&all);
        let evidence = Evidence {
            p_value: test.p_value,
            u: test.u,
            n_all,
            n_partial,
            median_ratio,
        };
        if test.p_value < alpha && median_ratio >= min_ratio {
            Verdict::MemoryBound(evidence)
        } else {
            Verdict::NotMemoryBound(evidence)
        }
    }
}

/// What the test saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// Two-sided p-value of the U test.
    pub p_value: f64,
    /// U of the Partial-share sample: the pairs (partial, all) with the
    /// partial sample higher, ties counting one half. `u / (n_all *
    /// n_partial)` estimates P(Partial-share CPI > All-share CPI).
    pub u: f64,
    pub n_all: usize,
    pub n_partial: usize,
    /// Median CPI under Partial share / median CPI under All share.
    pub median_ratio: f64,
}

/// Is a gang memory-bound, and on what evidence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Too few samples on a side: `all` and `partial` held, `needed` each.
    Insufficient {
        all: usize,
        partial: usize,
        needed: usize,
    },
    /// p < alpha and median ratio >= min_ratio.
    MemoryBound(Evidence),
    /// Not significant, or significant but with too small a median ratio
    /// (see [`Evidence`] for which).
    NotMemoryBound(Evidence),
}

impl Verdict {
    pub fn is_memory_bound(&self) -> bool {
        matches!(self, Verdict::MemoryBound(_))
    }

    /// The evidence, unless there were too few samples.
    pub fn evidence(&self) -> Option<&Evidence> {
        match self {
            Verdict::Insufficient { .. } => None,
            Verdict::MemoryBound(e) | Verdict::NotMemoryBound(e) => Some(e),
        }
    }
}

/// The outcome of a Mann–Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UTest {
    /// U of the first sample: pairs (x, y) with x > y, ties one half.
    pub u: f64,
    /// The standardised statistic after the continuity correction (signed:
    /// positive when the first sample tends higher).
    pub z: f64,
    /// Two-sided p-value from the normal approximation.
    pub p_value: f64,
}

/// Two-sided Mann–Whitney U test of `x` against `y` by the normal
/// approximation, with mid-ranks for ties, the tie correction of the
/// variance and a continuity correction of 0.5. `None` when a sample is
/// empty or holds a NaN. When every value is equal the variance is zero
/// and p is 1.
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> Option<UTest> {
    if x.is_empty() || y.is_empty() || x.iter().chain(y).any(|v| v.is_nan()) {
        return None;
    }
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    let mut all: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len() as f64;
    // Ranks from 1; a run of t equal values gets their mean rank.
    let (mut rank_sum_x, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i + 1;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        let mid_rank = (i + j + 1) as f64 / 2.0;
        rank_sum_x += mid_rank * all[i..j].iter().filter(|e| e.1).count() as f64;
        ties += t * t * t - t;
        i = j;
    }
    let u = rank_sum_x - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if variance <= 0.0 || n < 2.0 {
        return Some(UTest {
            u,
            z: 0.0,
            p_value: 1.0,
        });
    }
    let distance = ((u - mean).abs() - 0.5).max(0.0);
    let z = (u - mean).signum() * distance / variance.sqrt();
    // Two-sided: 2 * (1 - Phi(|z|)) = erfc(|z| / sqrt 2).
    let p_value = erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0);
    Some(UTest { u, z, p_value })
}

/// The complementary error function, by the Chebyshev fit of Numerical
/// Recipes (Press et al., `erfcc`): relative error below 1.2e-7 for every
/// x, so the far tails (tiny p-values) are as good as the middle, which
/// Abramowitz–Stegun 7.1.26 (absolute error 1.5e-7) is not.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * (-z * z + poly).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The standard normal CDF, Phi(x) = erfc(-x / sqrt 2) / 2 (relative error
/// below 1.2e-7, absolute below 1e-7).
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The median (the mean of the middle two for an even count); NaN when
/// empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
#[path = "memory_bound_tests.rs"]
mod tests;
