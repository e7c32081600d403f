//! The trace's two CSV files (the format of Alibaba's `cluster-trace-gpu-v2023`, as the FGD
//! paper's simulator reads it): a node list `sn,cpu_milli,memory_mib,gpu,model` and a pod list
//! `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time]`. Columns are found by their header name, so their order is
//! free and unknown columns are ignored; a malformed row is refused naming the file, the line
//! and the column.
//!
//! Traces as people export them are read too: integers written as floats (`6000.0`), times in
//! seconds, milliseconds or ISO-8601 (detected unless `--time-unit` says), a pod name used by
//! several rows (a recreated pod: each row is its own pod), and `gpu_spec` models no node has
//! (a warning). What the reading decided is returned as notes for the user, never silently.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::Context as _;
use ksched_framework::validation;

/// Milli-GPUs of one whole GPU.
pub const GPU_MILLI: i64 = 1000;

/// One GPU node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNode {
    /// `sn`: the node's name.
    pub name: String,
    /// `cpu_milli`: allocatable cpu, millicores.
    pub cpu_milli: i64,
    /// `memory_mib`: allocatable memory, MiB.
    pub memory_mib: i64,
    /// `gpu`: number of GPUs.
    pub gpus: i64,
    /// `model`: the GPU model (empty on a node without GPUs).
    pub model: String,
}

/// One pod of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePod {
    /// `name` (made unique: see [`parse_pods_with`]).
    pub name: String,
    /// `cpu_milli`: cpu request, millicores.
    pub cpu_milli: i64,
    /// `memory_mib`: memory request, MiB.
    pub memory_mib: i64,
    /// `num_gpu`: GPUs the pod uses.
    pub num_gpu: i64,
    /// `gpu_milli`: the share of each of those GPUs it uses (1000 = whole).
    pub gpu_milli: i64,
    /// `gpu_spec`: the GPU models it accepts (empty: any).
    pub gpu_spec: Vec<String>,
    /// `qos` (informational).
    pub qos: String,
    /// `pod_phase` (informational: the phase the pod ended the trace in).
    pub pod_phase: String,
    /// `creation_time` in milliseconds: from the trace's start for numbers, since the Unix
    /// epoch for ISO-8601 times (only differences between times matter).
    pub creation_ms: Option<i64>,
    /// `deletion_time`, milliseconds on the same scale (empty: still running when the trace ended).
    pub deletion_ms: Option<i64>,
    /// `scheduled_time`, milliseconds on the same scale (empty: never scheduled).
    pub scheduled_ms: Option<i64>,
}

impl TracePod {
    /// A pod with these requests and nothing else (tests).
    #[cfg(test)]
    pub fn with_requests(
        name: &str,
        cpu_milli: i64,
        memory_mib: i64,
        num_gpu: i64,
        gpu_milli: i64,
        spec: &[&str],
    ) -> Self {
        TracePod {
            name: name.into(),
            cpu_milli,
            memory_mib,
            num_gpu,
            gpu_milli,
            gpu_spec: spec.iter().map(|s| s.to_string()).collect(),
            qos: String::new(),
            pod_phase: String::new(),
            creation_ms: None,
            deletion_ms: None,
            scheduled_ms: None,
        }
    }

    /// The pod's GPU request in milli-GPUs (`num_gpu * gpu_milli`).
    pub fn gpu_request_milli(&self) -> i64 {
        self.num_gpu * self.gpu_milli
    }

    /// True when the pod shares its GPU with others (uses part of one).
    pub fn shares_gpu(&self) -> bool {
        self.num_gpu > 0 && self.gpu_milli < GPU_MILLI
    }
}

/// How a pod list writes its times (`--time-unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeUnit {
    /// Numbers of seconds (the Alibaba trace's own).
    S,
    /// Numbers of milliseconds.
    Ms,
    /// ISO-8601 date-times: `2023-05-01T12:00:00Z`, an offset (`+02:00`), fractional seconds.
    Iso,
    /// Detected from the values; the detection is reported.
    #[default]
    Auto,
}

/// A parsed trace: the cluster and its pods.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Nodes, in file order.
    pub nodes: Vec<TraceNode>,
    /// Pods, in file order.
    pub pods: Vec<TracePod>,
}

impl Trace {
    /// Reads both files with times in `unit`; also returns the notes for the user (what was
    /// detected, renamed, or is suspicious), one line each.
    pub fn load_with(nodes: &Path, pods: &Path, unit: TimeUnit) -> anyhow::Result<(Trace, Vec<String>)> {
        let read = |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
        let pods_file = pods.display().to_string();
        let list = parse_pods_with(&read(pods)?, &pods_file, unit)?;
        let trace = Trace { nodes: parse_nodes(&read(nodes)?, &nodes.display().to_string())?, pods: list.pods };
        let mut notes = list.notes;
        notes.extend(trace.absent_models_note(&list.lines, &pods_file));
        Ok((trace, notes))
    }

    /// GPU capacity of the cluster, in milli-GPUs.
    pub fn gpu_capacity_milli(&self) -> i64 {
        self.nodes.iter().map(|n| n.gpus * GPU_MILLI).sum()
    }

