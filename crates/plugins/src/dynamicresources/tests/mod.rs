use super::args::parse_go_duration;
use super::*;
use crate::helper::testing::{node, node_info, pod, pod_info, pod_obj};
use ksched_framework::{Code, Registry};
use serde_json::json;

fn plugin() -> DynamicResources {
    let handle = Handle::for_tests();
    let manager = Arc::new(DraManager::new(handle.lister.clone()));
    DynamicResources { args: DynamicResourcesArgs::default(), features: Features::default(), handle, manager }
}

fn claimless() -> PodInfo {
    pod_info(pod(json!({"uid": "u1"}), json!({"containers": [{"name": "c", "image": "i"}]})))
}

fn with_claim() -> PodInfo {
    pod_info(pod(
        json!({"uid": "u2"}),
        json!({"containers": [{"name": "c", "image": "i"}],
               "resourceClaims": [{"name": "gpu", "resourceClaimName": "my-gpu"}]}),
    ))
}

fn framework() -> Framework {
    let mut r = Registry::new();
    r.register(names::DYNAMIC_RESOURCES, new).unwrap();
    r.register(names::PRIORITY_SORT, crate::prioritysort::new).unwrap();
    r.register(names::DEFAULT_BINDER, crate::defaultbinder::new).unwrap();
    let plugins: ksched_framework::plugin_config::Plugins = serde_json::from_value(json!({
        "multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "DynamicResources", "weight": 2},
                                   {"name": "DefaultBinder"}]}
    }))
    .unwrap();
    Framework::new(&r, "default-scheduler", &plugins, &[], Handle::for_tests()).unwrap()
}

#[test]
fn claimless_pods_skip_and_get_the_upstream_post_filter_reason() {
    let p = plugin();
    let pi = claimless();
    assert!(p.pre_enqueue(&pi).is_success());
    let mut state = CycleState::new();
    let (res, s) = p.pre_filter(&mut state, &pi, &Snapshot::default());
    assert!(res.is_none());
    assert_eq!(s.code(), Code::Skip);
    let ni = node_info(node(json!({"name": "n"}), json!({})));
    assert!(p.filter(&state, &pi, &ni).is_success());
    assert_eq!(p.score(&state, &pi, &ni).unwrap(), 0);
    assert!(p.reserve(&mut state, &pi, "n").is_success());
    assert!(p.pre_bind_pre_flight(&state, &pi, "n").is_skip());
    let fw = framework();
    let (r, s) = p.post_filter(&fw, &mut state, &pi, &Snapshot::default(), &NodeToStatus::default());
    assert!(r.is_none());
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.message(), "no new claims to deallocate");
}

#[test]
fn post_filter_without_pre_filter_state_is_the_bare_not_found_error() {
    let fw = framework();
    let (_, s) =
        plugin().post_filter(&fw, &mut CycleState::new(), &claimless(), &Snapshot::default(), &NodeToStatus::default());
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "not found");
}

#[test]
fn extension_points_match_upstream_and_filter_only_runs_without_skip() {
    let fw = framework();
    use ksched_framework::ExtensionPoint as E;
    for point in [E::PreEnqueue, E::PreFilter, E::Filter, E::PostFilter, E::Reserve, E::PreBind] {
        assert_eq!(fw.list_plugins(point), vec!["DynamicResources"], "{point:?}");
    }
    assert_eq!(fw.list_plugins(E::Score), vec!["DynamicResources(2)"]);
    assert!(fw.list_plugins(E::PreScore).is_empty());
    let mut state = CycleState::new();
    let (_, s, _) = fw.run_pre_filter(&mut state, &claimless(), &Snapshot::default());
    assert!(s.is_success());
    assert!(fw.active_filters(&state).is_empty(), "skipped at PreFilter");
}

#[test]
fn events_and_hints() {
    let events = plugin().events_to_register().unwrap();
    let labels: Vec<String> = events.iter().map(|e| e.event.label()).collect();
    assert_eq!(labels.len(), 5);
    assert!(labels[1].starts_with("resource.k8s.io/ResourceClaim"));
    let pod_hint = events[2].hint.as_ref().unwrap();
    let me = with_claim();
    let other = claimless();
    // the pod's claim does not exist yet: its own update cannot help
    assert_eq!(pod_hint(&me.pod, None, Some(&pod_obj((*me.pod).clone()))).unwrap(), QueueingHint::QueueSkip);
    assert_eq!(pod_hint(&me.pod, None, Some(&pod_obj((*other.pod).clone()))).unwrap(), QueueingHint::QueueSkip);
    assert_eq!(pod_hint(&other.pod, None, Some(&pod_obj((*other.pod).clone()))).unwrap(), QueueingHint::Queue);
}

