//! Power loss at every persistence step of create, enqueue and dequeue, on
//! both sides, followed by a reboot and resume of both sides.
//!
//! The sender and receiver run as separate processes under the simulated
//! persistent memory of `sky_pvas::persist::sim`: flushed-and-fenced
//! cache lines reach the image; at step k the power fails, and the lines
//! flushed but not fenced reach it not at all, all, or only the last
//! flush's; or else any line stored to and never flushed may have been
//! written back early (all such lines, or every other one, land). The
//! image is then booted: new processes open the queue, the
//! sender re-sends from where the queue says, the receiver continues. The
//! rules checked after every run:
//! - nothing acknowledged is lost: the resumed sender's position is the
//!   last message whose enqueue returned (or the one after, if that one was
//!   durable but not yet acknowledged);
//! - nothing is applied twice beyond the one message in flight: the
//!   resumed receiver continues after the last message it had applied, or
//!   at it (the application saw it, the consumed count was not durable) —
//!   an application keyed by sequence number applies it once;
//! - nothing is torn: every payload is checked byte by byte;
//! - the queue exists after the reboot if its create returned.
//!
//! Then the test leaves out, one at a time, each flush and each fence of
//! each persistence site and shows the same enumeration finds a broken
//! rule: every one of them is needed, and the test would notice.

mod common;

use common::*;
use sky_pvas::persist::sim::{self, Dropped, Unfenced, Unflushed, OUTCOMES};
use sky_pvas::persist::Site;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

const MESSAGES: u64 = 6;

#[derive(Debug, Clone, Copy)]
struct Run {
    mode: &'static str,
    crash_at: u64,
    /// What reaches the image at the failure besides what was fenced.
    outcome: (Unfenced, Unflushed),
    dropped: Option<Dropped>,
}

/// Waits for a member process to end, at most `limit`.
fn wait_exit(p: &mut Peer, limit: Duration) -> Option<ExitStatus> {
    let t = Instant::now();
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            return Some(status);
        }
        if t.elapsed() > limit {
            p.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Every line a member printed, once it has ended (its output closed).
fn all_lines(p: &Peer) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(l) = p.lines.recv_timeout(Duration::from_secs(5)) {
        out.push(l);
    }
    out
}

/// Runs both sides to completion (or their death) and returns their
/// output lines, sender first. On resume the queue's owner goes first: if
/// the power failed before the queue existed it says so, and the other
/// side is not started (it would wait for a create that never comes).
fn both_sides(
    path: &Path,
    mode: &str,
    phase: &str,
    env: &[(&str, &str)],
) -> Result<(Vec<String>, Vec<String>), String> {
    let args = strs(&[mode, &MESSAGES.to_string(), phase]);
    let owner_is_receiver = mode == "push";
    let start = |id: u32| {
        let role = if id == 1 {
            "durable-send"
        } else {
            "durable-recv"
        };
        peer(path, id, role, &args, env)
    };
    let (owner_id, other_id) = if owner_is_receiver { (2, 1) } else { (1, 2) };
    let mut owner = start(owner_id);
    let mut early = Vec::new();
    if phase == "resume" {
        let first = owner.line(Duration::from_secs(20));
        if first.as_deref() == Some("no-queue") {
            let lines = vec!["no-queue".to_string()];
            return Ok((lines.clone(), lines));
        }
        early.extend(first);
    }
    let mut other = start(other_id);
    for (p, id) in [(&mut owner, owner_id), (&mut other, other_id)] {
        if wait_exit(p, Duration::from_secs(20)).is_none() {
            return Err(format!("{phase}: member {id} hung"));
        }
    }
    early.extend(all_lines(&owner));
    let other_lines = all_lines(&other);
    Ok(if owner_id == 1 {
        (early, other_lines)
    } else {
        (other_lines, early)
    })
}

/// Numbers after `prefix` in `lines`, in order.
fn numbers(lines: &[String], prefix: &str) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(prefix)?.parse().ok())
        .collect()
}

fn position(lines: &[String]) -> Option<(u64, u64)> {
    lines.iter().find_map(|l| {
        let rest = l.strip_prefix("position enqueued=")?;
        let (e, c) = rest.split_once(" consumed=")?;
        Some((e.parse().ok()?, c.parse().ok()?))
    })
}

/// An error a side may end with when the power failed under its peer.
fn acceptable_error(line: &str) -> bool {
    !line.starts_with("error:") || line.contains("died or left")
}

