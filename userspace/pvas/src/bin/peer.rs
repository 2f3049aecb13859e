//! sky-pvas-peer: one member process for the multi-process tests and the
//! benchmark. `sky-pvas-peer PATH ID ROLE [ARGS]` (PATH `-`: attach from
//! the SKY_PVAS_* environment, as `scx_sky pvas run` sets it); prints `ok ...` lines
//! and exits 0 on success, prints `error: ...` and exits 1 otherwise
//! (bad arguments included: the tests read every answer from stdout).

use clap::{Args, Parser, Subcommand, ValueEnum};
use sky_pvas::msg::CopyBy;
use sky_pvas::pattern;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::{Error, Space};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;

#[repr(C)]
struct Node {
    value: u64,
    next: *const Node,
}

/// One member of a shared space, doing one role.
#[derive(Parser)]
#[command(name = "sky-pvas-peer")]
struct Cli {
    /// The space's file, or `-` to attach as `scx_sky pvas run` set up
    /// (SKY_PVAS_* variables).
    path: String,
    /// This member's ID (with `-`, the environment's is used).
    id: u32,
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Build a linked list of LENGTH nodes in our own segment, publish its
    /// head, stay a member until PEER has walked it.
    ExportList { length: u64, peer: u32 },
    /// Follow OWNER's pointers directly (valid here too) and report the
    /// list's length and sum.
    WalkList { owner: u32 },
    /// Send message k of SIZES (pattern k) to PEER.
    Send { peer: u32, sizes: Vec<usize> },
    /// Receive SIZES from PEER and check each message's pattern.
    Recv { peer: u32, sizes: Vec<usize> },
    /// Send SIZES to PEER from this member's segment (so the receiver can
    /// copy part); prints the bytes this side copied of each.
    SendSplit {
        peer: u32,
        by: SplitBy,
        sizes: Vec<usize>,
    },
    /// COUNT split messages of SIZE bytes to PEER, pattern k % 2.
    SendSplitStream { peer: u32, count: u64, size: usize },
    /// Like recv, and prints the bytes this side copied of each message.
    RecvSplit { peer: u32, sizes: Vec<usize> },
    /// Send MESSAGES through a persistent queue to PEER.
    QueueSend(QueueArgs),
    /// Receive MESSAGES through a persistent queue from PEER.
    QueueRecv(QueueArgs),
    /// Open the queue as its sender, then hold.
    QueueHoldSend(QueueArgs),
    /// Open the queue as its receiver, then hold.
    QueueHoldRecv(QueueArgs),
    /// The power-loss and restart tests' sender (member 1).
    DurableSend(DurableArgs),
    /// The power-loss and restart tests' receiver (member 2).
    DurableRecv(DurableArgs),
    /// Attach and wait to be killed or for the space to go.
    Hold,
    /// Fork: the child joins as ID+1 through the inherited mapping and
    /// sends "child" to PEER; the parent sends "parent" and checks it is
    /// still a member after the child has left.
    ForkMember { peer: u32 },
    /// Hold, with a forked child (no exec) that outlives us: the child must
    /// not keep this membership alive.
    HoldForked,
}

/// Who copies a split message.
#[derive(Clone, Copy, ValueEnum)]
enum SplitBy {
    Auto,
    Both,
    Sender,
}

#[derive(Clone, Copy, ValueEnum)]
enum QueueMode {
    Push,
    Pull,
}

impl From<QueueMode> for Mode {
    fn from(m: QueueMode) -> Mode {
        match m {
            QueueMode::Push => Mode::Push,
            QueueMode::Pull => Mode::Pull,
        }
    }
}

#[derive(Args)]
struct QueueArgs {
    mode: QueueMode,
    /// The other side's member ID.
    peer: u32,
    /// How many messages to send or receive (unused by the hold roles).
    messages: u64,
    entry_size: u32,
    entries: u32,
    /// Which of the owner's queue slots.
    #[arg(default_value_t = 0)]
    slot: u32,
}

/// The power-loss runs' phases: the owner creates the queue first; after
/// the simulated power loss both open it and finish.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    First,
    Resume,
}

#[derive(Clone, Copy, ValueEnum)]
enum Then {
    /// Ride out the peer's restart (tests/restart.rs).
    Retry,
}

#[derive(Args)]
struct DurableArgs {
    mode: QueueMode,
    /// Messages in all (sender 1, receiver 2, slot 0, 4 entries of 256
    /// bytes).
    messages: u64,
    #[arg(default_value = "first")]
    phase: Phase,
    then: Option<Then>,
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            println!("error: {}", e.to_string().trim_end());
            std::process::exit(1);
        }
    };
    if let Err(e) = run(cli) {
        println!("error: {e}");
        std::process::exit(1);
    }
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Stays a member until killed or the space is destroyed.
fn hold(space: &Space) -> Result<(), Error> {
    let mut buf = [0u8; 1];
    match space.recv(space.id(), &mut buf) {
        Err(Error::Destroyed) => {
            say("ok destroyed".into());
            Ok(())
        }
        other => Err(Error::Invalid(format!("hold ended with {other:?}"))),
    }
}

