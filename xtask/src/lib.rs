//! The scx_sky test bed: fetch a sched_ext kernel, pack an initramfs with
//! busybox and the project's binaries, boot it under qemu with a chosen CPU
//! topology, run a scenario as root and bring back its output and status.
//! Also used by the VM integration tests in tests/.

pub mod anchors;
pub mod bench;
pub mod cachesim;
pub mod console;
pub mod eval;
pub mod guest_tools;
pub mod host_load;
pub mod initramfs;
pub mod install;
pub mod judge;
pub mod kbuild;
pub mod kernel;
pub mod kimage;
pub mod kversion;
pub mod markdown;
pub mod matrix;
pub mod modules;
pub mod nodes;
pub mod paths;
pub mod private_bus;
pub mod pvas;
pub mod rdma_bench;
pub mod repeat;
pub mod report;
pub mod systemd_guest;
pub mod vm;
pub mod vm_tests;
