use std::sync::atomic::{AtomicU64, Ordering};

use futures_lite_box::BoxFuture as Fut;
use k8s_openapi::api::core::v1::PersistentVolume;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::listers::MemoryLister;
use ksched_framework::Code;
use serde_json::{json, Value};

use super::testutil::*;
use super::*;
use binder::{
    ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST,
};

const WAIT: &str = "wait-sc";
const IMMEDIATE: &str = "immediate-sc";
const PROVISION: &str = "provision-sc";
const TOPOLOGY: &str = "topology-sc";
const CAPACITY: &str = "capacity-sc";
const HOST: &str = "kubernetes.io/hostname";

fn classes() -> Vec<StorageClass> {
    vec![
        sc(WAIT, helpers::NOT_SUPPORTED_PROVISIONER, Some("WaitForFirstConsumer"), json!({})),
        sc(IMMEDIATE, "p", Some("Immediate"), json!({})),
        sc(PROVISION, "csi.example.com", Some("WaitForFirstConsumer"), json!({})),
        sc(
            TOPOLOGY,
            "csi.example.com",
            Some("WaitForFirstConsumer"),
            json!({"allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}]}),
        ),
        sc(CAPACITY, "capacity.example.com", Some("WaitForFirstConsumer"), json!({})),
    ]
}

fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    pvc(
        name,
        json!({"storageClassName": class, "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}}}),
    )
}

fn bound_claim(name: &str, class: &str, pv_name: &str) -> PersistentVolumeClaim {
    pvc_meta(
        name,
        json!({"annotations": {helpers::ANN_BIND_COMPLETED: "yes"}}),
        json!({"storageClassName": class, "volumeName": pv_name}),
        json!({"phase": "Bound"}),
    )
}

fn local_pv(name: &str, class: &str, size: &str, affinity: Value) -> PersistentVolume {
    pv(
        name,
        json!({}),
        json!({"storageClassName": class, "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}}}),
        "Available",
    )
}

fn on_host(h: &str) -> Value {
    json!({"key": HOST, "operator": "In", "values": [h]})
}

fn host(name: &str, extra: Value) -> ksched_framework::node::Node {
    let mut labels = json!({HOST: name});
    if let (Some(l), Some(e)) = (labels.as_object_mut(), extra.as_object()) {
        l.extend(e.clone());
    }
    node(name, labels)
}

fn plugin(l: Arc<MemoryLister>) -> VolumeBinding {
    VolumeBinding::with_options(VolumeBindingArgs::default(), &handle(l), false).unwrap()
}

/// PreFilter, then Filter on each node: (pre-filter status, filter statuses).
fn run(o: Objects, pod: Pod, nodes: Vec<ksched_framework::node::Node>) -> (Status, Vec<Status>, CycleState) {
    let pl = plugin(lister(o));
    let pod = pi(pod);
    let mut state = CycleState::new();
    let (_, pre) = pl.pre_filter(&mut state, &pod, &Snapshot::default());
    let mut out = Vec::new();
    if pre.is_success() {
        for n in nodes {
            out.push(pl.filter(&state, &pod, &node_info(n, vec![])));
        }
    }
    (pre, out, state)
}

fn objects(pvcs: Vec<PersistentVolumeClaim>, pvs: Vec<PersistentVolume>) -> Objects {
    Objects { pvcs, pvs, classes: classes(), ..Default::default() }
}

fn uar(reasons: &[&str]) -> Status {
    Status::new(Code::UnschedulableAndUnresolvable, reasons.to_vec())
}

#[test]
fn pre_filter_cases() {
    let pod = |claims: &[&str]| pod_with_claims("pod-a", claims);
    let lost = pvc_meta("pvc-a", json!({}), json!({"volumeName": "pv-a"}), json!({"phase": "Lost"}));
    let deleting = pvc_meta(
        "pvc-a",
        json!({"deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x"]}),
        json!({}),
        json!({}),
    );
    let eph_pod = pod_with_volumes("pod-a", json!([{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]));
    let foreign_eph = pvc("pod-a-v", json!({"storageClassName": WAIT}));
    let cases: Vec<(&str, Objects, Pod, Status)> = vec![
        ("pod has no pvcs", objects(vec![], vec![]), pod_with_volumes("pod-a", json!([])), Status::skip()),
        (
            "PVC does not exist",
            objects(vec![], vec![]),
            pod(&["pvc-a"]),
            Status::unresolvable("persistentvolumeclaim \"pvc-a\" not found"),
        ),
        (
            "part of PVCs do not exist",
            objects(vec![bound_claim("pvc-a", WAIT, "pv-a")], vec![]),
            pod(&["pvc-a", "pvc-b"]),
            Status::unresolvable("persistentvolumeclaim \"pvc-b\" not found"),
        ),
        (
            "immediate claims not bound",
            objects(vec![claim("pvc-a", IMMEDIATE, "1Gi")], vec![]),
            pod(&["pvc-a"]),
            Status::unresolvable("pod has unbound immediate PersistentVolumeClaims"),
        ),
        (
            "claim without class is immediate",
            objects(vec![pvc("pvc-a", json!({}))], vec![]),
            pod(&["pvc-a"]),
            Status::unresolvable("pod has unbound immediate PersistentVolumeClaims"),
        ),
        (
            "pv not found claim lost",
            objects(vec![lost], vec![]),
            pod(&["pvc-a"]),
            Status::unresolvable("persistentvolumeclaim \"pvc-a\" bound to non-existent persistentvolume \"pv-a\""),
        ),
        (
            "claim being deleted",
            objects(vec![deleting], vec![]),
            pod(&["pvc-a"]),
            Status::unresolvable("persistentvolumeclaim \"pvc-a\" is being deleted"),
        ),
        (
            "ephemeral claim not created yet",
            objects(vec![], vec![]),
            eph_pod.clone(),
            Status::unresolvable(
                "waiting for ephemeral volume controller to create the persistentvolumeclaim \"pod-a-v\"",
            ),
        ),
        (
            "ephemeral claim owned by someone else",
            objects(vec![foreign_eph], vec![]),
            eph_pod,
            Status::unresolvable("PVC default/pod-a-v was not created for pod default/pod-a (pod is not owner)"),
        ),
        ("all bound", objects(vec![bound_claim("pvc-a", WAIT, "pv-a")], vec![]), pod(&["pvc-a"]), Status::success()),
    ];
    for (name, o, pod, want) in cases {
        let (pre, _, _) = run(o, pod, vec![]);
        assert_eq!(pre, want, "{name}");
    }
}

#[test]
fn filter_cases() {
    let pod = |claims: &[&str]| pod_with_claims("pod-a", claims);
    let node_a = || host("node-a", json!({"foo": "barbar", "zone": "a"}));
    let bound_pv = local_pv("pv-a", WAIT, "1Gi", json!({"key": "foo", "operator": "In", "values": ["bar"]}));
    let capacity = |name: &str, size: &str, zone: &str| -> CSIStorageCapacity {
        obj(json!({"metadata": {"name": name, "namespace": "default"}, "storageClassName": CAPACITY,
            "capacity": size, "nodeTopology": {"matchLabels": {"zone": zone}}}))
    };
    let driver: CSIDriver =
        obj(json!({"metadata": {"name": "capacity.example.com"}, "spec": {"storageCapacity": true}}));
    let with_capacity = |caps: Vec<CSIStorageCapacity>| Objects {
        pvcs: vec![claim("pvc-a", CAPACITY, "10Gi")],
        csi_drivers: vec![driver.clone()],
        capacities: caps,
        classes: classes(),
        ..Default::default()
    };
    let selected = pvc_meta(
        "pvc-a",
        json!({"annotations": {helpers::ANN_SELECTED_NODE: "node-b"}}),
        json!({"storageClassName": PROVISION}),
        json!({}),
    );
    let cases: Vec<(&str, Objects, Pod, Vec<Status>)> = vec![
        (
            "all bound",
            objects(vec![bound_claim("pvc-a", WAIT, "pv-ok")], vec![local_pv("pv-ok", WAIT, "1Gi", on_host("node-a"))]),
            pod(&["pvc-a"]),
            vec![Status::success()],
        ),
        (
            "unbound claims no matches",
            objects(vec![claim("pvc-a", WAIT, "1Gi")], vec![]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_BIND_CONFLICT])],
        ),
        (
            "bound and unbound unsatisfied",
            objects(vec![bound_claim("pvc-a", WAIT, "pv-a"), claim("pvc-b", WAIT, "1Gi")], vec![bound_pv.clone()]),
            pod(&["pvc-a", "pvc-b"]),
            vec![uar(&[ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT])],
        ),
        (
            "pv not found",
            objects(vec![bound_claim("pvc-a", WAIT, "pv-a")], vec![]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_PV_NOT_EXIST])],
        ),
        (
            "static binding to a local PV of the node",
            objects(vec![claim("pvc-a", WAIT, "1Gi")], vec![local_pv("pv-local", WAIT, "2Gi", on_host("node-a"))]),
            pod(&["pvc-a"]),
            vec![Status::success()],
        ),
        (
            "local PV of another node",
            objects(vec![claim("pvc-a", WAIT, "1Gi")], vec![local_pv("pv-local", WAIT, "2Gi", on_host("node-b"))]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_BIND_CONFLICT])],
        ),
        (
            "local PV too small",
            objects(vec![claim("pvc-a", WAIT, "4Gi")], vec![local_pv("pv-local", WAIT, "2Gi", on_host("node-a"))]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_BIND_CONFLICT])],
        ),
        (
            "dynamic provisioning",
            objects(vec![claim("pvc-a", PROVISION, "1Gi")], vec![]),
            pod(&["pvc-a"]),
            vec![Status::success()],
        ),
        (
            "allowed topologies exclude the node",
            objects(vec![claim("pvc-a", TOPOLOGY, "1Gi")], vec![]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_BIND_CONFLICT])],
        ),
        (
            "provisioning started for another node",
            objects(vec![selected], vec![]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_BIND_CONFLICT])],
        ),
        ("enough capacity", with_capacity(vec![capacity("c1", "20Gi", "a")]), pod(&["pvc-a"]), vec![Status::success()]),
        (
            "capacity too small",
            with_capacity(vec![capacity("c1", "5Gi", "a")]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_NOT_ENOUGH_SPACE])],
        ),
        (
            "capacity of another zone",
            with_capacity(vec![capacity("c1", "20Gi", "b")]),
            pod(&["pvc-a"]),
            vec![uar(&[ERR_REASON_NOT_ENOUGH_SPACE])],
        ),
    ];
    for (name, o, pod, want) in cases {
        let (pre, got, _) = run(o, pod, vec![node_a()]);
        assert!(pre.is_success(), "{name}: {pre}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn smallest_matching_volume_is_chosen() {
    let o = objects(
        vec![claim("pvc-a", WAIT, "1Gi"), claim("pvc-b", WAIT, "3Gi")],
        vec![
            local_pv("pv-5", WAIT, "5Gi", on_host("node-a")),
            local_pv("pv-3", WAIT, "3Gi", on_host("node-a")),
            local_pv("pv-1", WAIT, "1Gi", on_host("node-a")),
        ],
    );
    let (_, got, state) = run(o, pod_with_claims("pod-a", &["pvc-b", "pvc-a"]), vec![host("node-a", json!({}))]);
    assert_eq!(got, vec![Status::success()]);
    let data = state.read::<StateData>(STATE_KEY).unwrap().clone();
    let inner = data.lock();
    let chosen: Vec<(String, String)> = inner.pod_volumes_by_node["node-a"]
        .static_bindings
        .iter()
        .map(|b| (name_of(&b.pvc.metadata).to_string(), name_of(&b.pv.metadata).to_string()))
        .collect();
    assert_eq!(chosen, [("pvc-a".to_string(), "pv-1".to_string()), ("pvc-b".to_string(), "pv-3".to_string())]);
    assert!(inner.has_static_bindings);
}

/// An API client that stores updates in the lister and plays the PV controller: a PV given a
/// claimRef binds its claim; a claim given a selected node gets a new PV there.
struct FakeApi {
    lister: Arc<MemoryLister>,
    rv: AtomicU64,
    pv_updates: AtomicU64,
    fail_pvc_updates: bool,
    controller: bool,
}

impl FakeApi {
    fn new(lister: Arc<MemoryLister>) -> Self {
        FakeApi {
            lister,
            rv: AtomicU64::new(100),
            pv_updates: AtomicU64::new(0),
            fail_pvc_updates: false,
            controller: true,
        }
    }

    fn next_rv(&self) -> Option<String> {
        Some((self.rv.fetch_add(1, Ordering::Relaxed) + 1).to_string())
    }

    fn put_pv(&self, pv: PersistentVolume) {
        let mut pvs = self.lister.pvs.write();
        pvs.retain(|p| p.metadata.name != pv.metadata.name);
        pvs.push(Arc::new(pv));
    }

    fn put_pvc(&self, pvc: PersistentVolumeClaim) {
        let mut pvcs = self.lister.pvcs.write();
        pvcs.retain(|p| p.metadata.name != pvc.metadata.name);
        pvcs.push(Arc::new(pvc));
    }

    fn bind_claim(&self, claim_name: &str, pv_name: &str) {
        let mut pvc = (*self.lister.persistent_volume_claim("default", claim_name).unwrap()).clone();
        pvc.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.into());
        pvc.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(helpers::ANN_BIND_COMPLETED.into(), "yes".into());
        pvc.metadata.resource_version = self.next_rv();
        self.put_pvc(pvc);
    }
}

