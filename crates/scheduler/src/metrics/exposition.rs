//! Exposition formats of `/metrics`: content negotiation between the Prometheus text format
//! 0.0.4 (upstream's default) and OpenMetrics 1.0 (when the `Accept` header asks for it).
//!
//! `prometheus-client` only encodes OpenMetrics, so the 0.0.4 text is derived from its output
//! line by line ([`openmetrics_to_text`]). The two formats carry the same samples; they differ in
//! the family name of counters (`# TYPE x_total counter` vs `# TYPE x counter`), the `# UNIT`
//! and `# EOF` lines, exemplars, and number formatting (client_golang prints Go's shortest `%g`:
//! `le="16"`, `1e-05`, `1.764e+09`), which the conversion reproduces.

/// `Content-Type` of an OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `Content-Type` of upstream's default exposition (client_golang's `FmtText` with the default
/// name-escaping scheme).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores";

/// An exposition format `/metrics` can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
}

impl Format {
    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }

    /// Renders an OpenMetrics exposition (what `prometheus-client` produces) in this format.
    pub fn render(self, openmetrics: &str) -> String {
        match self {
            Format::Text => openmetrics_to_text(openmetrics),
            Format::OpenMetrics => openmetrics.to_string(),
        }
    }
}

/// Picks the format from an `Accept` header the way `expfmt.NegotiateIncludingOpenMetrics`
/// does: media ranges by descending `q` (ties keep their order), the first one we can serve
/// wins; nothing servable (or no header) gives the text format. The protobuf format is not
/// offered, so a client asking for it first gets its next choice.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else { return Format::Text };
    let mut ranges: Vec<(f32, Option<Format>)> = Vec::new();
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut q = 1.0f32;
        let mut version = None;
        for p in parts {
            let Some((k, v)) = p.split_once('=') else { continue };
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.trim().parse().unwrap_or(0.0),
                "version" => version = Some(v.trim().trim_matches('"').to_string()),
                _ => {}
            }
        }
        let format = match (media.as_str(), version.as_deref()) {
            ("application/openmetrics-text", None | Some("1.0.0") | Some("0.0.1")) => Some(Format::OpenMetrics),
            ("text/plain", None | Some("0.0.4")) => Some(Format::Text),
            _ => None,
        };
        if q > 0.0 {
            ranges.push((q, format));
        }
    }
    // A stable sort keeps the client's order among equal weights.
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges.into_iter().find_map(|(_, f)| f).unwrap_or(Format::Text)
}

/// Formats a sample value as client_golang's text encoder does (`strconv.FormatFloat(v, 'g',
/// -1, 64)`): shortest round-trip digits, exponent form below 1e-4 and from 1e6 on.
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if v == 0.0 {
        return "0".into();
    }
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    if (-4..6).contains(&exp) {
        // Rust's Display is the shortest round-trip fixed notation, like Go's %f on those digits.
        return format!("{v}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Converts an OpenMetrics text exposition into the Prometheus text format 0.0.4.
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The HELP line precedes TYPE in OpenMetrics; its family name depends on the type.
    let mut pending_help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, help));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (family, ty) = match ty {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" => (name.to_string(), "gauge"),
                "gaugehistogram" => (name.to_string(), "histogram"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            if let Some((help_name, help)) = pending_help.take() {
                if help_name == name {
                    out.push_str(&format!("# HELP {family} {}\n", text_help(help)));
                }
            }
            out.push_str(&format!("# TYPE {family} {ty}\n"));
            continue;
        }
        if line.starts_with('#') {
            // # UNIT, # EOF and comments have no 0.0.4 counterpart.
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if let Some(sample) = convert_sample(line) {
            out.push_str(&sample);
            out.push('\n');
        }
    }
    out
}

/// OpenMetrics escapes `"` in help texts, 0.0.4 only `\` and newlines.
fn text_help(help: &str) -> String {
    help.replace("\\\"", "\"")
}

/// `name{labels} value [timestamp] [# exemplar]` → the 0.0.4 sample line, or `None` for samples
/// 0.0.4 does not have (`_created`).
fn convert_sample(line: &str) -> Option<String> {
    let (series, rest) = split_series(line)?;
    let name_end = series.find('{').unwrap_or(series.len());
    if series[..name_end].ends_with("_created") {
        return None;
    }
    // Drop the exemplar.
    let rest = rest.split(" # ").next().unwrap_or(rest);
    let mut fields = rest.split_whitespace();
    let value = fields.next()?;
    let value = value.parse::<f64>().map(go_float).unwrap_or_else(|_| value.to_string());
    let mut out = String::with_capacity(line.len());
    out.push_str(&series[..name_end]);
    if name_end < series.len() {
        out.push_str(&convert_labels(&series[name_end..]));
    }
    out.push(' ');
    out.push_str(&value);
    // OpenMetrics timestamps are seconds, 0.0.4 milliseconds.
    if let Some(ts) = fields.next().and_then(|t| t.parse::<f64>().ok()) {
        out.push(' ');
        out.push_str(&((ts * 1000.0).round() as i64).to_string());
    }
    Some(out)
}

/// Splits a sample line after its label set (label values may contain spaces and braces).
fn split_series(line: &str) -> Option<(&str, &str)> {
    let bytes = line.as_bytes();
    let mut in_quotes = false;
    let mut escaped = false;
    let mut depth = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if in_quotes {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_quotes = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_quotes = true,
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b' ' if depth == 0 => return Some((&line[..i], line[i + 1..].trim_start())),
            _ => {}
        }
    }
    None
}

