//! What the `cel` crate leaves to its users and Kubernetes' CEL compiler does before running
//! an expression: rejecting undeclared names and expressions that cannot be a boolean, and
//! estimating the worst-case cost against the selector limit.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

/// A static type, as far as the checker can tell without declarations for everything.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Quantity,
    Semver,
    Device,
    Type,
    Dyn,
}

impl Ty {
    pub(crate) fn name(&self) -> String {
        match self {
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::List(e) => format!("list({})", e.name()),
            Ty::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            Ty::Quantity => "kubernetes.Quantity".into(),
            Ty::Semver => "kubernetes.Semver".into(),
            Ty::Device => "kubernetes.DRADevice".into(),
            Ty::Type => "type".into(),
            Ty::Dyn => "dyn".into(),
        }
    }
}

/// A checker finding, positioned at an expression.
pub(crate) struct Issue {
    pub id: u64,
    pub message: String,
}

/// Global functions of the environment (everything else is an undeclared reference).
const GLOBAL_FUNCTIONS: &[&str] = &[
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
    "matches",
    "quantity",
    "isQuantity",
    "semver",
    "isSemver",
    "url",
    "isURL",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "format",
];

struct Checker {
    scopes: Vec<(String, Ty)>,
    issues: Vec<Issue>,
}

