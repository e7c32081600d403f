//! Serialisation for `--write-config-to`: the v1 JSON that upstream produces when it encodes its
//! internal config (every internal scalar becomes a set pointer, `omitempty` applied), printed as
//! YAML the way `sigs.k8s.io/yaml` (go-yaml v2) does: keys sorted, sequences not indented.

use std::cmp::Ordering;

use ksched_framework::plugin_config::{PluginRef, PluginSet, Plugins};
use serde_json::{json, Map, Value};

use super::types::*;

/// The configuration as v1 YAML, like upstream's `--write-config-to` output.
pub fn to_yaml(cfg: &KubeSchedulerConfiguration) -> String {
    let mut out = String::new();
    emit_value(&to_json(cfg), 0, &mut out);
    out
}

/// The configuration as the v1 JSON object upstream would encode.
pub fn to_json(cfg: &KubeSchedulerConfiguration) -> Value {
    let mut m = Map::new();
    m.insert("apiVersion".into(), API_VERSION.into());
    m.insert("kind".into(), KIND.into());
    let cc = &cfg.client_connection;
    m.insert(
        "clientConnection".into(),
        json!({
            "kubeconfig": cc.kubeconfig,
            "acceptContentTypes": cc.accept_content_types,
            "contentType": cc.content_type,
            "qps": f32_value(cc.qps),
            "burst": cc.burst,
        }),
    );
    if cfg.delay_cache_until_active {
        m.insert("delayCacheUntilActive".into(), true.into());
    }
    m.insert("enableProfiling".into(), cfg.enable_profiling.unwrap_or(false).into());
    m.insert("enableContentionProfiling".into(), cfg.enable_contention_profiling.unwrap_or(false).into());
    if !cfg.extenders.is_empty() {
        m.insert("extenders".into(), Value::Array(cfg.extenders.iter().map(extender_json).collect()));
    }
    let le = &cfg.leader_election;
    m.insert(
        "leaderElection".into(),
        json!({
            "leaderElect": le.leader_elect.unwrap_or(false),
            "leaseDuration": le.lease_duration.to_string(),
            "renewDeadline": le.renew_deadline.to_string(),
            "retryPeriod": le.retry_period.to_string(),
            "resourceLock": le.resource_lock,
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        }),
    );
    m.insert("parallelism".into(), cfg.parallelism.unwrap_or(0).into());
    if let Some(p) = cfg.percentage_of_nodes_to_score {
        m.insert("percentageOfNodesToScore".into(), p.into());
    }
    m.insert("podInitialBackoffSeconds".into(), cfg.pod_initial_backoff_seconds.unwrap_or(0).into());
    m.insert("podMaxBackoffSeconds".into(), cfg.pod_max_backoff_seconds.unwrap_or(0).into());
    if !cfg.profiles.is_empty() {
        m.insert("profiles".into(), Value::Array(cfg.profiles.iter().map(profile_json).collect()));
    }
    Value::Object(m)
}

/// A float32 as Go's JSON prints it and YAML re-reads it: integral values become integers.
fn f32_value(v: f32) -> Value {
    // Go formats float32 with 32-bit shortest digits; going through that text keeps e.g. 0.1 exact.
    let text = v.to_string();
    match text.parse::<i64>() {
        Ok(i) => Value::from(i),
        Err(_) => {
            text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number).unwrap_or_default()
        }
    }
}

fn profile_json(p: &KubeSchedulerProfile) -> Value {
    let mut m = Map::new();
    m.insert("schedulerName".into(), p.scheduler_name.clone().unwrap_or_default().into());
    if let Some(pct) = p.percentage_of_nodes_to_score {
        m.insert("percentageOfNodesToScore".into(), pct.into());
    }
    if let Some(plugins) = &p.plugins {
        m.insert("plugins".into(), plugins_json(plugins));
    }
    if !p.plugin_config.is_empty() {
        let items = p
            .plugin_config
            .iter()
            .map(|pc| json!({"name": pc.name, "args": plugin_args_json(&pc.args).unwrap_or(Value::Null)}))
            .collect();
        m.insert("pluginConfig".into(), Value::Array(items));
    }
    Value::Object(m)
}

