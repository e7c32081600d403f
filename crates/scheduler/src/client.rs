//! The API shell: [`KubeApiClient`] implements the framework's [`ApiClient`] with `kube`, and
//! [`EventSink`] records `events.k8s.io/v1` events off the scheduling path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::handle::EventRecorder;
use ksched_framework::pod::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use parking_lot::Mutex;
use tokio::sync::mpsc;

pub(crate) fn api_error(e: kube::Error) -> ApiError {
    match e {
        kube::Error::Api(s) => ApiError { code: s.code, message: s.message },
        other => ApiError { code: 0, message: other.to_string() },
    }
}

/// How long a request may go unanswered: kube-apiserver's default `--request-timeout`. A call
/// lost with its connection (the server restarted and the drop went unseen) would otherwise
/// wait for the transport's read timeout, five minutes, with its pod assumed and out of the
/// queue; failing it here lets the binding cycle's failure handling retry the pod.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// [`ApiClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeApiClient {
    client: kube::Client,
    timeout: Duration,
}

impl KubeApiClient {
    /// Wraps a client; requests fail after [`REQUEST_TIMEOUT`].
    pub fn new(client: kube::Client) -> Self {
        KubeApiClient { client, timeout: REQUEST_TIMEOUT }
    }

    /// The same client with requests failing after `timeout` instead.
    pub fn with_request_timeout(self, timeout: Duration) -> Self {
        KubeApiClient { timeout, ..self }
    }

    /// `request`, failed with a transport error (code 0, which callers retry like a dropped
    /// connection) when it is not answered within the timeout.
    fn bounded<T: Send + 'static>(
        &self,
        request: impl std::future::Future<Output = Result<T, ApiError>> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, ApiError>> {
        let timeout = self.timeout;
        Box::pin(async move {
            tokio::time::timeout(timeout, request).await.unwrap_or_else(|_| {
                Err(ApiError { code: 0, message: format!("request not answered within {timeout:?}") })
            })
        })
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }
}

impl ApiClient for KubeApiClient {
    fn get_resource_claim(&self, ns: &str, name: &str) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.bounded(crate::dra_client::get(&self.client, ns, name))
    }
    fn create_resource_claim(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.bounded(crate::dra_client::create(&self.client, c))
    }
    fn update_resource_claim(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.bounded(crate::dra_client::update(&self.client, c))
    }
    fn update_resource_claim_status(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.bounded(crate::dra_client::update_status(&self.client, c))
    }
    fn patch_resource_claim_status(
        &self,
        ns: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.bounded(crate::dra_client::patch_status(&self.client, ns, name, patch))
    }
    fn delete_resource_claim(&self, ns: &str, name: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        self.bounded(crate::dra_client::delete(&self.client, ns, name))
    }
    fn patch_pod_group_status(
        &self,
        ns: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>> {
        let api: Api<ksched_framework::podgroup::PodGroup> = Api::namespaced(self.client.clone(), ns);
        let name = name.to_string();
        self.bounded(async move {
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map(|_| ())
                .map_err(api_error)
        })
    }

    fn bind(&self, pod: &Pod, node: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            },
            target: ObjectReference { kind: Some("Node".into()), name: Some(node.to_string()), ..Default::default() },
        };
        let api = self.pods(&ns);
        self.bounded(async move {
            api.create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                .await
                .map(|_| ())
                .map_err(api_error)
        })
    }

    fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>> {
        let api = self.pods(namespace);
        let name = name.to_string();
        self.bounded(async move {
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map(|_| ())
                .map_err(api_error)
        })
    }

    fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, Result<Option<Pod>, ApiError>> {
        let api = self.pods(namespace);
        let name = name.to_string();
        self.bounded(async move { api.get_opt(&name).await.map_err(api_error) })
    }

    fn delete_pod(&self, namespace: &str, name: &str, uid: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        let api = self.pods(namespace);
        let name = name.to_string();
        let dp = DeleteParams {
            preconditions: uid.map(|u| Preconditions { uid: Some(u.to_string()), resource_version: None }),
            ..Default::default()
        };
        self.bounded(async move {
            match api.delete(&name, &dp).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    let e = api_error(e);
                    if e.is_not_found() {
                        Ok(())
                    } else {
                        Err(e)
                    }
                }
            }
        })
    }

    fn update_persistent_volume(
        &self,
        pv: &PersistentVolume,
    ) -> BoxFuture<'static, Result<PersistentVolume, ApiError>> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let pv = pv.clone();
        self.bounded(async move {
            let name = pv.metadata.name.clone().unwrap_or_default();
            api.replace(&name, &PostParams::default(), &pv).await.map_err(api_error)
        })
    }

    fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> BoxFuture<'static, Result<PersistentVolumeClaim, ApiError>> {
        let ns = pvc.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        let pvc = pvc.clone();
        self.bounded(async move {
            let name = pvc.metadata.name.clone().unwrap_or_default();
            api.replace(&name, &PostParams::default(), &pvc).await.map_err(api_error)
        })
    }
}

