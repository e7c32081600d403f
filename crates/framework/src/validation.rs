//! Name and label formats as apimachinery checks them, in one place for the scheduler's config,
//! the plugins' args and the embedded API server. Each check returns the messages kube-apiserver
//! prints for the value, in its order; an empty list means valid.
//!
//! The top level is `pkg/util/validation`, which object names go through; [`content`] is
//! `pkg/api/validate/content`, which label keys and values go through. The two differ in one
//! word that is visible to users: a length limit is "characters" here and "bytes" there, so a
//! too-long object name and a too-long label-key prefix are reported differently, as upstream
//! reports them.

pub use content::{is_c_identifier, is_label_value as is_valid_label_value, is_qualified_name};

/// The longest RFC 1123 or RFC 1035 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// The longest RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

/// `IsDNS1123Label`: namespace and container names, among others.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        // What would be a valid subdomain differs from a label only by its dots.
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: most object names.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    subdomain_errors(value, max_len_error)
}

/// `IsDNS1035Label`: Service names.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !(matches_dns1123_label(value) && value.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errs
}

/// `MaxLenError` of `pkg/util/validation`, which words the limit in characters (of a length
/// measured in bytes).
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `RegexError`: `msg`, then the examples (if any) and the expression the value failed.
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    // Each example keeps its trailing ", " before the " or ", as upstream prints them.
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{re}')", quoted.join(" or "))
}

/// `EmptyError`.
pub fn empty_error() -> String {
    "must be non-empty".to_string()
}

fn subdomain_errors(value: &str, max_len: fn(usize) -> String) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// Whether `value` matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` in full.
fn matches_dns1123_label(value: &str) -> bool {
    let b = value.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-'),
        _ => false,
    }
}

/// Whether `value` is dot-separated RFC 1123 labels (no length limit).
fn matches_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(matches_dns1123_label)
}

/// `pkg/api/validate/content`: label keys and values, C identifiers.
pub mod content {
    use super::{empty_error, regex_error};

    const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
    const LABEL_KEY_ERR: &str =
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    const LABEL_KEY_EXAMPLES: [&str; 3] = ["MyName", "my.name", "123-abc"];
    /// The longest name part of a label key.
    pub const LABEL_KEY_MAX_LENGTH: usize = 63;
    const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
    const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    /// The longest label value.
    pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
    const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
    const C_IDENTIFIER_ERR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";

    /// `MaxLenError` of the content package, which words the limit in bytes.
    pub fn max_len_error(length: usize) -> String {
        format!("must be no more than {length} bytes")
    }