/// One run: power fails at `run.crash_at` (or never); returns the number
/// of steps taken, or which rule broke.
fn run_once(run: Run) -> Result<u64, String> {
    let s = space("power", 2, 2);
    let shadow = s.dir.path().join("shadow");
    let control = s.dir.path().join("control");
    std::fs::copy(&s.path, &shadow).unwrap();
    sim::write_control(&control, run.crash_at, run.outcome, run.dropped).unwrap();
    let sim_env = format!("{}:{}", control.display(), shadow.display());
    let (sent_lines, got_lines) =
        both_sides(&s.path, run.mode, "first", &[("SKY_PVAS_SIM", &sim_env)])?;
    let (steps, failed) = sim::read_control(&control).unwrap();
    for l in sent_lines.iter().chain(&got_lines) {
        if !acceptable_error(l) || (!failed && l.starts_with("error:")) {
            return Err(format!("before the power loss: {l}"));
        }
    }
    let sent = numbers(&sent_lines, "sent ");
    let got = numbers(&got_lines, "got ");
    if sent != (1..=sent.len() as u64).collect::<Vec<_>>()
        || got != (1..=got.len() as u64).collect::<Vec<_>>()
    {
        return Err(format!(
            "out of order before the power loss: sent {sent:?}, got {got:?}"
        ));
    }
    let created = sent_lines.iter().chain(&got_lines).any(|l| l == "created");

    // Reboot: the image is all that is left.
    let rebooted = s.dir.path().join("rebooted");
    std::fs::copy(&shadow, &rebooted).unwrap();
    let (sent2, got2) = both_sides(&rebooted, run.mode, "resume", &[])?;
    if sent2.iter().chain(&got2).any(|l| l == "no-queue") {
        return if created {
            Err("the queue is gone after a reboot although its create returned".into())
        } else {
            Ok(steps)
        };
    }
    for l in sent2.iter().chain(&got2) {
        if l.starts_with("error:") {
            return Err(format!("after the reboot: {l}"));
        }
    }
    let (enqueued, _) = position(&sent2).ok_or("the resumed sender did not report its position")?;
    let (_, consumed) =
        position(&got2).ok_or("the resumed receiver did not report its position")?;
    let last_sent = sent.len() as u64;
    let last_got = got.len() as u64;
    if enqueued < last_sent || enqueued > last_sent + 1 {
        return Err(format!(
            "{last_sent} enqueues returned, but the queue holds {enqueued} after the reboot ({sent_lines:?} {got_lines:?} / {sent2:?} {got2:?})"
        ));
    }
    if consumed > last_got || consumed + 1 < last_got {
        return Err(format!(
            "the receiver applied {last_got} messages, but the queue says {consumed} were consumed"
        ));
    }
    let resent = numbers(&sent2, "sent ");
    let regot = numbers(&got2, "got ");
    if resent != (enqueued + 1..=MESSAGES).collect::<Vec<_>>()
        || regot != (consumed + 1..=MESSAGES).collect::<Vec<_>>()
    {
        return Err(format!(
            "after the reboot: sent {resent:?} from {enqueued}, got {regot:?} from {consumed}"
        ));
    }
    Ok(steps)
}

/// Every crash step of one mode, with every unfenced-lines outcome; the
/// first broken rule, if any.
fn enumerate(mode: &'static str, dropped: Option<Dropped>) -> Result<usize, String> {
    let base = Run {
        mode,
        crash_at: u64::MAX,
        outcome: OUTCOMES[0],
        dropped,
    };
    let total = run_once(base).map_err(|e| format!("{mode}, no power loss: {e}"))?;
    let mut runs = 1;
    for crash_at in 1..=total {
        for outcome in OUTCOMES {
            let run = Run {
                crash_at,
                outcome,
                ..base
            };
            run_once(run).map_err(|e| format!("{run:?}: {e}"))?;
            runs += 1;
        }
    }
    Ok(runs)
}

#[test]
fn power_loss_at_every_step_loses_and_repeats_nothing() {
    for mode in ["push", "pull"] {
        let runs = enumerate(mode, None).unwrap_or_else(|e| panic!("{e}"));
        println!("{mode}: {runs} runs, every rule held");
        // 4 create steps, 2 for the other side to open (it makes the
        // consumed count durable), 2 per enqueue and 2 per dequeue; each
        // outcome at the failure (unfenced lines, early write-back) each.
        assert_eq!(
            runs as u64,
            1 + OUTCOMES.len() as u64 * (4 + 2 + 4 * MESSAGES)
        );
    }
}

#[test]
fn leaving_out_any_flush_or_fence_is_caught() {
    for site in Site::ALL {
        for fence in [false, true] {
            let dropped = Dropped { site, fence };
            let caught = ["push", "pull"]
                .iter()
                .find_map(|mode| enumerate(mode, Some(dropped)).err());
            let what = format!("{} {}", site.name(), if fence { "fence" } else { "flush" });
            match caught {
                Some(e) => println!("without the {what}: {e}"),
                None => panic!("leaving out the {what} broke no rule: the test cannot see it"),
            }
        }
    }
}
