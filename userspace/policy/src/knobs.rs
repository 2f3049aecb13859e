//! Every knob of a policy, declared once: [`for_each_knob!`] hands the
//! list to a macro that makes something of it. Here it makes the policy
//! file's schema ([`PolicyFile`]), the knob set with its defaults
//! ([`Knobs`]), the command line's overrides ([`Overrides`], flattened into
//! `scx_sky`'s options: each knob's doc comment is its `--help`), the range
//! checks and the `policy get` listing; the scheduler makes its write into
//! BPF's `struct sky_config` from the same list (src/live_policy.rs), and a
//! test there fails if bpf/intf.h has a field the list does not write.
//! Adding a knob is one entry here, its field in `struct sky_config` and
//! its use in BPF.

use serde::{Deserialize, Serialize};

/// The knobs: for each, its doc comment (the `--help` text), its name in
/// policy files and on the command line (`slice_us`, `--slice-us`), its
/// type and default (what a policy file that leaves it out gets), the
/// value name shown in `--help`, optionally the range it must lie in, and
/// the `struct sky_config` field it goes to with the conversion
/// ([`to_bpf`]). An `Option` knob left out is derived from the machine
/// (`Policy::resolve`). Rules between knobs (a slice floor below the
/// slice, the wait bound) are checked in `Policy::validate`.
#[macro_export]
macro_rules! for_each_knob {
    ($then:ident) => {
        $then! {
            /// SKY-1 last-CPU cache affinity (true) or plain weighted vtime,
            /// the baseline (false).
            affinity: bool = true, "BOOL" => affinity(flag);
            /// How a task's cache footprint decays: `pressure`, by what other
            /// tasks ran on its CPU and cache domain since it left; `sleep`,
            /// by how long it slept (SKY-1 as published).
            decay: $crate::DecayRule = $crate::DecayRule::Pressure, "RULE" => decay(rule);
            /// Queued tasks a steal inspects per queue.
            walk_depth: u32 = 8, "N", [1, 32] => walk_depth(count);
            /// Longest time slice in microseconds; shorter while tasks wait.
            // Below 100 us a slice is mostly scheduling; above 100 ms
            // nothing is preempted in time.
            slice_us: u64 = 5000, "US", [100, 100_000] => slice_ns(us);
            /// Shortest time slice in microseconds, however many tasks wait.
            slice_min_us: u64 = 250, "US", [50, 100_000] => slice_min_ns(us);
            /// How long an idle CPU leaves a warm task queued for the CPU it
            /// last ran on, in microseconds; 0 is pure SKY-1.
            affinity_grace_us: u64 = 1000, "US", [0, 100_000] => affinity_grace_ns(us);
            /// Most vtime credit a task banks while sleeping, in microseconds.
            sleeper_credit_us: u64 = 5000, "US", [0, 1_000_000] => sleeper_credit_ns(us);
            /// The wait bound in milliseconds: every queued task runs within
            /// it; must exceed (4 x slice + grace) x 4/3; grows under
            /// overload.
            // The rescue scans every starve_ms / 8: below 10 ms that is more
            // often than every 1.25 ms, timer and scan cost for no gain.
            starve_ms: u64 = 50, "MS", [10, 10_000] => starve_ns(ms);
            /// A synchronous wakeup (a pipe round trip) may run on the
            /// waker's CPU, where the data it needs is cached.
            wake_sync: bool = true, "BOOL" => wake_sync(flag);
            /// SMT pairing: a persistent-memory writer runs beside a compute
            /// task on one core. Needs task classes (--class or the PMU) and
            /// SMT.
            smt_pairing: bool = true, "BOOL" => smt_pairing(flag);
            /// Shared-cache gangs: the threads of each memory-bound gang run
            /// in one cache domain, one gang per domain while domains are
            /// spare.
            gangs: bool = true, "BOOL" => gangs(flag);
            /// How long a gang thread waits for a CPU at home before another
            /// domain may take it, in microseconds (default: 4 slices; below
            /// 3/4 of the wait bound).
            gang_spill_us: Option<u64> = None, "US", [0, 10_000_000] => gang_spill_ns(us);
            /// The latency path: a task whose runs per wakeup stay under this
            /// many microseconds is short: it sorts ahead, claims an idle CPU
            /// near its last and may preempt a batch task; 0 is off.
            // A burst limit over a slice would call a hog short (validate).
            latency_burst_us: u64 = 500, "US", [0, 100_000] => latency_burst_ns(us);
            /// How long a task runs, in microseconds, before a short wakee
            /// may preempt it.
            // Below 50 us a hog could be preempted faster than it does work.
            latency_min_run_us: u64 = 500, "US", [50, 100_000] => latency_min_run_ns(us);
            /// Sleep rule: a task off its CPU longer than this many
            /// microseconds may move within its cache domain (default:
            /// derived from the cache sizes).
            decay_core_us: Option<u64> = None, "US", [1, 10_000_000] => decay_core_ns(us);
            /// Sleep rule: a task off its CPU longer than this many
            /// microseconds may move to any CPU (default: derived).
            decay_llc_us: Option<u64> = None, "US", [1, 10_000_000] => decay_llc_ns(us);
            /// Pressure rule: KiB others pull into a CPU's share of the core
            /// cache before a task's footprint there is cold (default:
            /// derived).
            decay_core_kb: Option<u64> = None, "KB", [1, 1 << 30] => decay_core_bytes(kb);
            /// Pressure rule: KiB others pull into the last-level cache
            /// before a task's footprint there is cold (default: derived).
            decay_llc_kb: Option<u64> = None, "KB", [1, 1 << 30] => decay_llc_bytes(kb);
        }
    };
}

