//! Membership: claiming a member ID, leaving it, and knowing which peers
//! are there and still the same — liveness from the kernel (`liveness`),
//! epochs from the slot generation.

use crate::layout::*;
use crate::liveness::{self, SlotLock};
use crate::proc;
use crate::space::Space;
use crate::wait::{self, Peer};
use crate::{Error, Member, Result};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long a member waits for a peer it talks to to attach.
pub(crate) const JOIN_WAIT: Duration = Duration::from_secs(30);
const JOIN_POLL: Duration = Duration::from_millis(2);

impl Space {
    /// Joins as member `id` through this process's existing mapping of the
    /// space: the seed's `pvas_fork`. A child forked by a member already
    /// has the space at the same address; it claims its own ID here, and
    /// the parent's membership is untouched (the child's copy of the
    /// parent's handle is not the member; its slot lock was let go at
    /// fork). No exec, no second mapping.
    pub fn attach_inherited(&self, id: u32) -> Result<Space> {
        self.check_id(id)?;
        if self.destroyed() {
            return Err(Error::Destroyed);
        }
        let mut space = self.share_mapping()?;
        let lock = SlotLock::take(&space.file, &space.path, id)?;
        space.claim(id, lock);
        Ok(space)
    }

    /// Becomes member `id`, whose slot lock this process now holds (so no
    /// live process is member `id`). The slot's generation is this
    /// membership's epoch: odd while the shared state is being reset, so
    /// no peer starts talking to a half-reset member, and every waiter on
    /// the previous member sees the epoch change and fails.
    pub(crate) fn claim(&mut self, id: u32, lock: SlotLock) {
        let me = proc::my_pid();
        let start = proc::start_time(me).unwrap_or(0);
        let generation = self.begin_join(id);
        let slot = self.slot(id);
        self.reset_member_state(id);
        slot.owner
            .store(proc::owner_word(me, start), Ordering::Release);
        slot.pm_writer.store(0, Ordering::Relaxed);
        slot.hints.store(0, Ordering::Relaxed);
        let generation = generation.wrapping_add(1);
        slot.generation.store(generation, Ordering::Release);
        slot.state.store(SLOT_ACTIVE, Ordering::Release);
        wait::wake(&self.live().wake);
        self.id = id;
        self.generation = generation;
        self.lock = Some(lock);
        self.holder_pid = me;
    }

    /// Marks slot `id` (whose lock this process holds) as joining: state
    /// JOINING and a new, odd generation, so peers neither talk to it nor
    /// keep waiting on the member it was. Returns that generation.
    fn begin_join(&self, id: u32) -> u32 {
        let slot = self.slot(id);
        // The joiner is named from the start (`scx_sky pvas run` reserves
        // the slot before it execs, keeping its pid): the scheduler gangs
        // a joining member with the space before it attaches.
        let me = proc::my_pid();
        slot.owner.store(
            proc::owner_word(me, proc::start_time(me).unwrap_or(0)),
            Ordering::Release,
        );
        slot.state.store(SLOT_JOINING, Ordering::Release);
        let now = slot.generation.load(Ordering::Acquire);
        // Even (settled) + 1, or odd (a claimer died mid-join) + 2.
        let generation = now.wrapping_add(1 + (now & 1));
        slot.generation.store(generation, Ordering::Release);
        generation
    }

    /// A fresh membership starts from clean shared state: its export area
    /// and the mailboxes it sends through in the other members' areas.
    fn reset_member_state(&self, id: u32) {
        let seg = self.segment(id).expect("checked id");
        // SAFETY: the export area is ours alone while the slot is claimed
        // and not yet active; zero is a valid value for every field.
        unsafe { std::ptr::write_bytes(seg, 0, EXPORT_BYTES as usize) };
        let area = self.export(id).expect("checked id");
        area.owner_pid.store(proc::my_pid(), Ordering::Relaxed);
        area.heap_top.store(HEAP_START, Ordering::Relaxed);
        area.magic.store(EXPORT_MAGIC, Ordering::Release);
        for other in 1..=self.header.max_members {
            if other == id {
                continue;
            }
            let mb = &self.export(other).expect("in range").mailboxes[id as usize];
            for word in [&mb.cts_seq, &mb.rts_seq, &mb.done_seq, &mb.consumed_seq] {
                word.store(0, Ordering::Release);
            }
            wait::wake(&mb.wake);
        }
    }