    /// A warning for `gpu_spec` models no node has (`lines[i]` is pod `i`'s line). Such a pod
    /// stays: it cannot use the absent models, as in a real cluster, and one naming only absent
    /// models fits nowhere and counts as failed demand. Usually a typo or another cluster's
    /// model, so it is said, with the lines.
    fn absent_models_note(&self, lines: &[usize], file: &str) -> Option<String> {
        let models: HashSet<&str> = self.nodes.iter().filter(|n| n.gpus > 0).map(|n| n.model.as_str()).collect();
        let mut absent: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut none_left = Vec::new();
        for (p, &line) in self.pods.iter().zip(lines) {
            if p.num_gpu == 0 || p.gpu_spec.is_empty() {
                continue;
            }
            for m in p.gpu_spec.iter().filter(|m| !models.contains(m.as_str())) {
                absent.entry(m).or_default().push(line);
            }
            if !p.gpu_spec.iter().any(|m| models.contains(m.as_str())) {
                none_left.push(line);
            }
        }
        if absent.is_empty() {
            return None;
        }
        let mut known: Vec<&str> = models.into_iter().collect();
        known.sort_unstable();
        let listed: Vec<String> = absent.iter().map(|(m, l)| format!("{m} ({})", lines_text(l))).collect();
        let mut note = format!(
            "{file}: warning: gpu_spec names GPU model(s) no node has (the nodes have {}): {}; those pods cannot use them",
            known.join(", "),
            listed.join(", ")
        );
        if !none_left.is_empty() {
            note.push_str(&format!(
                ", and {} of them accept no model of the nodes, so they fit nowhere and count as failed demand ({})",
                none_left.len(),
                lines_text(&none_left)
            ));
        }
        Some(note)
    }
}

/// `line 3`, `lines 3, 5, 9`, `lines 3, 5, 9, 12, 20 and 7 more`.
fn lines_text(lines: &[usize]) -> String {
    const SHOWN: usize = 5;
    let shown: Vec<String> = lines.iter().take(SHOWN).map(usize::to_string).collect();
    let more = lines.len().saturating_sub(SHOWN);
    let word = if lines.len() == 1 { "line" } else { "lines" };
    if more > 0 {
        format!("{word} {} and {more} more", shown.join(", "))
    } else {
        format!("{word} {}", shown.join(", "))
    }
}

/// A CSV file being read: its name for errors, the header's column positions.
struct Table<'a> {
    file: &'a str,
    columns: HashMap<String, usize>,
    rows: Vec<(usize, Vec<String>)>,
}

/// Splits one line into fields; a field may be double-quoted (`""` inside is a quote).
fn split_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cur.push(c),
            (false, '"') if cur.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            (false, ',') => {
                fields.push(std::mem::take(&mut cur));
                was_quoted = false;
            }
            (false, '"') => return Err("a quote inside an unquoted field".into()),
            (false, c) => cur.push(c),
        }
    }
    if quoted {
        return Err("an unterminated quoted field".into());
    }
    fields.push(cur);
    Ok(fields)
}

impl<'a> Table<'a> {
    fn parse(text: &str, file: &'a str, required: &[&str]) -> anyhow::Result<Table<'a>> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
        let (hline, header) = lines
            .by_ref()
            .find(|(_, l)| !l.trim().is_empty())
            .with_context(|| format!("{file}: empty file (expected a header line: {})", required.join(",")))?;
        let names = split_line(header).map_err(|e| anyhow::anyhow!("{file}:{hline}: header: {e}"))?;
        let mut columns = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            let n = n.trim().trim_start_matches('\u{feff}').to_string();
            if columns.insert(n.clone(), i).is_some() {
                anyhow::bail!("{file}:{hline}: header: column {n:?} appears twice");
            }
        }
        let missing: Vec<&str> = required.iter().copied().filter(|c| !columns.contains_key(*c)).collect();
        anyhow::ensure!(
            missing.is_empty(),
            "{file}:{hline}: header: missing column(s) {} (the header is {:?}; expected {})",
            missing.join(", "),
            header,
            required.join(",")
        );
        let mut rows = Vec::new();
        for (line, l) in lines {
            if l.trim().is_empty() {
                continue;
            }
            let fields = split_line(l).map_err(|e| anyhow::anyhow!("{file}:{line}: {e}"))?;
            anyhow::ensure!(
                fields.len() == names.len(),
                "{file}:{line}: {} field(s), the header has {} ({})",
                fields.len(),
                names.len(),
                names.join(",")
            );
            rows.push((line, fields));
        }
        Ok(Table { file, columns, rows })
    }

    /// A row's value of `column` (`None` when the file has no such column).
    fn get<'r>(&self, row: &'r [String], column: &str) -> Option<&'r str> {
        self.columns.get(column).map(|&i| row[i].trim())
    }

    fn err(&self, line: usize, column: &str, value: &str, why: &str) -> anyhow::Error {
        anyhow::anyhow!("{}:{line}: column {column:?}: invalid value {value:?}: {why}", self.file)
    }

    /// A required non-negative integer.
    fn int(&self, line: usize, row: &[String], column: &str) -> anyhow::Result<i64> {
        let v = self.get(row, column).unwrap_or_default();
        self.parse_int(line, column, v)
    }

    fn parse_int(&self, line: usize, column: &str, v: &str) -> anyhow::Result<i64> {
        match integral(v) {
            Ok(n) if n >= 0 => Ok(n),
            Ok(_) => Err(self.err(line, column, v, "must not be negative")),
            Err(why) => Err(self.err(line, column, v, why)),
        }
    }
}