/// What a knob's type must do: take a command-line value, show the number
/// its range applies to, and go to BPF.
pub trait KnobValue: Copy {
    /// What the command line gives for it (an `Option` knob takes the
    /// value itself).
    type Given: Copy + Send + Sync + 'static;
    /// This value with the command line's, if any, in its place.
    fn given(self, given: Option<Self::Given>) -> Self;
    /// The number a range applies to (None: no number, or left out).
    fn number(self) -> Option<u64>;
    /// False for an `Option` knob left out.
    fn is_set(self) -> bool {
        true
    }
}

impl KnobValue for u64 {
    type Given = u64;
    fn given(self, given: Option<u64>) -> Self {
        given.unwrap_or(self)
    }
    fn number(self) -> Option<u64> {
        Some(self)
    }
}

impl KnobValue for u32 {
    type Given = u32;
    fn given(self, given: Option<u32>) -> Self {
        given.unwrap_or(self)
    }
    fn number(self) -> Option<u64> {
        Some(self.into())
    }
}

impl KnobValue for bool {
    type Given = bool;
    fn given(self, given: Option<bool>) -> Self {
        given.unwrap_or(self)
    }
    fn number(self) -> Option<u64> {
        None
    }
}

impl KnobValue for crate::DecayRule {
    type Given = crate::DecayRule;
    fn given(self, given: Option<Self>) -> Self {
        given.unwrap_or(self)
    }
    fn number(self) -> Option<u64> {
        None
    }
}

impl KnobValue for Option<u64> {
    type Given = u64;
    fn given(self, given: Option<u64>) -> Self {
        given.or(self)
    }
    fn number(self) -> Option<u64> {
        self
    }
    fn is_set(self) -> bool {
        self.is_some()
    }
}

/// How a knob's value becomes its `struct sky_config` field. An `Option`
/// knob is derived before it gets here (`Policy::resolve`); one left
/// unset would be 0, which `Knobs::unset` and its test rule out.
pub mod to_bpf {
    use super::KnobValue;

    pub fn flag(on: bool) -> u32 {
        u32::from(on)
    }

    pub fn count(n: u32) -> u32 {
        n
    }

    pub fn rule(rule: crate::DecayRule) -> u32 {
        rule as u32
    }

    pub fn us(v: impl KnobValue) -> u64 {
        v.number().unwrap_or(0) * 1000
    }

    pub fn ms(v: impl KnobValue) -> u64 {
        v.number().unwrap_or(0) * 1_000_000
    }

    pub fn kb(v: impl KnobValue) -> u64 {
        v.number().unwrap_or(0) << 10
    }
}

