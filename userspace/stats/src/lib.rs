//! scx_sky's statistics the scx way: served through `scx_stats` at the
//! standard socket (`/var/run/scx/root/stats`), so scx tools read them,
//! read back by `scx_sky stats`, and rendered as OpenMetrics text for
//! fleet scraping. Every name and help text comes from one catalog, which
//! the scheduler builds from the stat enum in bpf/intf.h: nothing here
//! lists a statistic by hand.
//!
//! A sample is a JSON object: `policy` (the running policy's name),
//! `generation`, then every counter by name, as totals since the
//! scheduler attached. Target `totals` answers with that; target `top`
//! (the scx default) with each counter's growth since the same client's
//! previous read.

pub use scx_stats;

use anyhow::{bail, Context, Result};
use crossbeam::channel::{Receiver, Sender};
use scx_stats::prelude::*;
use scx_stats::serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The fields every sample leads with, before the counters.
pub const POLICY: &str = "policy";
pub const GENERATION: &str = "generation";

/// A totals sample: the running policy, its generation, every counter.
pub fn sample<'a>(
    policy: &str,
    generation: u64,
    counters: impl IntoIterator<Item = (&'a str, u64)>,
) -> Value {
    let mut map = Map::new();
    map.insert(POLICY.into(), Value::from(policy));
    map.insert(GENERATION.into(), Value::from(generation));
    for (name, value) in counters {
        map.insert(name.to_string(), Value::from(value));
    }
    Value::Object(map)
}

/// A sample's policy and generation (`?` and 0 where missing).
pub fn policy_of(sample: &Map<String, Value>) -> (&str, u64) {
    (
        sample.get(POLICY).and_then(Value::as_str).unwrap_or("?"),
        sample.get(GENERATION).and_then(Value::as_u64).unwrap_or(0),
    )
}

/// What a reader asks the scheduler's run loop for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleRequest {
    /// A totals sample, now.
    Totals,
    /// What the scheduler knows of each of these threads: an object from
    /// thread ID (as text) to a [`ThreadView`].
    Threads(Vec<u32>),
    /// The gangs, their homes and why, and the cache domains' states, as
    /// the last plan left them (target `gangs`).
    Gangs,
}

/// What the scheduler knows of one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadView {
    /// Its class, if known (`compute`, `pm-writer`, `memory-bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Its waits before each run since it started, as (bucket, count) for
    /// the buckets that counted any (bucket: [`wait_bucket_bounds_us`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<(usize, u64)>,
}

/// Most threads one `threads` request may name.
pub const MAX_CLASS_TIDS: usize = 512;

/// Wait-histogram buckets (`struct sky_wait_hist` in bpf/intf.h): 0 for
/// under 1 us, then four per power of two of microseconds.
pub const WAIT_SUB_SHIFT: u32 = 2;

/// Microseconds bucket `i` holds: [low, high).
pub fn wait_bucket_bounds_us(i: usize) -> (u64, u64) {
    if i == 0 {
        return (0, 1);
    }
    let per_octave = 1usize << WAIT_SUB_SHIFT;
    let msb = ((i - 1) / per_octave) as u32;
    let sub = ((i - 1) % per_octave) as u64;
    let at = |s: u64| {
        let scaled = (per_octave as u64 + s) << msb;
        // Round up: below 4 us the buckets are whole microseconds.
        scaled.div_ceil(per_octave as u64)
    };
    (at(sub), at(sub + 1).max(at(sub) + 1))
}

/// The `p`th percentile of a wait histogram's counts (bucket, count), in
/// microseconds: the upper bound of the bucket it falls in (so at most
/// 25 % over the true value); None without a count.
pub fn wait_percentile_us(counts: &[(usize, u64)], p: f64) -> Option<u64> {
    let total: u64 = counts.iter().map(|&(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (bucket, n) in sorted {
        seen += n;
        if seen >= rank {
            return Some(wait_bucket_bounds_us(bucket).1);
        }
    }
    None
}

/// The `tids` argument of a `threads` read: thread IDs, comma-separated.
pub fn parse_tids(arg: &str) -> Result<Vec<u32>> {
    let tids = arg
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .with_context(|| format!("tids: {t:?} is not a thread ID"))
        })
        .collect::<Result<Vec<u32>>>()?;
    if tids.len() > MAX_CLASS_TIDS {
        bail!("tids: {} thread IDs, at most {MAX_CLASS_TIDS}", tids.len());
    }
    Ok(tids)
}

/// What a statistic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (BPF's per-CPU counters).
    Counter,
    /// A value now (the generation).
    Gauge,
    /// A name (the policy).
    Label,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub name: String,
    pub help: String,
    pub kind: Kind,
}

/// Every statistic a sample carries, in order.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub stats: Vec<Stat>,
}

/// The scx_stats name of the top-level struct.
pub const META_NAME: &str = "sky";