fn plugins_json(p: &Plugins) -> Value {
    let sets: [(&str, &PluginSet); 15] = [
        ("preEnqueue", &p.pre_enqueue),
        ("queueSort", &p.queue_sort),
        ("preFilter", &p.pre_filter),
        ("filter", &p.filter),
        ("postFilter", &p.post_filter),
        ("preScore", &p.pre_score),
        ("score", &p.score),
        ("reserve", &p.reserve),
        ("permit", &p.permit),
        ("preBind", &p.pre_bind),
        ("bind", &p.bind),
        ("postBind", &p.post_bind),
        ("multiPoint", &p.multi_point),
        ("placementGenerate", &p.placement_generate),
        ("placementScore", &p.placement_score),
    ];
    // Upstream's internal weight is a plain int32, so every plugin is written with a weight.
    let plugin = |r: &PluginRef| json!({"name": r.name, "weight": r.weight.unwrap_or(0)});
    let mut m = Map::new();
    for (name, set) in sets {
        let mut s = Map::new();
        if !set.enabled.is_empty() {
            s.insert("enabled".into(), Value::Array(set.enabled.iter().map(plugin).collect()));
        }
        if !set.disabled.is_empty() {
            s.insert("disabled".into(), Value::Array(set.disabled.iter().map(plugin).collect()));
        }
        m.insert(name.into(), Value::Object(s));
    }
    Value::Object(m)
}

fn extender_json(e: &Extender) -> Value {
    let mut m = Map::new();
    m.insert("urlPrefix".into(), e.url_prefix.clone().into());
    let mut opt_str = |k: &str, v: &str| {
        if !v.is_empty() {
            m.insert(k.into(), v.into());
        }
    };
    opt_str("filterVerb", &e.filter_verb);
    opt_str("preemptVerb", &e.preempt_verb);
    opt_str("prioritizeVerb", &e.prioritize_verb);
    opt_str("bindVerb", &e.bind_verb);
    if e.weight != 0 {
        m.insert("weight".into(), e.weight.into());
    }
    if e.enable_https {
        m.insert("enableHTTPS".into(), true.into());
    }
    if let Some(tls) = &e.tls_config {
        let mut t = Map::new();
        if tls.insecure {
            t.insert("insecure".into(), true.into());
        }
        for (k, v) in [
            ("serverName", &tls.server_name),
            ("certFile", &tls.cert_file),
            ("keyFile", &tls.key_file),
            ("caFile", &tls.ca_file),
        ] {
            if !v.is_empty() {
                t.insert(k.into(), v.clone().into());
            }
        }
        for (k, v) in [("certData", &tls.cert_data), ("keyData", &tls.key_data), ("caData", &tls.ca_data)] {
            if !v.0.is_empty() {
                t.insert(k.into(), v.encode().into());
            }
        }
        m.insert("tlsConfig".into(), Value::Object(t));
    }
    m.insert("httpTimeout".into(), e.http_timeout.to_string().into());
    if e.node_cache_capable {
        m.insert("nodeCacheCapable".into(), true.into());
    }
    if !e.managed_resources.is_empty() {
        let items = e
            .managed_resources
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("name".into(), r.name.clone().into());
                if r.ignored_by_scheduler {
                    o.insert("ignoredByScheduler".into(), true.into());
                }
                Value::Object(o)
            })
            .collect();
        m.insert("managedResources".into(), Value::Array(items));
    }
    if e.ignorable {
        m.insert("ignorable".into(), true.into());
    }
    Value::Object(m)
}

fn resources_json(resources: &[ResourceSpec]) -> Value {
    Value::Array(
        resources
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("name".into(), r.name.clone().into());
                if r.weight != 0 {
                    o.insert("weight".into(), r.weight.into());
                }
                Value::Object(o)
            })
            .collect(),
    )
}

fn shape_json(shape: &[UtilizationShapePoint]) -> Value {
    Value::Array(shape.iter().map(|p| json!({"utilization": p.utilization, "score": p.score})).collect())
}