/// Tests that need both members running at once pin them apart
/// (SKY_PVAS_PEER_CPU).
fn pin_if_asked() -> Result<(), Error> {
    let Some(cpu) = std::env::var("SKY_PVAS_PEER_CPU")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    else {
        return Ok(());
    };
    // SAFETY: cpu_set_t is plain data; CPU_SET with a checked index.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu < libc::CPU_SETSIZE as usize {
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: a valid set of the size given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(Error::Invalid(format!("cannot run on CPU {cpu}")));
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), Error> {
    pin_if_asked()?;
    let space = if cli.path == "-" {
        Space::attach_from_env()?
    } else {
        Space::attach(Path::new(&cli.path), cli.id)?
    };
    match cli.role {
        Role::ExportList { length, peer } => export_list(&space, length, peer),
        Role::WalkList { owner } => walk_list(&space, owner),
        Role::Send { peer, sizes } => send(&space, peer, &sizes),
        Role::Recv { peer, sizes } => recv(&space, peer, &sizes),
        Role::SendSplit { peer, by, sizes } => send_split(&space, peer, by, &sizes),
        Role::SendSplitStream { peer, count, size } => send_split_stream(&space, peer, count, size),
        Role::RecvSplit { peer, sizes } => recv_split(&space, peer, &sizes),
        Role::QueueSend(q) => queue_side(&space, &q, true, false),
        Role::QueueRecv(q) => queue_side(&space, &q, false, false),
        Role::QueueHoldSend(q) => queue_side(&space, &q, true, true),
        Role::QueueHoldRecv(q) => queue_side(&space, &q, false, true),
        Role::DurableSend(d) => durable_side(&space, true, &d),
        Role::DurableRecv(d) => durable_side(&space, false, &d),
        Role::Hold => {
            say("ok holding".into());
            hold(&space)
        }
        Role::ForkMember { peer } => fork_member(&space, peer),
        Role::HoldForked => hold_forked(&space),
    }
}

/// Builds a linked list in our own segment and publishes its head.
fn export_list(space: &Space, n: u64, peer: u32) -> Result<(), Error> {
    let mut next: *const Node = std::ptr::null();
    for v in (1..=n).rev() {
        let node = space.alloc(std::mem::size_of::<Node>(), 8)? as *mut Node;
        // SAFETY: fresh allocation in our segment.
        unsafe { node.write(Node { value: v, next }) };
        next = node;
    }
    space
        .export_word(space.id(), 0)?
        .store(next as u64, Ordering::Release);
    say(format!("ok head={:#x}", next as u64));
    // Stay a member until the walker is done.
    let mut buf = [0u8; 1];
    space.recv(peer, &mut buf)?;
    Ok(())
}