#[test]
fn args_are_strict_defaulted_and_validated() {
    let a = DynamicResourcesArgs::decode(None).unwrap();
    assert_eq!(a.filter_timeout(), std::time::Duration::from_secs(10));
    assert_eq!(a.binding_timeout(), std::time::Duration::from_secs(600));
    let a = DynamicResourcesArgs::decode(Some(&json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs",
        "filterTimeout": "1m30s", "bindingTimeout": null
    })))
    .unwrap();
    assert_eq!(a.filter_timeout(), std::time::Duration::from_secs(90));
    assert_eq!(a.binding_timeout(), std::time::Duration::from_secs(600));
    assert!(DynamicResourcesArgs::decode(Some(&json!({"filterTimeOut": "1s"}))).is_err());
    assert!(DynamicResourcesArgs::decode(Some(&json!({"filterTimeout": "10"}))).is_err());
    let handle = Handle::for_tests();
    assert!(new(Some(&json!({"filterTimeout": "0s", "bindingTimeout": "1s"})), &handle).is_ok());
    let err = new(Some(&json!({"filterTimeout": "-1s"})), &handle).err().unwrap();
    assert_eq!(err, "filterTimeout: Invalid value: \"-1s\": must be zero or positive");
    let err = new(Some(&json!({"filterTimeout": "-1s", "bindingTimeout": "500ms"})), &handle).err().unwrap();
    assert_eq!(
        err,
        "[filterTimeout: Invalid value: \"-1s\": must be zero or positive, bindingTimeout: Invalid value: \"500ms\": must be at least 1 second]"
    );
}

#[test]
fn device_selection_is_opt_in_and_validated() {
    use ksched_dra::allocator::DeviceSelection;
    assert_eq!(DynamicResourcesArgs::decode(None).unwrap().device_selection(), DeviceSelection::FirstFit);
    let a = DynamicResourcesArgs::decode(Some(&json!({"deviceSelection": "BestFit"}))).unwrap();
    assert_eq!(a.device_selection(), DeviceSelection::BestFit);
    let handle = Handle::for_tests();
    assert!(new(Some(&json!({"deviceSelection": "FirstFit"})), &handle).is_ok());
    let err = new(Some(&json!({"deviceSelection": "Tightest"})), &handle).err().unwrap();
    assert_eq!(err, "deviceSelection: Unsupported value: \"Tightest\": supported values: \"FirstFit\", \"BestFit\"");
    let err = new(Some(&json!({"deviceSelection": "bestfit", "filterTimeout": "-1s"})), &handle).err().unwrap();
    assert!(
        err.starts_with("[filterTimeout: Invalid value")
            && err.contains("deviceSelection: Unsupported value: \"bestfit\""),
        "{err}"
    );
}

#[test]
fn go_durations() {
    assert_eq!(parse_go_duration("0").unwrap(), 0);
    assert_eq!(parse_go_duration("10m0s").unwrap(), 600_000_000_000);
    assert_eq!(parse_go_duration("1h2m3.5s").unwrap(), 3_723_500_000_000);
    assert_eq!(parse_go_duration("-250ms").unwrap(), -250_000_000);
    assert_eq!(parse_go_duration("3us").unwrap(), 3_000);
    assert!(parse_go_duration("").is_err());
    assert!(parse_go_duration("5").is_err());
    assert!(parse_go_duration("5d").is_err());
}

mod cycle;

/// A claim in namespace `ns` allocated `device` of driver `d`, pool `p` (or unallocated).
fn allocated_claim(name: &str, rv: &str, device: Option<&str>) -> Arc<ResourceClaim> {
    let mut c: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name, "uid": format!("uid-{name}"), "resourceVersion": rv},
        "spec": {"devices": {"requests": []}}
    }))
    .unwrap();
    if let Some(device) = device {
        c.status = Some(
            serde_json::from_value(json!({"allocation": {"devices": {"results": [
                {"request": "r", "driver": "d", "pool": "p", "device": device}]}}}))
            .unwrap(),
        );
    }
    Arc::new(c)
}

#[test]
fn allocated_devices_follow_claim_changes_incrementally_and_after_rescans() {
    let lister = Arc::new(ksched_framework::listers::MemoryLister::default());
    let manager = DraManager::new(lister.clone());
    let taken = |m: &DraManager, dev: &str| m.allocated().is_taken("d", "p", dev);
    lister.resource_claims.upsert(allocated_claim("a", "1", Some("g0")));
    lister.resource_claims.upsert(allocated_claim("b", "1", None));
    assert!(taken(&manager, "g0") && !taken(&manager, "g1"));
    // Through the journal: an allocation, a deallocation, a deletion.
    lister.resource_claims.upsert(allocated_claim("b", "2", Some("g1")));
    assert!(taken(&manager, "g1"));
    lister.resource_claims.upsert(allocated_claim("a", "2", None));
    assert!(!taken(&manager, "g0") && taken(&manager, "g1"));
    lister.resource_claims.remove(Some("ns"), "b");
    assert!(!taken(&manager, "g1"));
    // A claim deleted and created again under the same name and version counts anew.
    lister.resource_claims.upsert(allocated_claim("c", "5", Some("g2")));
    assert!(taken(&manager, "g2"));
    let mut recreated = (*allocated_claim("c", "5", Some("g3"))).clone();
    recreated.metadata.uid = Some("uid-c-2".into());
    lister.resource_claims.upsert(Arc::new(recreated));
    assert!(!taken(&manager, "g2") && taken(&manager, "g3"));
    // More changes than the journal holds: the rescan gives the same answer.
    for i in 0..5000 {
        lister.resource_claims.upsert(allocated_claim(&format!("x{i}"), "1", None));
    }
    lister.resource_claims.upsert(allocated_claim("a", "3", Some("g0")));
    assert!(taken(&manager, "g0") && taken(&manager, "g3") && !taken(&manager, "g1"));
}