macro_rules! define_knobs {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident : $ty:ty = $default:expr, $unit:literal $(, [$lo:expr, $hi:expr])?
            => $bpf:ident($conv:ident);
    )*) => {
        /// Every knob's value, in the units policy files use.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        pub struct Knobs {
            $($(#[doc = $doc])* pub $name: $ty,)*
        }

        impl Default for Knobs {
            /// What a policy file that leaves a knob out gets.
            fn default() -> Self {
                Knobs { $($name: $default,)* }
            }
        }

        impl Knobs {
            /// Each knob's range (in the list).
            pub(crate) fn check_ranges(&self) -> anyhow::Result<()> {
                $($(
                    if let Some(v) = KnobValue::number(self.$name) {
                        crate::check(stringify!($name), v, ($lo, $hi))?;
                    }
                )?)*
                Ok(())
            }

            /// These values with the command line's in their place.
            pub fn overridden(mut self, over: &Overrides) -> Self {
                $(self.$name = KnobValue::given(self.$name, over.$name);)*
                self
            }

            /// The knobs that are still left out (derived ones before
            /// `Policy::resolve`).
            pub fn unset(&self) -> Vec<&'static str> {
                let mut unset = Vec::new();
                $(
                    if !KnobValue::is_set(self.$name) {
                        unset.push(stringify!($name));
                    }
                )*
                unset
            }

            /// Every knob's name, in the list's order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
        }

        /// The command line's knob overrides (`--slice-us`, ...): each
        /// given one replaces the policy's value, across policy switches.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
        pub struct Overrides {
            $(
                $(#[doc = $doc])*
                #[arg(long, value_name = $unit, help_heading = "Knobs (override the policy's)")]
                pub $name: Option<<$ty as KnobValue>::Given>,
            )*
        }

        /// A policy file as written: every knob may be left out.
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct PolicyFile {
            pub name: String,
            pub description: String,
            #[serde(default)]
            pub classify: sky_classify::Thresholds,
            #[serde(default)]
            pub class_rule: Vec<sky_classify::RuleSpec>,
            #[serde(default)]
            pub gang_rule: Vec<sky_gangs::rules::GangRuleSpec>,
            $(#[serde(default)] $name: Option<$ty>,)*
        }

        impl PolicyFile {
            /// The knobs it sets, the defaults for the rest.
            pub(crate) fn knobs(&self) -> Knobs {
                let d = Knobs::default();
                Knobs { $($name: self.$name.unwrap_or(d.$name),)* }
            }
        }

        /// Markdown: one row per knob (docs/knobs.md).
        pub fn knob_table() -> String {
            let mut t = String::from(
                "| knob | option | default | range | what it does |\n| --- | --- | --- | --- | --- |\n",
            );
            let d = Knobs::default();
            $(
                let range: &[u64] = &[$($lo, $hi)?];
                t.push_str(&format!(
                    "| `{}` | `--{} {}` | {} | {} | {} |\n",
                    stringify!($name),
                    stringify!($name).replace('_', "-"),
                    $unit,
                    crate::knobs::show_default(&d.$name),
                    match range {
                        [lo, hi] => format!("{lo}–{hi}"),
                        _ => String::new(),
                    },
                    [$($doc),*].map(str::trim).join(" "),
                ));
            )*
            t
        }
    };
}

for_each_knob!(define_knobs);

/// docs/knobs.md: the knob list as a page (a test keeps it current).
pub fn knobs_doc() -> String {
    format!(
        "# Knobs\n\n\
         Made from the knob list (`for_each_knob!` in userspace/policy/src/knobs.rs) by \
         `SKY_WRITE_DOCS=1 cargo test -p sky-policy`; a test fails when it is out of date.\n\n\
         Each knob is a key of a policy file (`scheds/*.toml`; a file that leaves one \
         out gets the default) and an option of `scx_sky` that overrides the policy's \
         value, across policy switches. `scx_sky policy get` shows the running values. \
         Values outside the range are refused by name, and so are settings that break \
         a rule between knobs (a slice floor above the slice, a wait bound affinity \
         would outlast, a gang spill after the starvation rescue).\n\n{}",
        knob_table()
    )
}

/// A default as docs/knobs.md shows it (left out: derived).
fn show_default(value: &impl Serialize) -> String {
    #[derive(Serialize)]
    struct One<'a, T: Serialize> {
        v: &'a T,
    }
    match toml::to_string(&One { v: value }) {
        Ok(line) => match line.trim().strip_prefix("v = ") {
            Some(v) => format!("`{}`", v.trim_matches('"')),
            None => "derived".into(),
        },
        Err(_) => "derived".into(),
    }
}
