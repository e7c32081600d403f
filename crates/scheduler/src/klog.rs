//! klog-compatible log lines for the tracing subscriber (`--logging-format`): the `text`
//! header `I1125 05:52:08.123456    4242 schedule_one.rs:481] "msg" key="value"` and
//! component-base's zap JSON shape `{"ts":<epoch ms>,"caller":"dir/file:line","msg":..,"v":N,..}`.
//!
//! Conventions that carry klog's semantics through tracing fields:
//! - `v = N` sets the klog verbosity of an event; events above `-v` are dropped. Without it,
//!   INFO/WARN/ERROR are V(0), DEBUG V(4) and TRACE V(5).
//! - `error`/`err` become klog's `err` key; on ERROR events it is placed as `logger.Error`
//!   does (text: right after the message; JSON: after the other pairs).
//! - A value whose `Debug` form is a JSON object (see [`KObj`]) is embedded as an object in
//!   JSON; `{"name","namespace"}` objects print as `namespace/name` in text, as `klog.KObj`.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Which line layout to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// klog's text header and `key=value` pairs.
    Text,
    /// component-base's JSON lines.
    Json,
}

/// A [`FormatEvent`] writing klog lines; `verbosity` is `-v`.
#[derive(Debug, Clone)]
pub struct KlogFormat {
    format: Format,
    verbosity: u32,
    pid: u32,
}

impl KlogFormat {
    /// A formatter for `format` that drops events whose `v` exceeds `verbosity`.
    pub fn new(format: Format, verbosity: u32) -> Self {
        KlogFormat { format, verbosity, pid: std::process::id() }
    }
}

pub use ksched_framework::kobj::KObj;

/// One recorded field value.
enum Value {
    Str(String),
    Json(serde_json::Value),
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    v: Option<u32>,
    pairs: Vec<(&'static str, Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let s = format!("{value:?}");
        match field.name() {
            "message" => self.message = Some(s),
            "error" | "err" => self.pairs.push(("err", Value::Str(s))),
            name => {
                let v = match serde_json::from_str::<serde_json::Value>(&s) {
                    Ok(obj @ serde_json::Value::Object(_)) if s.starts_with('{') => Value::Json(obj),
                    _ => Value::Str(s),
                };
                self.pairs.push((name, v));
            }
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = Some(value.to_string()),
            "error" | "err" => self.pairs.push(("err", Value::Str(value.to_string()))),
            name => self.pairs.push((name, Value::Str(value.to_string()))),
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "v" {
            self.v = u32::try_from(value).ok();
            return;
        }
        self.number(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.number(field, serde_json::Number::from_f64(value).map_or(serde_json::Value::Null, Into::into));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.pairs.push((field.name(), Value::Json(value.into())));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let name = if matches!(field.name(), "error" | "err") { "err" } else { field.name() };
        self.pairs.push((name, Value::Str(value.to_string())));
    }
}

impl Fields {
    fn number(&mut self, field: &Field, value: serde_json::Value) {
        if field.name() == "v" {
            self.v = value.as_u64().and_then(|n| u32::try_from(n).ok());
        } else {
            self.pairs.push((field.name(), Value::Json(value)));
        }
    }
}

/// klog's text rendering of a value: Go-quoted strings, bare numbers and bools,
/// `namespace/name` for object references.
fn text_value(out: &mut String, v: &Value) {
    match v {
        Value::Str(s) => out.push_str(&go_quote(s)),
        Value::Json(serde_json::Value::Object(o)) if o.contains_key("name") && o.len() <= 2 => {
            let name = o.get("name").and_then(|n| n.as_str()).unwrap_or("");
            let ns = o.get("namespace").and_then(|n| n.as_str()).unwrap_or("");
            let r = if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") };
            out.push_str(&go_quote(&r));
        }
        Value::Json(j) => {
            let _ = write!(out, "{j}");
        }
    }
}

/// Go's `%q` for the printable subset klog writes (JSON escaping is the same for it).
fn go_quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

impl<S, N> FormatEvent<S, N> for KlogFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut f = Fields::default();
        event.record(&mut f);
        let meta = event.metadata();
        let level = *meta.level();
        let v = f.v.unwrap_or(match level {
            Level::TRACE => 5,
            Level::DEBUG => 4,
            _ => 0,
        });
        let is_error = level == Level::ERROR;
        if !is_error && v > self.verbosity {
            return Ok(());
        }
        let file = meta.file().unwrap_or("???");
        let line = meta.line().unwrap_or(0);
        let msg = f.message.unwrap_or_default();
        // `logger.Error` puts its error apart from the pairs; an `err` pair on an info line stays put.
        let mut pairs = f.pairs;
        let err = match pairs.iter().position(|(k, _)| *k == "err") {
            Some(i) if is_error => match pairs.remove(i).1 {
                Value::Str(s) => Some(s),
                Value::Json(j) => Some(j.to_string()),
            },
            _ => None,
        };
        let mut out = String::with_capacity(128);
        match self.format {
            Format::Text => {
                let now = chrono::Local::now();
                let letter = match level {
                    Level::ERROR => 'E',
                    Level::WARN => 'W',
                    _ => 'I',
                };
                let base = file.rsplit('/').next().unwrap_or(file);
                let _ = write!(
                    out,
                    "{letter}{} {:>7} {base}:{line}] {}",
                    now.format("%m%d %H:%M:%S%.6f"),
                    self.pid,
                    go_quote(&msg)
                );
                if let Some(e) = &err {
                    let _ = write!(out, " err={}", go_quote(e));
                }
                for (k, val) in &pairs {
                    let _ = write!(out, " {k}=");
                    text_value(&mut out, val);
                }
            }
            Format::Json => {
                let ts = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0) as f64 / 1e6;
                let mut parts = file.rsplit('/');
                let base = parts.next().unwrap_or(file);
                let caller = match parts.next() {
                    Some(dir) => format!("{dir}/{base}:{line}"),
                    None => format!("{base}:{line}"),
                };
                // Written by hand: the keys keep zap's order (serde_json's map would sort them).
                let _ = write!(out, "{{\"ts\":{ts},\"caller\":{},\"msg\":{}", go_quote(&caller), go_quote(&msg));
                if !is_error {
                    let _ = write!(out, ",\"v\":{v}");
                }
                for (k, val) in &pairs {
                    let val = match val {
                        Value::Str(s) => go_quote(s),
                        Value::Json(j) => j.to_string(),
                    };
                    let _ = write!(out, ",{}:{val}", go_quote(k));
                }
                if let Some(e) = &err {
                    let _ = write!(out, ",\"err\":{}", go_quote(e));
                }
                out.push('}');
            }
        }
        writeln!(writer, "{out}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn capture(format: Format, verbosity: u32, f: impl FnOnce()) -> Vec<String> {
        let buf = Buf::default();
        let w = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(Level::TRACE)
            .event_format(KlogFormat::new(format, verbosity))
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::with_default(sub, f);
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        out.lines().map(str::to_string).collect()
    }

