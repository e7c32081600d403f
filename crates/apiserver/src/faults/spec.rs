//! The `--faults` specification: which faults to inject, how often, with which seed.
//!
//! ```text
//! SPEC  := ITEM (',' ITEM)*          e.g. seed=7,restart:every=20s:pause=1s,error:p=0.1
//! ITEM  := 'seed=' INT | 'all' | 'none' | FAULT (':' KEY '=' VALUE)*
//! FAULT := restart | error | latency | watch-end | compact | bind-conflict
//! ```
//! Durations are `250ms`, `2s`, `1m`; fractions are `0.05`; lists use `/` (`codes=500/429`);
//! `agent=TEXT` limits `error` and `latency` to clients whose User-Agent contains TEXT.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Every fault kind, in the order they are printed.
pub const KINDS: [&str; 6] = ["restart", "error", "latency", "watch-end", "compact", "bind-conflict"];

/// Drop every connection and watch, refuse connections for `pause`, keep the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Restart {
    /// Mean time between restarts (each interval is drawn from [every/2, 3·every/2]).
    pub every: Duration,
    /// How long the server stays away.
    pub pause: Duration,
}

/// Answer a fraction of requests with an error instead of serving them.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorFault {
    /// Fraction of eligible requests that fail.
    pub p: f64,
    /// Status codes to answer, chosen uniformly (500 and 429 supported).
    pub codes: Vec<u16>,
    /// `Retry-After` seconds sent with 429.
    pub retry_after: u64,
    /// Verbs that may fail (default: the writes).
    pub verbs: Vec<Verb>,
    /// Only requests whose User-Agent contains this (default: any client).
    pub agent: Option<String>,
    /// At most this many injections per second.
    pub rate: f64,
}

/// Delay a fraction of requests before serving them.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    /// Fraction of eligible requests delayed.
    pub p: f64,
    /// Shortest added delay.
    pub min: Duration,
    /// Longest added delay (uniform between min and max).
    pub max: Duration,
    /// Verbs that may be delayed (default: all).
    pub verbs: Vec<Verb>,
    /// Only requests whose User-Agent contains this (default: any client).
    pub agent: Option<String>,
    /// At most this many injections per second.
    pub rate: f64,
}

/// End watch streams early, as if their timeout had passed.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEnd {
    /// Mean lifetime of a watch (each drawn from [every/2, 3·every/2]).
    pub every: Duration,
}

/// Compact the watch history: resuming a watch from an earlier resourceVersion gets 410 Gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Compact {
    /// Mean time between compactions (each drawn from [every/2, 3·every/2]).
    pub every: Duration,
}

/// Answer a binding 409 Conflict after binding the pod to the requested node, as if another
/// binder had got there first.
#[derive(Debug, Clone, PartialEq)]
pub struct BindConflict {
    /// Fraction of bindings affected.
    pub p: f64,
    /// At most this many injections per second.
    pub rate: f64,
}

/// A request's verb, as the API server's audit log names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

const ALL_VERBS: [Verb; 7] =
    [Verb::Get, Verb::List, Verb::Watch, Verb::Create, Verb::Update, Verb::Patch, Verb::Delete];
const WRITE_VERBS: [Verb; 4] = [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete];

impl Verb {
    /// The audit name (`get`, `list`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    fn parse(s: &str) -> Option<Verb> {
        ALL_VERBS.into_iter().find(|v| v.as_str() == s)
    }
}

/// The faults to inject. `Default` injects none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSpec {
    /// Seed of every fault's random choices; `None` picks one at start (printed, to replay).
    pub seed: Option<u64>,
    /// See [`Restart`].
    pub restart: Option<Restart>,
    /// See [`ErrorFault`].
    pub error: Option<ErrorFault>,
    /// See [`Latency`].
    pub latency: Option<Latency>,
    /// See [`WatchEnd`].
    pub watch_end: Option<WatchEnd>,
    /// See [`Compact`].
    pub compact: Option<Compact>,
    /// See [`BindConflict`].
    pub bind_conflict: Option<BindConflict>,
}

impl Default for Restart {
    fn default() -> Self {
        Restart { every: Duration::from_secs(30), pause: Duration::from_secs(2) }
    }
}