/// Plugin args as v1 JSON with `apiVersion`/`kind` (raw args verbatim; `None` when absent).
/// This is also the form the framework's plugin factories receive.
pub fn plugin_args_json(args: &PluginArgs) -> Option<Value> {
    let mut m = Map::new();
    match args {
        PluginArgs::None => return None,
        PluginArgs::Unknown(v) => return Some(v.clone()),
        PluginArgs::DefaultPreemption(a) => {
            m.insert("minCandidateNodesPercentage".into(), a.min_candidate_nodes_percentage.unwrap_or(0).into());
            m.insert("minCandidateNodesAbsolute".into(), a.min_candidate_nodes_absolute.unwrap_or(0).into());
        }
        PluginArgs::InterPodAffinity(a) => {
            m.insert("hardPodAffinityWeight".into(), a.hard_pod_affinity_weight.unwrap_or(0).into());
            m.insert("ignorePreferredTermsOfExistingPods".into(), a.ignore_preferred_terms_of_existing_pods.into());
        }
        PluginArgs::NodeAffinity(a) => {
            if let Some(aff) = &a.added_affinity {
                m.insert("addedAffinity".into(), serde_json::to_value(aff).unwrap_or_default());
            }
        }
        PluginArgs::NodeResourcesBalancedAllocation(a) => {
            if !a.resources.is_empty() {
                m.insert("resources".into(), resources_json(&a.resources));
            }
        }
        PluginArgs::NodeResourcesFit(a) => {
            if !a.ignored_resources.is_empty() {
                m.insert("ignoredResources".into(), a.ignored_resources.clone().into());
            }
            if !a.ignored_resource_groups.is_empty() {
                m.insert("ignoredResourceGroups".into(), a.ignored_resource_groups.clone().into());
            }
            if let Some(s) = &a.scoring_strategy {
                let mut so = Map::new();
                if !s.type_.is_empty() {
                    so.insert("type".into(), s.type_.clone().into());
                }
                if !s.resources.is_empty() {
                    so.insert("resources".into(), resources_json(&s.resources));
                }
                if let Some(r) = &s.requested_to_capacity_ratio {
                    let mut ro = Map::new();
                    if !r.shape.is_empty() {
                        ro.insert("shape".into(), shape_json(&r.shape));
                    }
                    so.insert("requestedToCapacityRatio".into(), Value::Object(ro));
                }
                m.insert("scoringStrategy".into(), Value::Object(so));
            }
        }
        PluginArgs::PodTopologySpread(a) => {
            if !a.default_constraints.is_empty() {
                m.insert("defaultConstraints".into(), serde_json::to_value(&a.default_constraints).unwrap_or_default());
            }
            if !a.defaulting_type.is_empty() {
                m.insert("defaultingType".into(), a.defaulting_type.clone().into());
            }
        }
        PluginArgs::VolumeBinding(a) => {
            m.insert("bindTimeoutSeconds".into(), a.bind_timeout_seconds.unwrap_or(0).into());
            if let Some(shape) = a.shape.as_ref().filter(|s| !s.is_empty()) {
                m.insert("shape".into(), shape_json(shape));
            }
        }
        PluginArgs::DynamicResources(a) => {
            // filterTimeout has no omitempty upstream, so an unset value is written as null.
            m.insert("filterTimeout".into(), a.filter_timeout.map(|d| d.to_string().into()).unwrap_or(Value::Null));
            if let Some(d) = a.binding_timeout {
                m.insert("bindingTimeout".into(), d.to_string().into());
            }
            if let Some(s) = &a.device_selection {
                m.insert("deviceSelection".into(), s.clone().into());
            }
        }
    }
    m.insert("apiVersion".into(), API_VERSION.into());
    m.insert("kind".into(), args.kind().unwrap_or_default().into());
    Some(Value::Object(m))
}

impl PluginArgs {
    /// The v1 JSON handed to plugin factories (see [`plugin_args_json`]).
    pub fn to_json(&self) -> Option<Value> {
        plugin_args_json(self)
    }
}

impl KubeSchedulerProfile {
    /// `(plugin name, args JSON)` pairs in the form `Framework::new` takes.
    pub fn framework_plugin_args(&self) -> Vec<(String, Value)> {
        self.plugin_config.iter().filter_map(|pc| plugin_args_json(&pc.args).map(|v| (pc.name.clone(), v))).collect()
    }
}

// ---- YAML emitter (go-yaml v2 block style) ----