impl ApiClient for FakeApi {
    fn bind(&self, _: &Pod, _: &str) -> Fut<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> Fut<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> Fut<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn update_persistent_volume(&self, pv: &PersistentVolume) -> Fut<'static, Result<PersistentVolume, ApiError>> {
        self.pv_updates.fetch_add(1, Ordering::Relaxed);
        let mut pv = pv.clone();
        pv.metadata.resource_version = self.next_rv();
        self.put_pv(pv.clone());
        if self.controller {
            let claim = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.name.clone()).unwrap();
            self.bind_claim(&claim, name_of(&pv.metadata));
        }
        Box::pin(async move { Ok(pv) })
    }
    fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> Fut<'static, Result<PersistentVolumeClaim, ApiError>> {
        if self.fail_pvc_updates {
            return Box::pin(async { Err(ApiError { code: 409, message: "conflict".into() }) });
        }
        let mut pvc = pvc.clone();
        pvc.metadata.resource_version = self.next_rv();
        self.put_pvc(pvc.clone());
        if self.controller {
            let node = helpers::annotation(&pvc.metadata, helpers::ANN_SELECTED_NODE).unwrap().to_string();
            let name = format!("pvc-{}", name_of(&pvc.metadata));
            let mut new_pv = local_pv(&name, helpers::claim_class(&pvc), "1Gi", on_host(&node));
            new_pv.metadata.resource_version = self.next_rv();
            self.put_pv(new_pv);
            self.bind_claim(name_of(&pvc.metadata), &name);
        }
        Box::pin(async move { Ok(pvc) })
    }
}