fn literal_ty(l: &LiteralValue) -> Ty {
    match l {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(_) => Ty::Bytes,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(_) => Ty::String,
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

fn common(tys: &[Ty]) -> Ty {
    match tys.first() {
        Some(t) if tys.iter().all(|x| x == t) => t.clone(),
        _ => Ty::Dyn,
    }
}

impl Checker {
    fn lookup(&self, name: &str) -> Option<Ty> {
        self.scopes.iter().rev().find(|(n, _)| n == name).map(|(_, t)| t.clone())
    }

    fn check(&mut self, e: &IdedExpr) -> Ty {
        match &e.expr {
            Expr::Literal(l) => literal_ty(l),
            Expr::Ident(name) => {
                if let Some(t) = self.lookup(name) {
                    return t;
                }
                if name == "device" {
                    return Ty::Device;
                }
                if matches!(
                    name.as_str(),
                    "int" | "uint" | "double" | "string" | "bytes" | "bool" | "list" | "map" | "null_type" | "type"
                ) {
                    return Ty::Type;
                }
                self.issues
                    .push(Issue { id: e.id, message: format!("undeclared reference to '{name}' (in container '')") });
                Ty::Dyn
            }
            Expr::Select(s) => {
                let operand = self.check(&s.operand);
                if s.test {
                    return Ty::Bool;
                }
                match operand {
                    Ty::Device => match s.field.as_str() {
                        "driver" => Ty::String,
                        "allowMultipleAllocations" => Ty::Bool,
                        "attributes" => {
                            Ty::Map(Box::new(Ty::String), Box::new(Ty::Map(Box::new(Ty::String), Box::new(Ty::Dyn))))
                        }
                        "capacity" => Ty::Map(
                            Box::new(Ty::String),
                            Box::new(Ty::Map(Box::new(Ty::String), Box::new(Ty::Quantity))),
                        ),
                        other => {
                            self.issues.push(Issue { id: e.id, message: format!("undefined field '{other}'") });
                            Ty::Dyn
                        }
                    },
                    Ty::Map(_, v) => *v,
                    _ => Ty::Dyn,
                }
            }
            Expr::List(l) => {
                let tys: Vec<Ty> = l.elements.iter().map(|x| self.check(x)).collect();
                Ty::List(Box::new(if tys.is_empty() { Ty::Dyn } else { common(&tys) }))
            }
            Expr::Map(m) => {
                let mut ks = Vec::new();
                let mut vs = Vec::new();
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        ks.push(self.check(&me.key));
                        vs.push(self.check(&me.value));
                    }
                }
                let k = if ks.is_empty() { Ty::Dyn } else { common(&ks) };
                let v = if vs.is_empty() { Ty::Dyn } else { common(&vs) };
                Ty::Map(Box::new(k), Box::new(v))
            }
            Expr::Struct(_) => Ty::Dyn,
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let elem = match &range {
                    Ty::List(e) => (**e).clone(),
                    Ty::Map(k, _) => (**k).clone(),
                    _ => Ty::Dyn,
                };
                let init = self.check(&c.accu_init);
                self.scopes.push((c.iter_var.clone(), elem));
                if let Some(v2) = &c.iter_var2 {
                    self.scopes.push((v2.clone(), Ty::Dyn));
                }
                self.scopes.push((c.accu_var.clone(), init));
                self.check(&c.loop_cond);
                self.check(&c.loop_step);
                let n = 2 + usize::from(c.iter_var2.is_some());
                // The result sees the accumulator but not the iteration variables.
                let accu = self.scopes.pop();
                for _ in 1..n {
                    self.scopes.pop();
                }
                if let Some(a) = accu {
                    self.scopes.push(a);
                }
                let t = self.check(&c.result);
                self.scopes.pop();
                t
            }
            Expr::Call(call) => self.check_call(e.id, call),
            Expr::Unspecified => Ty::Dyn,
        }
    }

    fn check_call(&mut self, id: u64, call: &CallExpr) -> Ty {
        let target = call.target.as_ref().map(|t| self.check(t));
        let args: Vec<Ty> = call.args.iter().map(|a| self.check(a)).collect();
        let f = call.func_name.as_str();
        if f.starts_with('_') || f.starts_with('@') || f.starts_with('!') || f.starts_with('-') {
            return match f {
                "_==_"
                | "_!=_"
                | "_<_"
                | "_<=_"
                | "_>_"
                | "_>=_"
                | "_&&_"
                | "_||_"
                | "!_"
                | "@in"
                | "@not_strictly_false" => Ty::Bool,
                "_+_" | "_-_" | "_*_" | "_/_" | "_%_" => {
                    let t = common(&args);
                    match t {
                        Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes | Ty::List(_) => t,
                        _ => Ty::Dyn,
                    }
                }
                "-_" => args.first().cloned().unwrap_or(Ty::Dyn),
                "_?_:_" => common(&args[1..]),
                "_[_]" => match args.first() {
                    Some(Ty::Map(_, v)) => (**v).clone(),
                    Some(Ty::List(e)) => (**e).clone(),
                    _ => Ty::Dyn,
                },
                _ => Ty::Dyn,
            };
        }
        if target.is_none() && !GLOBAL_FUNCTIONS.contains(&f) {
            self.issues.push(Issue { id, message: format!("undeclared reference to '{f}' (in container '')") });
            return Ty::Dyn;
        }
        match f {
            "size" | "compareTo" | "sign" | "asInteger" | "major" | "minor" | "patch" | "indexOf" | "lastIndexOf"
            | "int" => Ty::Int,
            "uint" => Ty::Uint,
            "double" | "asApproximateFloat" => Ty::Double,
            "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join"
            | "format" | "quote" | "reverse" => Ty::String,
            "bool" | "matches" | "startsWith" | "endsWith" | "contains" | "isGreaterThan" | "isLessThan"
            | "isInteger" | "isQuantity" | "isSemver" | "isURL" | "isIP" | "isCIDR" => Ty::Bool,
            "quantity" | "add" | "sub" => Ty::Quantity,
            "semver" => Ty::Semver,
            "bytes" => Ty::Bytes,
            "type" => Ty::Type,
            "split" => Ty::List(Box::new(Ty::String)),
            _ => Ty::Dyn,
        }
    }
}

/// Checks an expression: the issues found, and the type it evaluates to.
pub(crate) fn check(e: &IdedExpr) -> (Vec<Issue>, Ty) {
    let mut c = Checker { scopes: Vec::new(), issues: Vec::new() };
    let t = c.check(e);
    (c.issues, t)
}

/// Maximum number of attribute or capacity domains, and of entries per domain.
const MAX_ENTRIES: u64 = 32;
/// Maximum length of string attributes and of lists whose size is unknown.
const MAX_VALUE_LENGTH: u64 = 64;

