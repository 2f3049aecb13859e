// Compiles the BPF scheduler and generates Rust bindings for the header
// shared with it (bpf/intf.h), plus the table of statistic names parsed from
// the same header so that no list of counters is ever copied by hand, and
// the git revision `--version` names.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    // The compiler is $BPF_CLANG: scripts/bpf-clang unless set
    // (.cargo/config.toml), which finds a clang >= 18 on PATH.
    scx_cargo::BpfBuilder::new()
        .expect("BPF builder: no usable clang >= 18 (scripts/bpf-clang; BPF_CLANG chooses one)")
        .enable_intf("bpf/intf.h", "bpf_intf.rs")
        .enable_skel("bpf/main.bpf.c", "bpf")
        .build()
        .expect("building the BPF scheduler failed");

    let header = std::fs::read_to_string("bpf/intf.h").expect("read bpf/intf.h");
    let table = stat_table(&header);
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("stat_names.rs");
    std::fs::write(out, table).expect("write stat_names.rs");
    println!("cargo:rerun-if-changed=bpf");
    git_revision();
}

/// `SKY_GIT_REVISION`: `g<sha>` of the checkout built, `-dirty` if tracked
/// files differ from it; empty outside a git checkout (a source tarball).
/// Re-run when HEAD moves, not on every edit: a rebuild of the BPF costs
/// more than a stale `-dirty`.
fn git_revision() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let revision = match git(&["rev-parse", "--short=8", "HEAD"]) {
        Some(sha) if !sha.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("g{sha}{}", if dirty { "-dirty" } else { "" })
        }
        _ => String::new(),
    };
    println!("cargo:rustc-env=SKY_GIT_REVISION={revision}");
    // Only files that exist: cargo re-runs a script whose watched file is
    // missing on every build. (A fresh clone's branch may be in packed-refs.)
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}

/// Turns the `enum sky_stat_idx` entries, each `SKY_STAT_NAME, /* why */`,
/// into `pub const STAT_INFO: [(&str, &str); N]` in enum order.
fn stat_table(header: &str) -> String {
    let body = header
        .split("enum sky_stat_idx {")
        .nth(1)
        .and_then(|rest| rest.split("};").next())
        .expect("bpf/intf.h has no `enum sky_stat_idx { ... };`");
    let mut rows = Vec::new();
    for line in body.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("SKY_STAT_") else {
            continue;
        };
        let (name, tail) = rest.split_once(',').expect("stat entry without a comma");
        let help = tail
            .trim()
            .trim_start_matches("/*")
            .trim_end_matches("*/")
            .trim();
        assert!(
            !help.is_empty(),
            "stat SKY_STAT_{name} has no /* description */"
        );
        rows.push(format!("    ({:?}, {:?}),\n", name.to_lowercase(), help));
    }
    format!(
        "/// (name, description) of every BPF statistic, in `enum sky_stat_idx` order.\n\
         pub const STAT_INFO: [(&str, &str); {}] = [\n{}];\n",
        rows.len(),
        rows.concat()
    )
}
