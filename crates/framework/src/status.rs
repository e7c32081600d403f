//! The outcome of running a plugin: a code plus human-readable reasons.

use std::fmt;

/// Status codes in upstream's ordinal order (the order matters for metrics labels and comparisons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Code {
    /// The plugin ran and the pod may proceed.
    #[default]
    Success,
    /// An unexpected internal failure; the pod is retried through the error backoff path.
    Error,
    /// The pod does not fit; preemption might help.
    Unschedulable,
    /// The pod does not fit and preemption cannot help on this node.
    UnschedulableAndUnresolvable,
    /// Permit asks the binding cycle to wait.
    Wait,
    /// The plugin has nothing to do for this pod (meaning depends on the extension point).
    Skip,
    /// Success for now, but the pod must wait for an external actor.
    Pending,
}

impl Code {
    /// The upstream name of the code (`Success`, `Unschedulable`, ...), used in metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plugin result. `Status::default()` is Success and allocates nothing.
///
/// Two words wide: Filter returns one per node evaluated, so the rare details (reasons, wrapped
/// error, producing plugin) live behind a box that successes never allocate.
#[derive(Debug, Clone, Default)]
pub struct Status {
    code: Code,
    detail: Option<Box<Detail>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Detail {
    reasons: Vec<String>,
    /// Text of a wrapped error; when set it is the first part of `message()`.
    error: Option<String>,
    /// The plugin that produced a rejection (set by the framework).
    plugin: Option<String>,
}

static NO_DETAIL: Detail = Detail { reasons: Vec::new(), error: None, plugin: None };

impl PartialEq for Status {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.detail() == other.detail()
    }
}

impl Eq for Status {}

impl Status {
    /// A successful status.
    pub fn success() -> Self {
        Self::default()
    }

    fn detail(&self) -> &Detail {
        self.detail.as_deref().unwrap_or(&NO_DETAIL)
    }

    fn detail_mut(&mut self) -> &mut Detail {
        self.detail.get_or_insert_with(Default::default)
    }

    /// A status with the given code and reasons.
    pub fn new(code: Code, reasons: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let reasons: Vec<String> = reasons.into_iter().map(Into::into).collect();
        let detail = (!reasons.is_empty()).then(|| Box::new(Detail { reasons, error: None, plugin: None }));
        Status { code, detail }
    }

    /// `Unschedulable` with one reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, [reason.into()])
    }

    /// `UnschedulableAndUnresolvable` with one reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, [reason.into()])
    }

    /// `Error` wrapping an error text.
    pub fn error(err: impl fmt::Display) -> Self {
        let detail = Detail { reasons: Vec::new(), error: Some(err.to_string()), plugin: None };
        Status { code: Code::Error, detail: Some(Box::new(detail)) }
    }

    /// `Skip`.
    pub fn skip() -> Self {
        Status { code: Code::Skip, detail: None }
    }

    /// `Wait`.
    pub fn wait() -> Self {
        Status { code: Code::Wait, detail: None }
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, without a wrapped error.
    pub fn reasons(&self) -> &[String] {
        &self.detail().reasons
    }

    /// Reasons including the error text first, as upstream's `Reasons()` does.
    pub fn all_reasons(&self) -> Vec<String> {
        let d = self.detail();
        let mut out = Vec::with_capacity(d.reasons.len() + 1);
        if let Some(e) = &d.error {
            out.push(e.clone());
        }
        out.extend(d.reasons.iter().cloned());
        out
    }

    /// Reasons joined with ", " (error text first), upstream's `Message()`.
    pub fn message(&self) -> String {
        self.all_reasons().join(", ")
    }

    /// Appends a reason.
    pub fn push_reason(&mut self, reason: impl Into<String>) {
        self.detail_mut().reasons.push(reason.into());
    }

    /// The plugin recorded as the producer of this status.
    pub fn plugin(&self) -> Option<&str> {
        self.detail().plugin.as_deref()
    }

    /// Records the producing plugin (builder style).
    pub fn with_plugin(mut self, plugin: impl Into<String>) -> Self {
        self.set_plugin(plugin);
        self
    }

    /// Records the producing plugin in place.
    pub fn set_plugin(&mut self, plugin: impl Into<String>) {
        self.detail_mut().plugin = Some(plugin.into());
    }

    /// Replaces the code, keeping the reasons.
    pub fn with_code(mut self, code: Code) -> Self {
        self.code = code;
        self
    }

    /// Drops a status known to be uninteresting, with the no-detail case inline: filters return
    /// one per node and plugin, and the out-of-line drop glue was a measurable share of the walk.
    #[inline]
    pub fn discard(self) {
        if let Some(detail) = self.detail {
            drop(detail);
        }
    }

    /// True for Success.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// True for Skip.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// True for Wait.
    pub fn is_wait(&self) -> bool {
        self.code == Code::Wait
    }

    /// "Rejected" = Unschedulable, UnschedulableAndUnresolvable or Pending.
    pub fn is_rejected(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending)
    }

    /// The error text when this status is an error (Success/Wait/Skip have none).
    pub fn as_error(&self) -> Option<String> {
        match self.code {
            Code::Success | Code::Wait | Code::Skip => None,
            _ => Some(self.message()),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_puts_error_first() {
        let mut s = Status::error("boom");
        s.push_reason("second");
        assert_eq!(s.message(), "boom, second");
        assert_eq!(s.as_error().as_deref(), Some("boom, second"));
    }

    #[test]
    fn rejection_classes() {
        assert!(Status::unschedulable("x").is_rejected());
        assert!(Status::unresolvable("x").is_rejected());
        assert!(Status::new(Code::Pending, ["p"]).is_rejected());
        assert!(!Status::error("e").is_rejected());
        assert!(Status::skip().as_error().is_none());
        assert!(Status::default().is_success());
        assert_eq!(std::mem::size_of::<Status>(), 16);
        // An empty detail and no detail are the same status.
        assert_eq!(Status::new(Code::Skip, Vec::<String>::new()), Status::skip());
        assert_ne!(Status::skip().with_plugin("P"), Status::skip());
    }
}
