//! Args decoding, defaulting, validation and registration.

use ksched_framework::Handle;
use serde_json::json;

use super::*;
use crate::interpodaffinity::{new, validate_inter_pod_affinity_args};
use crate::names;

#[test]
fn args_decode_default_and_validate() {
    let handle = Handle::for_tests();
    let cases: Vec<(&str, Option<serde_json::Value>, Result<InterPodAffinityArgs, &str>)> = vec![
        ("absent args are defaulted", None, Ok(InterPodAffinityArgs::default())),
        (
            "empty object is defaulted",
            Some(json!({})),
            Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }),
        ),
        (
            "null weight is defaulted",
            Some(json!({"hardPodAffinityWeight": null})),
            Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }),
        ),
        (
            "apiVersion/kind are accepted and fields decoded",
            Some(json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs",
                        "hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": true})),
            Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 0, ignore_preferred_terms_of_existing_pods: true }),
        ),
        (
            "upper bound",
            Some(json!({"hardPodAffinityWeight": 100})),
            Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 100, ..Default::default() }),
        ),
        (
            "weight above 100",
            Some(json!({"hardPodAffinityWeight": 101})),
            Err("hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
        ),
        (
            "negative weight",
            Some(json!({"hardPodAffinityWeight": -1})),
            Err("hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
        ),
    ];
    for (name, raw, want) in cases {
        let got = new(raw.as_ref(), &handle);
        match want {
            Ok(args) => {
                let pl = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(pl.name(), names::INTER_POD_AFFINITY, "{name}");
                let direct = InterPodAffinity::from_args(args.clone(), &handle).unwrap();
                assert_eq!(direct.args(), &args, "{name}");
                let decoded: InterPodAffinityArgs = ksched_framework::registry::decode_args(raw.as_ref()).unwrap();
                assert_eq!(decoded, args, "{name}");
            }
            Err(msg) => assert_eq!(got.err().as_deref(), Some(msg), "{name}"),
        }
    }
    let err = new(Some(&json!({"hardPodAffinityWeight": 1, "bogus": true})), &handle).err().unwrap();
    assert!(err.contains("unknown field `bogus`"), "{err}");
    assert!(new(Some(&json!({"hard_pod_affinity_weight": 1})), &handle).is_err(), "fields are camelCase");
    assert_eq!(
        validate_inter_pod_affinity_args(
            "profiles[0].pluginConfig[1].args",
            &InterPodAffinityArgs { hard_pod_affinity_weight: 200, ..Default::default() }
        ),
        Err("profiles[0].pluginConfig[1].args.hardPodAffinityWeight: Invalid value: 200: not in valid range [0, 100]"
            .to_string())
    );
}

#[test]
fn registered_in_tree() {
    let r = crate::in_tree_registry();
    let factory = r.get(names::INTER_POD_AFFINITY).expect("registered");
    let pl = factory(None, &Handle::for_tests()).unwrap();
    assert!(pl.as_pre_filter().is_some_and(|p| p.extensions().is_some()));
    assert!(pl.as_filter().is_some() && pl.as_pre_score().is_some() && pl.as_score().is_some());
    assert!(pl.as_reserve().is_none());
}
