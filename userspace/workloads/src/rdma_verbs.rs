//! `sky-work rdma-verbs`: the verbs the queue between machines is made of,
//! exercised across an RDMA connection (tests/vm/rdma-bed.sh runs the
//! server in one network namespace, the client in the other).
//!
//! The server offers two regions: `open` (the peer may write, read, place
//! 8 bytes atomically and flush) and `write_only` (the peer may only
//! write: a push receiver's queue area). The client writes messages of 1 B
//! to 60 000 B into `open`, flushes them to global visibility, reads them
//! back, then places a done marker by ATOMIC WRITE; the server checks every
//! byte once the marker is there. Last, the client reads `write_only`,
//! which must fail with a remote access error (the QP is in error after
//! it, so it comes last).

use anyhow::{bail, Context, Result};
use sky_rdma::{Access, Endpoint, Listener, Persistence, RemoteRegion};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

const OPEN_BYTES: usize = 64 << 10;
const WRITE_ONLY_BYTES: usize = 4096;
/// Where the done marker goes: the last 8 bytes of `open`.
const MARKER_AT: usize = OPEN_BYTES - 8;
const MARKER: u64 = 0x5c5_d0e5_1d0e;
/// (offset, length) of each message the client writes.
const PIECES: [(usize, usize); 4] = [(0, 1), (64, 100), (4096, 4096), (8192, 60_000 - 8192)];

fn byte(at: usize) -> u8 {
    (at as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3]
}

/// A page-aligned zeroed buffer that stays put while registered.
fn buffer(len: usize) -> Vec<u8> {
    vec![0u8; len]
}

/// Serves one client; returns the result line.
pub fn serve(addr: SocketAddrV4, wait: Duration) -> Result<String> {
    let listener = Listener::bind(addr).context("listening")?;
    let endpoint = listener.request().context("waiting for the client")?;
    let caps = endpoint.caps();
    let mut open = buffer(OPEN_BYTES);
    let mut write_only = buffer(WRITE_ONLY_BYTES);
    // SAFETY: both buffers outlive their regions (dropped at the end).
    let open_mr = unsafe {
        endpoint.register(
            open.as_mut_ptr(),
            OPEN_BYTES,
            Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC
                | Access::FLUSH_GLOBAL,
        )
    }?;
    let write_only_mr = unsafe {
        endpoint.register(
            write_only.as_mut_ptr(),
            WRITE_ONLY_BYTES,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
    }?;
    // FLUSH to persistence asks for persistent memory: DRAM is refused.
    let mut dram = buffer(4096);
    // SAFETY: dram outlives the attempt.
    let persistent_on_dram = unsafe {
        endpoint.register(
            dram.as_mut_ptr(),
            4096,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::FLUSH_PERSISTENT,
        )
    };
    let mut data = open_mr.remote().to_bytes().to_vec();
    data.extend(write_only_mr.remote().to_bytes());
    let (_conn, _) = endpoint.connect(&data).context("accepting")?;
    let started = Instant::now();
    let marker = open[MARKER_AT..].as_ptr() as *const u64;
    // SAFETY: an aligned word of the buffer, written by the peer's NIC.
    while unsafe { std::ptr::read_volatile(marker) } != MARKER {
        if started.elapsed() > wait {
            bail!("no done marker from the client in {wait:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let wrong = PIECES
        .iter()
        .flat_map(|&(at, len)| at..at + len)
        .filter(|&i| open[i] != byte(i))
        .count();
    // Let the client's last, failing read reach this side before the
    // connection goes.
    std::thread::sleep(Duration::from_secs(2));
    drop((open_mr, write_only_mr));
    Ok(format!(
        "result workload=rdma-verbs side=server {caps} bytes_checked={} bytes_wrong={wrong} persistent_on_dram={}",
        PIECES.iter().map(|p| p.1).sum::<usize>(),
        match persistent_on_dram {
            Ok(_) => "registered".to_string(),
            Err(e) => format!("refused:{}", e.to_string().replace(' ', "_")),
        }
    ))
}

/// Connects to the server and runs the exchange; returns the result line.
pub fn drive(server: SocketAddrV4) -> Result<String> {
    let endpoint = Endpoint::resolve(server).context("resolving the server")?;
    let mut local = buffer(2 * OPEN_BYTES);
    // SAFETY: local outlives the region.
    let mr = unsafe { endpoint.register(local.as_mut_ptr(), local.len(), Access::LOCAL_WRITE) }?;
    let (conn, data) = endpoint.connect(b"sky-rdma-verbs").context("connecting")?;
    if data.len() < 2 * RemoteRegion::BYTES {
        bail!("the server sent {} bytes of connection data", data.len());
    }
    let open = RemoteRegion::from_bytes(&data[..RemoteRegion::BYTES])?;
    let write_only = RemoteRegion::from_bytes(&data[RemoteRegion::BYTES..])?;
    for (i, b) in local[..OPEN_BYTES].iter_mut().enumerate() {
        *b = byte(i);
    }
    let t = Instant::now();
    for &(at, len) in &PIECES {
        conn.write(&mr, at, len, &open, at as u64)?;
    }
    let written_us = t.elapsed().as_micros();
    conn.flush(&open, 0, OPEN_BYTES as u64, Persistence::Global)?;
    // Read back into the second half.
    for &(at, len) in &PIECES {
        conn.read(&mr, OPEN_BYTES + at, len, &open, at as u64)?;
    }
    let read_wrong = PIECES
        .iter()
        .flat_map(|&(at, len)| at..at + len)
        .filter(|&i| local[OPEN_BYTES + i] != byte(i))
        .count();
    conn.atomic_write(&open, MARKER_AT as u64, MARKER)?;
    let refused = match conn.read(&mr, 0, 64, &write_only, 0) {
        Ok(()) => "read".to_string(),
        Err(e) => e.to_string().replace(' ', "_"),
    };
    drop(mr);
    Ok(format!(
        "result workload=rdma-verbs side=client {} written_us={written_us} read_back_wrong={read_wrong} write_only_read={refused}",
        conn.caps()
    ))
}
