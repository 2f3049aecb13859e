//! `--verifier-stats`: what each BPF program costs the kernel's verifier
//! as it loads — instructions processed, total and peak states — the
//! figures veristat reports, taken from the verifier's own statistics
//! (log level 4) through libbpf's log, on the machine and kernel at hand.
//! A VM test holds them against a checked-in baseline, so a change that
//! grows verification shows up before a kernel refuses it.

use crate::bpf::skel::OpenBpfSkel;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{PrintCallback, PrintLevel};
use std::sync::Mutex;

/// The verifier's statistics only (BPF_LOG_STATS): a few lines per
/// program, whatever its size. A program the verifier refuses then comes
/// with its error but not the instruction trace (libbpf retries with the
/// trace only when no level was asked for): the scheduler says to run
/// again without `--verifier-stats` for it.
const LOG_STATS: u32 = 4;

/// libbpf's log while the programs load.
static LOG: Mutex<String> = Mutex::new(String::new());
/// Who printed libbpf's messages before [`start`].
static BEFORE: Mutex<Option<(PrintLevel, PrintCallback)>> = Mutex::new(None);

/// One program's cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramCost {
    pub program: String,
    /// Instructions processed (the verifier's walk over every path).
    pub processed: u64,
    pub total_states: u64,
    pub peak_states: u64,
}

/// Asks the verifier for its statistics on every program and collects
/// libbpf's log until [`finish`]; its other messages still reach whoever
/// printed them before.
pub fn start(skel: &mut OpenBpfSkel) {
    for mut prog in skel.open_object_mut().progs_mut() {
        prog.set_log_level(LOG_STATS);
    }
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let before = libbpf_rs::set_print(Some((PrintLevel::Debug, collect)));
    *BEFORE.lock().unwrap_or_else(|e| e.into_inner()) = before;
}

fn collect(level: PrintLevel, msg: String) {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).push_str(&msg);
    let before = *BEFORE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((min, print)) = before {
        if level <= min {
            print(level, msg);
        }
    }
}

/// The costs of the programs loaded since [`start`], in load order;
/// libbpf's messages go back to whoever printed them before.
pub fn finish() -> Vec<ProgramCost> {
    libbpf_rs::set_print(BEFORE.lock().unwrap_or_else(|e| e.into_inner()).take());
    parse(&std::mem::take(
        &mut *LOG.lock().unwrap_or_else(|e| e.into_inner()),
    ))
}

/// The programs' costs in libbpf's log: each load log is framed by
/// `libbpf: prog 'NAME': -- BEGIN PROG LOAD LOG --` and `-- END PROG LOAD LOG --`
/// and holds the verifier's `processed N insns (limit L)
/// max_states_per_insn M total_states T peak_states P mark_read R`.
pub fn parse(log: &str) -> Vec<ProgramCost> {
    let mut costs = Vec::new();
    let mut program: Option<String> = None;
    for line in log.lines() {
        // libbpf prefixes its messages (`libbpf: `).
        if let Some(rest) = line.find("prog '").map(|i| &line[i + "prog '".len()..]) {
            if let Some((name, tail)) = rest.split_once("': ") {
                if tail.starts_with("-- BEGIN PROG LOAD LOG --") {
                    program = Some(name.to_string());
                }
            }
            continue;
        }
        let Some(name) = &program else {
            continue;
        };
        if !line.starts_with("processed ") {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1)?.parse::<u64>().ok())
        };
        if let (Some(processed), Some(total_states), Some(peak_states)) = (
            after("processed"),
            after("total_states"),
            after("peak_states"),
        ) {
            costs.push(ProgramCost {
                program: name.clone(),
                processed,
                total_states,
                peak_states,
            });
        }
        program = None;
    }
    costs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_programs_statistics_are_read_from_its_load_log() {
        let log = "libbpf: loading object\n\
            libbpf: prog 'sky_enqueue': -- BEGIN PROG LOAD LOG --\n\
            processed 4210 insns (limit 1000000) max_states_per_insn 4 total_states 301 peak_states 120 mark_read 37\n\
            verification time 1200 usec\n\
            -- END PROG LOAD LOG --\n\
            prog 'sky_init': -- BEGIN PROG LOAD LOG --\n\
            func#0 @0\n\
            processed 88 insns (limit 1000000) max_states_per_insn 0 total_states 7 peak_states 7 mark_read 2\n\
            -- END PROG LOAD LOG --\n\
            prog 'sky_broken': -- BEGIN PROG LOAD LOG --\n\
            processed x insns\n\
            -- END PROG LOAD LOG --\n\
            processed 5 insns (limit 1) max_states_per_insn 0 total_states 1 peak_states 1\n";
        assert_eq!(
            parse(log),
            [
                ProgramCost {
                    program: "sky_enqueue".into(),
                    processed: 4210,
                    total_states: 301,
                    peak_states: 120,
                },
                ProgramCost {
                    program: "sky_init".into(),
                    processed: 88,
                    total_states: 7,
                    peak_states: 7,
                },
            ]
        );
        assert!(parse("").is_empty());
    }
}
