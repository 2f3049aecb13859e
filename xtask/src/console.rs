//! Cleans the guest console before it is shown or judged: qemu's firmware
//! (SeaBIOS, iPXE) prints banners and terminal control sequences (`ESC c`
//! resets the host terminal, `ESC [2J` clears it) before the kernel starts;
//! a newcomer should see the scenario, not those.

/// Lines with these, before the guest's first own line, are firmware's.
const FIRMWARE: [&str; 5] = [
    "SeaBIOS",
    "iPXE",
    "Booting from ROM",
    "Press Ctrl-B",
    "Press ESC for boot menu",
];

/// SeaBIOS's last words before the kernel runs, not always followed by a
/// line break.
const BOOTING: &str = "Booting from ROM";

/// What the guest's init prints first (xtask/src/init.sh): from here on
/// nothing is taken for firmware noise.
const GUEST_UP: &str = "sky-vm: up";

/// Drops firmware lines until the guest is up; strips terminal control
/// sequences from every line.
#[derive(Debug, Default)]
pub struct ConsoleFilter {
    guest_up: bool,
}

impl ConsoleFilter {
    /// Whether the guest's init has printed its first line.
    pub fn guest_up(&self) -> bool {
        self.guest_up
    }

    /// The line to show and keep, or None to drop it.
    pub fn line(&mut self, raw: &str) -> Option<String> {
        let mut clean = strip_controls(raw);
        if let Some(at) = clean.find(GUEST_UP) {
            // Firmware does not always end its last line ("Booting from
            // ROM..sky-vm: up"): keep only the guest's part.
            clean.drain(..at);
            self.guest_up = true;
        }
        if !self.guest_up {
            if let Some(at) = clean.find(BOOTING) {
                // What follows the dots on the same line is the kernel's.
                let rest = clean[at + BOOTING.len()..].trim_start_matches('.');
                if rest.trim().is_empty() {
                    return None;
                }
                clean = rest.to_string();
            }
            if FIRMWARE.iter().any(|f| clean.contains(f)) {
                return None;
            }
            // Blank lines and screen clears between the firmware banners.
            if clean.trim().is_empty() {
                return None;
            }
        }
        Some(clean)
    }
}

/// Removes ANSI/VT escape sequences (CSI `ESC [ ... final`, OSC
/// `ESC ] ... BEL|ESC \`, charset selects `ESC ( B`, and two-byte ones like
/// `ESC c`) and other control characters except tab.
pub fn strip_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                Some('[') => {
                    // Parameters and intermediates, then one final byte @..~.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some('(' | ')' | '*' | '+' | '#' | '%') => {
                    chars.next();
                }
                // ESC c, ESC 7, ESC =, ...: two bytes.
                Some(_) | None => {}
            },
            '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_stripped() {
        assert_eq!(
            strip_controls("\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS"),
            "SeaBIOS"
        );
        assert_eq!(strip_controls("a\x1b[1;31mred\x1b[0m b"), "ared b");
        assert_eq!(strip_controls("\x1b]0;title\x07x\x1b]2;t\x1b\\y"), "xy");
        assert_eq!(strip_controls("\x1b(Bplain\tTab\x07"), "plain\tTab");
        assert_eq!(strip_controls("trailing\x1b"), "trailing");
        assert_eq!(strip_controls("unterminated \x1b[12"), "unterminated ");
    }

    #[test]
    fn firmware_noise_is_dropped_and_the_guest_kept() {
        let raw = [
            "\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2-debian-1.16.2-1)",
            "",
            "",
            "iPXE (https://ipxe.org) 00:03.0 CA00 PCI2.10 PnP PMM+7EFD0C70+7EF30C70 CA00",
            "Press Ctrl-B to configure iPXE (PCI 00:03.0)...",
            "\x1b[2J",
            "Booting from ROM...",
            "Booting from ROM..[    0.5] Kernel panic - not syncing: test",
            "Booting from ROM..\x1bc\x1b[?7l\x1b[2Jsky-vm: up, 4 CPUs, kernel 7.3.4+deb13-amd64",
            "check state_before=disabled",
            "",
            "a scenario may print iPXE or SeaBIOS too",
            "\x1b[0mSKY-VM-EXIT=0",
        ];
        let mut f = ConsoleFilter::default();
        let kept: Vec<String> = raw.iter().filter_map(|l| f.line(l)).collect();
        assert_eq!(
            kept,
            [
                "[    0.5] Kernel panic - not syncing: test",
                "sky-vm: up, 4 CPUs, kernel 7.3.4+deb13-amd64",
                "check state_before=disabled",
                "",
                "a scenario may print iPXE or SeaBIOS too",
                "SKY-VM-EXIT=0",
            ]
        );
    }
}
