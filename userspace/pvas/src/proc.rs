//! Process identity: a pid plus its start time, so a recycled pid is never
//! mistaken for the member that died.

/// Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22),
/// or None if there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: count
    // fields after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The real uid of `pid` (/proc/PID/status, `Uid:`), or None if there is
/// no such process.
pub fn real_uid(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().next()?.parse().ok()
}

pub fn my_pid() -> u32 {
    std::process::id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_known_and_stable() {
        let me = my_pid();
        let t = start_time(me).unwrap();
        assert_eq!(start_time(me), Some(t));
        assert_eq!(start_time(u32::MAX - 1), None);
    }

    #[test]
    fn own_real_uid_is_the_one_the_kernel_gives() {
        // SAFETY: getuid has no preconditions.
        assert_eq!(real_uid(my_pid()), Some(unsafe { libc::getuid() }));
        assert_eq!(real_uid(u32::MAX - 1), None);
    }
}
