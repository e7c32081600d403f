//! Kubernetes' CEL libraries that DRA selectors use: `quantity()` and `semver()` with their
//! methods, and the `cel.bind` macro.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, ListExpr, LiteralValue};
use cel::extractors::This;
use cel::objects::Opaque;
use cel::parser::Macro;
use cel::{Context, ExecutionError, Value};

use std::ops::{Add, Sub};

use crate::quantity::Quantity;
use crate::semver::Version;

/// A `kubernetes.Quantity` value.
#[derive(Debug, Clone, Copy)]
pub struct QuantityVal(pub Quantity);

impl PartialEq for QuantityVal {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for QuantityVal {}
impl Opaque for QuantityVal {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A `kubernetes.Semver` value.
#[derive(Debug, Clone)]
pub struct SemverVal(pub Version);

impl PartialEq for SemverVal {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp(&other.0) == Ordering::Equal
    }
}
impl Eq for SemverVal {}
impl Opaque for SemverVal {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

/// Wraps a quantity into a CEL value.
pub fn quantity_value(q: Quantity) -> Value {
    Value::Opaque(Arc::new(QuantityVal(q)))
}

/// Wraps a version into a CEL value.
pub fn semver_value(v: Version) -> Value {
    Value::Opaque(Arc::new(SemverVal(v)))
}

fn no_overload(name: &str) -> ExecutionError {
    ExecutionError::function_error(name, "no such overload")
}

fn as_quantity(v: &Value) -> Option<Quantity> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<QuantityVal>().map(|q| q.0),
        _ => None,
    }
}

fn as_semver(v: &Value) -> Option<&Version> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<SemverVal>().map(|s| &s.0),
        _ => None,
    }
}

fn compare(name: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    if let (Some(x), Some(y)) = (as_quantity(a), as_quantity(b)) {
        return Ok(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (as_semver(a), as_semver(b)) {
        return Ok(x.cmp(y));
    }
    Err(no_overload(name))
}

fn ord_int(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

fn quantity_operand(name: &str, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Int(i) => Ok(Quantity::from_i64(*i)),
        other => as_quantity(other).ok_or_else(|| no_overload(name)),
    }
}

/// Adds the library functions to a context (they are looked up by name at run time).
pub fn register(ctx: &mut Context<'_, '_>) -> Result<(), cel::DeclarationError> {
    ctx.add_function("quantity", |s: Arc<String>| -> Result<Value, ExecutionError> {
        Quantity::parse(&s).map(quantity_value).map_err(|e| ExecutionError::function_error("quantity", e))
    })?;
    ctx.add_function("isQuantity", |s: Arc<String>| -> bool { Quantity::parse(&s).is_ok() })?;
    ctx.add_function(
        "semver",
        |s: Arc<String>,
         cel::extractors::Arguments(args): cel::extractors::Arguments|
         -> Result<Value, ExecutionError> {
            let normalize = matches!(args.get(1), Some(Value::Bool(true)));
            let parsed = if normalize { Version::parse_normalized(&s) } else { Version::parse(&s) };
            parsed.map(semver_value).map_err(|e| ExecutionError::function_error("semver", e))
        },
    )?;
    ctx.add_function(
        "isSemver",
        |s: Arc<String>, cel::extractors::Arguments(args): cel::extractors::Arguments| -> bool {
            let normalize = matches!(args.get(1), Some(Value::Bool(true)));
            if normalize {
                Version::parse_normalized(&s).is_ok()
            } else {
                Version::parse(&s).is_ok()
            }
        },
    )?;
    ctx.add_function("isGreaterThan", |This(a): This<Value>, b: Value| -> Result<bool, ExecutionError> {
        Ok(compare("isGreaterThan", &a, &b)? == Ordering::Greater)
    })?;
    ctx.add_function("isLessThan", |This(a): This<Value>, b: Value| -> Result<bool, ExecutionError> {
        Ok(compare("isLessThan", &a, &b)? == Ordering::Less)
    })?;
    ctx.add_function("compareTo", |This(a): This<Value>, b: Value| -> Result<i64, ExecutionError> {
        Ok(ord_int(compare("compareTo", &a, &b)?))
    })?;
    ctx.add_function("sign", |This(a): This<Value>| -> Result<i64, ExecutionError> {
        as_quantity(&a).map(Quantity::sign).ok_or_else(|| no_overload("sign"))
    })?;
    ctx.add_function("isInteger", |This(a): This<Value>| -> Result<bool, ExecutionError> {
        as_quantity(&a).map(|q| q.as_i64().is_some()).ok_or_else(|| no_overload("isInteger"))
    })?;
    ctx.add_function("asInteger", |This(a): This<Value>| -> Result<i64, ExecutionError> {
        let q = as_quantity(&a).ok_or_else(|| no_overload("asInteger"))?;
        q.as_i64().ok_or_else(|| ExecutionError::function_error("asInteger", "cannot convert value to integer"))
    })?;
    ctx.add_function("asApproximateFloat", |This(a): This<Value>| -> Result<f64, ExecutionError> {
        as_quantity(&a).map(Quantity::as_f64).ok_or_else(|| no_overload("asApproximateFloat"))
    })?;
    ctx.add_function("add", |This(a): This<Value>, b: Value| -> Result<Value, ExecutionError> {
        let x = as_quantity(&a).ok_or_else(|| no_overload("add"))?;
        Ok(quantity_value(x.add(quantity_operand("add", &b)?)))
    })?;
    ctx.add_function("sub", |This(a): This<Value>, b: Value| -> Result<Value, ExecutionError> {
        let x = as_quantity(&a).ok_or_else(|| no_overload("sub"))?;
        Ok(quantity_value(x.sub(quantity_operand("sub", &b)?)))
    })?;
    ctx.add_function("major", |This(a): This<Value>| -> Result<i64, ExecutionError> {
        as_semver(&a).map(|v| v.major as i64).ok_or_else(|| no_overload("major"))
    })?;
    ctx.add_function("minor", |This(a): This<Value>| -> Result<i64, ExecutionError> {
        as_semver(&a).map(|v| v.minor as i64).ok_or_else(|| no_overload("minor"))
    })?;
    ctx.add_function("patch", |This(a): This<Value>| -> Result<i64, ExecutionError> {
        as_semver(&a).map(|v| v.patch as i64).ok_or_else(|| no_overload("patch"))
    })?;
    Ok(())
}

/// `cel.bind(var, init, expr)`: `expr` with `var` bound to `init` (a comprehension over no
/// elements whose accumulator is the variable, as cel-go expands it).
pub fn bind_macro() -> Macro {
    Macro::receiver("bind", 3, |helper, target, args| {
        if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
            return Ok(None);
        }
        let Some(Expr::Ident(var)) = args.first().map(|a| a.expr.clone()) else {
            let id = args.first().map(|a| a.id).unwrap_or_default();
            return Err(helper.new_error(id, "cel.bind() variable names must be simple identifiers"));
        };
        target.take();
        let result = args.pop().unwrap_or_default();
        let init = args.pop().unwrap_or_default();
        let iter_range = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
        let loop_cond = helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into())));
        let loop_step = helper.next_expr(Expr::Ident(var.clone()));
        Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range,
            iter_var: "#unused".into(),
            iter_var2: None,
            accu_var: var,
            accu_init: init,
            loop_cond,
            loop_step,
            result,
        })))))
    })
}
