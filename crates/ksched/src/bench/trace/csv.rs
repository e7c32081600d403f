//! The trace's two CSV files (the format of Alibaba's `cluster-trace-gpu-v2023`, as the FGD
//! paper's simulator reads it): a node list `sn,cpu_milli,memory_mib,gpu,model` and a pod list
//! `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time]`. Columns are found by their header name, so their order is
//! free and unknown columns are ignored; a malformed row is refused naming the file, the line
//! and the column.

use std::collections::{HashMap, HashSet};
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
    /// `name`.
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
    /// `creation_time`, seconds from the trace's start.
    pub creation_time: Option<i64>,
    /// `deletion_time`, seconds from the trace's start.
    pub deletion_time: Option<i64>,
    /// `scheduled_time`, seconds from the trace's start (empty: never scheduled).
    pub scheduled_time: Option<i64>,
}

impl TracePod {
    /// The pod's GPU request in milli-GPUs (`num_gpu * gpu_milli`).
    pub fn gpu_request_milli(&self) -> i64 {
        self.num_gpu * self.gpu_milli
    }

    /// True when the pod shares its GPU with others (uses part of one).
    pub fn shares_gpu(&self) -> bool {
        self.num_gpu > 0 && self.gpu_milli < GPU_MILLI
    }
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
    /// Reads both files.
    pub fn load(nodes: &Path, pods: &Path) -> anyhow::Result<Trace> {
        let read = |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
        let trace = Trace {
            nodes: parse_nodes(&read(nodes)?, &nodes.display().to_string())?,
            pods: parse_pods(&read(pods)?, &pods.display().to_string())?,
        };
        trace.check_fits_some_model().with_context(|| format!("{} against {}", pods.display(), nodes.display()))?;
        Ok(trace)
    }

    /// GPU capacity of the cluster, in milli-GPUs.
    pub fn gpu_capacity_milli(&self) -> i64 {
        self.nodes.iter().map(|n| n.gpus * GPU_MILLI).sum()
    }

    /// Refuses pods whose `gpu_spec` names only models no node has: almost always a typo,
    /// which would otherwise silently count as failed demand.
    fn check_fits_some_model(&self) -> anyhow::Result<()> {
        let models: HashSet<&str> = self.nodes.iter().filter(|n| n.gpus > 0).map(|n| n.model.as_str()).collect();
        for p in &self.pods {
            if p.num_gpu > 0 && !p.gpu_spec.is_empty() && !p.gpu_spec.iter().any(|m| models.contains(m.as_str())) {
                let mut known: Vec<&str> = models.iter().copied().collect();
                known.sort_unstable();
                anyhow::bail!(
                    "pod {}: gpu_spec {:?} names no GPU model of the nodes ({})",
                    p.name,
                    p.gpu_spec.join("|"),
                    known.join(", ")
                );
            }
        }
        Ok(())
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

    /// An optional non-negative integer (absent column or empty field: `None`).
    fn opt_int(&self, line: usize, row: &[String], column: &str) -> anyhow::Result<Option<i64>> {
        match self.get(row, column) {
            None | Some("") => Ok(None),
            Some(v) => self.parse_int(line, column, v).map(Some),
        }
    }

    fn parse_int(&self, line: usize, column: &str, v: &str) -> anyhow::Result<i64> {
        match v.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n),
            Ok(_) => Err(self.err(line, column, v, "must not be negative")),
            Err(_) => Err(self.err(line, column, v, "expected a non-negative integer")),
        }
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

/// The pod list.
pub fn parse_pods(text: &str, file: &str) -> anyhow::Result<Vec<TracePod>> {
    let t = Table::parse(text, file, &["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])?;
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, row) in &t.rows {
        let line = *line;
        let name = t.get(row, "name").unwrap_or_default().to_string();
        if !valid_name(&name) {
            return Err(t.err(line, "name", &name, "expected a lowercase RFC 1123 name (a-z, 0-9, '-', '.')"));
        }
        if !seen.insert(name.clone()) {
            return Err(t.err(line, "name", &name, "a pod of this name appears earlier"));
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
        let creation_time = t.opt_int(line, row, "creation_time")?;
        let deletion_time = t.opt_int(line, row, "deletion_time")?;
        let scheduled_time = t.opt_int(line, row, "scheduled_time")?;
        if let (Some(c), Some(d)) = (creation_time, deletion_time) {
            if d < c {
                return Err(t.err(
                    line,
                    "deletion_time",
                    t.get(row, "deletion_time").unwrap_or_default(),
                    &format!("before the creation_time {c}"),
                ));
            }
        }
        out.push(TracePod {
            name,
            cpu_milli: t.int(line, row, "cpu_milli")?,
            memory_mib: t.int(line, row, "memory_mib")?,
            num_gpu,
            gpu_milli,
            gpu_spec,
            qos: t.get(row, "qos").unwrap_or_default().to_string(),
            pod_phase: t.get(row, "pod_phase").unwrap_or_default().to_string(),
            creation_time,
            deletion_time,
            scheduled_time,
        });
    }
    anyhow::ensure!(!out.is_empty(), "{file}: no pods");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                creation_time: Some(427061),
                deletion_time: Some(12902960),
                scheduled_time: Some(427065),
            }
        );
        assert_eq!(p[0].gpu_request_milli(), 460);
        assert!(p[0].shares_gpu());
        assert_eq!(p[1].gpu_request_milli(), 8000);
        assert!(!p[1].shares_gpu());
        assert_eq!(p[1].scheduled_time, None, "an empty field is no time");
        assert!(p[1].gpu_spec.is_empty());
    }

    #[test]
    fn the_five_column_format_of_multigpu50_reads_with_the_rest_empty() {
        let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,2,1000\n";
        let p = parse_pods(text, "m.csv").unwrap();
        assert_eq!(p[0].num_gpu, 2);
        assert_eq!((p[0].creation_time, p[0].deletion_time, p[0].scheduled_time), (None, None, None));
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
        assert!(pod_error("a,1,1,0,0,\na,1,1,0,0,\n").starts_with("pods.csv:3: column \"name\": invalid value \"a\""));
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
    fn a_gpu_spec_no_node_has_is_refused() {
        let nodes = parse_nodes(NODES, "n.csv").unwrap();
        let pods = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\na,1,1,1,500,A100|H100\n", "p.csv")
            .unwrap();
        let e = format!("{:#}", Trace { nodes, pods }.check_fits_some_model().unwrap_err());
        assert_eq!(e, "pod a: gpu_spec \"A100|H100\" names no GPU model of the nodes (P100, V100M32)");
    }
}