impl Default for ErrorFault {
    fn default() -> Self {
        ErrorFault {
            p: 0.05,
            codes: vec![500, 429],
            retry_after: 1,
            verbs: WRITE_VERBS.to_vec(),
            agent: None,
            rate: 10.0,
        }
    }
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            p: 0.2,
            min: Duration::from_millis(10),
            max: Duration::from_millis(100),
            verbs: ALL_VERBS.to_vec(),
            agent: None,
            rate: 1000.0,
        }
    }
}

impl Default for WatchEnd {
    fn default() -> Self {
        WatchEnd { every: Duration::from_secs(10) }
    }
}

impl Default for Compact {
    fn default() -> Self {
        Compact { every: Duration::from_secs(15) }
    }
}

impl Default for BindConflict {
    fn default() -> Self {
        BindConflict { p: 0.05, rate: 5.0 }
    }
}

impl FaultSpec {
    /// Every fault with its defaults.
    pub fn all() -> Self {
        FaultSpec {
            seed: None,
            restart: Some(Restart::default()),
            error: Some(ErrorFault::default()),
            latency: Some(Latency::default()),
            watch_end: Some(WatchEnd::default()),
            compact: Some(Compact::default()),
            bind_conflict: Some(BindConflict::default()),
        }
    }

    /// True when no fault is configured.
    pub fn is_empty(&self) -> bool {
        self.restart.is_none()
            && self.error.is_none()
            && self.latency.is_none()
            && self.watch_end.is_none()
            && self.compact.is_none()
            && self.bind_conflict.is_none()
    }

    /// The names of the configured faults.
    pub fn kinds(&self) -> Vec<&'static str> {
        let on = [
            self.restart.is_some(),
            self.error.is_some(),
            self.latency.is_some(),
            self.watch_end.is_some(),
            self.compact.is_some(),
            self.bind_conflict.is_some(),
        ];
        KINDS.into_iter().zip(on).filter(|(_, on)| *on).map(|(k, _)| k).collect()
    }
}

/// A `--faults` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault spec {item:?}: {why}")]
pub struct SpecError {
    /// The offending item.
    pub item: String,
    /// What is wrong with it.
    pub why: String,
}

/// Parses `250ms`, `2s`, `1.5s`, `1m`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (e.g. 250ms, 2s, 1m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?} is not a duration (e.g. 250ms, 2s, 1m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"))
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a fraction between 0 and 1")),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!("{s:?} is not a positive number of injections per second")),
    }
}

fn parse_verbs(s: &str) -> Result<Vec<Verb>, String> {
    if s == "all" {
        return Ok(ALL_VERBS.to_vec());
    }
    if s == "writes" {
        return Ok(WRITE_VERBS.to_vec());
    }
    s.split('/')
        .map(|v| {
            Verb::parse(v).ok_or_else(|| {
                format!("unknown verb {v:?} (get, list, watch, create, update, patch, delete, all, writes)")
            })
        })
        .collect()
}

fn parse_agent(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("agent must not be empty".into());
    }
    Ok(s.to_string())
}

fn parse_codes(s: &str) -> Result<Vec<u16>, String> {
    s.split('/')
        .map(|c| match c {
            "500" => Ok(500),
            "429" => Ok(429),
            _ => Err(format!("unsupported status code {c:?} (500 or 429)")),
        })
        .collect()
}

fn nonzero(d: Duration, what: &str) -> Result<Duration, String> {
    if d.is_zero() {
        Err(format!("{what} must be greater than zero"))
    } else {
        Ok(d)
    }
}