struct Flow {
    pl: VolumeBinding,
    api: Arc<FakeApi>,
    lister: Arc<MemoryLister>,
    pod: PodInfo,
    state: CycleState,
}

fn flow(o: Objects, claims: &[&str], configure: impl FnOnce(&mut FakeApi)) -> Flow {
    let lister = lister(o);
    let mut api = FakeApi::new(lister.clone());
    configure(&mut api);
    let api = Arc::new(api);
    let h = Handle { client: api.clone(), ..handle(lister.clone()) };
    let args = VolumeBindingArgs { bind_timeout_seconds: 1, shape: None };
    let mut pl = VolumeBinding::with_options(args, &h, false).unwrap();
    pl.set_poll_interval(Duration::from_millis(10));
    let pod = pi(pod_with_claims("pod-a", claims));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &pod, &Snapshot::default()).1.is_success());
    assert!(pl.filter(&state, &pod, &node_info(host("node-a", json!({})), vec![])).is_success());
    Flow { pl, api, lister, pod, state }
}

#[test]
fn reserve_and_pre_bind_static_binding() {
    let o = objects(vec![claim("pvc-a", WAIT, "1Gi")], vec![local_pv("pv-a", WAIT, "1Gi", on_host("node-a"))]);
    let mut f = flow(o, &["pvc-a"], |_| {});
    assert!(f.pl.reserve(&mut f.state, &f.pod, "node-a").is_success());
    // the assumed PV is what the next pods see
    let assumed = f.pl.binder.cache.pv("pv-a").unwrap();
    let claim_ref = assumed.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(claim_ref.name.as_deref(), Some("pvc-a"));
    assert_eq!(claim_ref.uid.as_deref(), Some("uid-pvc-a"));
    assert_eq!(helpers::annotation(&assumed.metadata, helpers::ANN_BOUND_BY_CONTROLLER), Some("yes"));
    assert!(f.pl.pre_bind_pre_flight(&f.state, &f.pod, "node-a").is_success());
    assert_eq!(
        f.pl.pre_bind_pre_flight(&f.state, &f.pod, "node-b"),
        Status::error("no pod volume found for node \"node-b\"")
    );
    let s = timer::block_on(f.pl.pre_bind(&f.state, &f.pod, "node-a"));
    assert!(s.is_success(), "{s}");
    assert_eq!(f.api.pv_updates.load(Ordering::Relaxed), 1);
    let pvc = f.lister.persistent_volume_claim("default", "pvc-a").unwrap();
    assert_eq!(claim_volume_name(&pvc), "pv-a");
}