/// Rewrites a `{...}` label set as client_golang prints it: `le` / `quantile` last (after the
/// family's own labels) and their numeric values in Go's formatting (`16.0` → `16`).
fn convert_labels(labels: &str) -> String {
    let body = labels.strip_prefix('{').and_then(|l| l.strip_suffix('}')).unwrap_or(labels);
    let mut own: Vec<(&str, &str)> = Vec::new();
    let mut bound: Option<(&str, String)> = None;
    let mut rest = body;
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq].trim_start_matches(',').trim();
        let after = &rest[eq + 2..];
        let end = value_end(after);
        let value = &after[..end];
        if key == "le" || key == "quantile" {
            let v = value.parse::<f64>().map(go_float).unwrap_or_else(|_| value.to_string());
            bound = Some((key, v));
        } else {
            own.push((key, value));
        }
        rest = after.get(end + 1..).unwrap_or("");
    }
    let mut out = String::with_capacity(labels.len() + 2);
    out.push('{');
    for (i, (k, v)) in own.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{k}=\"{v}\""));
    }
    if let Some((k, v)) = bound {
        if !own.is_empty() {
            out.push(',');
        }
        out.push_str(&format!("{k}=\"{v}\""));
    }
    out.push('}');
    out
}

/// Index of the closing quote of a label value.
fn value_end(s: &str) -> usize {
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return i,
            _ => {}
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_matches_strconv_g_shortest() {
        for (v, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (16.0, "16"),
            (-3.0, "-3"),
            (0.001, "0.001"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000015, "1.5e-05"),
            (0.1 + 0.2, "0.30000000000000004"),
            (3e-7 + 1e-8, "3.1e-07"),
            (5242.88, "5242.88"),
            (999999.0, "999999"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1764031234.56, "1.76403123456e+09"),
            (1e21, "1e+21"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(go_float(v), want, "{v:?}");
        }
    }

    #[test]
    fn accept_header_negotiates_format() {
        let prometheus_default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, want) in [
            (None, Format::Text),
            (Some(""), Format::Text),
            (Some("*/*"), Format::Text),
            (Some("text/plain"), Format::Text),
            (Some("text/plain;version=0.0.4"), Format::Text),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (Some("application/openmetrics-text; version=1.0.0"), Format::OpenMetrics),
            (Some(prometheus_default), Format::OpenMetrics),
            (Some("text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"), Format::Text),
            (Some("text/plain;q=0.2,application/openmetrics-text;q=0.5"), Format::OpenMetrics),
            (Some("application/openmetrics-text;version=2.0.0,text/plain;q=0.5"), Format::Text),
            (Some("application/openmetrics-text;q=0"), Format::Text),
            (
                Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;q=0.7"),
                Format::OpenMetrics,
            ),
        ] {
            assert_eq!(negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn counters_gain_total_in_family_name_and_eof_goes() {
        let om = "# HELP scheduler_schedule_attempts [STABLE] Number of attempts.\n\
                  # TYPE scheduler_schedule_attempts counter\n\
                  scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 3\n\
                  scheduler_schedule_attempts_created{profile=\"default-scheduler\",result=\"scheduled\"} 1700000000.5\n\
                  # HELP scheduler_pending_pods [STABLE] Pending.\n\
                  # TYPE scheduler_pending_pods gauge\n\
                  scheduler_pending_pods{queue=\"active\"} 0\n\
                  # EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts.\n\
             # TYPE scheduler_schedule_attempts_total counter\n\
             scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 3\n\
             # HELP scheduler_pending_pods [STABLE] Pending.\n\
             # TYPE scheduler_pending_pods gauge\n\
             scheduler_pending_pods{queue=\"active\"} 0\n"
        );
    }

    #[test]
    fn histogram_bounds_and_sums_use_go_number_format() {
        let om = "# HELP h Help.\n# TYPE h histogram\n# UNIT h seconds\n\
                  h_sum{plugin=\"A\"} 1.0\nh_count{plugin=\"A\"} 2\n\
                  h_bucket{le=\"1e-5\",plugin=\"A\"} 0\nh_bucket{le=\"16.0\",plugin=\"A\"} 2\n\
                  h_bucket{le=\"+Inf\",plugin=\"A\"} 2 # {trace_id=\"x\"} 1.0\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP h Help.\n# TYPE h histogram\n\
             h_sum{plugin=\"A\"} 1\nh_count{plugin=\"A\"} 2\n\
             h_bucket{plugin=\"A\",le=\"1e-05\"} 0\nh_bucket{plugin=\"A\",le=\"16\"} 2\n\
             h_bucket{plugin=\"A\",le=\"+Inf\"} 2\n"
        );
    }

    #[test]
    fn label_values_with_spaces_quotes_and_le_names_survive() {
        let om = "# TYPE g gauge\ng{le_not=\"1.0\",msg=\"a \\\"b\\\" } c\"} 2.5\n";
        assert_eq!(openmetrics_to_text(om), "# TYPE g gauge\ng{le_not=\"1.0\",msg=\"a \\\"b\\\" } c\"} 2.5\n");
    }

    #[test]
    fn info_and_unknown_types_map_to_gauge_and_untyped() {
        let om = "# HELP b Build.\n# TYPE b info\nb_info{v=\"1\"} 1\n# TYPE u unknown\nu 7\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP b_info Build.\n# TYPE b_info gauge\nb_info{v=\"1\"} 1\n# TYPE u untyped\nu 7\n"
        );
    }

    #[test]
    fn help_quotes_are_unescaped() {
        let om = "# HELP g Says \\\"hi\\\".\n# TYPE g gauge\ng 1\n";
        assert_eq!(openmetrics_to_text(om), "# HELP g Says \"hi\".\n# TYPE g gauge\ng 1\n");
    }
}