/// go-yaml v2's key order: letters compare by code point, a non-letter sorts before a letter,
/// and runs of digits compare numerically.
fn go_yaml_key_cmp(a: &str, b: &str) -> Ordering {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl { Ordering::Less } else { Ordering::Greater };
        }
        let mut an: i64 = 0;
        let mut bn: i64 = 0;
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an.wrapping_mul(10).wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn.wrapping_mul(10).wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

fn sorted_entries(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by(|(a, _), (b, _)| go_yaml_key_cmp(a, b));
    entries
}

fn pad(n: usize) -> String {
    " ".repeat(n)
}

/// Writes a top-level value (a document) at `indent`.
fn emit_value(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => emit_map(m, indent, out),
        Value::Array(a) if !a.is_empty() => emit_seq(a, indent, out),
        other => {
            out.push_str(&inline_scalar(other, indent));
            out.push('\n');
        }
    }
}

/// A mapping whose first key is written at the cursor and the others at `indent`.
fn emit_map(m: &Map<String, Value>, indent: usize, out: &mut String) {
    for (i, (k, v)) in sorted_entries(m).into_iter().enumerate() {
        if i > 0 {
            out.push_str(&pad(indent));
        }
        out.push_str(&scalar_str(k, indent));
        out.push(':');
        match v {
            Value::Object(child) if !child.is_empty() => {
                out.push('\n');
                out.push_str(&pad(indent + 2));
                emit_map(child, indent + 2, out);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                out.push_str(&pad(indent));
                emit_seq(items, indent, out);
            }
            other => {
                out.push(' ');
                out.push_str(&inline_scalar(other, indent));
                out.push('\n');
            }
        }
    }
}

/// A sequence whose first `- ` is written at the cursor and the others at `indent`.
fn emit_seq(items: &[Value], indent: usize, out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&pad(indent));
        }
        out.push_str("- ");
        match item {
            Value::Object(m) if !m.is_empty() => emit_map(m, indent + 2, out),
            Value::Array(a) if !a.is_empty() => emit_seq(a, indent + 2, out),
            other => {
                out.push_str(&inline_scalar(other, indent));
                out.push('\n');
            }
        }
    }
}

fn inline_scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_yaml_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => scalar_str(s, indent),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// A JSON float as Go re-reads it from JSON (integral ⇒ integer) and go-yaml prints it
/// (`strconv.FormatFloat(f, 'g', -1, 64)`).
fn go_yaml_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        return format!("{f:.0}");
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    // Shortest 'g' switches to exponent form outside [1e-4, 1e6).
    if !(-4..6).contains(&exp) {
        return format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    format!("{f}")
}

/// A string scalar: plain when go-yaml would leave it plain, else single or double quoted,
/// or a literal block for multi-line text.
fn scalar_str(s: &str, indent: usize) -> String {
    if s.contains('\n') {
        let chomp = if s.ends_with('\n') { "|" } else { "|-" };
        let body: Vec<String> = s
            .trim_end_matches('\n')
            .split('\n')
            .map(|l| if l.is_empty() { String::new() } else { format!("{}{l}", pad(indent + 2)) })
            .collect();
        return format!("{chomp}\n{}", body.join("\n"));
    }
    if resolves_to_non_string(s) || has_special_chars(s) {
        return double_quoted(s);
    }
    if plain_allowed(s) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "''"))
}

fn double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn has_special_chars(s: &str) -> bool {
    s.chars().any(|c| c != '\n' && ((c as u32) < 0x20 || c as u32 == 0x7f || c == '\u{feff}'))
}

/// Would go-yaml v2 read this unquoted text as something other than a string?
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: [&str; 33] = [
        "", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "y", "Y", "yes", "Yes",
        "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", ".inf", ".Inf", ".INF", ".nan",
        ".NaN", ".NAN",
    ];
    if WORDS.contains(&s) || s == "<<" {
        return true;
    }
    if matches!(s, "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF") {
        return true;
    }
    let Some(first) = s.chars().next() else { return true };
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return false;
    }
    let plain: String = s.chars().filter(|c| *c != '_').collect();
    is_go_int(&plain) || is_yaml_float(&plain) || is_base60_float(s) || is_timestamp(s)
}

