//! Label and field selectors (`?labelSelector=` / `?fieldSelector=`).

use serde_json::Value;

/// A label selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    NotEq,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector; all requirements must hold (AND).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Comma,
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    Gt,
    Lt,
    Open,
    Close,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            ',' => {
                chars.next();
                out.push(Tok::Comma);
            }
            '(' => {
                chars.next();
                out.push(Tok::Open);
            }
            ')' => {
                chars.next();
                out.push(Tok::Close);
            }
            '>' => {
                chars.next();
                out.push(Tok::Gt);
            }
            '<' => {
                chars.next();
                out.push(Tok::Lt);
            }
            '=' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::DoubleEq);
                } else {
                    out.push(Tok::Eq);
                }
            }
            '!' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::NotEq);
                } else {
                    out.push(Tok::Bang);
                }
            }
            _ => {
                let mut ident = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || ",()=!<>".contains(c) {
                        break;
                    }
                    ident.push(c);
                    chars.next();
                }
                out.push(Tok::Ident(ident));
            }
        }
    }
    Ok(out)
}

impl LabelSelector {
    /// Parses the full Kubernetes label selector syntax
    /// (`a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let toks = tokenize(s)?;
        let mut reqs = Vec::new();
        let mut i = 0;
        let err = |m: &str| Err(format!("unable to parse requirement: {m} in selector {s:?}"));
        while i < toks.len() {
            let negated = toks[i] == Tok::Bang;
            if negated {
                i += 1;
            }
            let key = match toks.get(i) {
                Some(Tok::Ident(k)) if !k.is_empty() => k.clone(),
                _ => return err("expected a label key"),
            };
            i += 1;
            if negated {
                reqs.push(Requirement { key, op: Op::DoesNotExist, values: vec![] });
            } else {
                match toks.get(i) {
                    None | Some(Tok::Comma) => reqs.push(Requirement { key, op: Op::Exists, values: vec![] }),
                    Some(t @ (Tok::Eq | Tok::DoubleEq | Tok::NotEq | Tok::Gt | Tok::Lt)) => {
                        let op = match t {
                            Tok::NotEq => Op::NotEq,
                            Tok::Gt => Op::Gt,
                            Tok::Lt => Op::Lt,
                            _ => Op::Eq,
                        };
                        i += 1;
                        let value = match toks.get(i) {
                            Some(Tok::Ident(v)) => {
                                i += 1;
                                v.clone()
                            }
                            None | Some(Tok::Comma) if matches!(op, Op::Eq | Op::NotEq) => String::new(),
                            _ => return err("expected a value"),
                        };
                        if matches!(op, Op::Gt | Op::Lt) && value.parse::<i64>().is_err() {
                            return err("value for > or < must be an integer");
                        }
                        reqs.push(Requirement { key, op, values: vec![value] });
                    }
                    Some(Tok::Ident(word)) if word == "in" || word == "notin" => {
                        let op = if word == "in" { Op::In } else { Op::NotIn };
                        i += 1;
                        if toks.get(i) != Some(&Tok::Open) {
                            return err("expected '(' after set operator");
                        }
                        i += 1;
                        let mut values = Vec::new();
                        loop {
                            match toks.get(i) {
                                Some(Tok::Ident(v)) => {
                                    values.push(v.clone());
                                    i += 1;
                                }
                                Some(Tok::Comma) => i += 1,
                                Some(Tok::Close) => {
                                    i += 1;
                                    break;
                                }
                                _ => return err("unterminated value set"),
                            }
                        }
                        reqs.push(Requirement { key, op, values });
                    }
                    _ => return err("unexpected token after key"),
                }
            }
            match toks.get(i) {
                None => {}
                Some(Tok::Comma) => i += 1,
                _ => return err("expected ','"),
            }
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Matches against an object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }

    /// Matches against a label map.
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        self.reqs.iter().all(|r| {
            let v = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            match r.op {
                Op::Eq => v == Some(r.values[0].as_str()),
                Op::NotEq => v != Some(r.values[0].as_str()),
                Op::In => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotIn => v.is_none_or(|v| !r.values.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::DoesNotExist => v.is_none(),
                Op::Gt | Op::Lt => {
                    let (Some(have), Ok(want)) = (v.and_then(|v| v.parse::<i64>().ok()), r.values[0].parse::<i64>())
                    else {
                        return false;
                    };
                    if r.op == Op::Gt {
                        have > want
                    } else {
                        have < want
                    }
                }
            }
        })
    }
}

/// A parsed field selector: comma-ANDed `path=value`, `path==value`, `path!=value`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

/// Splits on unescaped `sep`, keeping escapes for later unescaping.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    parts.push(cur);
    parts
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldSelector {
    /// Parses a field selector string.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_unescaped(s, ',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (path, negate, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, false, v)
            } else {
                return Err(format!("invalid selector: '{term}'; can't understand '{term}'"));
            };
            let path = path.trim();
            if path.is_empty() {
                return Err(format!("invalid field selector {s:?}: empty field name"));
            }
            reqs.push((path.to_string(), negate, unescape(value.trim())));
        }
        Ok(FieldSelector { reqs })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Adds `path=value`.
    pub fn require(&mut self, path: &str, value: &str) {
        self.reqs.push((path.to_string(), false, value.to_string()));
    }

    /// Evaluates against an object.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, negate, want)| {
            let have = field_value(obj, path);
            (have == *want) != *negate
        })
    }
}

/// The string value of a dotted field path; absent fields read as "".
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    // core/v1 events select `source` by its component.
    if path == "source" {
        if let Some(c) = cur.get("component") {
            cur = c;
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn label_selector_full_syntax() {
        let l = labels(json!({"app": "web", "tier": "front", "n": "5"}));
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(ok("app=web"));
        assert!(ok("app==web"));
        assert!(!ok("app!=web"));
        assert!(ok("app in (web, db)"));
        assert!(!ok("app notin (web,db)"));
        assert!(ok("missing notin (x)"));
        assert!(ok("tier"));
        assert!(!ok("!tier"));
        assert!(ok("!missing"));
        assert!(ok("app=web,tier in (front),!missing"));
        assert!(ok("n>3"));
        assert!(!ok("n<3"));
        assert!(ok(""));
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("=x").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selector() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let ok = |s: &str| FieldSelector::parse(s).unwrap().matches(&pod);
        assert!(ok("spec.nodeName=n1"));
        assert!(ok("spec.nodeName==n1,metadata.namespace=ns"));
        assert!(!ok("spec.nodeName!=n1"));
        assert!(ok("spec.schedulerName="));
        assert!(ok("status.phase!=Succeeded,status.phase!=Failed"));
        assert!(FieldSelector::parse("garbage").is_err());
        assert_eq!(FieldSelector::parse("a=x\\,y").unwrap().reqs[0].2, "x,y");
    }
}
