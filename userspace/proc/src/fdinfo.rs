//! `/proc/PID/fdinfo/FD`: the locks a descriptor holds.

/// Does this fdinfo text show an open file description (OFD) write lock
/// over exactly bytes `start..=end`? Its lock lines read
/// `lock:\t1: OFDLCK ADVISORY  WRITE -1 00:1a:42 START END`; a waiter's
/// line (`lock:\t1: -> OFDLCK ...`) holds nothing.
pub fn holds_ofd_write_lock(fdinfo: &str, start: &str, end: &str) -> bool {
    fdinfo.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.first() == Some(&"lock:")
            && !f.contains(&"->")
            && f.contains(&"OFDLCK")
            && f.contains(&"WRITE")
            && f.len() >= 2
            && f[f.len() - 2] == start
            && f[f.len() - 1] == end
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_ofd_write_lock_over_the_range_counts() {
        let info = "pos:\t0\nflags:\t0100002\n\
                    lock:\t1: OFDLCK ADVISORY  WRITE -1 00:1b:2 42 42\n";
        assert!(holds_ofd_write_lock(info, "42", "42"));
        assert!(!holds_ofd_write_lock(info, "41", "41"));
        let read = "lock:\t1: OFDLCK ADVISORY  READ -1 00:1b:2 42 42\n";
        assert!(!holds_ofd_write_lock(read, "42", "42"));
        let posix = "lock:\t1: POSIX  ADVISORY  WRITE 77 00:1b:2 42 42\n";
        assert!(!holds_ofd_write_lock(posix, "42", "42"));
        let waiting = "lock:\t1: -> OFDLCK ADVISORY  WRITE -1 00:1b:2 42 42\n";
        assert!(!holds_ofd_write_lock(waiting, "42", "42"));
    }
}