    /// The content package's `IsDNS1123Subdomain`: the "bytes" wording of the length limit.
    pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
        super::subdomain_errors(value, max_len_error)
    }

    /// `IsQualifiedName` (also `IsLabelKey`): `[prefix/]name`, a DNS subdomain prefix and a name
    /// part of at most 63 alphanumerics, '-', '_' or '.'. Label, annotation and finalizer keys,
    /// resource names.
    pub fn is_qualified_name(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        let parts: Vec<&str> = value.split('/').collect();
        let name = match parts.as_slice() {
            [name] => *name,
            [prefix, name] => {
                if prefix.is_empty() {
                    errs.push(format!("prefix part {}", empty_error()));
                } else {
                    errs.extend(is_dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
                }
                *name
            }
            _ => {
                errs.push(format!(
                    "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                    regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &LABEL_KEY_EXAMPLES)
                ));
                return errs;
            }
        };
        if name.is_empty() {
            errs.push(format!("name part {}", empty_error()));
        } else if name.len() > LABEL_KEY_MAX_LENGTH {
            errs.push(format!("name part {}", max_len_error(LABEL_KEY_MAX_LENGTH)));
        }
        if !matches_label_key_name(name) {
            errs.push(format!("name part {}", regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &LABEL_KEY_EXAMPLES)));
        }
        errs
    }

    /// `IsLabelValue` (`IsValidLabelValue`): empty, or a label key's name part.
    pub fn is_label_value(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        if value.len() > LABEL_VALUE_MAX_LENGTH {
            errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
        }
        if !value.is_empty() && !matches_label_key_name(value) {
            errs.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
        }
        errs
    }

    /// `IsCIdentifier`: the format only, any length.
    pub fn is_c_identifier(value: &str) -> Vec<String> {
        let b = value.as_bytes();
        let head = |c: &u8| c.is_ascii_alphabetic() || *c == b'_';
        let ok = b.first().is_some_and(head) && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
        if ok {
            Vec::new()
        } else {
            vec![regex_error(C_IDENTIFIER_ERR, C_IDENTIFIER_FMT, &["my_name", "MY_NAME", "MyName"])]
        }
    }

    /// Whether `value` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` in full.
    fn matches_label_key_name(value: &str) -> bool {
        let b = value.as_bytes();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                first.is_ascii_alphanumeric()
                    && last.is_ascii_alphanumeric()
                    && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_REGEX: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_REGEX: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const DNS1035_REGEX: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    const KEY_REGEX: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_REGEX: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    const C_IDENTIFIER_REGEX: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')";

    fn check(name: &str, f: fn(&str) -> Vec<String>, cases: &[(&str, &[&str])]) {
        for (value, want) in cases {
            assert_eq!(f(value), *want, "{name}({value:?})");
        }
    }

    fn prefixed(prefix: &str, msg: &str) -> String {
        format!("{prefix}{msg}")
    }

    #[test]
    fn dns1123_labels() {
        let long = "a".repeat(64);
        let long_dotted = format!("{}.b", "a".repeat(62));
        check(
            "is_dns1123_label",
            is_dns1123_label,
            &[
                ("a", &[]),
                ("ab-c", &[]),
                ("0", &[]),
                ("1-2", &[]),
                (&"a".repeat(63), &[]),
                ("", &[LABEL_REGEX]),
                ("A", &[LABEL_REGEX]),
                ("-a", &[LABEL_REGEX]),
                ("a-", &[LABEL_REGEX]),
                ("a_b", &[LABEL_REGEX]),
                ("a b", &[LABEL_REGEX]),
                ("a\n", &[LABEL_REGEX]),
                ("a.b", &["must not contain dots"]),
                ("a..b", &[LABEL_REGEX]),
                (&long, &["must be no more than 63 characters"]),
                (&long_dotted, &["must be no more than 63 characters", "must not contain dots"]),
                (&format!("{long}_"), &["must be no more than 63 characters", LABEL_REGEX]),
            ],
        );
    }

    #[test]
    fn dns1123_subdomains() {
        let longest = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
        assert_eq!(longest.len(), 253);
        let too_long = format!("{longest}e");
        for (name, f, unit) in [
            ("is_dns1123_subdomain", is_dns1123_subdomain as fn(&str) -> Vec<String>, "characters"),
            ("content::is_dns1123_subdomain", content::is_dns1123_subdomain, "bytes"),
        ] {
            let max = format!("must be no more than 253 {unit}");
            check(
                name,
                f,
                &[
                    ("a", &[]),
                    ("a.b-c.d", &[]),
                    ("1.2.3.4", &[]),
                    ("example.com", &[]),
                    (&longest, &[]),
                    ("", &[SUBDOMAIN_REGEX]),
                    (".a", &[SUBDOMAIN_REGEX]),
                    ("a.", &[SUBDOMAIN_REGEX]),
                    ("a..b", &[SUBDOMAIN_REGEX]),
                    ("a.-b", &[SUBDOMAIN_REGEX]),
                    ("Example.com", &[SUBDOMAIN_REGEX]),
                    ("a_b.com", &[SUBDOMAIN_REGEX]),
                    (&too_long, &[&max]),
                    (&format!("{too_long}."), &[&max, SUBDOMAIN_REGEX]),
                ],
            );
        }
    }

    #[test]
    fn dns1035_labels() {
        check(
            "is_dns1035_label",
            is_dns1035_label,
            &[
                ("a", &[]),
                ("ab-c1", &[]),
                ("", &[DNS1035_REGEX]),
                ("1a", &[DNS1035_REGEX]),
                ("a-", &[DNS1035_REGEX]),
                ("a.b", &[DNS1035_REGEX]),
                ("Ab", &[DNS1035_REGEX]),
                (&"a".repeat(64), &["must be no more than 63 characters"]),
                (&"1".repeat(64), &["must be no more than 63 characters", DNS1035_REGEX]),
            ],
        );
    }

    #[test]
    fn qualified_names() {
        let name_regex = prefixed("name part ", KEY_REGEX);
        let prefix_regex = prefixed("prefix part ", SUBDOMAIN_REGEX);
        let shape = format!(
            "a valid label key {KEY_REGEX} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        );
        let long_prefix = format!("{}/a", "a".repeat(254));
        check(
            "is_qualified_name",
            is_qualified_name,
            &[
                ("simple", &[]),
                ("now-with-dashes", &[]),
                ("1-starts-with-num", &[]),
                ("1234", &[]),
                ("simple/simple", &[]),
                ("now-with-dashes/simple", &[]),
                ("now-with-dashes/now-with-dashes", &[]),
                ("now.with.dots/simple", &[]),
                ("now-with.dashes-and.dots/simple", &[]),
                ("1-num.2-num/3-num", &[]),
                ("1234/5678", &[]),
                ("1.2.3.4/5678", &[]),
                ("Uppercase_Is_OK_123", &[]),
                ("example.com/Uppercase_Is_OK_123", &[]),
                ("requests.storage-foo", &[]),
                (&"a".repeat(63), &[]),
                (&format!("{}/b", "a".repeat(253)), &[]),
                ("", &["name part must be non-empty", &name_regex]),
                ("/", &["prefix part must be non-empty", "name part must be non-empty", &name_regex]),
                ("/simple", &["prefix part must be non-empty"]),
                ("nospecialchars%^=@", &[&name_regex]),
                ("cantendwithadash-", &[&name_regex]),
                ("-cantstartwithadash-", &[&name_regex]),
                ("only/one/slash", &[&shape]),
                ("Example.com/abc", &[&prefix_regex]),
                ("example_com/abc", &[&prefix_regex]),
                ("example.com/", &["name part must be non-empty", &name_regex]),
                (&"a".repeat(64), &["name part must be no more than 63 bytes"]),
                (&long_prefix, &["prefix part must be no more than 253 bytes"]),
            ],
        );
    }

    #[test]
    fn label_values() {
        check(
            "is_valid_label_value",
            is_valid_label_value,
            &[
                ("", &[]),
                ("simple", &[]),
                ("now-with-dashes", &[]),
                ("1-starts-with-num", &[]),
                ("end-with-num-1", &[]),
                ("1234", &[]),
                ("Uppercase_Is_OK_123", &[]),
                ("my_value.1", &[]),
                (&"a".repeat(63), &[]),
                ("nospecialchars%^=@", &[VALUE_REGEX]),
                ("Tama-nui-te-rā.is.Māori.sun", &[VALUE_REGEX]),
                ("\\backslashes\\are\\bad", &[VALUE_REGEX]),
                ("-starts-with-dash", &[VALUE_REGEX]),
                ("ends-with-dash-", &[VALUE_REGEX]),
                (".starts.with.dot", &[VALUE_REGEX]),
                ("a/b", &[VALUE_REGEX]),
                (&"a".repeat(64), &["must be no more than 63 bytes"]),
                (&format!("{}-", "a".repeat(63)), &["must be no more than 63 bytes", VALUE_REGEX]),
            ],
        );
    }

    #[test]
    fn c_identifiers() {
        check(
            "is_c_identifier",
            is_c_identifier,
            &[
                ("a", &[]),
                ("ab", &[]),
                ("abc", &[]),
                ("a1", &[]),
                ("_a", &[]),
                ("a_", &[]),
                ("a_b", &[]),
                ("a_1", &[]),
                ("__123_abc", &[]),
                ("_abc_123", &[]),
                ("A", &[]),
                ("AB", &[]),
                ("AbC", &[]),
                ("A1", &[]),
                ("_A", &[]),
                ("A_", &[]),
                ("A_B", &[]),
                ("A_1", &[]),
                ("__123_ABC", &[]),
                ("_ABC_123", &[]),
                ("", &[C_IDENTIFIER_REGEX]),
                ("1", &[C_IDENTIFIER_REGEX]),
                ("123", &[C_IDENTIFIER_REGEX]),
                ("123abc", &[C_IDENTIFIER_REGEX]),
                ("-a", &[C_IDENTIFIER_REGEX]),
                ("a-b", &[C_IDENTIFIER_REGEX]),
                ("a b", &[C_IDENTIFIER_REGEX]),
                ("1a", &[C_IDENTIFIER_REGEX]),
                ("a.b", &[C_IDENTIFIER_REGEX]),
                ("#a#", &[C_IDENTIFIER_REGEX]),
            ],
        );
    }

    #[test]
    fn message_helpers() {
        assert_eq!(regex_error("m", "re", &[]), "m (regex used for validation is 're')");
        assert_eq!(regex_error("m", "re", &["x"]), "m (e.g. 'x', regex used for validation is 're')");
        assert_eq!(regex_error("m", "re", &["x", "y"]), "m (e.g. 'x',  or 'y', regex used for validation is 're')");
        assert_eq!(max_len_error(5), "must be no more than 5 characters");
        assert_eq!(content::max_len_error(5), "must be no more than 5 bytes");
        assert_eq!(empty_error(), "must be non-empty");
    }
}