    pub(crate) fn release(&mut self) {
        // Only the process that holds the slot ends the membership: a
        // forked child dropping its copy leaves it alone (its copy of the
        // lock already points at /dev/null, see `liveness`).
        if self.id == 0 || self.holder_pid != proc::my_pid() {
            return;
        }
        let slot = self.slot(self.id);
        slot.pm_writer.store(0, Ordering::Relaxed);
        slot.hints.store(0, Ordering::Relaxed);
        slot.state.store(SLOT_LEFT, Ordering::Release);
        // Even to even: a new epoch, not a join in progress.
        slot.generation.fetch_add(2, Ordering::AcqRel);
        slot.owner.store(0, Ordering::Release);
        // The lock goes last: until now no other process could claim.
        self.lock = None;
        // Peers waiting on us notice at once.
        wait::wake(&self.live().wake);
        for other in 1..=self.header.max_members {
            if let Ok(area) = self.export(other) {
                wait::wake(&area.mailboxes[self.id as usize].wake);
            }
        }
    }

    /// Current members: (ID, pid, PM writer?), dead ones left out.
    pub fn members(&self) -> Vec<Member> {
        (1..=self.header.max_members)
            .filter_map(|id| {
                let slot = self.slot(id);
                let owner = slot.owner.load(Ordering::Acquire);
                (owner != 0 && slot.state.load(Ordering::Acquire) == SLOT_ACTIVE).then(|| Member {
                    id,
                    pid: owner as u32,
                    owner_word: owner,
                    alive: self.alive(id),
                    pm_writer: slot.pm_writer.load(Ordering::Relaxed) != 0,
                    memory_bound: slot.hints.load(Ordering::Relaxed) & MEMBER_MEMORY_BOUND != 0,
                })
            })
            .collect()
    }

    /// Snapshot of member `id` for waits that depend on it, waiting up to
    /// `JOIN_WAIT` for it to attach: members may start in any order. The
    /// fast path reads two words; liveness is checked by the waits.
    pub(crate) fn peer(&self, id: u32) -> Result<Peer> {
        self.joined_peer(id, &mut || false)?
            .ok_or(Error::NotAttached(id))
    }