    /// The top-level keys appear in this order and are the only ones.
    fn assert_key_order(line: &str, keys: &[&str]) {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(j.as_object().unwrap().len(), keys.len(), "{line}");
        let pos: Vec<usize> = keys.iter().map(|k| line.find(&format!("\"{k}\":")).expect(k)).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "keys out of order in {line}");
    }

    fn bound() {
        let pod = KObj { namespace: "default", name: "web-1" };
        tracing::info!(v = 2, pod = ?pod, node = "n1", evaluatedNodes = 3, feasibleNodes = 2, "Successfully bound pod to node");
    }

    #[test]
    fn json_lines_have_components_base_keys_in_order() {
        let lines = capture(Format::Json, 2, bound);
        assert_eq!(lines.len(), 1);
        let j: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_key_order(&lines[0], &["ts", "caller", "msg", "v", "pod", "node", "evaluatedNodes", "feasibleNodes"]);
        assert_eq!(j["msg"], "Successfully bound pod to node");
        assert_eq!(j["v"], 2);
        assert_eq!(j["pod"], serde_json::json!({"name": "web-1", "namespace": "default"}));
        assert_eq!(j["evaluatedNodes"], 3);
        assert!(j["caller"].as_str().unwrap().starts_with("src/klog.rs:"), "{}", j["caller"]);
        // Epoch milliseconds, as component-base's encoder writes them.
        let ms = j["ts"].as_f64().unwrap();
        let now = chrono::Utc::now().timestamp_millis() as f64;
        assert!((now - ms).abs() < 60_000.0, "ts {ms} is not epoch milliseconds (now {now})");
    }

    #[test]
    fn events_above_the_verbosity_are_dropped() {
        assert!(capture(Format::Json, 1, bound).is_empty());
        assert!(capture(Format::Text, 0, || tracing::debug!("x")).is_empty());
        assert_eq!(capture(Format::Text, 4, || tracing::debug!("x")).len(), 1);
    }

    #[test]
    fn errors_use_klogs_err_key_and_no_verbosity() {
        let lines = capture(Format::Json, 0, || {
            tracing::error!(lock = "kube-system/kube-scheduler", error = "boom", "Failed to update lease")
        });
        let j: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_key_order(&lines[0], &["ts", "caller", "msg", "lock", "err"]);
        assert!(j.get("v").is_none(), "{}", lines[0]);
        assert_eq!(j["err"], "boom");
        let text = capture(Format::Text, 0, || tracing::error!(lock = "l", error = "boom", "Failed to update lease"));
        assert!(text[0].starts_with('E'), "{}", text[0]);
        assert!(text[0].ends_with("] \"Failed to update lease\" err=\"boom\" lock=\"l\""), "{}", text[0]);
    }

    #[test]
    fn text_lines_have_klogs_header_and_pairs() {
        let lines = capture(Format::Text, 2, bound);
        let l = &lines[0];
        let (header, rest) = l.split_once("] ").unwrap();
        assert!(header.starts_with('I'), "{l}");
        // I<MMDD> <HH:MM:SS.micros> <pid, width 7> <file>:<line>
        let fields: Vec<&str> = header[1..].split_whitespace().collect();
        assert_eq!(fields[0].len(), 4, "{l}");
        assert_eq!(fields[1].len(), 15, "{l}");
        assert_eq!(fields[2], std::process::id().to_string());
        assert!(fields[3].starts_with("klog.rs:"), "{l}");
        assert_eq!(
            rest,
            r#""Successfully bound pod to node" pod="default/web-1" node="n1" evaluatedNodes=3 feasibleNodes=2"#
        );
    }
}