/// An integer, also when written as a float with nothing after the point (`6000.0`, `6e3`), as
/// spreadsheets and dataframes export integer columns; a fraction is refused, not rounded.
fn integral(v: &str) -> Result<i64, &'static str> {
    if let Ok(n) = v.parse::<i64>() {
        return Ok(n);
    }
    // Integers above 2^53 are not all representable as f64: refuse rather than round.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() && f.fract() != 0.0 => Err("expected an integer: it has a fractional part"),
        Ok(f) if f.is_finite() && f.abs() <= EXACT => Ok(f as i64),
        Ok(f) if f.is_finite() => Err("too large"),
        _ => Err("expected a non-negative integer"),
    }
}

/// A GPU model name: it becomes a label value and a CEL string, so it is kept to what both
/// accept without escaping.
fn valid_model(m: &str) -> bool {
    !m.is_empty() && validation::is_valid_label_value(m).is_empty()
}

/// A lowercase RFC 1123 name short enough for the suffixes the replay adds.
fn valid_name(n: &str) -> bool {
    n.len() <= 200 && validation::is_dns1123_subdomain(n).is_empty()
}

/// The node list.
pub fn parse_nodes(text: &str, file: &str) -> anyhow::Result<Vec<TraceNode>> {
    let t = Table::parse(text, file, &["sn", "cpu_milli", "memory_mib", "gpu", "model"])?;
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, row) in &t.rows {
        let line = *line;
        let name = t.get(row, "sn").unwrap_or_default().to_string();
        if !valid_name(&name) {
            return Err(t.err(line, "sn", &name, "expected a lowercase RFC 1123 name (a-z, 0-9, '-', '.')"));
        }
        if !seen.insert(name.clone()) {
            return Err(t.err(line, "sn", &name, "a node of this name appears earlier"));
        }
        let gpus = t.int(line, row, "gpu")?;
        let model = t.get(row, "model").unwrap_or_default().to_string();
        if gpus > 0 && !valid_model(&model) {
            return Err(t.err(line, "model", &model, "expected a GPU model name (letters, digits, '-', '_', '.')"));
        }
        out.push(TraceNode {
            name,
            cpu_milli: t.int(line, row, "cpu_milli")?,
            memory_mib: t.int(line, row, "memory_mib")?,
            gpus,
            model,
        });
    }
    anyhow::ensure!(!out.is_empty(), "{file}: no nodes");
    Ok(out)
}

/// A parsed pod list.
#[derive(Debug, Clone, Default)]
pub struct PodList {
    /// The pods, in file order.
    pub pods: Vec<TracePod>,
    /// The line of each pod in the file.
    pub lines: Vec<usize>,
    /// What the reading decided that the user should know (the time unit detected, renamed
    /// pods), one line each.
    pub notes: Vec<String>,
}

/// The pod list's optional time columns.
const TIME_COLUMNS: [&str; 3] = ["creation_time", "deletion_time", "scheduled_time"];

/// Numbers of at least this size are taken for milliseconds by `--time-unit auto`: as seconds
/// since 1970 they would lie past the year 5000, as milliseconds they are after 1973; a trace
/// counting seconds from its start stays far below (the Alibaba trace: 1.3e7 after 150 days).
const MS_THRESHOLD: f64 = 1e11;

/// How one time value is written; a file writes all of its times one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeForm {
    Number,
    /// ISO-8601 with `Z` or an offset.
    IsoZoned,
    /// ISO-8601 without an offset (taken as UTC).
    IsoLocal,
}

impl TimeForm {
    fn of(v: &str) -> Option<TimeForm> {
        if v.parse::<f64>().is_ok() {
            return Some(TimeForm::Number);
        }
        let b = v.as_bytes();
        if !(b.len() > 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-') {
            return None;
        }
        Some(if split_offset(v).1.is_some() { TimeForm::IsoZoned } else { TimeForm::IsoLocal })
    }

    fn describe(self) -> &'static str {
        match self {
            TimeForm::Number => "a number",
            TimeForm::IsoZoned => "an ISO-8601 time with an offset",
            TimeForm::IsoLocal => "an ISO-8601 time without an offset",
        }
    }
}

/// The date-time part of an ISO-8601 value and its offset in seconds (`None`: no offset).
fn split_offset(v: &str) -> (&str, Option<i64>) {
    if let Some(local) = v.strip_suffix(['Z', 'z']) {
        return (local, Some(0));
    }
    // An offset sign comes after the date (`YYYY-MM-DD`, whose dashes are not signs).
    let Some(i) = v.get(10..).and_then(|t| t.rfind(['+', '-'])).map(|i| i + 10) else { return (v, None) };
    let sign = if v[i..].starts_with('-') { -1 } else { 1 };
    let digits: String = v[i + 1..].chars().filter(|c| *c != ':').collect();
    let parsed = match digits.len() {
        2 | 4 if digits.chars().all(|c| c.is_ascii_digit()) => {
            let h: i64 = digits[..2].parse().unwrap_or(0);
            let m: i64 = if digits.len() == 4 { digits[2..].parse().unwrap_or(0) } else { 0 };
            Some(sign * (h * 3600 + m * 60))
        }
        _ => None,
    };
    match parsed {
        Some(off) => (&v[..i], Some(off)),
        None => (v, None),
    }
}

