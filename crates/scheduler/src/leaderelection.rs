//! Leader election on a `coordination.k8s.io/v1` Lease with client-go's protocol, so this
//! binary and upstream kube-schedulers can share one lock (mixed versions during an upgrade).
//!
//! Hand-rolled rather than built on `kube-lease-manager` 0.13, whose protocol differs in ways an
//! operator would see: it takes the lock with server-side apply and relies on field-manager
//! conflicts (no `resourceVersion` precondition, so it does not exclude a client-go holder), its
//! leader never gives up when renewals fail (the watch loop retries errors forever, so a
//! partitioned leader keeps scheduling after its lease expired — there is no renew deadline),
//! durations are whole seconds with no retry period, expiry is computed from the holder's
//! `renewTime` (clock skew) instead of the local observation time, and release nulls the record
//! instead of upstream's `leaseDurationSeconds: 1` with an empty holder.
//!
//! Semantics (client-go `tools/leaderelection`): candidates retry every retryPeriod (jitter
//! 1.2); a record is expired when the local time since it last *changed* exceeds its
//! `leaseDurationSeconds`; updates carry the observed `resourceVersion`, so two candidates
//! cannot both win; the leader renews every retryPeriod and stops leading when it cannot renew
//! within renewDeadline; release rewrites the record with an empty holder.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use rand::Rng as _;
use tokio::sync::watch;

use crate::config::LeaderElectionConfiguration;

/// client-go's `JitterFactor` for acquisition retries.
pub const JITTER_FACTOR: f64 = 1.2;

/// The elector's name in health checks (upstream's `LeaderElectionConfig.Name`).
pub const ELECTOR_NAME: &str = "kube-scheduler";

/// What the elector needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This candidate's identity (`<hostname>_<uuid>`).
    pub identity: String,
    /// How long a non-renewed record keeps others away.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
    /// `source.component` of the LeaderElection events (the first profile's scheduler name).
    pub event_component: String,
}

impl ElectionConfig {
    /// Checks the lock type and timings with upstream's messages (`makeLeaderElectionConfig`
    /// and `NewLeaderElector`).
    pub fn from_config(
        le: &LeaderElectionConfiguration,
        identity: String,
        event_component: String,
    ) -> Result<Self, String> {
        match le.resource_lock.as_str() {
            "leases" => {}
            lock @ ("endpoints" | "configmaps" | "endpointsleases" | "configmapsleases") => {
                return Err(format!("couldn't create resource lock: {lock} lock is removed, migrate to leases"))
            }
            other => return Err(format!("couldn't create resource lock: Invalid lock-type {other}")),
        }
        let lease = le.lease_duration.as_nanos();
        let renew = le.renew_deadline.as_nanos();
        let retry = le.retry_period.as_nanos();
        let fail = |m: &str| Err(format!("couldn't create leader elector: {m}"));
        if lease <= renew {
            return fail("leaseDuration must be greater than renewDeadline");
        }
        if renew as f64 <= JITTER_FACTOR * retry as f64 {
            return fail("renewDeadline must be greater than retryPeriod*JitterFactor");
        }
        if lease < 1 {
            return fail("leaseDuration must be greater than zero");
        }
        if renew < 1 {
            return fail("renewDeadline must be greater than zero");
        }
        if retry < 1 {
            return fail("retryPeriod must be greater than zero");
        }
        if identity.is_empty() {
            return fail("Lock identity is empty");
        }
        let std = |d: crate::config::Duration| d.to_std().unwrap_or_default();
        Ok(ElectionConfig {
            namespace: le.resource_namespace.clone(),
            name: le.resource_name.clone(),
            identity,
            lease_duration: std(le.lease_duration),
            renew_deadline: std(le.renew_deadline),
            retry_period: std(le.retry_period),
            event_component,
        })
    }