#[test]
fn reserve_and_pre_bind_dynamic_provisioning() {
    let o = objects(vec![claim("pvc-a", PROVISION, "1Gi")], vec![]);
    let mut f = flow(o, &["pvc-a"], |_| {});
    assert!(f.pl.reserve(&mut f.state, &f.pod, "node-a").is_success());
    let assumed = f.pl.binder.cache.pvc("default/pvc-a").unwrap();
    assert_eq!(helpers::annotation(&assumed.metadata, helpers::ANN_SELECTED_NODE), Some("node-a"));
    let s = timer::block_on(f.pl.pre_bind(&f.state, &f.pod, "node-a"));
    assert!(s.is_success(), "{s}");
    let pvc = f.lister.persistent_volume_claim("default", "pvc-a").unwrap();
    assert_eq!(claim_volume_name(&pvc), "pvc-pvc-a");
}

#[test]
fn unreserve_reverts_the_assumptions() {
    let o = objects(vec![claim("pvc-a", PROVISION, "1Gi")], vec![]);
    let mut f = flow(o, &["pvc-a"], |_| {});
    assert!(f.pl.reserve(&mut f.state, &f.pod, "node-a").is_success());
    f.pl.unreserve(&mut f.state, &f.pod, "node-a");
    let pvc = f.pl.binder.cache.pvc("default/pvc-a").unwrap();
    assert_eq!(helpers::annotation(&pvc.metadata, helpers::ANN_SELECTED_NODE), None);
}