/// Events waiting for the API server at most, as upstream's broadcaster (`maxQueuedEvents`):
/// a burst of thousands of pods must not hold thousands of events in memory.
const MAX_QUEUED_EVENTS: usize = 1000;

/// An event waiting in the backlog: only what differs between events. The `Event` itself (over
/// a kilobyte inline, a dozen strings) is built when it is written, so a full backlog holds less
/// than half the memory it would as `Event`s.
struct EventJob {
    name: String,
    time: k8s_openapi::jiff::Timestamp,
    reporter: Arc<Reporter>,
    type_: String,
    reason: String,
    action: String,
    note: String,
    regarding: PodRef,
    related: Option<PodRef>,
}

/// The reporting controller and instance of a recorder's events.
struct Reporter {
    controller: String,
    instance: String,
}

/// The fields of a pod an event's object reference carries.
struct PodRef {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

impl PodRef {
    fn of(p: &Pod) -> Self {
        PodRef {
            name: p.metadata.name.clone(),
            namespace: p.metadata.namespace.clone(),
            uid: p.metadata.uid.clone(),
            resource_version: p.metadata.resource_version.clone(),
        }
    }

    fn into_reference(self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            ..Default::default()
        }
    }
}

impl EventJob {
    /// The events.k8s.io/v1 Event to create.
    fn into_event(self) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(self.name),
                namespace: self.regarding.namespace.clone(),
                ..Default::default()
            },
            event_time: Some(MicroTime(self.time)),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            action: Some(self.action),
            reason: Some(self.reason),
            type_: Some(self.type_),
            note: Some(self.note),
            regarding: Some(self.regarding.into_reference()),
            related: self.related.map(PodRef::into_reference),
            ..Default::default()
        }
    }
}

/// Writes events in the background; recording never blocks scheduling. When the backlog is
/// full, events are dropped (and counted in the log) rather than slowing the scheduler, as
/// upstream's broadcaster does.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<EventJob>,
    host: String,
    closed: Arc<AtomicBool>,
    writer: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl EventSink {
    /// Starts the writer task on the current runtime.
    pub fn start(client: kube::Client) -> Self {
        let (tx, mut rx) = mpsc::channel::<EventJob>(MAX_QUEUED_EVENTS);
        let writer = tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let event = job.into_event();
                let ns = event.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                let api: Api<Event> = Api::namespaced(client.clone(), &ns);
                if let Err(e) = api.create(&PostParams::default(), &event).await {
                    tracing::debug!(error = %e, "failed to write event");
                }
            }
        });
        let host = hostname();
        EventSink { tx, host, closed: Arc::default(), writer: Arc::new(Mutex::new(Some(writer))) }
    }

    /// Stops taking events, gives the backlog up to `grace` to reach the API server, then drops
    /// the rest. Without this the writer outlives the scheduler and keeps failing against an API
    /// server that is gone (one error per queued event).
    pub async fn close(&self, grace: Duration) {
        self.closed.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + grace;
        while self.tx.capacity() < self.tx.max_capacity() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let writer = self.writer.lock().take();
        if let Some(w) = writer {
            w.abort();
            let _ = w.await;
        }
    }

    /// A recorder reporting as the given scheduler (profile) name.
    pub fn recorder(&self, scheduler_name: &str) -> Arc<dyn EventRecorder> {
        Arc::new(KubeEventRecorder {
            sink: self.clone(),
            reporter: Arc::new(Reporter {
                controller: scheduler_name.to_string(),
                instance: format!("{scheduler_name}-{}", self.host),
            }),
        })
    }
}

