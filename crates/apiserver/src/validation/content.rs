//! String formats shared by every API group (DNS names, label keys and
//! values, qualified names), returning upstream's messages.

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` without a regex engine.
fn dns1123_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn dns1123_subdomain_shape(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(dns1123_label_shape)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn label_key_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let ex: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{re}')", ex.join(" or "))
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// RFC 1123 label (namespace names, container names).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !dns1123_label_shape(s) {
        if dns1123_subdomain_shape(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// RFC 1123 subdomain (most object names).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    dns1123_subdomain_with_unit(s, "characters")
}

fn dns1123_subdomain_with_unit(s: &str, unit: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(format!("must be no more than 253 {unit}"));
    }
    if !dns1123_subdomain_shape(s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// RFC 1035 label (Service names).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = s.as_bytes();
    let ok = dns1123_label_shape(s) && b[0].is_ascii_lowercase();
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// A label key / qualified name: `[prefix/]name`.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_with_unit(prefix, "bytes").into_iter().map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !label_key_shape(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// A label value: empty, or a label-key-shaped name of at most 63 bytes.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !s.is_empty() && !label_key_shape(s) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({LABEL_KEY_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// How a kind's `metadata.name` is checked (`prefix` is set for `generateName`).
pub type NameFn = fn(name: &str, prefix: bool) -> Vec<String>;

/// Names that `generateName` will extend may end with `-`.
fn mask_trailing_dash(name: &str, prefix: bool) -> String {
    if prefix && name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 1])
    } else {
        name.to_string()
    }
}

/// Most kinds: a DNS subdomain.
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    dns1123_subdomain(&mask_trailing_dash(name, prefix))
}

/// Namespaces: a DNS label.
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    dns1123_label(&mask_trailing_dash(name, prefix))
}

/// Services: a DNS-1035 label.
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    dns1035_label(&mask_trailing_dash(name, prefix))
}

/// Kinds whose names only have to be usable as a path segment.
pub fn name_is_path_segment(name: &str, prefix: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if !prefix {
        match name {
            "." => errs.push("may not be '.'".to_string()),
            ".." => errs.push("may not be '..'".to_string()),
            _ => {}
        }
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_accept_and_reject_like_upstream() {
        assert!(dns1123_label("my-name").is_empty());
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        assert!(dns1123_label("Bad")[0].starts_with("a lowercase RFC 1123 label must consist"));
        assert_eq!(dns1123_label(&"a".repeat(64))[0], "must be no more than 63 characters");
        assert!(dns1123_subdomain("a.b-c.d").is_empty());
        assert_eq!(
            dns1123_subdomain("Bad_Name"),
            ["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert!(dns1035_label("1abc")[0].starts_with("a DNS-1035 label"));
        assert!(name_is_dns_subdomain("web-", true).is_empty());
        assert!(!name_is_dns_subdomain("web-", false).is_empty());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(qualified_name("example.com/MyName").is_empty());
        assert!(qualified_name("app").is_empty());
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert!(qualified_name("a/b/c")[0].starts_with("a valid label key must consist of"));
        assert!(qualified_name("-x")[0].starts_with("name part must consist of"));
        assert!(label_value("").is_empty());
        assert!(label_value("my_value.1").is_empty());
        assert_eq!(
            label_value("bad value"),
            ["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
        );
        assert_eq!(label_value(&"a".repeat(64))[0], "must be no more than 63 bytes");
    }
}