impl Catalog {
    /// `policy` and `generation`, then `counters` (name, help) in order.
    pub fn new(counters: &[(&str, &str)]) -> Catalog {
        let mut stats = vec![
            Stat {
                name: POLICY.into(),
                help: "the running policy".into(),
                kind: Kind::Label,
            },
            Stat {
                name: GENERATION.into(),
                help: "policy generation: moves on every switch".into(),
                kind: Kind::Gauge,
            },
        ];
        stats.extend(counters.iter().map(|(name, help)| Stat {
            name: name.to_string(),
            help: help.to_string(),
            kind: Kind::Counter,
        }));
        Catalog { stats }
    }

    /// The scx_stats metadata: one top-level struct with a field per stat.
    pub fn meta(&self) -> StatsMeta {
        let fields = self
            .stats
            .iter()
            .map(|s| {
                let kind = match s.kind {
                    Kind::Label => StatsKind::String,
                    Kind::Gauge | Kind::Counter => StatsKind::U64,
                };
                let field = StatsField {
                    data: StatsData::Datum(kind),
                    attrs: StatsFieldAttrs {
                        desc: Some(s.help.clone()),
                        user: BTreeMap::new(),
                    },
                };
                (s.name.clone(), field)
            })
            .collect();
        StatsMeta {
            name: META_NAME.into(),
            attrs: StatsStructAttrs {
                top: Some("true".into()),
                desc: Some("scx_sky scheduler statistics".into()),
                user: BTreeMap::new(),
            },
            fields,
        }
    }

    /// `now` with every counter replaced by its growth since `before`
    /// (a counter that went backwards restarted: its value counts whole).
    pub fn delta(
        &self,
        now: &Map<String, Value>,
        before: &Map<String, Value>,
    ) -> Map<String, Value> {
        let mut out = now.clone();
        for s in self.stats.iter().filter(|s| s.kind == Kind::Counter) {
            let (Some(n), Some(b)) = (
                now.get(&s.name).and_then(Value::as_u64),
                before.get(&s.name).and_then(Value::as_u64),
            ) else {
                continue;
            };
            out.insert(s.name.clone(), Value::from(n.checked_sub(b).unwrap_or(n)));
        }
        out
    }

    /// A totals sample as OpenMetrics text: counters as `scx_sky_NAME_total`,
    /// gauges as `scx_sky_NAME`, the policy as `scx_sky_policy_info`.
    pub fn openmetrics(&self, sample: &Map<String, Value>) -> String {
        let mut out = String::new();
        for s in &self.stats {
            let Some(value) = sample.get(&s.name) else {
                continue;
            };
            let family = format!("scx_sky_{}", s.name);
            let help = s.help.replace('\\', "\\\\").replace('\n', "\\n");
            match s.kind {
                Kind::Counter => {
                    out += &format!("# TYPE {family} counter\n# HELP {family} {help}\n");
                    out += &format!("{family}_total {}\n", value.as_u64().unwrap_or(0));
                }
                Kind::Gauge => {
                    out += &format!("# TYPE {family} gauge\n# HELP {family} {help}\n");
                    out += &format!("{family} {}\n", value.as_u64().unwrap_or(0));
                }
                Kind::Label => {
                    let label = value
                        .as_str()
                        .unwrap_or("")
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n");
                    out += &format!("# TYPE {family} info\n# HELP {family} {help}\n");
                    out += &format!("{family}_info{{{}=\"{label}\"}} 1\n", s.name);
                }
            }
        }
        out + "# EOF\n"
    }
}

/// Where scx schedulers serve statistics unless told otherwise (scx_stats'
/// default, where `scx_sky stats` and the scx tools look).
pub const DEFAULT_SOCKET: &str = "/var/run/scx/root/stats";

/// The stats socket of the running scheduler: mode 0600 whatever the
/// umask (samples name every thread and its class; only root reads them),
/// and removed with the server.
pub struct Served {
    server: Option<StatsServer<SampleRequest, Value>>,
    path: PathBuf,
}