/// The host name, for reportingInstance and leader-election identities.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

struct KubeEventRecorder {
    sink: EventSink,
    reporter: Arc<Reporter>,
}

impl EventRecorder for KubeEventRecorder {
    fn record(&self, regarding: &Pod, related: Option<&Pod>, type_: &str, reason: &str, action: &str, note: &str) {
        if self.sink.closed.load(Ordering::Relaxed) {
            return;
        }
        let time = k8s_openapi::jiff::Timestamp::now();
        let job = EventJob {
            name: format!("{}.{:x}", regarding.metadata.name.as_deref().unwrap_or("pod"), time.as_nanosecond()),
            time,
            reporter: self.reporter.clone(),
            type_: type_.to_string(),
            reason: reason.to_string(),
            action: action.to_string(),
            note: note.to_string(),
            regarding: PodRef::of(regarding),
            related: related.map(PodRef::of),
        };
        if self.sink.tx.try_send(job).is_err() {
            tracing::debug!(reason, "event backlog full; dropping event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_queued_event_is_written_as_the_full_event() {
        let pod = |name: &str, uid: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns1", "uid": uid, "resourceVersion": "7"},
                "spec": {"containers": []}
            }))
            .unwrap()
        };
        let (tx, mut rx) = mpsc::channel(4);
        let sink = EventSink { tx, host: "h".into(), closed: Arc::default(), writer: Arc::new(Mutex::new(None)) };
        let (victim, preemptor) = (pod("v", "u1"), pod("p", "u2"));
        sink.recorder("my-scheduler").record(&victim, Some(&preemptor), "Normal", "Preempted", "Preempting", "by p");
        let e = rx.try_recv().unwrap().into_event();
        let name = e.metadata.name.clone().unwrap();
        assert!(name.starts_with("v.") && name.len() > 2, "{name}");
        assert_eq!(e.metadata.namespace.as_deref(), Some("ns1"));
        assert!(e.event_time.is_some());
        assert_eq!(e.reporting_controller.as_deref(), Some("my-scheduler"));
        assert_eq!(e.reporting_instance.as_deref(), Some("my-scheduler-h"));
        let strs = [&e.type_, &e.reason, &e.action, &e.note].map(|f| f.as_deref());
        assert_eq!(strs, [Some("Normal"), Some("Preempted"), Some("Preempting"), Some("by p")]);
        let r = |o: Option<ObjectReference>| {
            let o = o.unwrap();
            [o.api_version, o.kind, o.name, o.namespace, o.uid, o.resource_version]
        };
        let want = |n: &str, u: &str| ["v1", "Pod", n, "ns1", u, "7"].map(|s| Some(s.to_string()));
        assert_eq!(r(e.regarding), want("v", "u1"));
        assert_eq!(r(e.related), want("p", "u2"));
    }

    /// A server that accepts connections and never answers: a binding sent to it fails after
    /// the request timeout instead of keeping its pod assumed for as long as the transport waits.
    #[tokio::test]
    async fn an_unanswered_request_fails_after_the_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (conn, _) = listener.accept().await.unwrap();
                held.push(conn);
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = KubeApiClient::new(kube::Client::try_from(config).unwrap())
            .with_request_timeout(Duration::from_millis(300));
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": []}
        }))
        .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(10), client.bind(&pod, "n1")).await;
        let err = outcome.expect("the binding must fail on its own, not hang").unwrap_err();
        assert_eq!(err.code, 0, "a transport error, which the binding cycle retries: {}", err.message);
        assert!(err.message.contains("not answered within 300ms"), "{}", err.message);
        accepted.abort();
    }
}
