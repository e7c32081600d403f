use super::*;
use serde_json::json;

fn device(
    attrs: serde_json::Value,
    capacity: serde_json::Value,
) -> (BTreeMap<String, DeviceAttribute>, BTreeMap<String, DeviceCapacity>) {
    (serde_json::from_value(attrs).unwrap(), serde_json::from_value(capacity).unwrap())
}

fn eval(expr: &str) -> Result<bool, String> {
    let (a, c) = device(
        json!({"model": {"string": "a100"}, "memory": {"int": 40}, "ecc": {"bool": true},
               "driverVersion": {"version": "1.2.3"}, "other.example.com/zone": {"string": "z1"}}),
        json!({"memory": {"value": "40Gi"}, "cores": {"value": "108"}}),
    );
    let compiled = compile(expr);
    if let Some(e) = &compiled.error {
        return Err(e.detail.clone());
    }
    compiled.device_matches(&DeviceView {
        driver: "gpu.example.com",
        allow_multiple_allocations: Some(true),
        attributes: Some(&a),
        capacity: Some(&c),
    })
}

#[test]
fn selectors_see_the_kubernetes_device_environment() {
    let cases = [
        (r#"device.driver == "gpu.example.com""#, true),
        (r#"device.attributes["gpu.example.com"].model == "a100""#, true),
        (r#"device.attributes["gpu.example.com"].memory >= 40"#, true),
        (r#"device.attributes["gpu.example.com"].ecc"#, true),
        (r#"device.attributes["other.example.com"].zone == "z1""#, true),
        (r#"has(device.attributes["gpu.example.com"].model)"#, true),
        (r#"has(device.attributes["gpu.example.com"].nope)"#, false),
        (r#"has(device.attributes["unknown.example.com"].model)"#, false),
        (r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#, true),
        (r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("32Gi"))"#, true),
        (r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))"#, false),
        (r#"device.capacity["gpu.example.com"].memory == quantity("40960Mi")"#, true),
        (r#"device.capacity["gpu.example.com"].cores.asInteger() == 108"#, true),
        (r#"device.capacity["gpu.example.com"].memory.add(quantity("8Gi")).isGreaterThan(quantity("47Gi"))"#, true),
        (r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#, true),
        (r#"device.attributes["gpu.example.com"].driverVersion.compareTo(semver("1.10.0")) < 0"#, true),
        (r#"device.attributes["gpu.example.com"].driverVersion.major() == 1"#, true),
        (r#"device.allowMultipleAllocations"#, true),
        (r#"cel.bind(g, device.attributes["gpu.example.com"], g.model == "a100" && g.memory > 16)"#, true),
        (r#"device.attributes["gpu.example.com"].model.startsWith("a1")"#, true),
        (r#"device.attributes["gpu.example.com"].exists(k, k == "ecc")"#, true),
    ];
    for (expr, want) in cases {
        assert_eq!(eval(expr), Ok(want), "{expr}");
    }
}

#[test]
fn runtime_errors_use_cel_go_texts() {
    assert_eq!(eval(r#"device.attributes["gpu.example.com"].missing == "x""#), Err("no such key: missing".into()));
    assert_eq!(eval(r#"device.attributes["gpu.example.com"].memory / 0 == 1"#), Err("division by zero".into()));
    assert_eq!(
        eval(r#"device.attributes["gpu.example.com"].model"#),
        Err("CEL result of type string could not be converted to bool: type conversion error from 'string' to 'bool'"
            .into())
    );
}

#[test]
fn broken_expressions_fail_to_compile_with_positions() {
    assert_eq!(
        eval("device.driver =="),
        Err("compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.driver ==\n | ................^".into())
    );
    assert_eq!(
        eval("foo == 1"),
        Err("compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^".into())
    );
    assert_eq!(eval("device.driver"), Err("must evaluate to bool or the unknown type, not string".into()));
    assert_eq!(eval("1 + 2"), Err("must evaluate to bool or the unknown type, not int".into()));
    assert!(eval("device.nofield == 1").unwrap_err().contains("undefined field 'nofield'"));
}

#[test]
fn cost_grows_with_nested_iteration() {
    let small = compile(r#"device.driver == "x""#);
    assert!(small.max_cost < 10, "{}", small.max_cost);
    let nested = compile(
        r#"device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(d, a != b))))"#,
    );
    assert!(nested.max_cost > SELECTOR_MAX_COST, "{}", nested.max_cost);
}

#[test]
fn the_cache_compiles_each_expression_once() {
    let cache = CelCache::new();
    let a = cache.get_or_compile("device.driver == 'x'");
    let b = cache.get_or_compile("device.driver == 'x'");
    assert!(Arc::ptr_eq(&a, &b));
}