impl Served {
    /// The scheduler's ends of the server's channels.
    pub fn channels(&self) -> (Sender<Value>, Receiver<SampleRequest>) {
        self.server
            .as_ref()
            .expect("the server lives as long as Served")
            .channels()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // The server wakes its listener through the socket: remove after.
        drop(self.server.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What wakes the scheduler's loop when a request is sent.
pub type Waker = std::sync::Arc<dyn Fn() + Send + Sync>;

/// Serves `catalog`'s samples at `path` (None: [`DEFAULT_SOCKET`]). Each
/// read sends a [`SampleRequest`] down the returned server's channel and
/// calls `wake`; the scheduler answers with a `Value::Object`: a totals
/// sample, or the threads asked for (target `threads`, argument `tids`).
pub fn serve(catalog: &Catalog, path: Option<&Path>, wake: Waker) -> Result<Served> {
    let w = wake.clone();
    let totals: Box<dyn StatsReaderSend<SampleRequest, Value>> =
        Box::new(move |_args, (req, res)| ask(req, res, &w, SampleRequest::Totals));
    let delta_catalog = catalog.clone();
    let w = wake.clone();
    let top: Box<dyn StatsOpener<SampleRequest, Value>> = Box::new(move |(req, res)| {
        let mut before = ask(req, res, &w, SampleRequest::Totals)?;
        let catalog = delta_catalog.clone();
        let w = w.clone();
        let read: Box<dyn StatsReader<SampleRequest, Value>> =
            Box::new(move |_args, (req, res)| {
                let now = ask(req, res, &w, SampleRequest::Totals)?;
                let delta = match (now.as_object(), before.as_object()) {
                    (Some(n), Some(b)) => Value::Object(catalog.delta(n, b)),
                    _ => now.clone(),
                };
                before = now;
                Ok(delta)
            });
        Ok(read)
    });
    let data = StatsServerData::new()
        .add_meta(catalog.meta())
        .add_ops(
            "top",
            StatsOps {
                open: top,
                close: None,
            },
        )
        .add_stats("totals", totals)
        .add_stats("threads", {
            let w = wake.clone();
            Box::new(move |args, (req, res)| {
                let tids = parse_tids(args.get("tids").map_or("", String::as_str))?;
                ask(req, res, &w, SampleRequest::Threads(tids))
            })
        })
        .add_stats(
            "gangs",
            Box::new(move |_args, (req, res)| ask(req, res, &wake, SampleRequest::Gangs)),
        );
    let path = path.map_or_else(|| PathBuf::from(DEFAULT_SOCKET), Path::to_path_buf);
    // scx_stats binds with the process umask (0777 under umask 000): a
    // umask that gives others nothing while it binds, then the mode made
    // exact. No other thread creates files while the scheduler starts.
    // SAFETY: umask only swaps the process's file-creation mask.
    let umask = unsafe { libc::umask(0o077) };
    let launched = StatsServer::new(data).set_path(&path).launch();
    // SAFETY: as above, restoring the mask found.
    unsafe { libc::umask(umask) };
    let served = Served {
        server: Some(launched?),
        path,
    };
    std::fs::set_permissions(&served.path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", served.path.display()))?;
    Ok(served)
}

/// Asks the scheduler (the channels are scx_stats') and wakes its loop.
fn ask(
    req: &Sender<SampleRequest>,
    res: &Receiver<Value>,
    wake: &Waker,
    what: SampleRequest,
) -> Result<Value> {
    req.send(what)?;
    wake();
    Ok(res.recv()?)
}

/// A client of a running scheduler's stats socket (None: the scx default).
pub struct Reader {
    client: StatsClient,
}

impl Reader {
    pub fn connect(path: Option<&Path>) -> Result<Reader> {
        let mut client = StatsClient::new();
        if let Some(path) = path {
            client = client.set_path(path);
        }
        let client = client.connect(Some(5_000)).map_err(|e| {
            anyhow::anyhow!(
                "no scx_sky statistics to read ({e}): is scx_sky running? (the socket is \
                 /var/run/scx/root/stats unless --stats-socket says otherwise)"
            )
        })?;
        Ok(Reader { client })
    }

    /// A sample of `target` ("totals" or "top").
    pub fn read(&mut self, target: &str) -> Result<Map<String, Value>> {
        let value: Value = self
            .client
            .request("stats", vec![("target".into(), target.into())])
            .with_context(|| format!("reading statistics {target}"))?;
        match value {
            Value::Object(map) => Ok(map),
            other => bail!("statistics came back as {other}, not an object"),
        }
    }

    /// What the scheduler knows of threads `tids` (at most
    /// MAX_CLASS_TIDS); threads it does not know are left out.
    pub fn threads(&mut self, tids: &[u32]) -> Result<BTreeMap<u32, ThreadView>> {
        let list: Vec<String> = tids.iter().map(u32::to_string).collect();
        let value: Value = self
            .client
            .request(
                "stats",
                vec![
                    ("target".into(), "threads".into()),
                    ("tids".into(), list.join(",")),
                ],
            )
            .context("reading what scx_sky knows of the threads")?;
        let Value::Object(map) = value else {
            bail!("threads came back as {value}, not an object");
        };
        Ok(map
            .into_iter()
            .filter_map(|(tid, view)| {
                Some((
                    tid.parse().ok()?,
                    scx_stats::serde_json::from_value(view).ok()?,
                ))
            })
            .collect())
    }

    /// The gangs as the scheduler's last plan left them (target `gangs`).
    pub fn gangs(&mut self) -> Result<Value> {
        self.client
            .request("stats", vec![("target".into(), "gangs".into())])
            .context("reading the gangs")
    }

    /// The scheduler's `stats_meta` answer.
    pub fn meta(&mut self) -> Result<Value> {
        self.client.request("stats_meta", vec![])
    }
}

#[cfg(test)]
mod tests;