/// Worst-case evaluation cost, after cel-go's model in outline: one unit per variable
/// access, field selection and function call, string functions by the length of their
/// input, and comprehensions by the size of what they iterate. Input sizes are bounded by
/// the ResourceSlice limits (32 domains, 32 entries each, 64 characters per value).
pub(crate) fn estimate_cost(e: &IdedExpr) -> u64 {
    cost(e).0
}

/// (cost, maximum size of the value).
fn cost(e: &IdedExpr) -> (u64, u64) {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => (0, s.inner().len() as u64),
        Expr::Literal(_) => (0, 1),
        Expr::Ident(name) if name == "device" => (1, MAX_ENTRIES),
        Expr::Ident(_) => (1, MAX_VALUE_LENGTH),
        Expr::Select(s) => {
            let (c, _) = cost(&s.operand);
            (c.saturating_add(1), if s.field == "driver" { 63 } else { MAX_ENTRIES.max(MAX_VALUE_LENGTH) })
        }
        Expr::List(l) => {
            let c = l.elements.iter().map(|x| cost(x).0).fold(10u64, u64::saturating_add);
            (c, l.elements.len() as u64)
        }
        Expr::Map(m) => {
            let mut c = 30u64;
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    c = c.saturating_add(cost(&me.key).0).saturating_add(cost(&me.value).0);
                }
            }
            (c, m.entries.len() as u64)
        }
        Expr::Struct(_) => (40, 1),
        Expr::Comprehension(c) => {
            let (range_cost, n) = cost(&c.iter_range);
            let per_iteration = cost(&c.loop_cond).0.saturating_add(cost(&c.loop_step).0);
            let total = range_cost
                .saturating_add(cost(&c.accu_init).0)
                .saturating_add(n.saturating_mul(per_iteration))
                .saturating_add(cost(&c.result).0);
            (total, n)
        }
        Expr::Call(call) => {
            let mut c = 0u64;
            let mut sizes = Vec::new();
            if let Some(t) = &call.target {
                let (tc, ts) = cost(t);
                c = c.saturating_add(tc);
                sizes.push(ts);
            }
            for a in &call.args {
                let (ac, s) = cost(a);
                c = c.saturating_add(ac);
                sizes.push(s);
            }
            let input = sizes.first().copied().unwrap_or(1);
            let own = match call.func_name.as_str() {
                "matches" | "contains" | "startsWith" | "endsWith" | "lowerAscii" | "upperAscii" | "trim"
                | "replace" | "split" | "indexOf" | "lastIndexOf" => 1 + input.div_ceil(10),
                "_&&_" | "_||_" | "_?_:_" | "!_" => 0,
                _ => 1,
            };
            (c.saturating_add(own), input)
        }
        Expr::Unspecified => (0, 0),
    }
}

/// The literal domains the expression looks up in `device.attributes` or `device.capacity`
/// (unknown domains must read as empty maps, so the evaluator pre-fills these).
pub(crate) fn literal_domains(e: &IdedExpr, attributes: &mut Vec<String>, capacity: &mut Vec<String>) {
    let visit = |x: &IdedExpr, a: &mut Vec<String>, c: &mut Vec<String>| literal_domains(x, a, c);
    match &e.expr {
        Expr::Call(call) => {
            if call.func_name == "_[_]" && call.args.len() == 2 {
                if let (Expr::Select(s), Expr::Literal(LiteralValue::String(key))) =
                    (&call.args[0].expr, &call.args[1].expr)
                {
                    if matches!(&s.operand.expr, Expr::Ident(n) if n == "device") {
                        let key = key.inner().to_string();
                        match s.field.as_str() {
                            "attributes" => attributes.push(key),
                            "capacity" => capacity.push(key),
                            _ => {}
                        }
                    }
                }
            }
            if let Some(t) = &call.target {
                visit(t, attributes, capacity);
            }
            for a in &call.args {
                visit(a, attributes, capacity);
            }
        }
        Expr::Select(s) => visit(&s.operand, attributes, capacity),
        Expr::List(l) => l.elements.iter().for_each(|x| visit(x, attributes, capacity)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    visit(&me.key, attributes, capacity);
                    visit(&me.value, attributes, capacity);
                }
            }
        }
        Expr::Comprehension(c) => {
            for x in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                visit(x, attributes, capacity);
            }
        }
        _ => {}
    }
}
