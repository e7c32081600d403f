use super::*;
use ksched_framework::podgroup::PodGroup;
use serde_json::{json, Value};

fn node(name: &str, zone: Option<&str>) -> NodeInfo {
    let labels = zone.map_or(json!({}), |z| json!({"zone": z}));
    NodeInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()))
}

fn snapshot() -> Snapshot {
    Snapshot::from_node_infos(vec![
        node("a1", Some("a")),
        node("b1", Some("b")),
        node("a2", Some("a")),
        node("none", None),
    ])
}

fn whole(s: &Snapshot) -> Placement {
    Placement { name: String::new(), nodes: s.list().to_vec(), fallback: false }
}

fn plugin(args: Value, constraint: Option<&str>) -> TopologyPlacementGenerator {
    let handle = Handle::for_tests();
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": 2}}});
    if let Some(k) = constraint {
        spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    let pg: PodGroup =
        serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "ns"}, "spec": spec})).unwrap();
    handle.pod_groups.upsert(Arc::new(pg));
    TopologyPlacementGenerator { handle, args: TopologyPlacementGeneratorArgs::decode(Some(&args)).unwrap() }
}

fn group() -> PodGroupInfo {
    PodGroupInfo { namespace: "ns".into(), name: "g".into(), unscheduled_pods: vec![] }
}

fn summary(placements: &[Placement]) -> Vec<(String, Vec<String>, bool)> {
    placements
        .iter()
        .map(|p| (p.name.clone(), p.nodes.iter().map(|n| n.name().to_string()).collect(), p.fallback))
        .collect()
}

#[test]
fn one_placement_per_domain_of_the_constraint() {
    let s = snapshot();
    let pl = plugin(json!({}), Some("zone"));
    let got = pl.generate_placements(&group(), &whole(&s), &s).unwrap();
    assert_eq!(
        summary(&got),
        vec![
            ("a".to_string(), vec!["a1".to_string(), "a2".to_string()], false),
            ("b".to_string(), vec!["b1".to_string()], false),
        ]
    );
}

#[test]
fn unconstrained_groups_get_the_parent_placement() {
    let s = snapshot();
    let got = plugin(json!({}), None).generate_placements(&group(), &whole(&s), &s).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].nodes.len(), 4);
}

#[test]
fn placed_members_pin_the_domain() {
    let s = snapshot();
    let pl = plugin(json!({}), Some("zone"));
    let placed: Arc<k8s_openapi::api::core::v1::Pod> = Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "m", "namespace": "ns", "uid": "m"},
            "spec": {"containers": [], "nodeName": "b1", "schedulingGroup": {"podGroupName": "g"}}}))
        .unwrap(),
    );
    pl.handle.pod_groups.observe_pod(None, Some(&placed));
    let got = pl.generate_placements(&group(), &whole(&s), &s).unwrap();
    assert_eq!(summary(&got), vec![("b".to_string(), vec!["b1".to_string()], false)]);

    // A member on a node without the label cannot be placed in a domain.
    let lost: Arc<k8s_openapi::api::core::v1::Pod> = Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "x", "namespace": "ns", "uid": "x"},
            "spec": {"containers": [], "nodeName": "none", "schedulingGroup": {"podGroupName": "g"}}}))
        .unwrap(),
    );
    pl.handle.pod_groups.observe_pod(None, Some(&lost));
    let err = pl.generate_placements(&group(), &whole(&s), &s).unwrap_err();
    assert_eq!(
        err.message(),
        "cannot determine domain for already scheduled pods: no topology domain found for pod ns/x"
    );
}

#[test]
fn past_upstream_default_key_and_preferred_fallback() {
    let s = snapshot();
    let pl = plugin(json!({"defaultTopologyKey": "zone", "mode": "Preferred"}), None);
    let got = pl.generate_placements(&group(), &whole(&s), &s).unwrap();
    let names: Vec<(String, bool)> = got.iter().map(|p| (p.name.clone(), p.fallback)).collect();
    assert_eq!(names, [("a".into(), false), ("b".into(), false), (String::new(), true)]);
    assert!(TopologyPlacementGeneratorArgs::decode(Some(&json!({"mode": "Sometimes"}))).is_err());
    assert!(TopologyPlacementGeneratorArgs::decode(Some(&json!({"unknown": 1}))).is_err());
}
