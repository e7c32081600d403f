//! Leader election under chaos: three `kube-scheduler` replicas (the real binary, each started
//! under its own name so its User-Agent tells it apart) on the embedded API server, which
//! audits every binding and Lease write. Whatever happens to the leader (SIGKILL, its lease
//! renewals failing while its bindings still go through, its network cut), exactly one replica
//! binds at any time, no pod is bound twice, and a deposed leader binds nothing after its
//! renew deadline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_apiserver::faults::{AuditRecord, Audited};
use ksched_apiserver::{ApiServer, FaultSpec, Faults, RunningServer, ServerConfig};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_millis(1500);
const RETRY: Duration = Duration::from_millis(200);
/// How long after its last successful renewal a leader may still bind: it gives up at most a
/// retry period plus the renew deadline after it, and a request sent just before may land a
/// little later.
const BIND_GRACE: Duration = Duration::from_millis(1500 + 200 + 250);

/// A TCP relay between one replica and the API server that can be cut (every connection
/// dropped, new ones refused) and healed: that replica's network partition.
struct Relay {
    addr: SocketAddr,
    cut: Arc<Mutex<CancellationToken>>,
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    async fn start(upstream: SocketAddr) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(Mutex::new(CancellationToken::new()));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, d) = (cut.clone(), down.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if d.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the replica sees its connection closed
                }
                let token = c.lock().clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = token.cancelled() => {}
                    }
                });
            }
        });
        Relay { addr, cut, down }
    }

    fn cut(&self) {
        self.down.store(true, std::sync::atomic::Ordering::SeqCst);
        let old = std::mem::replace(&mut *self.cut.lock(), CancellationToken::new());
        old.cancel();
    }
}

struct Replica {
    name: String,
    child: Child,
    log: PathBuf,
    relay: Relay,
}

impl Replica {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        assert!(Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success());
    }

    async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "{} did not exit; log:\n{}", self.name, self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Cluster {
    server: RunningServer,
    faults: Faults,
    dir: PathBuf,
    audit: Vec<AuditRecord>,
    next_pod: usize,
}

impl Cluster {
    async fn start(tag: &str) -> Cluster {
        let faults = Faults::with_binding_audit(FaultSpec::default());
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server =
            ApiServer::start(ServerConfig { listen, faults: faults.clone(), ..ServerConfig::default() }).await.unwrap();
        let dir = std::env::temp_dir().join(format!("ksched-chaos-le-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for n in ["n1", "n2", "n3"] {
            server
                .store()
                .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                    "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "500"}}}))
                .unwrap();
        }
        Cluster { server, faults, dir, audit: Vec::new(), next_pod: 0 }
    }

    /// Starts replica `name` (its binary is a link named `kube-scheduler-<name>`) behind its own
    /// relay, with short leader-election timings.
    async fn spawn(&self, name: &str) -> Replica {
        let relay = Relay::start(self.server.addr()).await;
        let yaml = self
            .server
            .kubeconfig_yaml()
            .replace(&format!("https://{}", self.server.addr()), &format!("https://{}", relay.addr));
        let kubeconfig = self.dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&kubeconfig, yaml).unwrap();
        let bin = self.dir.join(format!("kube-scheduler-{name}"));
        if !bin.exists() {
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kube-scheduler"), &bin).unwrap();
        }
        let log = self.dir.join(format!("{name}.log"));
        let child = Command::new(&bin)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--secure-port=0")
            .arg(format!("--leader-elect-lease-duration={}ms", LEASE.as_millis()))
            .arg(format!("--leader-elect-renew-deadline={}ms", RENEW_DEADLINE.as_millis()))
            .arg(format!("--leader-elect-retry-period={}ms", RETRY.as_millis()))
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        Replica { name: name.to_string(), child, log, relay }
    }