#[test]
fn pre_bind_failures() {
    // the API rejects the claim update
    let o = objects(vec![claim("pvc-a", PROVISION, "1Gi")], vec![]);
    let mut f = flow(o, &["pvc-a"], |a| a.fail_pvc_updates = true);
    assert!(f.pl.reserve(&mut f.state, &f.pod, "node-a").is_success());
    assert_eq!(timer::block_on(f.pl.pre_bind(&f.state, &f.pod, "node-a")), Status::error("conflict"));
    // nobody completes the binding: timeout
    let o = objects(vec![claim("pvc-a", WAIT, "1Gi")], vec![local_pv("pv-a", WAIT, "1Gi", on_host("node-a"))]);
    let mut f = flow(o, &["pvc-a"], |a| a.controller = false);
    assert!(f.pl.reserve(&mut f.state, &f.pod, "node-a").is_success());
    assert_eq!(
        timer::block_on(f.pl.pre_bind(&f.state, &f.pod, "node-a")),
        Status::error("binding volumes: context deadline exceeded")
    );
}

#[test]
fn everything_bound_skips_pre_bind() {
    let o = objects(vec![bound_claim("pvc-a", WAIT, "pv-a")], vec![local_pv("pv-a", WAIT, "1Gi", on_host("node-a"))]);
    let mut f = flow(o, &["pvc-a"], |_| {});
    assert!(f.pl.reserve(&mut f.state, &f.pod, "node-a").is_success());
    assert!(f.pl.pre_bind_pre_flight(&f.state, &f.pod, "node-a").is_skip());
    // a pod without claims: PreFilter skips, Reserve marks everything bound
    let pl = plugin(lister(Objects::default()));
    let pod = pi(pod_with_volumes("p", json!([])));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &pod, &Snapshot::default()).1.is_skip());
    assert!(pl.reserve(&mut state, &pod, "node-a").is_success());
    assert!(pl.pre_bind_pre_flight(&state, &pod, "node-a").is_skip());
    assert!(pl.pre_score(&mut state, &pod, &[], &Snapshot::default()).is_skip());
}

