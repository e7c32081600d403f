use super::*;
use ksched_framework::podgroup::PodGroup;
use ksched_framework::PodInfo;
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
    TopologyPlacementGenerator {
        handle,
        args: TopologyPlacementGeneratorArgs::decode(Some(&args)).unwrap(),
        cluster_totals: Default::default(),
    }
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
    let placed: Arc<ksched_framework::pod::Pod> = Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "m", "namespace": "ns", "uid": "m"},
            "spec": {"containers": [], "nodeName": "b1", "schedulingGroup": {"podGroupName": "g"}}}))
        .unwrap(),
    );
    pl.handle.pod_groups.observe_pod(None, Some(&placed));
    let got = pl.generate_placements(&group(), &whole(&s), &s).unwrap();
    assert_eq!(summary(&got), vec![("b".to_string(), vec!["b1".to_string()], false)]);

    // A member on a node without the label cannot be placed in a domain.
    let lost: Arc<ksched_framework::pod::Pod> = Arc::new(
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

fn sized(name: &str, zone: &str, cpu: &str, used: &str) -> NodeInfo {
    let mut ni = NodeInfo::new(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
        .unwrap(),
    ));
    let filler = json!({"metadata": {"name": format!("{name}-filler"), "uid": format!("{name}-filler")},
        "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {"cpu": used}}}]}});
    ni.add_pod(Arc::new(PodInfo::new(Arc::new(serde_json::from_value(filler).unwrap()))));
    ni
}

fn proposal(placement: &Placement, cpu: &str, n: usize) -> PodGroupAssignments {
    let pod: ksched_framework::pod::Pod = serde_json::from_value(json!({"metadata": {"name": "m"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}))
    .unwrap();
    let pod = Arc::new(PodInfo::new(Arc::new(pod)));
    PodGroupAssignments {
        placement: Arc::new(placement.clone()),
        proposed: (0..n)
            .map(|_| ksched_framework::podgroup::ProposedAssignment { pod: pod.clone(), node: "x".into() })
            .collect(),
    }
}

#[test]
fn best_fit_scores_the_domain_left_tightest_highest_and_is_off_by_default() {
    assert!(plugin(json!({}), Some("zone")).as_placement_score().is_none(), "upstream: no placement score");
    let pl = plugin(json!({"bestFit": true}), Some("zone"));
    assert!(pl.as_placement_score().is_some());
    // big: 4 nodes × 4 cpu, 2 used each (8 free); small: 2 × 4, 1 used each (6 free); tight:
    // 1 × 4, 0 used (4 free). A group of 4 × 1 cpu leaves 4, 2 and 0 cpu of 24.
    let mut nodes: Vec<NodeInfo> = (0..4).map(|i| sized(&format!("big{i}"), "big", "4", "2")).collect();
    nodes.extend((0..2).map(|i| sized(&format!("small{i}"), "small", "4", "1")));
    nodes.push(sized("tight0", "tight", "4", "0"));
    let s = Snapshot::from_node_infos(nodes);
    let placements = pl.generate_placements(&group(), &whole(&s), &s).unwrap();
    let names: Vec<&str> = placements.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["big", "small", "tight"]);
    let mut scores: Vec<i64> =
        placements.iter().map(|p| pl.score_placement(&group(), &proposal(p, "1", 4), &s).unwrap()).collect();
    // Free cpu left as millionths of the cluster's 28 cpu.
    assert_eq!(scores, [142857, 71429, 0]);
    assert!(pl.normalize_placement_scores(&group(), &mut scores).is_success());
    assert_eq!(scores, [0, 49, 100]);
    let mut equal = vec![7, 7];
    assert!(pl.normalize_placement_scores(&group(), &mut equal).is_success());
    assert_eq!(equal, [100, 100]);
}
