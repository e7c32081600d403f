//! The `kube-scheduler` command line: upstream flag names and defaults, pflag parsing rules,
//! the config overlay, `--version`, `--help`, `--write-config-to`, and early validation.

use std::process::Command;

use ksched_scheduler::config::Duration;
use ksched_scheduler::options::{self, CliError, Options};

fn parse(args: &[&str]) -> Options {
    let mut argv = vec!["kube-scheduler"];
    argv.extend_from_slice(args);
    options::parse(argv).unwrap_or_else(|e| panic!("{args:?}: {e:?}"))
}

fn parse_err(args: &[&str]) -> CliError {
    let mut argv = vec!["kube-scheduler"];
    argv.extend_from_slice(args);
    options::parse(argv).expect_err("expected an error")
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ksched-cli-{}-{name}", std::process::id()))
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
}

#[test]
fn defaults_match_upstream() {
    let o = parse(&[]);
    assert_eq!(o.misc.config, "");
    assert_eq!(o.misc.master, "");
    assert_eq!(o.secure_serving.bind_address.to_string(), "0.0.0.0");
    assert_eq!(o.secure_serving.secure_port, 10259);
    assert_eq!(o.secure_serving.cert_dir, "");
    assert!(o.secure_serving.tls_sni_cert_key.is_empty());
    assert_eq!(o.authentication.token_webhook_cache_ttl, Duration::from_secs(10));
    assert!(o.authentication.tolerate_lookup_failure);
    assert!(!o.authentication.skip_lookup);
    assert_eq!(o.authentication.requestheader_username_headers, ["x-remote-user"]);
    assert_eq!(o.authentication.requestheader_group_headers, ["x-remote-group"]);
    assert_eq!(o.authentication.requestheader_extra_headers_prefix, ["x-remote-extra-"]);
    assert!(o.authentication.requestheader_uid_headers.is_empty());
    assert_eq!(o.authorization.always_allow_paths, ["/healthz", "/readyz", "/livez"]);
    assert_eq!(o.authorization.always_allow_groups, ["system:masters"]);
    assert_eq!(o.authorization.webhook_cache_authorized_ttl, Duration::from_secs(10));
    assert_eq!(o.authorization.webhook_cache_unauthorized_ttl, Duration::from_secs(10));
    assert!(o.deprecated.profiling && o.deprecated.contention_profiling);
    assert_eq!(o.deprecated.kube_api_content_type, "application/vnd.kubernetes.protobuf");
    assert_eq!((o.deprecated.kube_api_qps, o.deprecated.kube_api_burst), (50.0, 100));
    assert_eq!(o.deprecated.pod_max_in_unschedulable_pods_duration, Duration::from_secs(300));
    let le = &o.leader_election;
    assert!(le.leader_elect);
    assert_eq!(le.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(le.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(le.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(
        (
            le.leader_elect_resource_lock.as_str(),
            le.leader_elect_resource_name.as_str(),
            le.leader_elect_resource_namespace.as_str()
        ),
        ("leases", "kube-scheduler", "kube-system")
    );
    assert_eq!(o.logs.logging_format, "text");
    assert_eq!(o.logs.verbosity, 0);
    assert_eq!(o.logs.log_flush_frequency, Duration::from_secs(5));
    assert!(o.changed.is_empty(), "{:?}", o.changed);

    let eff = o.effective_config().unwrap();
    assert_eq!(eff.pod_max_in_unschedulable_pods_duration, std::time::Duration::from_secs(300));
    assert_eq!(eff.config.leader_election.leader_elect, Some(true));
    assert_eq!(eff.config.client_connection.qps, 50.0);
}

#[test]
fn pflag_parsing_rules() {
    // `_` is `-`; scalars take `--f v` and `--f=v`; the last occurrence wins.
    let o =
        parse(&["--leader_elect=false", "--kube_api_qps", "7", "--secure-port=1", "--secure-port", "2", "--master=-x"]);
    assert!(!o.leader_election.leader_elect);
    assert_eq!(o.deprecated.kube_api_qps, 7.0);
    assert_eq!(o.secure_serving.secure_port, 2);
    assert_eq!(o.misc.master, "-x");
    assert!(o.changed("leader-elect") && o.changed("kube-api-qps") && o.changed("secure-port"));
    assert!(!o.changed("leader-elect-lease-duration"));
    // A value may start with a dash, like pflag.
    assert_eq!(parse(&["--config", "--weird"]).misc.config, "--weird");
    // Bool flags: bare means true; Go's bool spellings.
    assert!(parse(&["--leader-elect"]).leader_election.leader_elect);
    assert!(!parse(&["--profiling=F"]).deprecated.profiling);
    // -v forms.
    for args in [&["-v", "3"][..], &["-v=3"], &["-v3"], &["--v=3"], &["--v", "3"]] {
        assert_eq!(parse(args).logs.verbosity, 3, "{args:?}");
    }
    // Slices split on commas, accumulate, and replace the default.
    let o = parse(&["--disabled-metrics=a,b", "--disabled-metrics=c", "--requestheader-username-headers=X-U"]);
    assert_eq!(o.metrics.disabled_metrics, ["a", "b", "c"]);
    assert_eq!(o.authentication.requestheader_username_headers, ["X-U"]);
    let o = parse(&["--tls-sni-cert-key=a.crt,a.key:*.foo.com,foo.com", "--tls-sni-cert-key=b.crt,b.key"]);
    assert_eq!(o.secure_serving.tls_sni_cert_key.len(), 2);
    assert_eq!(o.secure_serving.tls_sni_cert_key[0].names, ["*.foo.com", "foo.com"]);
    let o = parse(&[
        "--feature-gates=GangScheduling=true",
        "--feature-gates",
        "kube:StorageCapacityScoring=true,Foo=false",
    ]);
    assert_eq!(o.feature_gate("GangScheduling"), Some(true));
    assert!(o.scheduler_features().storage_capacity_scoring);
    assert_eq!(o.unknown_feature_gates(), ["Foo"]);
    let o = parse(&["--allow-metric-labels=m1,l1=v1,v2", "--allow-metric-labels", "m2,l2=v3"]);
    assert_eq!(o.metrics.allow_metric_labels().len(), 2);
}

#[test]
fn positional_arguments_are_rejected_like_cobra() {
    assert_eq!(
        parse_err(&["foo", "bar"]),
        CliError::Other(r#""kube-scheduler" does not take any arguments, got ["foo" "bar"]"#.into())
    );
    // A bool flag does not consume the next word: it becomes an argument.
    assert_eq!(
        parse_err(&["--leader-elect", "false"]),
        CliError::Other(r#""kube-scheduler" does not take any arguments, got ["false"]"#.into())
    );
    // cobra only rejects non-empty arguments.
    parse(&[""]);
}

#[test]
fn flag_errors_use_pflag_wording() {
    assert_eq!(parse_err(&["--foo"]), CliError::Flag("unknown flag: --foo".into()));
    assert_eq!(parse_err(&["--foo=1"]), CliError::Flag("unknown flag: --foo".into()));
    assert_eq!(
        parse_err(&["--secure-port=x"]),
        CliError::Flag(
            r#"invalid argument "x" for "--secure-port" flag: strconv.ParseInt: parsing "x": invalid syntax"#.into()
        )
    );
    assert_eq!(
        parse_err(&["--leader-elect=maybe"]),
        CliError::Flag(
            r#"invalid argument "maybe" for "--leader-elect" flag: strconv.ParseBool: parsing "maybe": invalid syntax"#
                .into()
        )
    );
    assert_eq!(
        parse_err(&["--leader-elect-lease-duration=15"]),
        CliError::Flag(
            r#"invalid argument "15" for "--leader-elect-lease-duration" flag: time: missing unit in duration "15""#
                .into()
        )
    );
    assert_eq!(parse_err(&["--config"]), CliError::Flag("flag needs an argument: --config".into()));
}

#[test]
fn help_is_grouped_in_upstream_order() {
    let CliError::Help(text) = parse_err(&["--help"]) else { panic!("no help") };
    assert!(
        text.starts_with("The Kubernetes scheduler is a control plane process which assigns\nPods to Nodes."),
        "{text}"
    );
    assert!(text.contains("\nUsage:\n  kube-scheduler [flags]\n"), "{text}");
    let mut last = 0;
    for title in [
        "Misc flags:",
        "Secure serving flags:",
        "Authentication flags:",
        "Authorization flags:",
        "Deprecated flags:",
        "Leader election flags:",
        "Feature gate flags:",
        "Metrics flags:",
        "Logs flags:",
        "Global flags:",
    ] {
        let at = text.find(&format!("\n{title}\n\n")).unwrap_or_else(|| panic!("{title} missing:\n{text}"));
        assert!(at > last, "{title} out of order");
        last = at;
    }
    for line in [
        "      --config string            The path to the configuration file.\n",
        "      --secure-port int",
        "(default 10259)",
        "      --kube-api-qps float32",
        "DEPRECATED: QPS to use while talking with kubernetes apiserver.",
        "Start a leader election client and gain leadership before executing the main loop. Enable this when running replicated components for high availability. (default true)\n",
        "(default true)",
        "      --leader-elect-lease-duration duration",
        "(default 15s)",
        "      --leader-elect-resource-lock string",
        r#"(default "leases")"#,
        "  -v, --v Level",
        "      --version version[=true]",
        "  -h, --help",
        "(default [/healthz,/readyz,/livez])",
        "      --pod-max-in-unschedulable-pods-duration duration",
        "(default 5m0s)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // pflag alignment: within a section every usage starts three columns after the widest spec.
    let misc: Vec<&str> = text.split("Misc flags:\n\n").nth(1).unwrap().lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(misc.len(), 3, "{misc:?}");
    for l in &misc {
        assert_eq!(l.find("   The").or_else(|| l.find("   If")), Some(30), "{l:?}");
    }
    // -h works too, and help wins over other flags.
    assert!(matches!(parse_err(&["-h"]), CliError::Help(_)));
}

#[test]
fn leader_election_flags_override_the_config_file_only_when_set() {
    let path = tmp("le.yaml");
    std::fs::write(
        &path,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         leaderElection:\n  leaseDuration: 20s\n  resourceName: custom\n\
         clientConnection:\n  qps: 11\n",
    )
    .unwrap();
    let cfg = format!("--config={}", path.display());
    let o = parse(&[
        &cfg,
        "--leader-elect-renew-deadline=5s",
        "--kube-api-qps=7",
        "--pod-max-in-unschedulable-pods-duration=1m",
    ]);
    let eff = o.effective_config().unwrap();
    let le = &eff.config.leader_election;
    assert_eq!(le.lease_duration, Duration::from_secs(20), "file value kept");
    assert_eq!(le.renew_deadline, Duration::from_secs(5), "flag wins");
    assert_eq!(le.resource_name, "custom", "unset flag does not override");
    assert_eq!(le.retry_period, Duration::from_secs(2), "defaulted");
    // Deprecated flags are ignored with --config, except the unschedulable-pods duration.
    assert_eq!(eff.config.client_connection.qps, 11.0);
    assert_eq!(eff.pod_max_in_unschedulable_pods_duration, std::time::Duration::from_secs(60));
    assert_eq!(
        o.deprecated_flags_set(),
        [("kube-api-qps".to_string(), true), ("pod-max-in-unschedulable-pods-duration".to_string(), false)]
    );

    // A flag that makes the file invalid is caught by validation.
    let o = parse(&[&cfg, "--leader-elect-renew-deadline=30s"]);
    let err = o.effective_config().unwrap_err();
    assert!(err.contains("leaderElection.leaseDuration: Invalid value"), "{err}");

    // Without --config the deprecated flags apply.
    let o = parse(&["--kube-api-qps=7", "--kube-api-burst=9", "--kubeconfig=/k", "--profiling=false"]);
    let eff = o.effective_config().unwrap();
    assert_eq!((eff.config.client_connection.qps, eff.config.client_connection.burst), (7.0, 9));
    assert_eq!(eff.config.client_connection.kubeconfig, "/k");
    assert_eq!(eff.config.enable_profiling, Some(false));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn option_validation_messages() {
    assert_eq!(
        parse(&["--secure-port=70000"]).validate(),
        ["--secure-port 70000 must be between 0 and 65535, inclusive. 0 for turning off secure port"]
    );
    assert_eq!(
        parse(&["--show-hidden-metrics-for-version=1.30"]).validate(),
        ["metrics.showHiddenMetricsForVersion: Invalid value: \"1.30\": must be omitted or have the value '1.35'; only the previous minor version is allowed"]
    );
    assert!(parse(&["--show-hidden-metrics-for-version=1.35"]).validate().is_empty());
    assert_eq!(parse(&["--tls-cipher-suites=FOO"]).validate(), ["Cipher suite FOO not supported or doesn't exist"]);
    assert_eq!(parse(&["--tls-min-version=TLS9"]).validate(), ["unknown tls version \"TLS9\""]);
    assert_eq!(
        parse(&["--requestheader-group-headers= "]).validate(),
        ["empty value in \"requestheader-group-headers\""]
    );
    assert!(parse(&["--emulated-version=kube=1.36", "--tls-min-version=VersionTLS13"]).validate().is_empty());
}

/// `--emulated-version` gives that version's gate defaults and locks; gates are checked against
/// the emulated version (component-base's feature gate), and every v1.36 gate is known.
#[test]
fn emulated_version_sets_gate_defaults() {
    // DynamicResourceAllocation: beta and off in 1.33, GA and on since 1.34, locked since 1.35.
    assert!(!parse(&["--emulated-version=1.33"]).scheduler_features().dynamic_resource_allocation);
    assert!(parse(&["--emulated-version=1.34"]).scheduler_features().dynamic_resource_allocation);
    assert!(parse(&[]).scheduler_features().dynamic_resource_allocation);
    assert!(parse(&["--emulated-version=1.33", "--feature-gates=DynamicResourceAllocation=false"])
        .validate()
        .is_empty());
    assert_eq!(
        parse(&["--feature-gates=DynamicResourceAllocation=false"]).validate(),
        ["cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"]
    );
    // NodeDeclaredFeatures: alpha and off in 1.35, beta and on in 1.36.
    assert!(!parse(&["--emulated-version=1.35"]).scheduler_features().node_declared_features);
    // TaintTolerationComparisonOperators: alpha since 1.35, not there in 1.34.
    let o = parse(&["--feature-gates=TaintTolerationComparisonOperators=true"]);
    assert!(o.validate().is_empty() && o.unknown_feature_gates().is_empty());
    assert!(o.scheduler_features().plugin_features().taint_toleration_comparison_operators);
    assert_eq!(
        parse(&["--emulated-version=1.34", "--feature-gates=TaintTolerationComparisonOperators=true"]).validate(),
        ["cannot set feature gate TaintTolerationComparisonOperators to true, feature is PreAlpha at emulated version 1.34, min compatibility version 1.33"]
    );
    // Gates the scheduler never reads are still known (no "unrecognized" warning).
    let o = parse(&["--feature-gates=SchedulerAsyncAPICalls=true,ContextualLogging=true,WatchListClient=false"]);
    assert!(o.unknown_feature_gates().is_empty(), "{:?}", o.unknown_feature_gates());
    assert_eq!(o.compatibility_versions(), ((1, 36), (1, 35)));
    assert_eq!(parse(&["--emulated-version=1.33"]).compatibility_versions(), ((1, 33), (1, 33)));
    assert_eq!(parse(&["--feature-gates=wardle:Foo=true"]).validate(), ["component not registered: wardle"]);
}

#[test]
fn opportunistic_batching_gate_follows_the_emulated_version() {
    // Beta and on from v1.35 (upstream `pkg/features`); it does not exist before.
    assert!(parse(&[]).scheduler_features().opportunistic_batching);
    assert!(!parse(&["--feature-gates=OpportunisticBatching=false"]).scheduler_features().opportunistic_batching);
    assert!(parse(&["--emulated-version=1.35"]).scheduler_features().opportunistic_batching);
    // The default minimum compatibility version is one below the emulated one, never below 1.33.
    for (emulated, min) in [("1.33", "1.33"), ("1.34", "1.33")] {
        let o = parse(&[&format!("--emulated-version={emulated}")]);
        assert!(!o.scheduler_features().opportunistic_batching, "{emulated}");
        assert!(o.validate().is_empty(), "{emulated}: {:?}", o.validate());
        for value in ["true", "false"] {
            let o = parse(&[
                &format!("--emulated-version=kube={emulated}"),
                &format!("--feature-gates=OpportunisticBatching={value}"),
            ]);
            assert!(!o.scheduler_features().opportunistic_batching);
            assert_eq!(
                o.validate(),
                [format!("cannot set feature gate OpportunisticBatching to {value}, feature is PreAlpha at emulated version {emulated}, min compatibility version {min}")]
            );
        }
    }
}

#[test]
fn version_flag() {
    let out = bin().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Kubernetes v1.36.0\n");
    let out = bin().arg("--version=raw").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(
        raw.starts_with(r#"version.Info{Major:"1", Minor:"36", "#) && raw.contains(r#"GitVersion:"v1.36.0""#),
        "{raw}"
    );
    let out = bin().arg("--version=v2.0.0").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"Error: invalid argument "v2.0.0" for "--version" flag: version "v2.0.0" must match major/minor/patch of default version "v1.36.0""#),
        "{err}"
    );
}

#[test]
fn binary_rejects_arguments_and_unknown_flags() {
    let out = bin().args(["foo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: \"kube-scheduler\" does not take any arguments, got [\"foo\"]\n"
    );
    let out = bin().args(["--nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("Usage:\n  kube-scheduler [flags]\n") && err.ends_with("Error: unknown flag: --nope\n"),
        "{err}"
    );
    let out = bin().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Leader election flags:"));
}

#[test]
fn write_config_to_writes_the_defaulted_config_and_exits_0() {
    let path = tmp("written.yaml");
    let out = bin().arg(format!("--write-config-to={}", path.display())).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(&path).unwrap();
    let expected =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/config/defaulted-empty.yaml"))
            .unwrap();
    assert_eq!(written, expected);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Wrote configuration"));

    // Flags show up in the written config; deprecated ones warn.
    let out = bin()
        .args([
            &format!("--write-config-to={}", path.display()),
            "--kubeconfig=/etc/kubernetes/scheduler.conf",
            "--leader-elect=false",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("kubeconfig: /etc/kubernetes/scheduler.conf"), "{written}");
    assert!(written.contains("leaderElect: false"), "{written}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Flag --kubeconfig has been deprecated"), "{err}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn validation_errors_exit_1_before_touching_the_api() {
    let out = bin().args(["--secure-port=70000", "--kubeconfig=/nonexistent"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--secure-port 70000 must be between 0 and 65535, inclusive. 0 for turning off secure port"),
        "{err}"
    );
    assert!(!err.contains("nonexistent"), "{err}");

    let out = bin().args(["--leader-elect-renew-deadline=20s", "--kubeconfig=/nonexistent"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("couldn't create leader elector: leaseDuration must be greater than renewDeadline"), "{err}");

    let out = bin().args(["--logging-format=xml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "format: Invalid value: \"xml\": Unsupported log format\n");

    let out = bin().args(["--log-text-split-stream"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "options.text.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled\n"
    );

    // A kubeconfig that does not exist fails at client construction, after validation.
    let out = bin().args(["--kubeconfig=/nonexistent"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stat /nonexistent: no such file or directory"), "{err}");
}

#[test]
fn json_logging_format() {
    let path = tmp("json.yaml");
    let out = bin().args(["--logging-format=json", &format!("--write-config-to={}", path.display())]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| l.contains("Wrote configuration")).unwrap_or_else(|| panic!("{err}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["msg"], "Wrote configuration");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn flagz_lists_every_flag_with_its_given_or_default_value() {
    let o = parse(&["--leader-elect=false", "--v=3", "--feature-gates=GangScheduling=true"]);
    let get = |name: &str| o.flagz.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!(get("leader-elect"), Some("false"), "given");
    assert_eq!(get("v"), Some("3"), "given");
    assert_eq!(get("secure-port"), Some("10259"), "default");
    assert_eq!(get("bind-address"), Some("0.0.0.0"), "default");
    assert_eq!(get("feature-gates"), Some("GangScheduling=true"));
    assert_eq!(get("kubeconfig"), Some(""), "a string never given is empty");
    let names: std::collections::BTreeSet<&str> = o.flagz.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names.len(), o.flagz.len(), "one entry per flag");
    assert!(names.len() > 50, "every flag is listed, not only the given ones: {}", names.len());
}