    fn create_pods(&mut self, n: usize) {
        for _ in 0..n {
            let name = format!("p{}", self.next_pod);
            self.next_pod += 1;
            self.server
                .store()
                .create(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "i",
                        "resources": {"requests": {"cpu": "10m"}}}]}}))
                .unwrap();
        }
    }

    fn bound(&self) -> usize {
        let pods = self.server.store().list("v1", "Pod", Some("default"));
        pods.iter().filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str).is_some()).count()
    }

    fn collect(&mut self) {
        self.audit.extend(self.faults.take_audit());
    }

    /// The replica (by binary name) that wrote the lease most recently.
    fn leader(&mut self) -> Option<String> {
        self.collect();
        self.audit.iter().rev().find_map(|r| match &r.what {
            Audited::Lease { name, holder, .. } if name == "kube-scheduler" && !holder.is_empty() => {
                Some(replica_of(&r.author))
            }
            _ => None,
        })
    }

    /// Creates pods in batches until `f` holds (or panics after `within`).
    async fn run_until(
        &mut self,
        what: &str,
        within: Duration,
        replicas: &[&Replica],
        mut f: impl FnMut(&mut Self) -> bool,
    ) {
        let deadline = Instant::now() + within;
        while !f(self) {
            if Instant::now() > deadline {
                let logs: Vec<String> = replicas.iter().map(|r| format!("== {}\n{}", r.name, r.log())).collect();
                panic!("timed out waiting for {what}; logs:\n{}", logs.join("\n"));
            }
            self.create_pods(2);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every pod bound exactly once, every binding by the replica holding the lease at that
    /// moment and within its renew deadline. Returns bindings per replica.
    fn check(&mut self) -> HashMap<String, usize> {
        self.collect();
        let mut holder: Option<(String, Instant)> = None;
        let mut last_renew: HashMap<String, Instant> = HashMap::new();
        let mut bound: HashMap<String, usize> = HashMap::new();
        let mut by_replica: HashMap<String, usize> = HashMap::new();
        for r in &self.audit {
            let who = replica_of(&r.author);
            match &r.what {
                Audited::Lease { name, holder: h, .. } if name == "kube-scheduler" => {
                    holder = (!h.is_empty()).then(|| (who.clone(), r.at));
                    last_renew.insert(who, r.at);
                }
                Audited::Lease { .. } => {}
                Audited::Binding { name, .. } => {
                    *bound.entry(name.clone()).or_default() += 1;
                    *by_replica.entry(who.clone()).or_default() += 1;
                    let current = holder.as_ref().map(|(h, _)| h.as_str());
                    assert_eq!(
                        current,
                        Some(who.as_str()),
                        "{name} bound by {who} while the lease was held by {current:?}"
                    );
                    let since = r.at - last_renew[&who];
                    assert!(since <= BIND_GRACE, "{name} bound by {who} {since:?} after its last renewal");
                }
            }
        }
        let twice: Vec<_> = bound.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "pods bound more than once: {twice:?}");
        let pods = self.server.store().list("v1", "Pod", Some("default"));
        for p in &pods {
            let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            if p.pointer("/spec/nodeName").and_then(Value::as_str).is_some() {
                assert_eq!(bound.get(name), Some(&1), "{name} is bound but its binding was not seen once");
            }
        }
        by_replica
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `kube-scheduler-b/v1.36.0 (linux/amd64) kubernetes/unknown/scheduler` → `b`.
fn replica_of(user_agent: &str) -> String {
    let command = user_agent.split('/').next().unwrap_or_default();
    command.strip_prefix("kube-scheduler-").unwrap_or(command).to_string()
}

fn take(replicas: &mut Vec<Replica>, name: &str) -> Replica {
    let i = replicas.iter().position(|r| r.name == name).unwrap();
    replicas.remove(i)
}

async fn three_replicas(c: &mut Cluster) -> (Vec<Replica>, String) {
    let replicas = vec![c.spawn("a").await, c.spawn("b").await, c.spawn("c").await];
    let refs: Vec<&Replica> = replicas.iter().collect();
    c.run_until("a leader binding pods", Duration::from_secs(30), &refs, |c| c.leader().is_some() && c.bound() >= 10)
        .await;
    let leader = c.leader().unwrap();
    (replicas, leader)
}

/// Keeps creating pods until a replica other than `old` leads and has bound pods created
/// after now; returns the time from now to its first binding.
async fn failover(c: &mut Cluster, old: &str, replicas: &[&Replica]) -> (String, Duration) {
    let start = Instant::now();
    let mut first: Option<(String, Instant)> = None;
    c.run_until("another replica to take over and bind", Duration::from_secs(30), replicas, |c| {
        c.collect();
        if first.is_none() {
            first = c.audit.iter().find_map(|r| match &r.what {
                Audited::Binding { .. } if r.at > start && replica_of(&r.author) != old => {
                    Some((replica_of(&r.author), r.at))
                }
                _ => None,
            });
        }
        first.is_some()
    })
    .await;
    let (new, at) = first.unwrap();
    (new, at - start)
}

async fn settle(c: &mut Cluster, replicas: &[&Replica]) {
    let total = c.next_pod;
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.bound() < total {
        if Instant::now() > deadline {
            let logs: Vec<String> = replicas.iter().map(|r| format!("== {}\n{}", r.name, r.log())).collect();
            panic!("{} of {total} pods bound; logs:\n{}", c.bound(), logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_leader_hands_over_to_exactly_one_replica() {
    let mut c = Cluster::start("kill").await;
    let (mut replicas, leader) = three_replicas(&mut c).await;
    let mut old = take(&mut replicas, &leader);
    old.signal("-KILL");
    old.wait_exit(Duration::from_secs(5)).await;
    let refs: Vec<&Replica> = replicas.iter().collect();
    let (new, took) = failover(&mut c, &leader, &refs).await;
    assert_ne!(new, leader);
    settle(&mut c, &refs).await;
    let by_replica = c.check();
    eprintln!("SIGKILL failover: {leader} -> {new}, first binding {took:?} after the kill; bindings {by_replica:?}");
    assert!(took >= LEASE - Duration::from_millis(500), "the lease must expire before a takeover ({took:?})");
    assert_eq!(by_replica.len(), 2, "only the old and the new leader bound pods: {by_replica:?}");
    for r in replicas.iter_mut() {
        assert!(r.alive(), "{} died:\n{}", r.name, r.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_fail_stops_binding_at_its_renew_deadline() {
    let mut c = Cluster::start("renew").await;
    let (mut replicas, leader) = three_replicas(&mut c).await;
    // Its Lease updates fail; its bindings (creates) still reach the server.
    c.faults.set_spec(
        format!("error:p=1:codes=500:verbs=update:agent=kube-scheduler-{leader}/:rate=1000").parse().unwrap(),
    );
    let mut old = take(&mut replicas, &leader);
    let refs: Vec<&Replica> = replicas.iter().chain([&old]).collect();
    let (new, took) = failover(&mut c, &leader, &refs).await;
    // Upstream exits 1 once leadership is lost.
    let status = old.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(1), "{}", old.log());
    assert!(old.log().contains("Leaderelection lost"), "{}", old.log());
    c.faults.set_spec(FaultSpec::default());
    let refs: Vec<&Replica> = replicas.iter().collect();
    settle(&mut c, &refs).await;
    let by_replica = c.check();
    eprintln!("renewals failing: {leader} -> {new} in {took:?}; bindings {by_replica:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_is_replaced_and_binds_nothing_after() {
    let mut c = Cluster::start("cut").await;
    let (mut replicas, leader) = three_replicas(&mut c).await;
    let mut old = take(&mut replicas, &leader);
    old.relay.cut();
    let cut_at = Instant::now();
    let refs: Vec<&Replica> = replicas.iter().collect();
    let (new, took) = failover(&mut c, &leader, &refs).await;
    let status = old.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(1), "{}", old.log());
    settle(&mut c, &refs).await;
    let by_replica = c.check();
    c.collect();
    // A request whose bytes the relay forwarded just before the cut may still be audited a
    // moment after it; anything later came through the partition.
    let in_flight = Duration::from_millis(250);
    let late = c.audit.iter().filter(|r| replica_of(&r.author) == leader && r.at > cut_at + in_flight).count();
    assert_eq!(late, 0, "the cut-off leader reached the server after the cut");
    eprintln!("cut off: {leader} -> {new} in {took:?}; bindings {by_replica:?}");
    for r in replicas.iter_mut() {
        assert!(r.alive(), "{} died:\n{}", r.name, r.log());
    }
}