impl FromStr for FaultSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        let mut spec = FaultSpec::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let err = |why: String| SpecError { item: item.to_string(), why };
            if let Some(seed) = item.strip_prefix("seed=") {
                spec.seed = Some(seed.parse().map_err(|_| err(format!("{seed:?} is not an unsigned integer")))?);
                continue;
            }
            match item {
                "none" => continue,
                "all" => {
                    let seed = spec.seed;
                    spec = FaultSpec { seed, ..FaultSpec::all() };
                    continue;
                }
                _ => {}
            }
            let mut parts = item.split(':');
            let kind = parts.next().unwrap_or_default();
            let mut args = Vec::new();
            for kv in parts {
                let (k, v) = kv.split_once('=').ok_or_else(|| err(format!("{kv:?} is not KEY=VALUE")))?;
                args.push((k, v));
            }
            let unknown = |k: &str| err(format!("{kind} has no parameter {k:?}"));
            match kind {
                "restart" => {
                    let mut f = Restart::default();
                    for (k, v) in args {
                        match k {
                            "every" => f.every = parse_duration(v).and_then(|d| nonzero(d, "every")).map_err(err)?,
                            "pause" => f.pause = parse_duration(v).map_err(err)?,
                            _ => return Err(unknown(k)),
                        }
                    }
                    spec.restart = Some(f);
                }
                "error" => {
                    let mut f = ErrorFault::default();
                    for (k, v) in args {
                        match k {
                            "p" => f.p = parse_fraction(v).map_err(err)?,
                            "codes" => f.codes = parse_codes(v).map_err(err)?,
                            "retry-after" => {
                                f.retry_after =
                                    v.parse().map_err(|_| err(format!("{v:?} is not a number of seconds")))?
                            }
                            "verbs" => f.verbs = parse_verbs(v).map_err(err)?,
                            "agent" => f.agent = Some(parse_agent(v).map_err(err)?),
                            "rate" => f.rate = parse_rate(v).map_err(err)?,
                            _ => return Err(unknown(k)),
                        }
                    }
                    spec.error = Some(f);
                }
                "latency" => {
                    let mut f = Latency::default();
                    for (k, v) in args {
                        match k {
                            "p" => f.p = parse_fraction(v).map_err(err)?,
                            "min" => f.min = parse_duration(v).map_err(err)?,
                            "max" => f.max = parse_duration(v).map_err(err)?,
                            "verbs" => f.verbs = parse_verbs(v).map_err(err)?,
                            "agent" => f.agent = Some(parse_agent(v).map_err(err)?),
                            "rate" => f.rate = parse_rate(v).map_err(err)?,
                            _ => return Err(unknown(k)),
                        }
                    }
                    if f.max < f.min {
                        return Err(err("max must not be below min".into()));
                    }
                    spec.latency = Some(f);
                }
                "watch-end" => {
                    let mut f = WatchEnd::default();
                    for (k, v) in args {
                        match k {
                            "every" => f.every = parse_duration(v).and_then(|d| nonzero(d, "every")).map_err(err)?,
                            _ => return Err(unknown(k)),
                        }
                    }
                    spec.watch_end = Some(f);
                }
                "compact" => {
                    let mut f = Compact::default();
                    for (k, v) in args {
                        match k {
                            "every" => f.every = parse_duration(v).and_then(|d| nonzero(d, "every")).map_err(err)?,
                            _ => return Err(unknown(k)),
                        }
                    }
                    spec.compact = Some(f);
                }
                "bind-conflict" => {
                    let mut f = BindConflict::default();
                    for (k, v) in args {
                        match k {
                            "p" => f.p = parse_fraction(v).map_err(err)?,
                            "rate" => f.rate = parse_rate(v).map_err(err)?,
                            _ => return Err(unknown(k)),
                        }
                    }
                    spec.bind_conflict = Some(f);
                }
                _ => {
                    return Err(err(format!(
                        "unknown fault {kind:?} (restart, error, latency, watch-end, compact, bind-conflict, all, none)"
                    )))
                }
            }
        }
        Ok(spec)
    }
}

/// `60s` → `1m`, `1500ms` stays: the largest unit that spells the duration in whole numbers.
fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}s", d.as_secs_f64());
    }
    if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn fmt_agent(a: Option<&str>) -> String {
    a.map(|a| format!(":agent={a}")).unwrap_or_default()
}

fn fmt_verbs(v: &[Verb]) -> String {
    if v == ALL_VERBS {
        return "all".into();
    }
    if v == WRITE_VERBS {
        return "writes".into();
    }
    v.iter().map(|v| v.as_str()).collect::<Vec<_>>().join("/")
}

