//! Watch streams: newline-delimited `{"type":…,"object":…}` frames, or
//! length-prefixed protobuf `WatchEvent`s for protobuf clients.
//!
//! Writers never wait on watchers: each write is encoded once into a
//! [`LiveEvent`] and handed to every watcher's bounded channel with
//! `try_send`. Per-watcher work (selector filtering, Event API views, Table
//! rendering, bookmarks) happens here, on the watcher's own task.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::Stream;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior, Sleep};

use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Inner, Stored};
use crate::table::{self, TableOpts};

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created (or started matching the watch's selectors).
    Added,
    /// Object changed.
    Modified,
    /// Object deleted (or stopped matching).
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// Encodes `{"type":T,"object":OBJ}\n`, returning the line and the slice holding OBJ.
pub(crate) fn encode_line(ty: &str, obj: &Value) -> (Bytes, Bytes) {
    let prefix = format!("{{\"type\":\"{ty}\",\"object\":");
    let mut buf = Vec::with_capacity(prefix.len() + 2048);
    buf.extend_from_slice(prefix.as_bytes());
    // Serializing a `Value` into a Vec cannot fail (keys are always strings).
    let _ = serde_json::to_writer(&mut buf, obj);
    buf.extend_from_slice(b"}\n");
    let line = Bytes::from(buf);
    let json = line.slice(prefix.len()..line.len() - 2);
    (line, json)
}

fn line_from_json(out: &mut BytesMut, ty: &str, json: &[u8]) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(json);
    out.extend_from_slice(b"}\n");
}

/// One committed write, shared by every watcher of its bucket.
pub(crate) struct LiveEvent {
    pub rv: u64,
    pub ty: EventType,
    pub obj: Arc<Value>,
    pub prev: Option<Arc<Value>>,
    /// `{"type":…,"object":…}\n` for `ty`.
    pub line: Bytes,
}

/// Items queued before live events: initial state, history replay, markers.
pub(crate) enum Pending {
    /// A ready-made line.
    Line(Bytes),
    /// Current state, sent as ADDED.
    State(Stored),
    /// A history entry being replayed.
    Replay { ty: EventType, json: Bytes, prev: Option<Bytes> },
}

/// How a watcher wants events filtered and rendered.
pub(crate) struct Format {
    pub def: &'static ResourceDef,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
    /// Converts stored objects to the requested API's shape.
    pub view: Option<fn(&Value) -> Value>,
    pub render: Render,
    /// Length-prefixed protobuf WatchEvent frames instead of JSON lines.
    pub proto: bool,
}

/// The representation a client asked for in its Accept header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Render {
    /// The object itself.
    Object,
    /// A `meta.k8s.io` Table.
    Table(TableOpts),
    /// A `PartialObjectMetadata` of the given apiVersion.
    Partial(&'static str),
}

impl Render {
    /// Renders one object in this representation.
    pub(crate) fn one(&self, def: &'static ResourceDef, obj: &Value) -> Value {
        match self {
            Render::Object => obj.clone(),
            Render::Table(opts) => table::table_for(def, &[obj], opts, json!({})),
            Render::Partial(api_version) => partial(api_version, obj),
        }
    }
}

/// `PartialObjectMetadata` for an object.
pub(crate) fn partial(api_version: &str, obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

impl Format {
    fn is_plain(&self) -> bool {
        !self.proto
            && self.labels.is_none()
            && self.fields.is_none()
            && self.view.is_none()
            && matches!(self.render, Render::Object)
    }

    fn project<'a>(&self, obj: &'a Value) -> Cow<'a, Value> {
        match self.view {
            Some(f) => Cow::Owned(f(obj)),
            None => Cow::Borrowed(obj),
        }
    }

    fn matches(&self, obj: &Value) -> bool {
        self.labels.as_ref().is_none_or(|l| l.matches_object(obj))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj))
    }

    /// Encodes `obj` (stored form) as an event of the type implied by the
    /// selector transition from `prev`, or nothing if neither matches.
    fn encode(&self, out: &mut BytesMut, ty: EventType, obj: &Value, prev: Option<&Value>) {
        let now = self.project(obj);
        let now_matches = self.matches(&now);
        let ty = match ty {
            EventType::Modified => {
                let was = prev.map(|p| self.matches(&self.project(p))).unwrap_or(true);
                match (was, now_matches) {
                    (true, true) => EventType::Modified,
                    (false, true) => EventType::Added,
                    (true, false) => EventType::Deleted,
                    (false, false) => return,
                }
            }
            other if now_matches => other,
            _ => return,
        };
        if self.proto {
            let rendered = self.render.one(self.def, &now);
            self.frame(out, ty.as_str(), &rendered);
            return;
        }
        let json = match self.render {
            Render::Object => serde_json::to_vec(now.as_ref()),
            _ => serde_json::to_vec(&self.render.one(self.def, &now)),
        }
        .unwrap_or_default();
        line_from_json(out, ty.as_str(), &json);
    }

    /// A BOOKMARK line at `rv`.
    pub(crate) fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta});
        if self.proto {
            let mut out = BytesMut::new();
            self.frame(&mut out, "BOOKMARK", &obj);
            return out.freeze();
        }
        encode_line("BOOKMARK", &obj).0
    }

    /// An ERROR event carrying a Status (used for 410 Expired).
    pub(crate) fn error_event(&self, err: &ApiError) -> Bytes {
        if self.proto {
            let mut frame = Vec::new();
            crate::protobuf::watch_frame("ERROR", &crate::protobuf::encode_status(&err.to_status()), &mut frame);
            return Bytes::from(frame);
        }
        error_line(err)
    }

    /// Appends one protobuf watch frame for `obj` (which carries apiVersion and kind).
    fn frame(&self, out: &mut BytesMut, ty: &str, obj: &Value) {
        if let Some(b) = crate::protobuf::encode_object(obj) {
            let mut frame = Vec::with_capacity(b.len() + 32);
            crate::protobuf::watch_frame(ty, &b, &mut frame);
            out.extend_from_slice(&frame);
        }
    }
}

