//! The plugin driven through the framework runtime, as a profile would run it.

use std::sync::Arc;

use ksched_framework::plugin_config::{PluginRef, PluginSet, Plugins};
use ksched_framework::{CycleState, Framework, Registry, Status};

use super::*;
use crate::interpodaffinity::{
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
};
use crate::names;

fn framework(args: serde_json::Value) -> Framework {
    let mut r = Registry::new();
    r.register(names::INTER_POD_AFFINITY, crate::interpodaffinity::new).unwrap();
    r.register(names::PRIORITY_SORT, crate::prioritysort::new).unwrap();
    r.register(names::DEFAULT_BINDER, crate::defaultbinder::new).unwrap();
    let enabled = vec![
        PluginRef::new(names::PRIORITY_SORT),
        PluginRef::weighted(names::INTER_POD_AFFINITY, 2),
        PluginRef::new(names::DEFAULT_BINDER),
    ];
    let plugins = Plugins { multi_point: PluginSet { enabled, disabled: vec![] }, ..Default::default() };
    let args = vec![(names::INTER_POD_AFFINITY.to_string(), args)];
    Framework::new(&r, "default-scheduler", &plugins, &args, handle_with_namespaces(&team_namespaces())).unwrap()
}

#[test]
fn full_cycle_through_the_runtime() {
    let fw = framework(serde_json::json!({"hardPodAffinityWeight": 10}));
    let nodes = vec![
        node("n1", &[("zone", "z1")]),
        node("n2", &[("zone", "z1")]),
        node("n3", &[("zone", "z2")]),
        node("n4", &[("zone", "z3")]),
    ];
    let pods = vec![
        // Hates app=web in its zone.
        make_pod().name("guard").node("n1").pod_anti_affinity_in("app", "zone", &["web"], Required).obj(),
        // Wants to be with app=web: the incoming pod gets the hard weight in z2.
        make_pod().name("friend").node("n3").pod_affinity_in("app", "zone", &["web"], Required).obj(),
    ];
    let snap = snapshot(&pods, &nodes);
    let web = pod_info(
        &make_pod().name("web").label("app", "web").pod_affinity_in("app", "zone", &["cache"], Preferred(4)).obj(),
    );

    let mut state = CycleState::new();
    let (result, status, _) = fw.run_pre_filter(&mut state, &web, &snap);
    assert!(result.is_none() && status.is_success(), "{status:?}");
    let statuses: Vec<Status> = snap.list().iter().map(|n| fw.run_filter_plugins(&state, &web, n)).collect();
    {
        let bound = fw.bound_filters(&state, &web);
        let via_bound: Vec<Status> = snap.list().iter().map(|n| fw.run_filters(&bound, &state, &web, n)).collect();
        assert_eq!(via_bound, statuses, "filters bound to the cycle decide as unbound ones");
    }
    let existing =
        Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH).with_plugin("InterPodAffinity");
    assert_eq!(statuses, vec![existing.clone(), existing, Status::success(), Status::success()]);

    // A nominated app=cache pod hated by nothing, and a nominated pod the web pod would hate
    // were it in its terms: pass 1 (with nominated pods) must also succeed.
    let filters = fw.active_filters(&state);
    let cache = Arc::new(pod_info(&make_pod().name("cache").label("app", "cache").obj()));
    assert!(fw.run_filters_with_nominated_pods(&filters, &state, &web, &snap.list()[3], &[cache]).is_success());
    let hater = Arc::new(pod_info(&make_pod().name("h").pod_anti_affinity_in("app", "zone", &["web"], Required).obj()));
    assert_eq!(
        fw.run_filters_with_nominated_pods(&filters, &state, &web, &snap.list()[3], &[hater]),
        Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH).with_plugin("InterPodAffinity")
    );
    assert!(state.read::<crate::interpodaffinity::filtering::PreFilterState>("PreFilterInterPodAffinity").is_ok());

    // Score only the feasible nodes; the friend's required term gives z2 the hard weight 10.
    let feasible = vec![snap.list()[2].clone(), snap.list()[3].clone()];
    assert!(fw.run_pre_score(&mut state, &web, &ksched_framework::node_refs(&feasible), &snap).is_success());
    let scores = fw.run_score(&state, &web, &ksched_framework::node_refs(&feasible)).unwrap();
    assert_eq!(scores.totals, vec![200, 0]);

    // An anti-affinity pod: the runtime skips nothing and rejects the guarded zone.
    let lonely =
        pod_info(&make_pod().name("l").label("app", "x").pod_anti_affinity_in("app", "zone", &["x"], Required).obj());
    let with_x = snapshot(&[make_pod().name("x").node("n3").label("app", "x").obj()], &nodes);
    let mut state = CycleState::new();
    assert!(fw.run_pre_filter(&mut state, &lonely, &with_x).1.is_success());
    assert_eq!(
        fw.run_filter_plugins(&state, &lonely, &with_x.list()[2]),
        Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH).with_plugin("InterPodAffinity")
    );
    // No pod with affinity, nobody hates it: PreFilter and PreScore both skip.
    let plain = pod_info(&make_pod().name("plain").obj());
    let empty = snapshot(&[], &nodes);
    let mut state = CycleState::new();
    assert!(fw.run_pre_filter(&mut state, &plain, &empty).1.is_success());
    assert!(state.skip_filter_plugins.contains("InterPodAffinity"));
    assert!(fw.run_pre_score(&mut state, &plain, &ksched_framework::node_refs(empty.list()), &empty).is_success());
    assert!(state.skip_score_plugins.contains("InterPodAffinity"));
}