#[test]
fn args() {
    let h = Handle::for_tests();
    assert!(new(None, &h).is_ok());
    assert!(new(Some(&json!({"bindTimeoutSeconds": 300})), &h).is_ok());
    let err = |v: Value| new(Some(&v), &h).err().unwrap();
    assert!(err(json!({"bindTimeout": 1})).contains("unknown field `bindTimeout`"));
    assert_eq!(
        err(json!({"bindTimeoutSeconds": -1})),
        "bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"
    );
    assert!(err(json!({"shape": [{"utilization": 0, "score": 0}]})).contains("StorageCapacityScoring"));
    let d: VolumeBindingArgs = decode_args(None).unwrap();
    assert_eq!(d.bind_timeout_seconds, 600);
    assert!(validate_args(&VolumeBindingArgs { bind_timeout_seconds: 1, shape: Some(default_shape()) }, true).is_ok());
    assert_eq!(
        validate_args(
            &VolumeBindingArgs {
                bind_timeout_seconds: 1,
                shape: Some(vec![UtilizationShapePoint { utilization: 50, score: 1 }, UtilizationShapePoint { utilization: 10, score: 11 }])
            },
            true
        ),
        Err("[shape[1].utilization: Invalid value: 10: values must be sorted in increasing order, shape[1].score: Invalid value: 11: not in valid range [0, 10]]".into())
    );
}

