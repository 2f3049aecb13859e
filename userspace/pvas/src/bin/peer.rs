//! sky-pvas-peer: one member process for the multi-process tests and the
//! benchmark. `sky-pvas-peer PATH ID ROLE [ARGS]` (PATH `-`: attach from
//! the SKY_PVAS_* environment, as `scx_sky pvas run` sets it); prints `ok ...` lines
//! and exits 0 on success, prints `error: ...` and exits 1 otherwise.

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        println!("error: {e}");
        std::process::exit(1);
    }
}

fn num<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, Error> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| Error::Invalid(format!("argument {i} ({what}) missing or not a number")))
}

fn mode(arg: Option<&String>) -> Result<Mode, Error> {
    match arg.map(String::as_str) {
        Some("push") => Ok(Mode::Push),
        Some("pull") => Ok(Mode::Pull),
        other => Err(Error::Invalid(format!(
            "mode {other:?} is neither push nor pull"
        ))),
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

fn run(args: &[String]) -> Result<(), Error> {
    if args.len() < 3 {
        return Err(Error::Invalid(
            "usage: sky-pvas-peer PATH ID ROLE [ARGS]".into(),
        ));
    }
    // Tests that need both members running at once pin them apart.
    if let Some(cpu) = std::env::var("SKY_PVAS_PEER_CPU")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    {
        // SAFETY: cpu_set_t is plain data; CPU_SET with a checked index.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if cpu < libc::CPU_SETSIZE as usize {
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: a valid set of the size given.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0
        {
            return Err(Error::Invalid(format!("cannot run on CPU {cpu}")));
        }
    }
    // PATH "-": attach as `scx_sky pvas run` set up (SKY_PVAS_* variables).
    let space = if args[0] == "-" {
        Space::attach_from_env()?
    } else {
        Space::attach(Path::new(&args[0]), num(args, 1, "ID")?)?
    };
    let rest = &args[3..];
    match args[2].as_str() {
        // Build a linked list in our own segment and publish its head.
        "export-list" => {
            let n: u64 = num(rest, 0, "length")?;
            let peer: u32 = num(rest, 1, "peer")?;
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
        }
        // Follow the owner's pointers directly: valid here too.
        "walk-list" => {
            let owner: u32 = num(rest, 0, "owner")?;
            let word = space.export_word(owner, 0)?;
            let t = std::time::Instant::now();
            while word.load(Ordering::Acquire) == 0 {
                if t.elapsed().as_secs() > 10 {
                    return Err(Error::TimedOut);
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let (mut p, mut sum, mut len) =
                (word.load(Ordering::Acquire) as *const Node, 0u64, 0u64);
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
            space.send(owner, &[1])?;
        }
        "send" => {
            let to: u32 = num(rest, 0, "peer")?;
            let sizes: Vec<usize> = rest[1..].iter().filter_map(|s| s.parse().ok()).collect();
            let mut data = vec![0u8; sizes.iter().copied().max().unwrap_or(0)];
            for (k, &size) in sizes.iter().enumerate() {
                pattern::fill(k as u64, &mut data[..size]);
                space.send(to, &data[..size])?;
            }
            say(format!("ok sent={}", sizes.len()));
        }
        "recv" => {
            let from: u32 = num(rest, 0, "peer")?;
            let sizes: Vec<usize> = rest[1..].iter().filter_map(|s| s.parse().ok()).collect();
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
        }
        // send-split TO auto|both|sender SIZES...: message k is pattern k,
        // sent from this member's segment (so the receiver can copy part
        // of it); prints the bytes this side copied of each.
        "send-split" => {
            let to: u32 = num(rest, 0, "peer")?;
            let by = match rest.get(1).map(String::as_str) {
                Some("auto") => CopyBy::Auto,
                Some("both") => CopyBy::Both,
                Some("sender") => CopyBy::Sender,
                other => {
                    return Err(Error::Invalid(format!(
                        "copy mode {other:?} is not auto, both or sender"
                    )))
                }
            };
            let sizes: Vec<usize> = rest[2..].iter().filter_map(|s| s.parse().ok()).collect();
            let mut data = space.alloc_bytes(sizes.iter().copied().max().unwrap_or(0))?;
            say("ok ready".into());
            let mut copied = Vec::new();
            for (k, &size) in sizes.iter().enumerate() {
                pattern::fill(k as u64, &mut data[..size]);
                let mine = space.send_with(to, &data[..size], by)?;
                // The data is ours again once send returns: overwrite the
                // receiver's share at once (from where the two shares
                // meet; the lower ID copies the front), so a receiver
                // still reading it would get a torn message.
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
        }
        // send-split-stream TO COUNT SIZE: COUNT split messages of SIZE
        // bytes, pattern k % 2 (prepared once: the time goes to sending).
        "send-split-stream" => {
            let to: u32 = num(rest, 0, "peer")?;
            let count: u64 = num(rest, 1, "count")?;
            let size: usize = num(rest, 2, "size")?;
            let mut data = [space.alloc_bytes(size)?, space.alloc_bytes(size)?];
            pattern::fill(0, &mut data[0]);
            pattern::fill(1, &mut data[1]);
            say("ok ready".into());
            for k in 0..count {
                space.send_with(to, &data[k as usize % 2], CopyBy::Both)?;
            }
            say(format!("ok sent={count}"));
        }
        // recv-split FROM SIZES...: like recv, and prints the bytes this
        // side copied of each message.
        "recv-split" => {
            let from: u32 = num(rest, 0, "peer")?;
            let sizes: Vec<usize> = rest[1..].iter().filter_map(|s| s.parse().ok()).collect();
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
        }
        // queue-send MODE RECEIVER COUNT ENTRY_SIZE ENTRIES [SLOT], and
        // queue-recv MODE SENDER ...; queue-hold-send and queue-hold-recv
        // open the queue as that side, then hold like "hold" (COUNT unused).
        "queue-send" | "queue-recv" | "queue-hold-send" | "queue-hold-recv" => {
            let sending = args[2].ends_with("send");
            let spec = QueueSpec {
                mode: mode(rest.first())?,
                sender: if sending {
                    space.id()
                } else {
                    num(rest, 1, "peer")?
                },
                receiver: if sending {
                    num(rest, 1, "peer")?
                } else {
                    space.id()
                },
                slot: num(rest, 5, "slot").unwrap_or(0),
                entry_size: num(rest, 3, "entry size")?,
                entry_count: num(rest, 4, "entries")?,
            };
            let count: u64 = num(rest, 2, "messages")?;
            let q = if spec.owner() == space.id() {
                PmQueue::create(&space, spec)?
            } else {
                PmQueue::open(&space, spec)?
            };
            say("ok ready".into());
            let mut buf = vec![0u8; spec.entry_size as usize];
            if args[2].starts_with("queue-hold") {
                hold(&space)?;
            } else if sending {
                for k in 0..count {
                    let len = 1 + (k as usize * 13) % spec.entry_size as usize;
                    pattern::fill(k, &mut buf[..len]);
                    q.enqueue(&buf[..len])?;
                    say(format!("returned {k}"));
                }
                q.flush()?;
                say("ok flushed".into());
            } else {
                for k in 0..count {
                    let n = q.dequeue(&mut buf)?;
                    let want = 1 + (k as usize * 13) % spec.entry_size as usize;
                    if n != want || pattern::first_mismatch(k, &buf[..n]).is_some() {
                        return Err(Error::Invalid(format!(
                            "message {k} out of order or damaged"
                        )));
                    }
                }
                say(format!("ok dequeued={count}"));
            }
        }
        // The power-loss test's two sides: `durable-send|durable-recv MODE N
        // PHASE`, sender 1, receiver 2, slot 0, 4 entries of 256 bytes.
        // PHASE "first": the owner creates the queue; "resume": both open
        // it after the simulated power loss and finish the N messages.
        // Every step that matters is printed as it happens.
        "durable-send" | "durable-recv" => durable_side(&space, &args[2], rest)?,
        // Attach and wait to be killed or for the space to go.
        "hold" => {
            say("ok holding".into());
            hold(&space)?;
        }
        // pvas_fork: fork; the child joins as ID+1 through the inherited
        // mapping and sends "child" to TO; the parent sends "parent" to TO
        // and checks it is still a member after the child has left.
        "fork-member" => {
            let to: u32 = num(rest, 0, "peer")?;
            // SAFETY: this process is single-threaded: the child may do
            // anything the parent could.
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
        }
        // Hold, with a forked child (no exec) that outlives us: the child
        // must not keep this membership alive.
        "hold-forked" => {
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
            return Err(Error::Invalid(format!("hold ended with {r:?}")));
        }
        other => return Err(Error::Invalid(format!("unknown role {other:?}"))),
    }
    Ok(())
}

/// Payload length of message `seq` in the power-loss runs.
fn durable_len(seq: u64) -> usize {
    1 + (seq as usize * 37) % 255
}

fn durable_side(space: &Space, role: &str, rest: &[String]) -> Result<(), Error> {
    let spec = QueueSpec {
        mode: mode(rest.first())?,
        sender: 1,
        receiver: 2,
        slot: 0,
        entry_size: 256,
        entry_count: 4,
    };
    let total: u64 = num(rest, 1, "messages")?;
    let resume = rest.get(2).map(String::as_str) == Some("resume");
    // "retry": ride out the peer's restart (tests/restart.rs). After a
    // reboot ("resume") the peer is coming back too, and the member table
    // may show every member of before as active but dead (written back
    // early): wait for it as across a restart. Otherwise a gone peer ends
    // this side (the power-loss runs' first phase).
    let retry = rest.get(3).map(String::as_str) == Some("retry");
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
    if role == "durable-send" {
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
