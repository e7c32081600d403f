//! `--help` in cobra/pflag's layout: the long description, `Usage:`, then one block per named
//! flag set (`Misc flags:` ...), flags sorted by name with pflag's type names and defaults.

use clap::{ArgAction, Command};

use super::{FLAG_SETS, LONG_ABOUT};

/// Cipher suite names `--tls-cipher-suites` accepts (Go's secure and insecure lists).
pub const TLS_CIPHERS: [&str; 29] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_RC4_128_SHA",
    // Go's legacy aliases, kept by component-base.
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
];

/// Types whose zero default pflag still prints (`(default [])`): custom `Value`s.
const ALWAYS_SHOW_DEFAULT: [&str; 3] = ["namedCertKey", "int32Slice", "stringToString"];

/// The full `--help` text.
pub fn render_help(cmd: &Command) -> String {
    format!("{LONG_ABOUT}\n\n{}", render_usage(cmd))
}

/// `Usage:` and the flag sections (what cobra prints on a flag error).
pub fn render_usage(cmd: &Command) -> String {
    let mut out = String::from("Usage:\n  kube-scheduler [flags]\n");
    for set in FLAG_SETS {
        let mut rows: Vec<(String, String)> = cmd
            .get_arguments()
            .filter(|a| a.get_help_heading() == Some(set) && !a.is_hide_set() && a.get_long().is_some())
            .map(flag_row)
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by_key(|r| sort_key(&r.0));
        let width = rows.iter().map(|(spec, _)| spec.len()).max().unwrap_or(0);
        let mut title = set.to_string();
        title[..1].make_ascii_uppercase();
        out.push_str(&format!("\n{title} flags:\n\n"));
        for (spec, usage) in rows {
            // pflag pads to the widest spec plus three spaces and indents continuation lines.
            let usage = usage.replace('\n', &format!("\n{}", " ".repeat(width + 3)));
            out.push_str(&format!("{spec}{}   {usage}\n", " ".repeat(width - spec.len())));
        }
    }
    out
}

fn sort_key(spec: &str) -> String {
    spec.trim_start().trim_start_matches("-v, ").trim_start_matches("-h, ").trim_start_matches("--").to_string()
}

fn flag_row(a: &clap::Arg) -> (String, String) {
    let long = a.get_long().unwrap_or_default();
    let mut spec = match a.get_short() {
        Some(s) => format!("  -{s}, --{long}"),
        None => format!("      --{long}"),
    };
    let type_name = a.get_value_names().and_then(|v| v.first()).map(|s| s.to_string()).unwrap_or_default();
    if !type_name.is_empty() {
        spec.push(' ');
        spec.push_str(&type_name);
    }
    if long == "version" {
        spec.push_str("[=true]");
    }
    let mut usage = a.get_long_help().or_else(|| a.get_help()).map(|h| h.to_string()).unwrap_or_default();
    usage = usage.replace("{n}", "\n");
    let defaults: Vec<String> = a.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
    let slice = matches!(a.get_action(), ArgAction::Append);
    let default = if slice { format!("[{}]", defaults.join(",")) } else { defaults.join(",") };
    let zero = match type_name.as_str() {
        "" => default == "false",
        "string" => default.is_empty(),
        "duration" => default == "0" || default == "0s",
        "strings" => default == "[]",
        t if ALWAYS_SHOW_DEFAULT.contains(&t) => false,
        _ => matches!(default.as_str(), "" | "0" | "false" | "[]" | "<nil>"),
    };
    if !zero {
        if type_name == "string" {
            usage.push_str(&format!(" (default {})", super::values::go_quote(&default)));
        } else {
            usage.push_str(&format!(" (default {default})"));
        }
    }
    (spec, usage)
}
