// Compiles the BPF scheduler and generates Rust bindings for the header
// shared with it (bpf/intf.h), plus the table of statistic names parsed from
// the same header so that no list of counters is ever copied by hand.

use std::path::PathBuf;

fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("BPF builder: is clang-19 installed? (scripts/setup.sh)")
        .enable_intf("bpf/intf.h", "bpf_intf.rs")
        .enable_skel("bpf/main.bpf.c", "bpf")
        .build()
        .expect("building the BPF scheduler failed");

    let header = std::fs::read_to_string("bpf/intf.h").expect("read bpf/intf.h");
    let table = stat_table(&header);
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("stat_names.rs");
    std::fs::write(out, table).expect("write stat_names.rs");
    println!("cargo:rerun-if-changed=bpf");
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