/// The canonical spelling, every parameter explicit; parses back to the same spec.
impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Vec::new();
        if let Some(seed) = self.seed {
            items.push(format!("seed={seed}"));
        }
        if let Some(r) = &self.restart {
            items.push(format!("restart:every={}:pause={}", fmt_duration(r.every), fmt_duration(r.pause)));
        }
        if let Some(e) = &self.error {
            let codes: Vec<String> = e.codes.iter().map(u16::to_string).collect();
            items.push(format!(
                "error:p={}:codes={}:retry-after={}:verbs={}{}:rate={}",
                e.p,
                codes.join("/"),
                e.retry_after,
                fmt_verbs(&e.verbs),
                fmt_agent(e.agent.as_deref()),
                e.rate
            ));
        }
        if let Some(l) = &self.latency {
            items.push(format!(
                "latency:p={}:min={}:max={}:verbs={}{}:rate={}",
                l.p,
                fmt_duration(l.min),
                fmt_duration(l.max),
                fmt_verbs(&l.verbs),
                fmt_agent(l.agent.as_deref()),
                l.rate
            ));
        }
        if let Some(w) = &self.watch_end {
            items.push(format!("watch-end:every={}", fmt_duration(w.every)));
        }
        if let Some(c) = &self.compact {
            items.push(format!("compact:every={}", fmt_duration(c.every)));
        }
        if let Some(b) = &self.bind_conflict {
            items.push(format!("bind-conflict:p={}:rate={}", b.p, b.rate));
        }
        if items.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_parse_with_defaults_and_overrides() {
        let s: FaultSpec =
            "seed=7, restart:every=20s:pause=500ms, error:p=0.1:codes=429, bind-conflict".parse().unwrap();
        assert_eq!(s.seed, Some(7));
        assert_eq!(s.restart, Some(Restart { every: Duration::from_secs(20), pause: Duration::from_millis(500) }));
        let e = s.error.as_ref().unwrap();
        assert_eq!((e.p, e.codes.as_slice(), e.retry_after), (0.1, &[429][..], 1));
        assert_eq!(e.verbs, WRITE_VERBS);
        assert_eq!(s.bind_conflict, Some(BindConflict::default()));
        assert!(s.latency.is_none() && s.watch_end.is_none() && s.compact.is_none());
        assert_eq!(s.kinds(), ["restart", "error", "bind-conflict"]);
    }

    #[test]
    fn display_is_canonical_and_parses_back() {
        for text in [
            "all",
            "seed=1,all",
            "latency:verbs=get/watch:min=0ms:max=1.5s:agent=kube-scheduler-a",
            "none",
            "compact:every=1m",
            "error:verbs=update:agent=replica/1",
        ] {
            let spec: FaultSpec = text.parse().unwrap();
            let again: FaultSpec = spec.to_string().parse().unwrap();
            assert_eq!(spec, again, "{text} -> {spec}");
        }
        assert_eq!("none".parse::<FaultSpec>().unwrap().to_string(), "none");
        assert_eq!(
            "seed=3,restart,watch-end:every=1500ms".parse::<FaultSpec>().unwrap().to_string(),
            "seed=3,restart:every=30s:pause=2s,watch-end:every=1500ms"
        );
    }

    #[test]
    fn bad_items_name_the_item_and_the_problem() {
        let cases = [
            ("flood", "unknown fault \"flood\""),
            ("error:p=2", "\"2\" is not a fraction between 0 and 1"),
            ("error:codes=503", "unsupported status code \"503\" (500 or 429)"),
            ("restart:every=0s", "every must be greater than zero"),
            ("restart:often", "\"often\" is not KEY=VALUE"),
            ("latency:min=1s:max=10ms", "max must not be below min"),
            ("latency:delay=1s", "latency has no parameter \"delay\""),
            ("compact:every=soon", "\"soon\" is not a duration (e.g. 250ms, 2s, 1m)"),
            ("seed=-1", "\"-1\" is not an unsigned integer"),
            ("error:verbs=get/poke", "unknown verb \"poke\""),
            ("bind-conflict:rate=0", "\"0\" is not a positive number of injections per second"),
        ];
        for (text, want) in cases {
            let e = text.parse::<FaultSpec>().unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
            assert!(e.to_string().starts_with("invalid fault spec \""), "{e}");
        }
    }
}