/// An ERROR event line carrying a Status (used for 410 Expired).
pub(crate) fn error_line(err: &ApiError) -> Bytes {
    encode_line("ERROR", &err.to_status()).0
}

/// Flush a frame once this many bytes are buffered.
const FRAME_BYTES: usize = 256 * 1024;

/// The body stream of a watch response.
pub(crate) struct WatchStream {
    pub(crate) pending: VecDeque<Pending>,
    pub(crate) rx: Option<mpsc::Receiver<Arc<LiveEvent>>>,
    pub(crate) fmt: Format,
    pub(crate) inner: Arc<Inner>,
    pub(crate) bookmarks: Option<Interval>,
    pub(crate) deadline: Option<Pin<Box<Sleep>>>,
    pub(crate) last_rv: u64,
    pub(crate) batch: Vec<Arc<LiveEvent>>,
    pub(crate) finished: bool,
}

impl WatchStream {
    pub(crate) fn new(
        inner: Arc<Inner>,
        fmt: Format,
        pending: VecDeque<Pending>,
        rx: Option<mpsc::Receiver<Arc<LiveEvent>>>,
        start_rv: u64,
        bookmark_every: Option<Duration>,
        timeout: Option<Duration>,
    ) -> Self {
        let bookmarks = bookmark_every.map(|every| {
            let mut iv = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
            iv
        });
        WatchStream {
            pending,
            rx,
            fmt,
            inner,
            bookmarks,
            deadline: timeout.map(|t| Box::pin(tokio::time::sleep(t))),
            last_rv: start_rv,
            batch: Vec::with_capacity(256),
            finished: false,
        }
    }

    fn encode_pending(&self, item: Pending, out: &mut BytesMut) {
        match item {
            Pending::Line(b) => out.extend_from_slice(&b),
            Pending::State(s) => {
                if self.fmt.is_plain() {
                    line_from_json(out, "ADDED", &s.json);
                } else {
                    self.fmt.encode(out, EventType::Added, &s.value, None);
                }
            }
            Pending::Replay { ty, json, prev } => {
                if self.fmt.is_plain() {
                    line_from_json(out, ty.as_str(), &json);
                    return;
                }
                let Ok(obj) = serde_json::from_slice::<Value>(&json) else {
                    return;
                };
                let prev = prev.and_then(|p| serde_json::from_slice::<Value>(&p).ok());
                self.fmt.encode(out, ty, &obj, prev.as_ref());
            }
        }
    }
}

impl Stream for WatchStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        if let Some(d) = this.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                this.finished = true;
                return Poll::Ready(None);
            }
        }
        let mut out = BytesMut::new();
        while out.len() < FRAME_BYTES {
            let Some(item) = this.pending.pop_front() else {
                break;
            };
            this.encode_pending(item, &mut out);
        }
        if !out.is_empty() {
            return Poll::Ready(Some(Ok(out.freeze())));
        }
        let Some(rx) = this.rx.as_mut() else {
            this.finished = true;
            return Poll::Ready(None);
        };
        loop {
            this.batch.clear();
            match rx.poll_recv_many(cx, &mut this.batch, 512) {
                Poll::Ready(0) => {
                    // Sender dropped: we fell behind or the server is stopping.
                    this.finished = true;
                    return Poll::Ready(None);
                }
                Poll::Ready(_) => {
                    let batch = std::mem::take(&mut this.batch);
                    for ev in &batch {
                        if this.fmt.is_plain() {
                            out.extend_from_slice(&ev.line);
                        } else {
                            this.fmt.encode(&mut out, ev.ty, &ev.obj, ev.prev.as_deref());
                        }
                        this.last_rv = this.last_rv.max(ev.rv);
                    }
                    this.batch = batch;
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(out.freeze())));
                    }
                }
                Poll::Pending => break,
            }
        }
        if let Some(iv) = this.bookmarks.as_mut() {
            if iv.poll_tick(cx).is_ready() {
                // The published rv is stored after fan-out, so once our queue is
                // empty every event up to it has been delivered to us.
                let published = this.inner.rv.load(Ordering::Acquire);
                let drained = this.rx.as_ref().is_none_or(|rx| rx.is_empty());
                if drained {
                    this.last_rv = this.last_rv.max(published);
                }
                return Poll::Ready(Some(Ok(this.fmt.bookmark(this.last_rv, false))));
            }
        }
        Poll::Pending
    }
}