    /// Like `peer`, but gives up waiting (None) as soon as `done()` holds.
    pub(crate) fn joined_peer(
        &self,
        id: u32,
        done: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Peer>> {
        self.check_id(id)?;
        // A member that died without leaving (slot still active, lock
        // gone) will not come back as itself: that is PeerGone, at once.
        let joined = || match self.active_peer(id) {
            None => Ok(None),
            Some(_) if !self.alive(id) => Err(Error::PeerGone(id)),
            Some(p) => Ok(Some(p.generation)),
        };
        let mut generation = joined();
        if !matches!(generation, Ok(Some(_))) {
            let mut finished = false;
            let live = self.live();
            // Short naps: `done` may be made true without touching live.wake.
            let limit = self.timeout().map_or(JOIN_WAIT, |t| t.min(JOIN_WAIT));
            let deadline = std::time::Instant::now() + limit;
            loop {
                if done() {
                    finished = true;
                    break;
                }
                generation = joined();
                if !matches!(generation, Ok(None)) {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    return Err(Error::NotAttached(id));
                }
                match wait::wait_until(self, &live.wake, None, Some(JOIN_POLL), &mut *done) {
                    Ok(()) | Err(Error::TimedOut) => {}
                    Err(e) => return Err(e),
                }
            }
            if finished {
                return Ok(None);
            }
        }
        Ok(generation?.map(|generation| Peer { id, generation }))
    }

    /// Member `id` (a checked ID) if its slot holds a settled, active
    /// membership, from two words: no system call, so messages may ask on
    /// every call. Whether it is still alive is the waits' question.
    pub(crate) fn active_peer(&self, id: u32) -> Option<Peer> {
        let slot = self.slot(id);
        // Generation, state, generation again: the state is that
        // membership's only if no claim or leave came between (each moves
        // the generation on). A torn pair — a left membership's epoch with
        // the next one's state — would tag our counts with an epoch the
        // peer never answers to, and both sides would wait for ever.
        loop {
            let generation = slot.generation.load(Ordering::Acquire);
            between_reads();
            let active = slot.state.load(Ordering::Acquire) == SLOT_ACTIVE;
            if slot.generation.load(Ordering::Acquire) == generation {
                return (generation & 1 == 0 && active).then_some(Peer { id, generation });
            }
        }
    }

    /// Is `p` still the same live membership?
    pub(crate) fn peer_is(&self, p: Peer) -> bool {
        self.slot(p.id).generation.load(Ordering::Acquire) == p.generation && self.alive(p.id)
    }

    /// Does a live process hold member slot `id`? Asked of the kernel (the
    /// slot lock), not of the pid in the table.
    pub fn alive(&self, id: u32) -> bool {
        liveness::slot_locked(self.file.as_raw_fd(), id)
    }

    /// This membership's epoch (0 for a handle that is not a member).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Marks this member as a persistent-queue writer (a scheduler hint).
    pub(crate) fn set_pm_writer(&self, on: bool) {
        if self.id != 0 {
            self.slot(self.id)
                .pm_writer
                .store(on as u32, Ordering::Relaxed);
        }
    }

    /// Tells the scheduler this member is memory-bound (or no longer is): a
    /// space with such a member is a gang scx_sky keeps on one last-level
    /// cache. Only a member may say so, of itself.
    pub fn set_memory_bound(&self, on: bool) -> Result<()> {
        if self.id == 0 {
            return Err(Error::Invalid("this handle is not a member".into()));
        }
        let hints = &self.slot(self.id).hints;
        if on {
            hints.fetch_or(MEMBER_MEMORY_BOUND, Ordering::Relaxed);
        } else {
            hints.fetch_and(!MEMBER_MEMORY_BOUND, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Takes slot `id` for the program this process is about to exec
    /// (`scx_sky pvas run`): returns the lock descriptor, inheritable, for
    /// `SKY_PVAS_LOCK_FD`. The slot is held from now on, so nobody can take
    /// it between this call and the program's `attach_from_env`.
    pub fn reserve_for_exec(&self, id: u32) -> Result<i32> {
        self.check_id(id)?;
        let lock = SlotLock::take(&self.file, &self.path, id)?;
        // Ours now: peers see a member joining, not the previous one.
        self.begin_join(id);
        Ok(lock.into_inheritable_fd())
    }

    /// The process member `id` really is, proven from the kernel's side
    /// (/proc/PID/fdinfo shows the slot lock on this very file), not just
    /// read from the member table, which every member can write; held by a
    /// pidfd, so a signal sent later never reaches a process that reused
    /// its pid. Needs the access to /proc/PID that signalling it needs in
    /// practice.
    pub fn verified_process(&self, id: u32) -> Option<proc::Process> {
        use std::os::unix::fs::MetadataExt;
        self.check_id(id).ok()?;
        let pid = self.slot(id).owner.load(Ordering::Acquire) as u32;
        let meta = self.file.metadata().ok()?;
        liveness::slot_holder(pid, meta.dev(), meta.ino(), id)
    }
}

/// A preemption between a snapshot's reads is what tears one; the unit
/// test makes every snapshot wait there.
#[cfg(test)]
fn between_reads() {
    std::thread::sleep(std::time::Duration::from_micros(200));
}
#[cfg(not(test))]
#[inline(always)]
fn between_reads() {}

#[cfg(test)]
mod tests {
    use crate::{CreateOptions, Space};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A peer snapshot never pairs one membership's generation with
    /// another's state. Claims and leaves of slot 1 cycle its generation
    /// 1, 2 (active), 4 (left), 5, 6 (active), 8 ...: an active snapshot
    /// is always 2 mod 4. A torn one (a left generation read, the reader
    /// preempted, a whole claim, then the new state read) is 0 mod 4: the
    /// receiver that took it tagged its consumed count with that epoch,
    /// and sender and receiver then waited on each other for ever (seen
    /// in `sky-pvas --test c_abi` under load). More reader threads than
    /// cores, so readers are preempted at every point of the snapshot.
    #[test]
    fn a_peer_snapshot_is_never_torn_by_a_claim() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        std::env::set_var("SKY_PVAS_REGISTRY", dir.path().join("registry"));
        let opts = CreateOptions {
            dir: dir.path().to_path_buf(),
            max_members: 2,
            segment_size: 2 << 20,
            ..Default::default()
        };
        let space = Space::create(&format!("snap-{}", std::process::id()), &opts).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, torn) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let readers: Vec<_> = (0..6)
            .map(|_| {
                let handle = space.share_mapping().unwrap();
                let (stop, seen, torn) = (stop.clone(), seen.clone(), torn.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(p) = handle.active_peer(1) {
                            seen.fetch_add(1, Ordering::Relaxed);
                            if p.generation % 4 != 2 {
                                torn.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        let claimer = space.share_mapping().unwrap();
        let start = Instant::now();
        let mut claims = 0u64;
        // Each state held a little longer than a snapshot's pause: a claim
        // fits inside a pause, and untorn snapshots still happen.
        while start.elapsed() < Duration::from_secs(1) {
            let member = claimer.attach_inherited(1).unwrap();
            std::thread::sleep(Duration::from_micros(300));
            drop(member);
            std::thread::sleep(Duration::from_micros(300));
            claims += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        let (seen, torn) = (seen.load(Ordering::Relaxed), torn.load(Ordering::Relaxed));
        assert!(
            claims > 100 && seen > 100,
            "{claims} claims, {seen} snapshots"
        );
        assert_eq!(
            torn, 0,
            "{torn} of {seen} snapshots torn in {claims} claims"
        );
    }
}
