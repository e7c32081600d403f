//! Args decoding, defaulting and validation (upstream `apis/config/v1` and `apis/config/validation`), and the plugin factory.

use ksched_framework::Handle;
use serde_json::json;

use crate::podtopologyspread::{new, validate_args, DefaultConstraint, PodTopologySpreadArgs};

const NAME_ERR: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with \
                        an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
                        is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn constraint(max_skew: i32, key: &str, when: &str) -> DefaultConstraint {
    DefaultConstraint { max_skew, topology_key: key.into(), when_unsatisfiable: when.into(), ..Default::default() }
}

fn args(defaulting: &str, c: Vec<DefaultConstraint>) -> PodTopologySpreadArgs {
    PodTopologySpreadArgs { default_constraints: c, defaulting_type: defaulting.into() }
}

#[test]
fn validation_messages() {
    let p = "profiles[0].pluginConfig[3].args";
    let c = format!("{p}.defaultConstraints");
    let mut with_selector = constraint(1, "b", "DoNotSchedule");
    with_selector.label_selector = Some(Default::default());
    let cases: Vec<(&str, PodTopologySpreadArgs, Vec<String>)> = vec![
        ("valid system", args("System", vec![]), vec![]),
        (
            "valid list",
            args("List", vec![constraint(1, "zone", "DoNotSchedule"), constraint(2, "zone", "ScheduleAnyway")]),
            vec![],
        ),
        (
            "unknown defaulting type",
            args("Foo", vec![]),
            vec![format!(r#"{p}.defaultingType: Unsupported value: "Foo": supported values: "System", "List""#)],
        ),
        (
            "system with constraints",
            args("System", vec![constraint(1, "zone", "DoNotSchedule")]),
            vec![format!(r#"{p}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty"#)],
        ),
        (
            "every constraint error",
            args(
                "List",
                vec![
                    constraint(0, "", ""),
                    constraint(1, "a b", "Foo"),
                    with_selector,
                    constraint(2, "zone", "ScheduleAnyway"),
                    constraint(3, "zone", "ScheduleAnyway"),
                ],
            ),
            vec![
                format!("{c}[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
                format!("{c}[0].topologyKey: Required value: can not be empty"),
                format!("{c}[0].whenUnsatisfiable: Required value: can not be empty"),
                format!(r#"{c}[1].topologyKey: Invalid value: "a b": {NAME_ERR}"#),
                format!(
                    r#"{c}[1].whenUnsatisfiable: Unsupported value: "Foo": supported values: "DoNotSchedule", "ScheduleAnyway""#
                ),
                format!("{c}[2].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"),
                format!(r#"{c}[4]: Duplicate value: "{{zone, ScheduleAnyway}}""#),
            ],
        ),
    ];
    for (name, a, want) in cases {
        assert_eq!(validate_args(p, &a), want, "{name}");
    }
}

#[test]
fn factory_decodes_defaults_and_validates() {
    let h = Handle::for_tests();
    // Absent args and an empty defaultingType both mean System.
    assert!(new(None, &h).is_ok());
    assert!(new(Some(&json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "PodTopologySpreadArgs"})), &h)
        .is_ok());
    let ok = json!({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"]}]});
    assert_eq!(new(Some(&ok), &h).unwrap().name(), "PodTopologySpread");
    // Strict decoding: unknown fields are errors, also inside a constraint.
    assert!(new(Some(&json!({"defaultingType": "List", "bogus": 1})), &h)
        .err()
        .unwrap()
        .contains("unknown field `bogus`"));
    let nested = json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "z",
        "whenUnsatisfiable": "DoNotSchedule", "extra": true}]});
    assert!(new(Some(&nested), &h).err().unwrap().contains("unknown field `extra`"));
    // Validation uses an empty root path; several errors are aggregated.
    let bad =
        json!({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]});
    assert_eq!(
        new(Some(&bad), &h).err().unwrap(),
        r#"defaultingType: Invalid value: "System": when .defaultConstraints are not empty"#
    );
    let two = json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule"}, {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]});
    assert_eq!(
        new(Some(&two), &h).err().unwrap(),
        r#"[defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf), defaultConstraints[1]: Duplicate value: "{zone, DoNotSchedule}"]"#
    );
}

#[test]
fn default_args_are_system() {
    let a = PodTopologySpreadArgs::default();
    assert_eq!(a.defaulting_type, "System");
    assert!(a.default_constraints.is_empty());
    let defaults = crate::podtopologyspread::system_default_constraints();
    let keys: Vec<(&str, i32, &str)> =
        defaults.iter().map(|c| (c.topology_key.as_str(), c.max_skew, c.when_unsatisfiable.as_str())).collect();
    assert_eq!(
        keys,
        [("kubernetes.io/hostname", 3, "ScheduleAnyway"), ("topology.kubernetes.io/zone", 5, "ScheduleAnyway")]
    );
}