    /// `namespace/name`, as upstream logs the lock.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// `<hostname>_<random uuid>`: unique even for two processes on one host.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(crate::client::hostname);
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// client-go's `LeaderElectionRecord`.
#[derive(Debug, Clone, Default, PartialEq)]
struct Record {
    holder: String,
    lease_duration_seconds: i32,
    acquire_time: Option<MicroTime>,
    renew_time: Option<MicroTime>,
    transitions: i32,
}

impl Record {
    fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let Some(s) = spec else { return Record::default() };
        Record {
            holder: s.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: s.lease_duration_seconds.unwrap_or(0),
            acquire_time: s.acquire_time.clone(),
            renew_time: s.renew_time.clone(),
            transitions: s.lease_transitions.unwrap_or(0),
        }
    }

    fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.clone(),
            renew_time: self.renew_time.clone(),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }
}

#[derive(Default)]
struct Observed {
    record: Record,
    /// The record as last read from the server, to notice changes.
    raw: Option<serde_json::Value>,
    /// When `record` last changed, on the local clock (what expiry is measured from).
    time: Option<Instant>,
    /// The last Lease object read or written (its resourceVersion guards the next update).
    lease: Option<Lease>,
}

/// How a leadership term ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermEnd {
    /// The stop signal was raised.
    Stopped,
    /// Renewal failed for longer than the renew deadline.
    Lost,
}

/// A candidate for one Lease.
pub struct LeaderElector {
    cfg: ElectionConfig,
    leases: Api<Lease>,
    events: Api<Event>,
    observed: Mutex<Observed>,
}