#[test]
fn storage_capacity_scoring() {
    let s = Scorer::new(&default_shape());
    let r = |v: &[(i64, i64)]| -> ClassResources { v.iter().enumerate().map(|(i, x)| (i.to_string(), *x)).collect() };
    assert_eq!(s.score(&r(&[])), 0);
    assert_eq!(s.score(&r(&[(0, 100)])), 100);
    assert_eq!(s.score(&r(&[(50, 100)])), 50);
    assert_eq!(s.score(&r(&[(30, 100), (60, 100)])), 55);
    assert_eq!(s.score(&r(&[(150, 100)])), 0);
    // static bindings: closer capacity scores higher with the default (prefer full) shape
    let o = objects(
        vec![claim("pvc-a", WAIT, "50Gi")],
        vec![local_pv("pv-a", WAIT, "200Gi", on_host("node-a")), local_pv("pv-b", WAIT, "100Gi", on_host("node-b"))],
    );
    let pl = VolumeBinding::with_options(VolumeBindingArgs::default(), &handle(lister(o)), true).unwrap();
    let pod = pi(pod_with_claims("pod-a", &["pvc-a"]));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &pod, &Snapshot::default()).1.is_success());
    let (na, nb) = (node_info(host("node-a", json!({})), vec![]), node_info(host("node-b", json!({})), vec![]));
    assert!(pl.filter(&state, &pod, &na).is_success() && pl.filter(&state, &pod, &nb).is_success());
    assert!(pl.pre_score(&mut state, &pod, &[], &Snapshot::default()).is_success());
    assert_eq!(pl.score(&state, &pod, &na), Ok(75));
    assert_eq!(pl.score(&state, &pod, &nb), Ok(50));
}

#[test]
fn hints() {
    let pod = pod_with_claims("pod-a", &["pvc-a"]);
    let q = Ok(QueueingHint::Queue);
    let skip = Ok(QueueingHint::QueueSkip);
    assert_eq!(is_schedulable_after_pvc_change(&pod, None, Some(&other(&claim("pvc-a", WAIT, "1Gi")))), q);
    assert_eq!(is_schedulable_after_pvc_change(&pod, None, Some(&other(&claim("pvc-b", WAIT, "1Gi")))), skip);
    let sc_a = other(&classes()[2]);
    let sc_b = other(&classes()[3]);
    assert_eq!(is_schedulable_after_storage_class_change(&pod, None, Some(&sc_a)), q);
    assert_eq!(is_schedulable_after_storage_class_change(&pod, Some(&sc_a), Some(&sc_a)), skip);
    assert_eq!(is_schedulable_after_storage_class_change(&pod, Some(&sc_a), Some(&sc_b)), q);
    let csi = |ann: Value| {
        other(&obj::<CSINode>(json!({"metadata": {"name": "n", "annotations": ann}, "spec": {"drivers": []}})))
    };
    let (plain, migrated) = (csi(json!({})), csi(json!({MIGRATED_PLUGINS_ANNOTATION: "kubernetes.io/gce-pd"})));
    assert_eq!(is_schedulable_after_csi_node_change(&pod, None, Some(&plain)), q);
    assert_eq!(is_schedulable_after_csi_node_change(&pod, Some(&plain), Some(&plain)), skip);
    assert_eq!(is_schedulable_after_csi_node_change(&pod, Some(&plain), Some(&migrated)), q);
    let cap = |size: &str| {
        other(&obj::<CSIStorageCapacity>(json!({"metadata": {"name": "c"}, "storageClassName": "x", "capacity": size})))
    };
    assert_eq!(is_schedulable_after_csi_storage_capacity_change(&pod, Some(&cap("1Gi")), Some(&cap("2Gi"))), q);
    assert_eq!(is_schedulable_after_csi_storage_capacity_change(&pod, Some(&cap("2Gi")), Some(&cap("1Gi"))), skip);
    let csi_pod = pod_with_volumes("p", json!([{"name": "v", "csi": {"driver": "d"}}]));
    let drv =
        |cap: bool| other(&obj::<CSIDriver>(json!({"metadata": {"name": "d"}, "spec": {"storageCapacity": cap}})));
    assert_eq!(is_schedulable_after_csi_driver_change(&csi_pod, Some(&drv(true)), Some(&drv(false))), q);
    assert_eq!(is_schedulable_after_csi_driver_change(&csi_pod, Some(&drv(false)), Some(&drv(true))), skip);
}