/// `strconv.ParseInt(s, 0, 64)`-style syntax (range ignored).
fn is_go_int(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (digits, radix) = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (b, 2)
    } else if let Some(o) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        (o, 8)
    } else if body.len() > 1 && body.starts_with('0') {
        (&body[1..], 8)
    } else {
        (body, 10)
    };
    !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix))
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_float(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (num, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let num_ok = match num.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && frac.chars().all(|c| c.is_ascii_digit()),
        Some((int, frac)) => {
            !int.is_empty() && int.chars().all(|c| c.is_ascii_digit()) && frac.chars().all(|c| c.is_ascii_digit())
        }
        None => !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    num_ok && exp_ok
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$` (YAML 1.1 sexagesimal).
fn is_base60_float(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (main, frac) = match body.split_once('.') {
        Some((m, f)) => (m, Some(f)),
        None => (body, None),
    };
    let mut parts = main.split(':');
    let head = parts.next().unwrap_or("");
    let head_ok =
        head.chars().next().is_some_and(|c| c.is_ascii_digit()) && head.chars().all(|c| c.is_ascii_digit() || c == '_');
    let rest: Vec<&str> = parts.collect();
    let rest_ok = !rest.is_empty()
        && rest.iter().all(|p| {
            let b = p.as_bytes();
            match b.len() {
                1 => b[0].is_ascii_digit(),
                2 => (b'0'..=b'5').contains(&b[0]) && b[1].is_ascii_digit(),
                _ => false,
            }
        });
    let frac_ok = frac.is_none_or(|f| f.chars().all(|c| c.is_ascii_digit() || c == '_'));
    head_ok && rest_ok && frac_ok
}

/// Starts like a YAML timestamp: `YYYY-M-D` optionally followed by a time.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let date_end = rest.find(['T', 't', ' ']).unwrap_or(rest.len());
    let mut parts = rest[..date_end].split('-');
    let (Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next()) else { return false };
    let ok = |p: &str| (1..=2).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit());
    ok(m) && ok(d)
}

/// go-yaml's plain-scalar rules for block context.
fn plain_allowed(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    let Some(&first) = chars.first() else { return false };
    if s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    if first == ' ' || chars.last() == Some(&' ') {
        return false;
    }
    let followed_by_space = |i: usize| chars.get(i + 1).is_none_or(|c| *c == ' ' || *c == '\t');
    if "#,[]{}&*!|>'\"%@`".contains(first) {
        return false;
    }
    if matches!(first, '?' | ':' | '-') && followed_by_space(0) {
        return false;
    }
    for (i, &c) in chars.iter().enumerate().skip(1) {
        if c == ':' && followed_by_space(i) {
            return false;
        }
        if c == '#' && chars[i - 1] == ' ' {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_go_yaml() {
        let cases = [
            ("plain", "plain"),
            ("", "\"\""),
            ("*", "'*'"),
            ("true", "\"true\""),
            ("yes", "\"yes\""),
            ("123", "\"123\""),
            ("1.5", "\"1.5\""),
            ("0x1F", "\"0x1F\""),
            ("1:20", "\"1:20\""),
            ("2001-12-14", "\"2001-12-14\""),
            ("a: b", "'a: b'"),
            ("-x", "-x"),
            ("- x", "'- x'"),
            ("kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1"),
            ("10m0s", "10m0s"),
            ("it's", "it's"),
            (" lead", "' lead'"),
        ];
        for (input, want) in cases {
            assert_eq!(scalar_str(input, 0), want, "{input:?}");
        }
    }

    #[test]
    fn sorts_keys_like_go_yaml() {
        let mut keys = vec!["b", "a10", "a9", "A", "a_b", "ab"];
        keys.sort_by(|a, b| go_yaml_key_cmp(a, b));
        // A non-letter sorts before a digit run here because its "number" is 0.
        assert_eq!(keys, vec!["A", "a_b", "a9", "a10", "ab", "b"]);
    }

    #[test]
    fn formats_floats_like_go() {
        assert_eq!(go_yaml_float(50.0), "50");
        assert_eq!(go_yaml_float(0.5), "0.5");
        assert_eq!(go_yaml_float(0.00001), "1e-05");
        assert_eq!(go_yaml_float(1234567.5), "1.2345675e+06");
        assert_eq!(f32_value(0.1), json!(0.1));
    }
}