/// Milliseconds since the Unix epoch of an ISO-8601 date-time: `T` or a space between date
/// and time, seconds optional, fractional seconds, `Z`, `+hh:mm`, `+hhmm` or `+hh`, or no offset
/// (UTC).
fn iso_ms(v: &str) -> Option<i64> {
    let (local, offset) = split_offset(v);
    let local = local.replacen([' ', 't'], "T", 1);
    let dt = chrono::NaiveDateTime::parse_from_str(&local, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(&local, "%Y-%m-%dT%H:%M"))
        .ok()?;
    dt.and_utc().timestamp_millis().checked_sub(offset.unwrap_or(0) * 1000)
}

/// One row before its times are converted.
struct PodRow {
    line: usize,
    pod: TracePod,
    times: [String; 3],
}

/// The pod list. Times are read in `unit` (`Auto`: detected from the values, and the
/// detection noted); a file writing its times in different ways is refused at the first value
/// that differs. A name used by an earlier row gets a suffix (`-r2`, `-r3`, ...): each row is
/// its own pod (a pod deleted and created again under its name), and the renaming is noted.
pub fn parse_pods_with(text: &str, file: &str, unit: TimeUnit) -> anyhow::Result<PodList> {
    let t = Table::parse(text, file, &["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])?;
    let mut rows = Vec::with_capacity(t.rows.len());
    for (line, row) in &t.rows {
        let line = *line;
        let name = t.get(row, "name").unwrap_or_default().to_string();
        if !valid_name(&name) {
            return Err(t.err(line, "name", &name, "expected a lowercase RFC 1123 name (a-z, 0-9, '-', '.')"));
        }
        let num_gpu = t.int(line, row, "num_gpu")?;
        let gpu_milli = t.int(line, row, "gpu_milli")?;
        let milli_text = t.get(row, "gpu_milli").unwrap_or_default();
        if gpu_milli > GPU_MILLI {
            return Err(t.err(line, "gpu_milli", milli_text, "a pod uses at most 1000 milli of each GPU"));
        }
        if num_gpu == 0 && gpu_milli != 0 {
            return Err(t.err(line, "gpu_milli", milli_text, "num_gpu is 0, so gpu_milli must be 0"));
        }
        if num_gpu > 0 && gpu_milli == 0 {
            return Err(t.err(line, "gpu_milli", milli_text, "num_gpu is not 0, so gpu_milli must be 1 to 1000"));
        }
        let spec_text = t.get(row, "gpu_spec").unwrap_or_default();
        let gpu_spec: Vec<String> = if spec_text.is_empty() {
            Vec::new()
        } else {
            spec_text.split('|').map(|s| s.trim().to_string()).collect()
        };
        if let Some(bad) = gpu_spec.iter().find(|m| !valid_model(m)) {
            return Err(t.err(
                line,
                "gpu_spec",
                spec_text,
                &format!("{bad:?} is not a GPU model name ('|'-separated models expected)"),
            ));
        }
        let pod = TracePod {
            name,
            cpu_milli: t.int(line, row, "cpu_milli")?,
            memory_mib: t.int(line, row, "memory_mib")?,
            num_gpu,
            gpu_milli,
            gpu_spec,
            qos: t.get(row, "qos").unwrap_or_default().to_string(),
            pod_phase: t.get(row, "pod_phase").unwrap_or_default().to_string(),
            creation_ms: None,
            deletion_ms: None,
            scheduled_ms: None,
        };
        let times = TIME_COLUMNS.map(|c| t.get(row, c).unwrap_or_default().to_string());
        rows.push(PodRow { line, pod, times });
    }
    anyhow::ensure!(!rows.is_empty(), "{file}: no pods");
    let mut notes = Vec::new();
    let scale = time_scale(&t, &rows, unit, &mut notes)?;
    for r in &mut rows {
        let mut ms = [None; 3];
        for (k, v) in r.times.iter().enumerate() {
            if v.is_empty() {
                continue;
            }
            let column = TIME_COLUMNS[k];
            ms[k] = Some(match scale {
                Some(per_unit) => {
                    let n = t.parse_int(r.line, column, v)?;
                    n.checked_mul(per_unit).ok_or_else(|| t.err(r.line, column, v, "too large"))?
                }
                None => iso_ms(v).ok_or_else(|| {
                    t.err(r.line, column, v, "expected an ISO-8601 date-time such as 2023-05-01T12:00:00Z")
                })?,
            });
        }
        let [c, d, s] = ms;
        if let (Some(c), Some(d)) = (c, d) {
            if d < c {
                return Err(t.err(
                    r.line,
                    "deletion_time",
                    &r.times[1],
                    &format!("before the creation_time {}", r.times[0]),
                ));
            }
        }
        (r.pod.creation_ms, r.pod.deletion_ms, r.pod.scheduled_ms) = (c, d, s);
    }
    notes.extend(rename_repeated(&mut rows, file));
    let lines = rows.iter().map(|r| r.line).collect();
    Ok(PodList { pods: rows.into_iter().map(|r| r.pod).collect(), lines, notes })
}

/// Milliseconds per unit of the file's numeric times, or `None` for ISO-8601 times; refuses a
/// value not of `unit`'s form, or of another form than the file's first time.
fn time_scale(t: &Table<'_>, rows: &[PodRow], unit: TimeUnit, notes: &mut Vec<String>) -> anyhow::Result<Option<i64>> {
    let mut first: Option<(TimeForm, usize, &str, &str)> = None;
    let mut largest = 0.0_f64;
    for r in rows {
        for (k, v) in r.times.iter().enumerate().filter(|(_, v)| !v.is_empty()) {
            let column = TIME_COLUMNS[k];
            let form = TimeForm::of(v).ok_or_else(|| {
                t.err(
                    r.line,
                    column,
                    v,
                    "expected a time: a number (of seconds or milliseconds) or an ISO-8601 date-time",
                )
            })?;
            let wrong = match (unit, form) {
                (TimeUnit::S, f) if f != TimeForm::Number => Some("expected a number of seconds (--time-unit s)"),
                (TimeUnit::Ms, f) if f != TimeForm::Number => {
                    Some("expected a number of milliseconds (--time-unit ms)")
                }
                (TimeUnit::Iso, TimeForm::Number) => Some("expected an ISO-8601 date-time (--time-unit iso)"),
                _ => None,
            };
            if let Some(why) = wrong {
                return Err(t.err(r.line, column, v, why));
            }
            match first {
                None => first = Some((form, r.line, column, v)),
                Some((f, line, c, _)) if f != form => {
                    return Err(t.err(
                        r.line,
                        column,
                        v,
                        &format!(
                        "{}, but line {line} (column {c:?}) has {}: the times of a file must all be written one way",
                        form.describe(),
                        f.describe()
                    ),
                    ))
                }
                Some(_) => {}
            }
            if form == TimeForm::Number {
                largest = largest.max(v.parse::<f64>().unwrap_or(0.0).abs());
            }
        }
    }
    let Some((form, line, column, example)) = first else { return Ok(Some(1000)) };
    let file = t.file;
    Ok(match (unit, form) {
        (TimeUnit::S, _) => Some(1000),
        (TimeUnit::Ms, _) => Some(1),
        (TimeUnit::Iso, _) => None,
        (TimeUnit::Auto, TimeForm::Number) if largest >= MS_THRESHOLD => {
            notes.push(format!(
                "{file}: times read as milliseconds (--time-unit auto: numbers up to {largest}, too large for seconds since 1970; --time-unit s if they are seconds)"
            ));
            Some(1)
        }
        (TimeUnit::Auto, TimeForm::Number) => {
            notes.push(format!(
                "{file}: times read as seconds (--time-unit auto: numbers up to {largest}; --time-unit ms if they are milliseconds)"
            ));
            Some(1000)
        }
        (TimeUnit::Auto, f) => {
            let utc = if f == TimeForm::IsoLocal { ", without an offset: taken as UTC" } else { "" };
            notes.push(format!(
                "{file}: times read as ISO-8601 date-times (--time-unit auto: line {line}, column {column:?}: {example:?}{utc})"
            ));
            None
        }
    })
}

/// Gives each row reusing an earlier row's pod name a name of its own (`NAME-r2`, `NAME-r3`,
/// ..., skipping names the file already uses), and the note saying so.
fn rename_repeated(rows: &mut [PodRow], file: &str) -> Option<String> {
    let mut taken: HashSet<String> = rows.iter().map(|r| r.pod.name.clone()).collect();
    if taken.len() == rows.len() {
        return None;
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut renamed = Vec::new();
    for r in rows.iter_mut() {
        let n = seen.entry(r.pod.name.clone()).or_default();
        *n += 1;
        if *n == 1 {
            continue;
        }
        let mut k = *n;
        let new = loop {
            let candidate = format!("{}-r{k}", r.pod.name);
            if taken.insert(candidate.clone()) {
                break candidate;
            }
            k += 1;
        };
        renamed.push((r.line, std::mem::replace(&mut r.pod.name, new.clone()), new));
    }
    let names = renamed.iter().map(|r| r.1.as_str()).collect::<HashSet<_>>().len();
    let (line, old, new) = &renamed[0];
    Some(format!(
        "{file}: {} row(s) reuse the name of an earlier pod ({names} name(s)): each row is its own pod (recreated), renamed with a suffix -r2, -r3, ... (the first: line {line}, {old:?} as {new:?})",
        renamed.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pod list with its time unit detected, without the notes.
    fn parse_pods(text: &str, file: &str) -> anyhow::Result<Vec<TracePod>> {
        parse_pods_with(text, file, TimeUnit::Auto).map(|l| l.pods)
    }

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\nopenb-node-0001,96000,786432,8,V100M32\ncpu-only,32000,131072,0,\n";

    #[test]
    fn node_columns_map_to_fields() {
        let n = parse_nodes(NODES, "n.csv").unwrap();
        assert_eq!(
            n[1],
            TraceNode {
                name: "openb-node-0001".into(),
                cpu_milli: 96000,
                memory_mib: 786432,
                gpus: 8,
                model: "V100M32".into()
            }
        );
        assert_eq!(n[2].gpus, 0);
        assert_eq!(n[2].model, "");
        assert_eq!(Trace { nodes: n, pods: vec![] }.gpu_capacity_milli(), 10_000);
    }

    #[test]
    fn every_pod_column_maps_to_its_field() {
        let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                    openb-pod-0017,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427065\n\
                    openb-pod-0018,88000,327680,8,1000,,BE,Pending,10001278,10001403,\n";
        let p = parse_pods(text, "p.csv").unwrap();
        assert_eq!(
            p[0],
            TracePod {
                name: "openb-pod-0017".into(),
                cpu_milli: 6000,
                memory_mib: 12288,
                num_gpu: 1,
                gpu_milli: 460,
                gpu_spec: vec!["V100M16".into(), "V100M32".into()],
                qos: "LS".into(),
                pod_phase: "Running".into(),
                creation_ms: Some(427_061_000),
                deletion_ms: Some(12_902_960_000),
                scheduled_ms: Some(427_065_000),
            }
        );
        assert_eq!(p[0].gpu_request_milli(), 460);
        assert!(p[0].shares_gpu());
        assert_eq!(p[1].gpu_request_milli(), 8000);
        assert!(!p[1].shares_gpu());
        assert_eq!(p[1].scheduled_ms, None, "an empty field is no time");
        assert!(p[1].gpu_spec.is_empty());
    }

    #[test]
    fn the_five_column_format_of_multigpu50_reads_with_the_rest_empty() {
        let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,2,1000\n";
        let p = parse_pods(text, "m.csv").unwrap();
        assert_eq!(p[0].num_gpu, 2);
        assert_eq!((p[0].creation_ms, p[0].deletion_ms, p[0].scheduled_ms), (None, None, None));
        assert!(p[0].gpu_spec.is_empty() && p[0].qos.is_empty() && p[0].pod_phase.is_empty());
    }

    #[test]
    fn column_order_is_free_and_unknown_columns_are_ignored() {
        let text = "gpu_milli,extra,name,num_gpu,memory_mib,cpu_milli\r\n250,x,a,1,1024,500\r\n";
        let p = parse_pods(text, "p.csv").unwrap();
        assert_eq!((p[0].name.as_str(), p[0].cpu_milli, p[0].memory_mib, p[0].gpu_milli), ("a", 500, 1024, 250));
    }

    fn pod_error(rows: &str) -> String {
        let text = format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n{rows}");
        format!("{:#}", parse_pods(&text, "pods.csv").unwrap_err())
    }

    #[test]
    fn malformed_rows_are_refused_with_file_line_and_column() {
        assert_eq!(
            pod_error("a,1000,1024,1,500,\nb,12x,1024,0,0,\n"),
            "pods.csv:3: column \"cpu_milli\": invalid value \"12x\": expected a non-negative integer"
        );
        assert_eq!(
            pod_error("a,1000,-5,1,500,\n"),
            "pods.csv:2: column \"memory_mib\": invalid value \"-5\": must not be negative"
        );
        assert!(
            pod_error("a,1000,1024,1,1500,\n").starts_with("pods.csv:2: column \"gpu_milli\": invalid value \"1500\"")
        );
        assert!(pod_error("a,1000,1024,0,300,\n").contains("num_gpu is 0"));
        assert!(pod_error("a,1000,1024,2,0,\n").contains("gpu_milli must be 1 to 1000"));
        assert!(pod_error("a,1000,1024,1,500,T4||G2\n").starts_with("pods.csv:2: column \"gpu_spec\""));
        assert!(pod_error("Bad_Name,1000,1024,1,500,\n").starts_with("pods.csv:2: column \"name\""));
        assert_eq!(
            pod_error("a,1000,1024,1\n"),
            "pods.csv:2: 4 field(s), the header has 6 (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec)"
        );
        let e = format!("{:#}", parse_pods("name,cpu_milli,num_gpu\n", "p.csv").unwrap_err());
        assert!(e.starts_with("p.csv:1: header: missing column(s) memory_mib, gpu_milli"), "{e}");
        let e =
            format!("{:#}", parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,4,\n", "n.csv").unwrap_err());
        assert!(e.starts_with("n.csv:2: column \"model\": invalid value \"\""), "{e}");
        let e = format!(
            "{:#}",
            parse_pods(
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\na,1,1,0,0,50,40\n",
                "p.csv"
            )
            .unwrap_err()
        );
        assert_eq!(e, "p.csv:2: column \"deletion_time\": invalid value \"40\": before the creation_time 50");
    }

    #[test]
    fn quoted_fields_are_read_and_broken_quotes_refused() {
        assert_eq!(split_line(r#"a,"b,c","d""e""#).unwrap(), ["a", "b,c", "d\"e"]);
        assert!(split_line(r#"a,"b"#).is_err());
        assert!(split_line(r#"a,b"c"#).is_err());
    }

    #[test]
    fn gpu_spec_models_no_node_has_are_a_warning_with_their_lines() {
        let nodes = parse_nodes(NODES, "n.csv").unwrap();
        let list = parse_pods_with(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n\
             a,1,1,1,500,A100|H100\nb,1,1,1,500,P100\nc,1,1,1,500,V100M32|A100\nd,1,1,0,0,A100\n",
            "p.csv",
            TimeUnit::Auto,
        )
        .unwrap();
        assert_eq!(list.lines, [2, 3, 4, 5]);
        let t = Trace { nodes, pods: list.pods };
        assert_eq!(t.pods.len(), 4, "the pods stay in the trace");
        assert_eq!(
            t.absent_models_note(&list.lines, "p.csv").unwrap(),
            "p.csv: warning: gpu_spec names GPU model(s) no node has (the nodes have P100, V100M32): \
             A100 (lines 2, 4), H100 (line 2); those pods cannot use them, and 1 of them accept no model \
             of the nodes, so they fit nowhere and count as failed demand (line 2)"
        );
        let fine = Trace { nodes: t.nodes.clone(), pods: vec![t.pods[1].clone()] };
        assert_eq!(fine.absent_models_note(&[3], "p.csv"), None);
        assert_eq!(lines_text(&[1, 2, 3, 4, 5, 6, 7]), "lines 1, 2, 3, 4, 5 and 2 more");
    }

    #[test]
    fn integers_written_as_floats_are_read_and_fractions_refused() {
        let p = parse_pods(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\na,6000.0,12288.00,1.0,460.,7e2,800.0\n",
            "p.csv",
        )
        .unwrap();
        assert_eq!((p[0].cpu_milli, p[0].memory_mib, p[0].num_gpu, p[0].gpu_milli), (6000, 12288, 1, 460));
        assert_eq!((p[0].creation_ms, p[0].deletion_ms), (Some(700_000), Some(800_000)));
        assert_eq!(
            pod_error("a,6000.5,1024,1,500,\n"),
            "pods.csv:2: column \"cpu_milli\": invalid value \"6000.5\": expected an integer: it has a fractional part"
        );
        assert_eq!(
            pod_error("a,1,1024,1,500,\nb,1,1024,1.5,500,\n"),
            "pods.csv:3: column \"num_gpu\": invalid value \"1.5\": expected an integer: it has a fractional part"
        );
        assert!(pod_error("a,1,1024.25,1,500,\n").starts_with("pods.csv:2: column \"memory_mib\""));
        assert!(pod_error("a,1,1024,1,499.9,\n").starts_with("pods.csv:2: column \"gpu_milli\""));
        assert!(pod_error("a,1,1e30,1,500,\n").ends_with("too large"));
        assert!(pod_error("a,1,NaN,1,500,\n").ends_with("expected a non-negative integer"));
        let e = format!(
            "{:#}",
            parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\na,1,1,0,0,60.5\n", "p.csv")
                .unwrap_err()
        );
        assert_eq!(
            e,
            "p.csv:2: column \"creation_time\": invalid value \"60.5\": expected an integer: it has a fractional part"
        );
        let e = format!(
            "{:#}",
            parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,2.5,T4\n", "n.csv").unwrap_err()
        );
        assert_eq!(e, "n.csv:2: column \"gpu\": invalid value \"2.5\": expected an integer: it has a fractional part");
        assert_eq!(
            parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1000.0,1024,2.0,T4\n", "n.csv").unwrap()[0].gpus,
            2
        );
    }

    fn times(rows: &str, unit: TimeUnit) -> anyhow::Result<PodList> {
        let text =
            format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n{rows}");
        parse_pods_with(&text, "p.csv", unit)
    }

    fn ms_of(l: &PodList) -> Vec<(Option<i64>, Option<i64>, Option<i64>)> {
        l.pods.iter().map(|p| (p.creation_ms, p.deletion_ms, p.scheduled_ms)).collect()
    }

    #[test]
    fn seconds_and_milliseconds_are_detected_and_the_detection_said() {
        let l = times("a,1,1,0,0,0,1000,5\nb,1,1,0,0,10,70,\n", TimeUnit::Auto).unwrap();
        assert_eq!(ms_of(&l), [(Some(0), Some(1_000_000), Some(5000)), (Some(10_000), Some(70_000), None)]);
        assert_eq!(
            l.notes,
            ["p.csv: times read as seconds (--time-unit auto: numbers up to 1000; --time-unit ms if they are milliseconds)"]
        );
        let l = times("a,1,1,0,0,1682942400123,1682942460123.0,\n", TimeUnit::Auto).unwrap();
        assert_eq!(ms_of(&l), [(Some(1_682_942_400_123), Some(1_682_942_460_123), None)]);
        assert!(
            l.notes[0].starts_with("p.csv: times read as milliseconds (--time-unit auto: numbers up to 1682942460123"),
            "{:?}",
            l.notes
        );
        // Told: no detection, no note.
        let l = times("a,1,1,0,0,0,1000,5\n", TimeUnit::Ms).unwrap();
        assert_eq!(ms_of(&l), [(Some(0), Some(1000), Some(5))]);
        assert!(l.notes.is_empty());
        let l = times("a,1,1,0,0,1682942400123,1682942460123,\n", TimeUnit::S).unwrap();
        assert_eq!(l.pods[0].creation_ms, Some(1_682_942_400_123_000));
        // No times at all: nothing to detect, nothing said.
        assert!(times("a,1,1,0,0,,,\n", TimeUnit::Auto).unwrap().notes.is_empty());
    }

    #[test]
    fn iso_8601_times_are_read_with_offsets_and_fractions() {
        let l = times(
            "a,1,1,0,0,2023-05-01T12:00:00Z,2023-05-01T14:30:00.250+02:00,2023-05-01T12:00:01.5Z\n\
             b,1,1,0,0,2023-05-01 12:00:10z,2023-05-01T12:01:00-0100,\n",
            TimeUnit::Auto,
        )
        .unwrap();
        let noon = 1_682_942_400_000;
        assert_eq!(
            ms_of(&l),
            [
                (Some(noon), Some(noon + 1_800_250), Some(noon + 1500)),
                (Some(noon + 10_000), Some(noon + 3_660_000), None)
            ]
        );
        assert_eq!(
            l.notes,
            ["p.csv: times read as ISO-8601 date-times (--time-unit auto: line 2, column \"creation_time\": \"2023-05-01T12:00:00Z\")"]
        );
        let l = times("a,1,1,0,0,2023-05-01T12:00:00,2023-05-01T12:05,\n", TimeUnit::Iso).unwrap();
        assert_eq!(ms_of(&l), [(Some(noon), Some(noon + 300_000), None)], "no offset: UTC");
        let l = times("a,1,1,0,0,2023-05-01T12:00:00,2023-05-01T12:05,\n", TimeUnit::Auto).unwrap();
        assert!(l.notes[0].ends_with("\"2023-05-01T12:00:00\", without an offset: taken as UTC)"), "{:?}", l.notes);
    }

    fn time_error(rows: &str, unit: TimeUnit) -> String {
        format!("{:#}", times(rows, unit).unwrap_err())
    }

    #[test]
    fn times_written_two_ways_or_not_as_told_are_refused_with_the_line() {
        assert_eq!(
            time_error("a,1,1,0,0,0,100,\nb,1,1,0,0,10,2023-05-01T12:00:00Z,\n", TimeUnit::Auto),
            "p.csv:3: column \"deletion_time\": invalid value \"2023-05-01T12:00:00Z\": an ISO-8601 time with an offset, \
             but line 2 (column \"creation_time\") has a number: the times of a file must all be written one way"
        );
        assert_eq!(
            time_error("a,1,1,0,0,2023-05-01T12:00:00Z,2023-05-01T13:00:00,\n", TimeUnit::Auto),
            "p.csv:2: column \"deletion_time\": invalid value \"2023-05-01T13:00:00\": an ISO-8601 time without an offset, \
             but line 2 (column \"creation_time\") has an ISO-8601 time with an offset: the times of a file must all be written one way"
        );
        assert_eq!(
            time_error("a,1,1,0,0,2023-05-01T12:00:00Z,,\n", TimeUnit::S),
            "p.csv:2: column \"creation_time\": invalid value \"2023-05-01T12:00:00Z\": expected a number of seconds (--time-unit s)"
        );
        assert_eq!(
            time_error("a,1,1,0,0,5,,\n", TimeUnit::Iso),
            "p.csv:2: column \"creation_time\": invalid value \"5\": expected an ISO-8601 date-time (--time-unit iso)"
        );
        assert_eq!(
            time_error("a,1,1,0,0,yesterday,,\n", TimeUnit::Auto),
            "p.csv:2: column \"creation_time\": invalid value \"yesterday\": expected a time: a number (of seconds or milliseconds) or an ISO-8601 date-time"
        );
        assert_eq!(
            time_error("a,1,1,0,0,2023-13-01T12:00:00Z,,\n", TimeUnit::Auto),
            "p.csv:2: column \"creation_time\": invalid value \"2023-13-01T12:00:00Z\": expected an ISO-8601 date-time such as 2023-05-01T12:00:00Z"
        );
        assert_eq!(
            time_error("a,1,1,0,0,2023-05-01T12:00:00Z,2023-05-01T11:00:00Z,\n", TimeUnit::Auto),
            "p.csv:2: column \"deletion_time\": invalid value \"2023-05-01T11:00:00Z\": before the creation_time 2023-05-01T12:00:00Z"
        );
        assert!(time_error("a,1,1,0,0,-5,,\n", TimeUnit::Auto).ends_with("must not be negative"));
        assert!(time_error("a,1,1,0,0,2023-05-01T12:00:00€,,\n", TimeUnit::Auto)
            .starts_with("p.csv:2: column \"creation_time\""));
    }

    #[test]
    fn repeated_pod_names_become_pods_of_their_own() {
        let l = parse_pods_with(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,0,0\nb,2,1,0,0\na,3,1,0,0\na-r2,4,1,0,0\na,5,1,0,0\nb,6,1,0,0\n",
            "p.csv",
            TimeUnit::Auto,
        )
        .unwrap();
        let named: Vec<(&str, i64)> = l.pods.iter().map(|p| (p.name.as_str(), p.cpu_milli)).collect();
        // The file's own a-r2 keeps its name: the second a skips it.
        assert_eq!(named, [("a", 1), ("b", 2), ("a-r3", 3), ("a-r2", 4), ("a-r4", 5), ("b-r2", 6)]);
        assert_eq!(
            l.notes,
            ["p.csv: 3 row(s) reuse the name of an earlier pod (2 name(s)): each row is its own pod (recreated), \
              renamed with a suffix -r2, -r3, ... (the first: line 4, \"a\" as \"a-r3\")"]
        );
    }
}
