//! Which format a kind's `metadata.name` must have (apimachinery's `ValidateNameFunc`s). The
//! formats themselves are `ksched_framework::validation`'s.

use ksched_framework::validation::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain};

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
    is_dns1123_subdomain(&mask_trailing_dash(name, prefix))
}

/// Namespaces: a DNS label.
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    is_dns1123_label(&mask_trailing_dash(name, prefix))
}

/// Services: a DNS-1035 label.
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    is_dns1035_label(&mask_trailing_dash(name, prefix))
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
    fn generate_name_prefixes_may_end_with_a_dash() {
        let cases: [(NameFn, &str, bool, bool); 8] = [
            (name_is_dns_subdomain, "web-", true, true),
            (name_is_dns_subdomain, "web-", false, false),
            (name_is_dns_subdomain, "-", true, false),
            (name_is_dns_label, "ns-", true, true),
            (name_is_dns_label, "ns.a", false, false),
            (name_is_dns1035_label, "svc-", true, true),
            (name_is_dns1035_label, "1svc", false, false),
            (name_is_path_segment, "..", true, true),
        ];
        for (i, (f, name, prefix, valid)) in cases.into_iter().enumerate() {
            assert_eq!(f(name, prefix).is_empty(), valid, "case {i}: {name:?} prefix={prefix}: {:?}", f(name, prefix));
        }
    }

    #[test]
    fn path_segments() {
        assert!(name_is_path_segment("a.b", false).is_empty());
        assert_eq!(name_is_path_segment("..", false), ["may not be '..'"]);
        assert_eq!(name_is_path_segment(".", false), ["may not be '.'"]);
        assert_eq!(name_is_path_segment("a/b%c", false), ["may not contain '/'", "may not contain '%'"]);
    }
}
