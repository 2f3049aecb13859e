//! What a VM test judges, as lines the flake finder reads back: every
//! figure with its bound, where the bound is declared and what it rests
//! on, and every attempt's verdict. The VM tests print them through
//! [`at_least`] and [`at_most`] (tests/scenario), `cargo xtask test
//! --repeat N` collects them over N runs (xtask/src/repeat.rs) so that a
//! bound is set from data and a flaky one shows before CI finds it.

use std::cell::Cell;
use std::fmt::{self, Display};
use std::io::Write;
use std::panic::Location;

/// The prefix of a figure's line.
pub const FIGURE: &str = "sky-figure:";
/// The prefix of an attempt's verdict line.
pub const VERDICT: &str = "sky-verdict:";

/// Which side of its bound a figure must stay on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    AtLeast,
    AtMost,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::AtLeast => ">=",
            Op::AtMost => "<=",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        match s {
            ">=" => Some(Op::AtLeast),
            "<=" => Some(Op::AtMost),
            _ => None,
        }
    }
}

/// What a bound rests on: the three forms a pass/fail line may take
/// (docs/vm-bounds.md, "What every VM test judges").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Basis {
    /// Holds at any speed: a share of time or of events, a count the
    /// workload fixes, a wait in units of the scheduler's own slice and
    /// tick.
    Property,
    /// A ratio against a baseline run in the same boot (EEVDF, another
    /// preset, the same daemon with nothing to do).
    SameBoot,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Property => "property",
            Basis::SameBoot => "same-boot",
        }
    }

    fn parse(s: &str) -> Option<Basis> {
        match s {
            "property" => Some(Basis::Property),
            "same-boot" => Some(Basis::SameBoot),
            _ => None,
        }
    }
}

/// One judged figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub test: String,
    pub attempt: u32,
    pub name: String,
    pub value: f64,
    pub op: Op,
    pub bound: f64,
    pub basis: Basis,
    /// file:line of the judging call.
    pub at: String,
}

impl Figure {
    pub fn holds(&self) -> bool {
        match self.op {
            Op::AtLeast => self.value >= self.bound,
            Op::AtMost => self.value <= self.bound,
        }
    }

    /// Parses a line that holds [`FIGURE`]; None for any other line.
    pub fn parse(line: &str) -> Option<Figure> {
        let f = crate::report::fields(line.split_once(FIGURE)?.1);
        Some(Figure {
            test: f.get("test")?.clone(),
            attempt: f.get("attempt")?.parse().ok()?,
            name: f.get("figure")?.clone(),
            value: f.get("value")?.parse().ok()?,
            op: Op::parse(f.get("op")?)?,
            bound: f.get("bound")?.parse().ok()?,
            basis: Basis::parse(f.get("basis")?)?,
            at: f.get("at")?.clone(),
        })
    }
}

impl Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{FIGURE} test={} attempt={} figure={} value={} op={} bound={} basis={} at={}",
            self.test,
            self.attempt,
            self.name,
            self.value,
            self.op.symbol(),
            self.bound,
            self.basis.name(),
            self.at
        )
    }
}

/// How an attempt of a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// Failed on a busy host: measured again.
    Retry,
    Fail,
}

/// One attempt's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub test: String,
    pub attempt: u32,
    pub outcome: Outcome,
    /// The largest share of a VM run the host took in this attempt.
    pub lost_share: f64,
}

impl Verdict {
    pub fn parse(line: &str) -> Option<Verdict> {
        let f = crate::report::fields(line.split_once(VERDICT)?.1);
        Some(Verdict {
            test: f.get("test")?.clone(),
            attempt: f.get("attempt")?.parse().ok()?,
            outcome: match f.get("outcome")?.as_str() {
                "pass" => Outcome::Pass,
                "retry" => Outcome::Retry,
                "fail" => Outcome::Fail,
                _ => return None,
            },
            lost_share: f.get("lost_share")?.parse().ok()?,
        })
    }
}

impl Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Pass => "pass",
            Outcome::Retry => "retry",
            Outcome::Fail => "fail",
        };
        write!(
            f,
            "{VERDICT} test={} attempt={} outcome={outcome} lost_share={:.3}",
            self.test, self.attempt, self.lost_share
        )
    }
}

thread_local! {
    static ATTEMPT: Cell<u32> = const { Cell::new(1) };
}

/// The attempt the figures judged from now on belong to.
pub fn set_attempt(attempt: u32) {
    ATTEMPT.with(|a| a.set(attempt));
}

/// The running attempt (1 unless the host made a test measure again).
pub fn attempt() -> u32 {
    ATTEMPT.with(Cell::get)
}

/// The running test's name (libtest names each test's thread after it).
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace(char::is_whitespace, "_")
}

/// Writes `line` to the process's stderr itself, past the test harness's
/// capture, so that a passing test's figures reach the flake finder too.
pub fn emit(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[track_caller]
fn judge(name: &str, value: f64, op: Op, bound: f64, basis: Basis, context: &dyn Display) {
    let at = Location::caller();
    let figure = Figure {
        test: test_name(),
        attempt: ATTEMPT.with(Cell::get),
        name: name.replace(char::is_whitespace, "_"),
        value,
        op,
        bound,
        basis,
        at: format!("{}:{}", at.file(), at.line()),
    };
    emit(&figure.to_string());
    assert!(
        figure.holds(),
        "{name} = {value} is not {} {bound} ({}): {context}",
        op.symbol(),
        basis.name()
    );
}

/// `value` must be at least `floor`; the figure is printed either way.
#[track_caller]
pub fn at_least(name: &str, value: f64, floor: f64, basis: Basis, context: impl Display) {
    judge(name, value, Op::AtLeast, floor, basis, &context);
}

/// `value` must be at most `ceiling`; the figure is printed either way.
#[track_caller]
pub fn at_most(name: &str, value: f64, ceiling: f64, basis: Basis, context: impl Display) {
    judge(name, value, Op::AtMost, ceiling, basis, &context);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_and_verdicts_read_back_as_printed() {
        let fig = Figure {
            test: "a_test".into(),
            attempt: 2,
            name: "wait_ms[hog]".into(),
            value: 61.5,
            op: Op::AtMost,
            bound: 80.0,
            basis: Basis::Property,
            at: "tests/vm.rs:12".into(),
        };
        let line = format!("noise before {fig}");
        assert_eq!(Figure::parse(&line), Some(fig.clone()));
        assert!(fig.holds());
        assert!(!Figure {
            value: 80.5,
            ..fig.clone()
        }
        .holds());
        let v = Verdict {
            test: "a_test".into(),
            attempt: 1,
            outcome: Outcome::Retry,
            lost_share: 0.125,
        };
        assert_eq!(Verdict::parse(&v.to_string()), Some(v));
        assert_eq!(Figure::parse("sky-figure: test=x attempt=1"), None);
        assert_eq!(Verdict::parse("result workload=burn"), None);
    }

    #[test]
    fn a_figure_past_its_bound_fails_naming_it() {
        let e = std::panic::catch_unwind(|| at_least("per_s", 3.0, 4.0, Basis::Property, "ctx"))
            .unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("per_s = 3 is not >= 4 (property): ctx"),
            "{msg}"
        );
        at_most("ok", 3.0, 4.0, Basis::SameBoot, "");
    }
}
