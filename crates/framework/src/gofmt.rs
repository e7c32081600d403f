//! Go's text conventions that upstream messages show: `strconv.Quote` and the aggregate error
//! format. Config validation, flag parsing and plugin args all print through these.

/// Go's `strconv.Quote`: double quotes, `\"`/`\\`, C escapes and `\x`/`\u` for non-printables.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || c == '\u{feff}' => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Upstream's aggregate error text (`utilerrors.NewAggregate(errs).Error()`): duplicates dropped,
/// a single message as is, several comma-separated in brackets; "" for none.
pub fn aggregate(errs: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::with_capacity(errs.len());
    for e in errs {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Go's `time.Duration.String()`: `5m0s`, `1h2m3.5s`, `250ms`, `1.5µs`, `0s`.
pub fn duration(d: std::time::Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    // A fraction with trailing zeros (and a bare point) removed.
    let frac = |whole: u128, rem: u128, digits: usize| -> String {
        let f = format!("{rem:0digits$}");
        let f = f.trim_end_matches('0');
        if f.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{f}")
        }
    };
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", frac(ns / 1_000, ns % 1_000, 3));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", frac(ns / 1_000_000, ns % 1_000_000, 6));
    }
    let secs = ns / 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let sec = format!("{}s", frac(s, ns % 1_000_000_000, 9));
    match (h, m) {
        (0, 0) => sec,
        (0, m) => format!("{m}m{sec}"),
        (h, m) => format!("{h}h{m}m{sec}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_go() {
        use std::time::Duration as D;
        assert_eq!(duration(D::ZERO), "0s");
        assert_eq!(duration(D::from_secs(300)), "5m0s");
        assert_eq!(duration(D::from_secs(900)), "15m0s");
        assert_eq!(duration(D::from_millis(3_723_500)), "1h2m3.5s");
        assert_eq!(duration(D::from_millis(250)), "250ms");
        assert_eq!(duration(D::from_nanos(1_500)), "1.5µs");
        assert_eq!(duration(D::from_nanos(7)), "7ns");
        assert_eq!(duration(D::from_secs(1)), "1s");
    }

    #[test]
    fn quote_escapes_like_go() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("\u{7}\n\u{1}"), r#""\a\n\x01""#);
    }

    #[test]
    fn aggregate_like_upstream() {
        assert_eq!(aggregate(&[]), "");
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
