//! scx_sky as the installed systemd service, under systemd itself: a guest
//! whose PID 1 is Debian's systemd, with the system bus, polkitd and the
//! journal, and the tree `cargo xtask install --prefix /usr` writes
//! (xtask/src/systemd_guest.rs). tests/vm/service.sh runs the unit as a
//! machine would and says what it saw; this judges it.

#[allow(dead_code)]
mod scenario;

use scenario::{
    assert_no_fault, check, checks, on_a_quiet_host, run_scenario_configured, scenario_config,
};
use xtask::vm::VmConfig;

/// Lines the service may write to the journal in its ~40 s here: systemd's
/// start, reload, kill, restart and stop lines and scx_sky's start-up
/// lines, twice (the restart). With a line per class change or per
/// period, as before `--stats` defaulted to 0, there would be hundreds.
const QUIET_JOURNAL_LINES: usize = 60;

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn the_installed_unit_runs_scx_sky_under_systemd() {
    on_a_quiet_host(|| {
        let cfg = VmConfig {
            systemd: true,
            ..scenario_config("1x2x2")
        };
        let out = run_scenario_configured("service", "", &cfg);
        let c = checks(&out);
        assert_eq!(check(&c, "pid1"), "systemd", "{out}");
        // The installed unit, its environment file and the site policy by name.
        assert_eq!(check(&c, "start_exit"), "0");
        assert_eq!(check(&c, "main_exe"), "/usr/bin/scx_sky");
        assert_eq!(check(&c, "env_timeout"), "1");
        assert!(check(&c, "ops").starts_with("sky_"), "{out}");
        assert_eq!(check(&c, "policy"), "site");
        assert_eq!(check(&c, "starve_ms"), "45");
        // Its hardening is in force and leaves what scx_sky needs.
        assert_eq!(check(&c, "no_new_privs"), "1");
        assert_eq!(check(&c, "runtime_dir_mode"), "700");
        assert_eq!(check(&c, "runtime_dir_owner"), "root");
        assert_eq!(check(&c, "control_socket"), "1");
        let charges: u64 = check(&c, "pmu_charges").parse().unwrap_or(0);
        assert!(charges > 0, "no perf event counts charged: {out}");
        assert_eq!(check(&c, "top_p99"), "1", "no wait p99 read by pidfd");
        assert_eq!(check(&c, "space_gang"), "1", "the space is no gang: {out}");
        assert!(!out.contains("openat2 is refused"), "{out}");
        // Reload switches live to the edited file.
        assert_eq!(check(&c, "reload_exit"), "0");
        assert_eq!(check(&c, "reload_starve_ms"), "40");
        assert_eq!(check(&c, "reload_same_pid"), "1");
        // The system bus and polkitd: refused, then allowed by a rule.
        assert_ne!(check(&c, "bus_refused_exit"), "0");
        assert_eq!(check(&c, "bus_refused_by_polkit"), "1", "{out}");
        assert_eq!(check(&c, "bus_allowed_policy"), "vtime", "{out}");
        let lines: usize = check(&c, "journal_lines").parse().unwrap();
        assert!(
            (1..=QUIET_JOURNAL_LINES).contains(&lines),
            "{lines} journal lines: {out}"
        );
        // Restart on failure, then a clean stop.
        assert_eq!(check(&c, "restarted"), "1", "{out}");
        assert_eq!(check(&c, "restarts"), "1");
        assert_eq!(check(&c, "stop_exit"), "0");
        assert_eq!(check(&c, "stopped_state"), "disabled");
        assert_eq!(check(&c, "active"), "inactive");
        assert_eq!(check(&c, "result"), "success");
        assert_eq!(check(&c, "runtime_dir_gone"), "1");
        // Under a filter that refuses openat2 it says why spaces are no gangs.
        assert_eq!(check(&c, "seccomp_told"), "1", "{out}");
        assert_no_fault(&c, "dmesg_errors", "the kernel log");
    });
}
