//! CEL for device selectors, with the environment Kubernetes gives them: the `device`
//! variable (`driver`, `attributes`, `capacity`, `allowMultipleAllocations`), `quantity()` and
//! `semver()`, `cel.bind`, and the selector cost limit.
//!
//! Parsing and evaluation are the `cel` crate's. It has no type checker, no cost model and no
//! Kubernetes libraries, so this module adds a light checker (undeclared names, expressions
//! that cannot be boolean), a worst-case cost estimate, and the libraries; error texts follow
//! cel-go's where a user sees them.

mod check;
pub mod library;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use cel::{Context, Env, ExecutionError, Program, Value};
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};
use parking_lot::Mutex;

use crate::quantity::Quantity;
use crate::semver::Version;

/// Runtime cost limit of one selector expression (`CELSelectorExpressionMaxCost`).
pub const SELECTOR_MAX_COST: u64 = 1_000_000;
/// Maximum length of a selector expression (`CELSelectorExpressionMaxLength`).
pub const SELECTOR_MAX_LENGTH: usize = 10 * 1024;

/// Kind of a compilation failure, as the API server maps it to a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The expression is wrong (field.Invalid).
    Invalid,
    /// Something broke inside (field.InternalError).
    Internal,
}

/// Why an expression cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelError {
    /// Kind.
    pub kind: ErrorKind,
    /// The text (upstream's `Detail`).
    pub detail: String,
}

impl std::fmt::Display for CelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// A compiled selector.
pub struct Compiled {
    program: Option<Program>,
    /// Set when the expression cannot be used.
    pub error: Option<CelError>,
    /// Worst-case cost estimate.
    pub max_cost: u64,
    attribute_domains: Vec<String>,
    capacity_domains: Vec<String>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled").field("error", &self.error).field("max_cost", &self.max_cost).finish()
    }
}

/// The device a selector looks at.
#[derive(Debug, Clone, Copy)]
pub struct DeviceView<'a> {
    /// The driver; also the domain of attributes named without one.
    pub driver: &'a str,
    /// `allowMultipleAllocations`.
    pub allow_multiple_allocations: Option<bool>,
    /// Attributes by qualified name.
    pub attributes: Option<&'a BTreeMap<String, DeviceAttribute>>,
    /// Capacities by qualified name.
    pub capacity: Option<&'a BTreeMap<String, DeviceCapacity>>,
}

static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Registration into a fresh environment cannot conflict.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    let _ = env.add_macro(library::bind_macro());
    env.set_error_on_duplicate_map_keys(false);
    Arc::new(env)
});

thread_local! {
    /// The context with the library functions; evaluations run in a child scope of it. Per
    /// thread because contexts are not shareable.
    static ROOT: Context<'static, 'static> = {
        let mut ctx = Context::with_env(ENV.clone());
        let _ = library::register(&mut ctx);
        ctx
    };
}

fn with_root<R>(f: impl FnOnce(&Context<'static, 'static>) -> R) -> R {
    ROOT.with(|root| f(root))
}

/// Formats an error like cel-go's `ToDisplayString`: position, message and a caret line.
fn display_error(source: &str, offset: Option<usize>, message: &str) -> String {
    let offset = offset.unwrap_or(0);
    let before: Vec<char> = source.chars().take(offset).collect();
    let line_no = before.iter().filter(|c| **c == '\n').count() + 1;
    let col = before.iter().rev().take_while(|c| **c != '\n').count();
    let line = source.lines().nth(line_no - 1).unwrap_or_default().replace('\t', " ");
    let mut out = format!("ERROR: <input>:{line_no}:{}: {message}", col + 1);
    if !line.is_empty() || source.is_empty() {
        out.push_str(&format!("\n | {line}\n | {}^", ".".repeat(col.min(line.chars().count()))));
    }
    out
}

/// Compiles a selector expression.
pub fn compile(expression: &str) -> Compiled {
    let fail = |kind, detail: String| Compiled {
        program: None,
        error: Some(CelError { kind, detail }),
        max_cost: u64::MAX,
        attribute_domains: Vec::new(),
        capacity_domains: Vec::new(),
    };
    // A parser bug must not take the scheduler down: a panic is reported like any failure.
    let parsed = std::panic::catch_unwind(|| ENV.compile(expression));
    let Ok(parsed) = parsed else {
        return fail(ErrorKind::Internal, "compilation failed: internal error in the CEL parser".into());
    };
    let program = match parsed {
        Ok(p) => p,
        Err(errs) => {
            let text: Vec<String> = errs
                .errors
                .iter()
                .map(|e| {
                    let (line, col) = (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize);
                    let offset: usize =
                        expression.lines().take(line - 1).map(|l| l.chars().count() + 1).sum::<usize>() + col - 1;
                    display_error(expression, Some(offset), &e.msg)
                })
                .collect();
            return fail(ErrorKind::Invalid, format!("compilation failed: {}", text.join("\n")));
        }
    };
    let root = program.expression().clone();
    let (issues, ty) = check::check(&root);
    if !issues.is_empty() {
        let info = program.source_info();
        let text: Vec<String> = issues
            .iter()
            .map(|i| display_error(expression, info.offset_for(i.id).map(|(s, _)| s as usize), &i.message))
            .collect();
        return fail(ErrorKind::Invalid, format!("compilation failed: {}", text.join("\n")));
    }
    if !matches!(ty, check::Ty::Bool | check::Ty::Dyn) {
        return fail(ErrorKind::Invalid, format!("must evaluate to bool or the unknown type, not {}", ty.name()));
    }
    let mut attribute_domains = Vec::new();
    let mut capacity_domains = Vec::new();
    check::literal_domains(&root, &mut attribute_domains, &mut capacity_domains);
    Compiled {
        program: Some(program),
        error: None,
        max_cost: check::estimate_cost(&root),
        attribute_domains,
        capacity_domains,
    }
}

