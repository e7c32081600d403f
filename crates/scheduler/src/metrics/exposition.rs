//! Exposition formats of `/metrics`: content negotiation between the Prometheus text format
//! 0.0.4 (upstream's default) and OpenMetrics 1.0 (when the `Accept` header asks for it).
//!
//! `prometheus-client` only encodes OpenMetrics, so the 0.0.4 text is derived from its output
//! line by line ([`openmetrics_to_text`]). The two formats carry the same samples; they differ in
//! the family name of counters (`# TYPE x_total counter` vs `# TYPE x counter`), the `# UNIT`
//! and `# EOF` lines, exemplars, and number formatting (client_golang prints Go's shortest `%g`:
//! `le="16"`, `1e-05`, `1.764e+09`), which the conversion reproduces.

use super::registry::Metadata;

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

    /// Renders an OpenMetrics exposition (what `prometheus-client` produces) in this format, as
    /// client_golang's `Gather` + encoder would: families sorted by name, empty ones left out,
    /// upstream's names and help texts from `meta` (families missing there keep theirs).
    pub fn render(self, openmetrics: &str, meta: &Metadata) -> String {
        let mut families = parse_families(openmetrics, meta);
        families.retain(|f| !f.samples.is_empty());
        families.sort_by(|a, b| a.text_name.cmp(&b.text_name));
        let mut out = String::with_capacity(openmetrics.len());
        for f in &families {
            match self {
                Format::Text => f.write_text(&mut out),
                Format::OpenMetrics => f.write_openmetrics(&mut out),
            }
        }
        if self == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
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

/// One family of an OpenMetrics exposition.
#[derive(Debug)]
struct ParsedFamily<'a> {
    /// The name on `# TYPE` in OpenMetrics (counters without `_total`).
    om_name: &'a str,
    /// The family name in the text format 0.0.4 (upstream's name).
    text_name: String,
    /// OpenMetrics type.
    om_type: &'a str,
    /// Upstream's help text, or the OpenMetrics one (still escaped) when unknown.
    help: Option<HelpText<'a>>,
    /// `# UNIT` line, if any.
    unit: Option<&'a str>,
    samples: Vec<&'a str>,
}

#[derive(Debug)]
enum HelpText<'a> {
    /// Unescaped, from the registry's metadata.
    Upstream(&'a str),
    /// As found in the OpenMetrics text (escaped).
    Escaped(&'a str),
}

fn parse_families<'a>(openmetrics: &'a str, meta: &'a Metadata) -> Vec<ParsedFamily<'a>> {
    let mut families: Vec<ParsedFamily<'a>> = Vec::new();
    // HELP precedes TYPE in OpenMetrics; the family starts at whichever comes first.
    let mut pending_help: Option<(&'a str, &'a str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            pending_help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let upstream = meta.get(name);
            let text_name = match (upstream, ty) {
                (Some(m), _) => m.name.clone(),
                (None, "counter") => format!("{name}_total"),
                (None, "info") => format!("{name}_info"),
                (None, _) => name.to_string(),
            };
            let help = match (upstream, pending_help.take()) {
                (Some(m), _) => Some(HelpText::Upstream(&m.help)),
                (None, Some((help_name, help))) if help_name == name => Some(HelpText::Escaped(help)),
                (None, _) => None,
            };
            families.push(ParsedFamily {
                om_name: name,
                text_name,
                om_type: ty,
                help,
                unit: None,
                samples: Vec::new(),
            });
            continue;
        }
        if let Some(unit) = line.strip_prefix("# UNIT ") {
            if let Some(f) = families.last_mut() {
                f.unit = Some(unit);
            }
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(f) = families.last_mut() {
            f.samples.push(line);
        }
    }
    families
}

impl ParsedFamily<'_> {
    fn write_openmetrics(&self, out: &mut String) {
        match &self.help {
            Some(HelpText::Upstream(h)) => {
                let escaped = h.replace('\\', "\\\\").replace('\n', "\\n").replace('"', "\\\"");
                out.push_str(&format!("# HELP {} {escaped}\n", self.om_name));
            }
            Some(HelpText::Escaped(h)) => out.push_str(&format!("# HELP {} {h}\n", self.om_name)),
            None => {}
        }
        out.push_str(&format!("# TYPE {} {}\n", self.om_name, self.om_type));
        if let Some(unit) = self.unit {
            out.push_str(&format!("# UNIT {unit}\n"));
        }
        for s in &self.samples {
            out.push_str(s);
            out.push('\n');
        }
    }

    fn write_text(&self, out: &mut String) {
        let ty = match self.om_type {
            "counter" => "counter",
            "info" | "stateset" => "gauge",
            "gaugehistogram" => "histogram",
            "unknown" => "untyped",
            other => other,
        };
        match &self.help {
            // 0.0.4 escapes only backslashes and newlines in help texts.
            Some(HelpText::Upstream(h)) => {
                let escaped = h.replace('\\', "\\\\").replace('\n', "\\n");
                out.push_str(&format!("# HELP {} {escaped}\n", self.text_name));
            }
            Some(HelpText::Escaped(h)) => out.push_str(&format!("# HELP {} {}\n", self.text_name, text_help(h))),
            None => {}
        }
        out.push_str(&format!("# TYPE {} {ty}\n", self.text_name));
        // A counter's samples are `<om_name>_total` in OpenMetrics, the family name in 0.0.4.
        let counter_sample = (self.om_type == "counter").then(|| format!("{}_total", self.om_name));
        for line in &self.samples {
            let Some(mut sample) = convert_sample(line) else { continue };
            if let Some(om_sample) = &counter_sample {
                if let Some(rest) = sample.strip_prefix(om_sample.as_str()) {
                    if rest.starts_with(['{', ' ']) {
                        sample = format!("{}{rest}", self.text_name);
                    }
                }
            }
            out.push_str(&sample);
            out.push('\n');
        }
    }
}