/// Follows the owner's pointers directly: valid here too.
fn walk_list(space: &Space, owner: u32) -> Result<(), Error> {
    let word = space.export_word(owner, 0)?;
    let t = std::time::Instant::now();
    while word.load(Ordering::Acquire) == 0 {
        if t.elapsed().as_secs() > 10 {
            return Err(Error::TimedOut);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let (mut p, mut sum, mut len) = (word.load(Ordering::Acquire) as *const Node, 0u64, 0u64);
    while !p.is_null() {
        if !space.in_segment(owner, p as u64, 16) {
            return Err(Error::Invalid(format!(
                "pointer {:#x} outside the owner's segment",
                p as u64
            )));
        }
        // SAFETY: checked to lie in the owner's segment.
        unsafe {
            sum += (*p).value;
            p = (*p).next;
        }
        len += 1;
    }
    say(format!("ok len={len} sum={sum}"));
    space.send(owner, &[1])
}

fn send(space: &Space, to: u32, sizes: &[usize]) -> Result<(), Error> {
    let mut data = vec![0u8; sizes.iter().copied().max().unwrap_or(0)];
    for (k, &size) in sizes.iter().enumerate() {
        pattern::fill(k as u64, &mut data[..size]);
        space.send(to, &data[..size])?;
    }
    say(format!("ok sent={}", sizes.len()));
    Ok(())
}

fn recv(space: &Space, from: u32, sizes: &[usize]) -> Result<(), Error> {
    let mut buf = space.alloc_bytes(sizes.iter().copied().max().unwrap_or(0))?;
    for (k, &size) in sizes.iter().enumerate() {
        let n = space.recv(from, &mut buf)?;
        if n != size {
            return Err(Error::Invalid(format!(
                "message {k}: {n} bytes, expected {size}"
            )));
        }
        if let Some(at) = pattern::first_mismatch(k as u64, &buf[..n]) {
            return Err(Error::Invalid(format!(
                "message {k} ({size} B) differs at byte {at}"
            )));
        }
    }
    say(format!("ok received={}", sizes.len()));
    Ok(())
}

/// Message k is pattern k, sent from this member's segment (so the
/// receiver can copy part of it); prints the bytes this side copied of
/// each.
fn send_split(space: &Space, to: u32, by: SplitBy, sizes: &[usize]) -> Result<(), Error> {
    let by = match by {
        SplitBy::Auto => CopyBy::Auto,
        SplitBy::Both => CopyBy::Both,
        SplitBy::Sender => CopyBy::Sender,
    };
    let mut data = space.alloc_bytes(sizes.iter().copied().max().unwrap_or(0))?;
    say("ok ready".into());
    let mut copied = Vec::new();
    for (k, &size) in sizes.iter().enumerate() {
        pattern::fill(k as u64, &mut data[..size]);
        let mine = space.send_with(to, &data[..size], by)?;
        // The data is ours again once send returns: overwrite the
        // receiver's share at once (from where the two shares meet; the
        // lower ID copies the front), so a receiver still reading it would
        // get a torn message.
        if space.id() < to {
            data[mine..size].fill(0xee);
        } else {
            for page in data[..size - mine].rchunks_mut(4096) {
                page.fill(0xee);
            }
        }
        copied.push(mine.to_string());
    }
    say(format!(
        "ok sent={} copied={}",
        sizes.len(),
        copied.join(",")
    ));
    Ok(())
}

/// COUNT split messages of SIZE bytes, pattern k % 2 (prepared once: the
/// time goes to sending).
fn send_split_stream(space: &Space, to: u32, count: u64, size: usize) -> Result<(), Error> {
    let mut data = [space.alloc_bytes(size)?, space.alloc_bytes(size)?];
    pattern::fill(0, &mut data[0]);
    pattern::fill(1, &mut data[1]);
    say("ok ready".into());
    for k in 0..count {
        space.send_with(to, &data[k as usize % 2], CopyBy::Both)?;
    }
    say(format!("ok sent={count}"));
    Ok(())
}

fn recv_split(space: &Space, from: u32, sizes: &[usize]) -> Result<(), Error> {
    let mut buf = space.alloc_bytes(sizes.iter().copied().max().unwrap_or(0))?;
    let mut copied = Vec::new();
    for (k, &size) in sizes.iter().enumerate() {
        let r = space.recv_with(from, &mut buf)?;
        if r.len != size {
            return Err(Error::Invalid(format!(
                "message {k}: {} bytes, expected {size}",
                r.len
            )));
        }
        if let Some(at) = pattern::first_mismatch(k as u64, &buf[..size]) {
            return Err(Error::Invalid(format!(
                "message {k} ({size} B) differs at byte {at}"
            )));
        }
        copied.push(r.copied_here.to_string());
    }
    say(format!(
        "ok received={} copied={}",
        sizes.len(),
        copied.join(",")
    ));
    Ok(())
}

/// One side of a persistent queue: the owner creates it; the sender
/// enqueues message k (pattern k, 1 + 13k mod entry size bytes) and
/// flushes; the receiver checks each; a holding side only opens it.
fn queue_side(space: &Space, a: &QueueArgs, sending: bool, holding: bool) -> Result<(), Error> {
    let (sender, receiver) = if sending {
        (space.id(), a.peer)
    } else {
        (a.peer, space.id())
    };
    let spec = QueueSpec {
        mode: a.mode.into(),
        sender,
        receiver,
        slot: a.slot,
        entry_size: a.entry_size,
        entry_count: a.entries,
    };
    let q = if spec.owner() == space.id() {
        PmQueue::create(space, spec)?
    } else {
        PmQueue::open(space, spec)?
    };
    say("ok ready".into());
    if holding {
        return hold(space);
    }
    let mut buf = vec![0u8; spec.entry_size as usize];
    let len_of = |k: u64| 1 + (k as usize * 13) % spec.entry_size as usize;
    if sending {
        for k in 0..a.messages {
            pattern::fill(k, &mut buf[..len_of(k)]);
            q.enqueue(&buf[..len_of(k)])?;
            say(format!("returned {k}"));
        }
        q.flush()?;
        say("ok flushed".into());
    } else {
        for k in 0..a.messages {
            let n = q.dequeue(&mut buf)?;
            if n != len_of(k) || pattern::first_mismatch(k, &buf[..n]).is_some() {
                return Err(Error::Invalid(format!(
                    "message {k} out of order or damaged"
                )));
            }
        }
        say(format!("ok dequeued={}", a.messages));
    }
    Ok(())
}

/// pvas_fork: the child joins through the inherited mapping.
fn fork_member(space: &Space, to: u32) -> Result<(), Error> {
    // SAFETY: this process is single-threaded: the child may do anything
    // the parent could.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let code = match space
            .attach_inherited(space.id() + 1)
            .and_then(|mine| mine.send(to, b"child"))
        {
            Ok(()) => 0,
            Err(e) => {
                say(format!("error: child: {e}"));
                1
            }
        };
        // SAFETY: leave without running the parent's exit path.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(child, &mut status, 0) };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(Error::Invalid("the forked member failed".into()));
    }
    let me = space.id();
    let listed = space.members().iter().any(|m| m.id == me && m.alive);
    let child_gone = !space.alive(me + 1);
    if !listed || !child_gone {
        return Err(Error::Invalid(format!(
            "after the child: parent listed {listed}, child gone {child_gone}"
        )));
    }
    space.send(to, b"parent")?;
    say("ok forked".into());
    Ok(())
}

fn hold_forked(space: &Space) -> Result<(), Error> {
    // SAFETY: the child only sleeps and exits (async-signal-safe).
    let child = unsafe { libc::fork() };
    if child == 0 {
        unsafe {
            libc::sleep(60);
            libc::_exit(0);
        }
    }
    say(format!("ok holding child={child}"));
    let mut buf = [0u8; 1];
    let r = space.recv(space.id(), &mut buf);
    Err(Error::Invalid(format!("hold ended with {r:?}")))
}

/// Payload length of message `seq` in the power-loss runs.
fn durable_len(seq: u64) -> usize {
    1 + (seq as usize * 37) % 255
}

/// A side of the power-loss and restart runs: PHASE first, the owner
/// creates the queue; resume, both open it after the simulated power loss
/// and finish the messages. Every step that matters is printed as it
/// happens.
fn durable_side(space: &Space, sending: bool, d: &DurableArgs) -> Result<(), Error> {
    let spec = QueueSpec {
        mode: d.mode.into(),
        sender: 1,
        receiver: 2,
        slot: 0,
        entry_size: 256,
        entry_count: 4,
    };
    let total = d.messages;
    let resume = d.phase == Phase::Resume;
    // "retry": ride out the peer's restart (tests/restart.rs). After a
    // reboot ("resume") the peer is coming back too, and the member table
    // may show every member of before as active but dead (written back
    // early): wait for it as across a restart. Otherwise a gone peer ends
    // this side (the power-loss runs' first phase).
    let retry = matches!(d.then, Some(Then::Retry));
    let patience = if retry || resume { 20 } else { 0 };
    let q = if !resume && spec.owner() == space.id() {
        let q = PmQueue::create(space, spec)?;
        say("created".into());
        q
    } else {
        match retry_while_peer_restarts(patience, || PmQueue::open(space, spec)) {
            Ok(q) => q,
            // After a power loss during create there may be no queue.
            Err(Error::Invalid(e)) if resume && e.contains("to resume") => {
                say("no-queue".into());
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    };
    let p = q.position()?;
    say(format!(
        "position enqueued={} consumed={}",
        p.enqueued, p.consumed
    ));
    let mut buf = vec![0u8; 256];
    if sending {
        for seq in p.enqueued + 1..=total {
            pattern::fill(seq, &mut buf[..durable_len(seq)]);
            // A receiver that restarts fails the wait for room; the message
            // was not enqueued then, so trying again sends it exactly once.
            let got = retry_while_peer_restarts(patience, || q.enqueue(&buf[..durable_len(seq)]))?;
            if got != seq {
                return Err(Error::Invalid(format!(
                    "message {seq} got sequence number {got}"
                )));
            }
            say(format!("sent {seq}"));
        }
        retry_while_peer_restarts(patience, || q.flush())?;
    } else {
        for _ in p.consumed..total {
            retry_while_peer_restarts(patience, || {
                q.dequeue_with(|seq, payload| {
                    // The application's effect (this line) happens before the
                    // message is consumed for good.
                    if payload.len() != durable_len(seq)
                        || pattern::first_mismatch(seq, payload).is_some()
                    {
                        return Err(Error::Invalid(format!("message {seq} is torn")));
                    }
                    say(format!("got {seq}"));
                    Ok(())
                })
            })?;
        }
    }
    say("ok done".into());
    Ok(())
}

/// Runs `op` again while the peer it waits on is gone or not yet back,
/// for up to `seconds`: what a sender does across a receiver's restart.
fn retry_while_peer_restarts<T>(
    seconds: u64,
    mut op: impl FnMut() -> Result<T, Error>,
) -> Result<T, Error> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        match op() {
            Err(Error::PeerGone(_) | Error::NotAttached(_))
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            other => return other,
        }
    }
}
