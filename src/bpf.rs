//! The generated BPF skeleton, the bindings of bpf/intf.h, and the statistic
//! names parsed from that header by build.rs.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all)]

pub mod skel {
    include!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));
}

pub mod intf {
    include!(concat!(env!("OUT_DIR"), "/bpf_intf.rs"));
}

include!(concat!(env!("OUT_DIR"), "/stat_names.rs"));