/// Converts an OpenMetrics text exposition into the Prometheus text format 0.0.4 (families
/// not described by a registry's metadata).
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    Format::Text.render(openmetrics, &Metadata::new())
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
        // Sorted by family name, as client_golang's Gather does.
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP scheduler_pending_pods [STABLE] Pending.\n\
             # TYPE scheduler_pending_pods gauge\n\
             scheduler_pending_pods{queue=\"active\"} 0\n\
             # HELP scheduler_schedule_attempts_total [STABLE] Number of attempts.\n\
             # TYPE scheduler_schedule_attempts_total counter\n\
             scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 3\n"
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

    #[test]
    fn metadata_restores_upstream_names_and_help_and_drops_empty_families() {
        use super::super::registry::FamilyMeta;
        let om = "# HELP authentication_attempts [ALPHA] Counter of authenticated attempts..\n\
                  # TYPE authentication_attempts counter\n\
                  authentication_attempts_total{result=\"success\"} 2\n\
                  # HELP b_total_counter [ALPHA] x \\\"q\\\".\n\
                  # TYPE b_total_counter counter\n\
                  b_total_counter_total 1\n\
                  # HELP a_empty [ALPHA] Nothing yet..\n\
                  # TYPE a_empty gauge\n\
                  # EOF\n";
        let meta: Metadata = [
            ("authentication_attempts", "authentication_attempts", "[ALPHA] Counter of authenticated attempts."),
            ("b_total_counter", "b_total_counter_total", "[ALPHA] x \"q\""),
            ("a_empty", "a_empty", "[ALPHA] Nothing yet."),
        ]
        .into_iter()
        .map(|(om, name, help)| (om.to_string(), FamilyMeta { name: name.into(), help: help.into() }))
        .collect();
        // A counter upstream names without `_total` keeps its bare name in 0.0.4.
        assert_eq!(
            Format::Text.render(om, &meta),
            "# HELP authentication_attempts [ALPHA] Counter of authenticated attempts.\n\
             # TYPE authentication_attempts counter\n\
             authentication_attempts{result=\"success\"} 2\n\
             # HELP b_total_counter_total [ALPHA] x \"q\"\n\
             # TYPE b_total_counter_total counter\n\
             b_total_counter_total 1\n"
        );
        assert_eq!(
            Format::OpenMetrics.render(om, &meta),
            "# HELP authentication_attempts [ALPHA] Counter of authenticated attempts.\n\
             # TYPE authentication_attempts counter\n\
             authentication_attempts_total{result=\"success\"} 2\n\
             # HELP b_total_counter [ALPHA] x \\\"q\\\"\n\
             # TYPE b_total_counter counter\n\
             b_total_counter_total 1\n\
             # EOF\n"
        );
    }
}