/// Resolves once `stop` turns true (never, if its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn now_micro() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl LeaderElector {
    /// A candidate using `client`; nothing is sent until [`LeaderElector::acquire`].
    pub fn new(client: kube::Client, cfg: ElectionConfig) -> Self {
        LeaderElector {
            leases: Api::namespaced(client.clone(), &cfg.namespace),
            events: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: Mutex::new(Observed::default()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.cfg
    }

    /// True while the last observed record names this candidate.
    pub fn is_leader(&self) -> bool {
        self.observed.lock().record.holder == self.cfg.identity
    }

    /// The holder of the last observed record.
    pub fn leader(&self) -> String {
        self.observed.lock().record.holder.clone()
    }

    /// Upstream's healthz watchdog: unhealthy when leading but not renewed for longer than the
    /// lease duration plus `max_tolerable_expired`.
    pub fn check(&self, max_tolerable_expired: Duration) -> Result<(), String> {
        let o = self.observed.lock();
        if o.record.holder != self.cfg.identity {
            return Ok(());
        }
        match o.time {
            Some(t) if t.elapsed() > self.cfg.lease_duration + max_tolerable_expired => {
                Err(format!("failed election to renew leadership on lease {ELECTOR_NAME}"))
            }
            _ => Ok(()),
        }
    }

    fn lease_valid(&self, now: Instant) -> bool {
        let o = self.observed.lock();
        let ttl = Duration::from_secs(o.record.lease_duration_seconds.max(0) as u64);
        o.time.is_some_and(|t| t + ttl > now)
    }

    fn set_observed(&self, record: Record, lease: Lease) {
        let mut o = self.observed.lock();
        o.record = record;
        o.time = Some(Instant::now());
        o.lease = Some(lease);
    }

    async fn update(&self, base: Lease, record: &Record) -> Result<Lease, kube::Error> {
        let mut lease = base;
        lease.spec = Some(record.to_spec());
        self.leases.replace(&self.cfg.name, &PostParams::default(), &lease).await
    }

    /// One attempt to take or renew the lease (client-go's `tryAcquireOrRenew`).
    async fn try_acquire_or_renew(&self) -> bool {
        let lease_seconds = self.cfg.lease_duration.as_secs().min(i32::MAX as u64) as i32;
        let now = now_micro();
        let mut record = Record {
            holder: self.cfg.identity.clone(),
            lease_duration_seconds: lease_seconds,
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            transitions: 0,
        };

        // Fast path: the leader renews on top of what it last wrote.
        if self.is_leader() && self.lease_valid(Instant::now()) {
            let (old, base) = {
                let o = self.observed.lock();
                (o.record.clone(), o.lease.clone())
            };
            if let Some(base) = base {
                record.acquire_time = old.acquire_time;
                record.transitions = old.transitions;
                match self.update(base, &record).await {
                    Ok(lease) => {
                        self.set_observed(record, lease);
                        return true;
                    }
                    Err(e) => tracing::debug!(lock = %self.cfg.describe(), error = %e,
                        "Failed to update lease optimistically, falling back to slow path"),
                }
            }
        }

        let current = match self.leases.get(&self.cfg.name).await {
            Ok(l) => l,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(record.to_spec()),
                };
                return match self.leases.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        self.set_observed(record, created);
                        true
                    }
                    Err(e) => {
                        tracing::error!(lock = %self.cfg.describe(), error = %e, "Error initially creating lease lock");
                        false
                    }
                };
            }
            Err(e) => {
                tracing::error!(lock = %self.cfg.describe(), error = %e, "Error retrieving lease lock");
                return false;
            }
        };

        let old = Record::from_spec(current.spec.as_ref());
        let raw = serde_json::to_value(&current.spec).ok();
        {
            let mut o = self.observed.lock();
            if o.raw != raw {
                o.record = old.clone();
                o.time = Some(Instant::now());
                o.raw = raw;
            }
            o.lease = Some(current.clone());
        }
        if !old.holder.is_empty() && self.lease_valid(Instant::now()) && !self.is_leader() {
            tracing::debug!(lock = %self.cfg.describe(), holder = %old.holder, "Lease is held and has not yet expired");
            return false;
        }
        if self.is_leader() {
            record.acquire_time = old.acquire_time;
            record.transitions = old.transitions;
        } else {
            record.transitions = old.transitions + 1;
        }
        match self.update(current, &record).await {
            Ok(lease) => {
                self.set_observed(record, lease);
                true
            }
            Err(e) => {
                tracing::error!(lock = %self.cfg.describe(), error = %e, "Failed to update lease");
                false
            }
        }
    }

    /// Tries until this candidate holds the lease (true) or `stop` is raised (false).
    pub async fn acquire(&self, stop: &mut watch::Receiver<bool>) -> bool {
        tracing::info!(lock = %self.cfg.describe(), "Attempting to acquire leader lease...");
        loop {
            let attempt = tokio::time::timeout(self.cfg.lease_duration, self.try_acquire_or_renew());
            tokio::select! {
                biased;
                _ = stopped(stop) => return false,
                ok = attempt => {
                    if ok.unwrap_or(false) {
                        tracing::info!(lock = %self.cfg.describe(), "Successfully acquired lease");
                        self.record_event("became leader").await;
                        return true;
                    }
                    tracing::debug!(lock = %self.cfg.describe(), "Failed to acquire lease");
                }
            }
            // Sliding jitter: the wait starts after the attempt, period × [1, 1 + 1.2).
            let jitter = rand::rng().random::<f64>() * JITTER_FACTOR;
            let wait = self.cfg.retry_period.mul_f64(1.0 + jitter);
            tokio::select! {
                biased;
                _ = stopped(stop) => return false,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Keeps renewing every retryPeriod until `stop` is raised or a renewal round fails for
    /// renewDeadline.
    pub async fn renew(&self, stop: &mut watch::Receiver<bool>) -> TermEnd {
        loop {
            let deadline = Instant::now() + self.cfg.renew_deadline;
            let renewed = loop {
                let remaining = deadline.saturating_duration_since(Instant::now());
                let attempt = tokio::time::timeout(remaining, self.try_acquire_or_renew());
                tokio::select! {
                    biased;
                    _ = stopped(stop) => return TermEnd::Stopped,
                    ok = attempt => if ok.unwrap_or(false) { break true },
                }
                if Instant::now() + self.cfg.retry_period >= deadline {
                    break false;
                }
                tokio::select! {
                    biased;
                    _ = stopped(stop) => return TermEnd::Stopped,
                    _ = tokio::time::sleep(self.cfg.retry_period) => {}
                }
            };
            if !renewed {
                tracing::info!(lock = %self.cfg.describe(), "Failed to renew lease: timed out waiting for the condition");
                return TermEnd::Lost;
            }
            tokio::select! {
                biased;
                _ = stopped(stop) => return TermEnd::Stopped,
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    /// Gives the lease up (upstream's `ReleaseOnCancel`): empty holder, `leaseDurationSeconds`
    /// 1, so a standby takes over on its next attempt. Returns false if the write failed.
    pub async fn release(&self) -> bool {
        let work = async {
            let current = match self.leases.get(&self.cfg.name).await {
                Ok(l) => l,
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    tracing::info!(lock = %self.cfg.describe(), "lease lock not found");
                    return false;
                }
                Err(e) => {
                    tracing::error!(lock = %self.cfg.describe(), error = %e, "error retrieving resource lock");
                    return false;
                }
            };
            if !self.is_leader() {
                return true;
            }
            let old = Record::from_spec(current.spec.as_ref());
            let now = now_micro();
            let record = Record {
                holder: String::new(),
                lease_duration_seconds: 1,
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                transitions: old.transitions,
            };
            match self.update(current, &record).await {
                Ok(lease) => {
                    self.set_observed(record, lease);
                    true
                }
                Err(e) => {
                    tracing::error!(lock = %self.cfg.describe(), error = %e, "Failed to release lease");
                    false
                }
            }
        };
        tokio::time::timeout(self.cfg.renew_deadline, work).await.unwrap_or(false)
    }

    /// Records the core/v1 `LeaderElection` event on the Lease (`<identity> <what>`), best effort.
    pub async fn record_event(&self, what: &str) {
        let lease = self.observed.lock().lease.clone();
        let meta = lease.map(|l| l.metadata).unwrap_or_default();
        let now = Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", self.cfg.name, now.as_nanosecond())),
                namespace: Some(self.cfg.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("coordination.k8s.io/v1".into()),
                kind: Some("Lease".into()),
                name: Some(self.cfg.name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                uid: meta.uid,
                resource_version: meta.resource_version,
                ..ObjectReference::default()
            },
            reason: Some("LeaderElection".into()),
            message: Some(format!("{} {what}", self.cfg.identity)),
            type_: Some("Normal".into()),
            source: Some(EventSource { component: Some(self.cfg.event_component.clone()), host: None }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some(self.cfg.event_component.clone()),
            reporting_instance: Some(String::new()),
            ..Event::default()
        };
        let pp = PostParams::default();
        match tokio::time::timeout(Duration::from_secs(5), self.events.create(&pp, &event)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "could not record the LeaderElection event"),
            Err(_) => tracing::debug!("timed out recording the LeaderElection event"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Duration as GoDuration;

    fn le(lease: i64, renew: i64, retry: i64, lock: &str) -> LeaderElectionConfiguration {
        LeaderElectionConfiguration {
            leader_elect: Some(true),
            lease_duration: GoDuration::from_millis(lease),
            renew_deadline: GoDuration::from_millis(renew),
            retry_period: GoDuration::from_millis(retry),
            resource_lock: lock.into(),
            resource_name: "kube-scheduler".into(),
            resource_namespace: "kube-system".into(),
        }
    }

    #[test]
    fn client_go_timing_rules() {
        let ok = ElectionConfig::from_config(&le(15_000, 10_000, 2_000, "leases"), "a".into(), "s".into()).unwrap();
        assert_eq!(ok.describe(), "kube-system/kube-scheduler");
        let err =
            |l, r, p, lock: &str| ElectionConfig::from_config(&le(l, r, p, lock), "a".into(), "s".into()).unwrap_err();
        assert_eq!(
            err(10_000, 10_000, 2_000, "leases"),
            "couldn't create leader elector: leaseDuration must be greater than renewDeadline"
        );
        assert_eq!(
            err(15_000, 2_400, 2_000, "leases"),
            "couldn't create leader elector: renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        assert_eq!(
            err(15_000, 10_000, 2_000, "endpoints"),
            "couldn't create resource lock: endpoints lock is removed, migrate to leases"
        );
        assert_eq!(err(15_000, 10_000, 2_000, "foo"), "couldn't create resource lock: Invalid lock-type foo");
    }

    #[test]
    fn identity_is_host_underscore_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok());
    }
}
