//! Space files for this crate's tests, written from the layout alone as
//! `Space::create` and a member's claim in sky-pvas write them (sky-pvas'
//! tests read hints from spaces made there, so the two writers are held
//! to one format).

use crate::layout::{
    HeaderFixed, MemberSlot, FILE_PREFIX, FIXED_BYTES, HEADER_BYTES, MIN_SEGMENT, SLOT_ACTIVE,
    SPACE_ACTIVE,
};
use crate::liveness::SlotLock;
use crate::proc;
use std::fs::File;
use std::mem::{offset_of, size_of};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where test spaces say they are mapped (32 TiB, as sky-pvas places them).
const BASE: u64 = 32 << 40;

/// A space file of `max_members` members and no member yet, with members
/// joined through [`TestSpace::join`] until it is dropped.
pub struct TestSpace {
    pub path: PathBuf,
    file: File,
    locks: Vec<SlotLock>,
}

impl TestSpace {
    pub fn create(dir: &Path, name: &str, max_members: u32) -> TestSpace {
        let path = dir.join(format!("{FILE_PREFIX}{name}"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        let header = HeaderFixed::new(max_members, MIN_SEGMENT, BASE, proc::my_pid(), 1);
        file.set_len(header.total_size).unwrap();
        file.write_all_at(&header.to_bytes(), 0).unwrap();
        file.write_all_at(&SPACE_ACTIVE.to_le_bytes(), FIXED_BYTES as u64)
            .unwrap();
        TestSpace {
            path,
            file,
            locks: Vec::new(),
        }
    }

    /// This process becomes member `id`: its slot lock taken, its label
    /// (pid and start time) written and the slot active.
    pub fn join(&mut self, id: u32) {
        self.locks
            .push(SlotLock::take(&self.file, &self.path, id).unwrap());
        let me = proc::my_pid();
        let owner = proc::owner_word(me, proc::start_time(me).unwrap());
        let slot = (HEADER_BYTES + id as usize * size_of::<MemberSlot>()) as u64;
        let at = |field: usize| slot + field as u64;
        self.file
            .write_all_at(&owner.to_ne_bytes(), at(offset_of!(MemberSlot, owner)))
            .unwrap();
        self.file
            .write_all_at(
                &SLOT_ACTIVE.to_ne_bytes(),
                at(offset_of!(MemberSlot, state)),
            )
            .unwrap();
    }
}