/// cel-go's texts for the runtime errors a selector can hit.
fn runtime_error(e: ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::UndeclaredReference(r) => format!("no such attribute(s): {r}"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {i:?}"),
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => "no such overload".into(),
        ExecutionError::FunctionError { message, .. } => message,
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "bool",
        Value::Null => "null_type",
        _ => "object",
    }
}

fn split_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn attribute_value(a: &DeviceAttribute) -> Result<Value, String> {
    if let Some(i) = a.int {
        return Ok(Value::Int(i));
    }
    if let Some(b) = a.bool {
        return Ok(Value::Bool(b));
    }
    if let Some(s) = &a.string {
        return Ok(Value::String(Arc::new(s.clone())));
    }
    if let Some(v) = &a.version {
        return Version::parse(v).map(library::semver_value).map_err(|e| format!("parse semantic version: {e}"));
    }
    Err("unsupported attribute value".into())
}

impl Compiled {
    /// Evaluates the selector for a device.
    pub fn device_matches(&self, d: &DeviceView<'_>) -> Result<bool, String> {
        let Some(program) = &self.program else {
            return Err(self.error.as_ref().map(|e| e.detail.clone()).unwrap_or_default());
        };
        let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
        for (name, a) in d.attributes.into_iter().flatten() {
            let v = attribute_value(a).map_err(|e| format!("attribute {name}: {e}"))?;
            let (domain, id) = split_name(name, d.driver);
            attributes.entry(domain.to_string()).or_default().insert(id.to_string(), v);
        }
        let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
        for (name, c) in d.capacity.into_iter().flatten() {
            let (domain, id) = split_name(name, d.driver);
            let q = Quantity::of(&c.value).unwrap_or_default();
            capacity.entry(domain.to_string()).or_default().insert(id.to_string(), library::quantity_value(q));
        }
        // Domains nobody published read as empty maps, as in Kubernetes' environment.
        for dom in &self.attribute_domains {
            attributes.entry(dom.clone()).or_default();
        }
        for dom in &self.capacity_domains {
            capacity.entry(dom.clone()).or_default();
        }
        let nest = |m: HashMap<String, HashMap<String, Value>>| -> Value {
            Value::from(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect::<HashMap<String, Value>>())
        };
        let mut device: HashMap<String, Value> = HashMap::new();
        device.insert("driver".into(), Value::String(Arc::new(d.driver.to_string())));
        device.insert("allowMultipleAllocations".into(), Value::Bool(d.allow_multiple_allocations == Some(true)));
        device.insert("attributes".into(), nest(attributes));
        device.insert("capacity".into(), nest(capacity));
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_root(|root| {
                let mut ctx = root.new_inner_scope();
                ctx.add_variable_from_value("device", device);
                program.execute(&ctx)
            })
        }))
        .map_err(|_| "internal error in the CEL interpreter".to_string())?;
        match out {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => {
                let t = type_name(&other);
                Err(format!(
                    "CEL result of type {t} could not be converted to bool: type conversion error from '{t}' to 'bool'"
                ))
            }
            Err(e) => Err(runtime_error(e)),
        }
    }
}

/// Compiled selectors by expression text: each expression is compiled once.
#[derive(Default)]
pub struct CelCache {
    compiled: Mutex<HashMap<String, Arc<Compiled>>>,
}

/// Beyond this many distinct expressions the cache starts over (a guard, not an LRU).
const CACHE_LIMIT: usize = 4096;

impl CelCache {
    /// An empty cache.
    pub fn new() -> Self {
        CelCache::default()
    }

    /// The compiled expression, compiling it on first use.
    pub fn get_or_compile(&self, expression: &str) -> Arc<Compiled> {
        if let Some(c) = self.compiled.lock().get(expression) {
            return c.clone();
        }
        let c = Arc::new(compile(expression));
        let mut g = self.compiled.lock();
        if g.len() >= CACHE_LIMIT {
            g.clear();
        }
        g.entry(expression.to_string()).or_insert(c).clone()
    }
}

#[cfg(test)]
mod tests;
