//! A client speaking protobuf exactly as client-go does by default (the
//! upstream kube-scheduler's defaults): `k8s\0` + runtime.Unknown bodies,
//! `Accept: application/vnd.kubernetes.protobuf, */*`, length-prefixed watch
//! frames. Messages are built and read with k8s-pb (prost, generated from
//! Kubernetes' .proto files), independently of the server's codec.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::BodyExt;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status, WatchEvent};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;

const PB: &str = "application/vnd.kubernetes.protobuf";

fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let u = Unknown {
        type_meta: Some(TypeMeta { api_version: Some(api_version.into()), kind: Some(kind.into()) }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(u.encode_to_vec());
    out
}

fn open<T: Message + Default>(body: &[u8]) -> (String, T) {
    let rest = body.strip_prefix(b"k8s\0").unwrap_or_else(|| panic!("protobuf magic in {body:?}"));
    let u = Unknown::decode(rest).expect("runtime.Unknown");
    let kind = u.type_meta.and_then(|t| t.kind).unwrap_or_default();
    (kind, T::decode(u.raw.unwrap_or_default().as_slice()).expect("message decodes"))
}

struct Resp {
    code: u16,
    content_type: String,
    body: kube::client::Body,
}

async fn send(client: &kube::Client, method: &str, path: &str, body: Option<Vec<u8>>) -> Resp {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("accept", format!("{PB}, */*"))
        .header("content-type", PB)
        .body(kube::client::Body::from(body.unwrap_or_default()))
        .unwrap();
    let resp = client.send(req).await.expect("request sent");
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    Resp { code: resp.status().as_u16(), content_type, body: resp.into_body() }
}

async fn read_all(r: Resp) -> (u16, String, Vec<u8>) {
    let bytes = r.body.collect().await.expect("body").to_bytes().to_vec();
    (r.code, r.content_type, bytes)
}

fn meta(name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta { name: Some(name.into()), ..Default::default() })
}

fn pod(name: &str, cpu: &str) -> core::Pod {
    let requests = BTreeMap::from([("cpu".to_string(), Quantity { string: Some(cpu.into()) })]);
    core::Pod {
        metadata: meta(name),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: Some("c".into()),
                image: Some("nginx".into()),
                resources: Some(core::ResourceRequirements { requests, ..Default::default() }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// Reads whole length-prefixed frames from a watch body.
struct Frames {
    body: kube::client::Body,
    buf: Vec<u8>,
}

impl Frames {
    async fn next(&mut self) -> WatchEvent {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let frame: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
                    return WatchEvent::decode(frame.as_slice()).expect("WatchEvent");
                }
            }
            let f = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("watch frame in time")
                .expect("stream open")
                .expect("frame");
            if let Ok(data) = f.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_client_lists_watches_and_binds() {
    let srv = common::start().await;
    let client = common::http_client(&srv, Some(srv.token()));

    let node = core::Node {
        metadata: meta("n1"),
        status: Some(core::NodeStatus {
            capacity: BTreeMap::from([("cpu".to_string(), Quantity { string: Some("4".into()) })]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (code, ct, body) =
        read_all(send(&client, "POST", "/api/v1/nodes", Some(envelope("v1", "Node", &node))).await).await;
    assert_eq!((code, ct.as_str()), (201, PB));
    let (kind, created): (_, core::Node) = open(&body);
    assert_eq!(kind, "Node");
    let alloc = created.status.unwrap().allocatable;
    assert_eq!(alloc["cpu"].string.as_deref(), Some("4"), "defaulting ran on the decoded node");

    let path = "/api/v1/namespaces/default/pods";
    let (code, _, body) =
        read_all(send(&client, "POST", path, Some(envelope("v1", "Pod", &pod("p1", "500m")))).await).await;
    assert_eq!(code, 201);
    let (_, created): (_, core::Pod) = open(&body);
    assert_eq!(created.spec.as_ref().unwrap().scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(
        created.spec.unwrap().containers[0].resources.as_ref().unwrap().requests["cpu"].string.as_deref(),
        Some("500m")
    );

    let (code, ct, body) = read_all(send(&client, "GET", path, None).await).await;
    assert_eq!((code, ct.as_str()), (200, PB));
    let (kind, list): (_, core::PodList) = open(&body);
    assert_eq!(kind, "PodList");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.as_ref().unwrap().name.as_deref(), Some("p1"));
    let rv = list.metadata.unwrap().resource_version.unwrap();

    let watch =
        send(&client, "GET", &format!("{path}?watch=true&resourceVersion={rv}&allowWatchBookmarks=false"), None).await;
    assert_eq!((watch.code, watch.content_type.as_str()), (200, "application/vnd.kubernetes.protobuf;stream=watch"));
    let mut frames = Frames { body: watch.body, buf: Vec::new() };

    let binding = core::Binding {
        metadata: meta("p1"),
        target: Some(core::ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..Default::default()
        }),
    };
    let (code, _, body) =
        read_all(send(&client, "POST", &format!("{path}/p1/binding"), Some(envelope("v1", "Binding", &binding))).await)
            .await;
    assert_eq!(code, 201);
    let (kind, status): (_, Status) = open(&body);
    assert_eq!((kind.as_str(), status.status.as_deref()), ("Status", Some("Success")));

    let ev = frames.next().await;
    assert_eq!(ev.r#type.as_deref(), Some("MODIFIED"));
    let (kind, bound): (_, core::Pod) = open(&ev.object.unwrap().raw.unwrap());
    assert_eq!(kind, "Pod");
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));

    // A second binding conflicts, and the Status says so in protobuf.
    let (code, ct, body) =
        read_all(send(&client, "POST", &format!("{path}/p1/binding"), Some(envelope("v1", "Binding", &binding))).await)
            .await;
    assert_eq!((code, ct.as_str()), (409, PB));
    let (_, status): (_, Status) = open(&body);
    assert_eq!(status.reason.as_deref(), Some("Conflict"));

    let (code, _, body) = read_all(send(&client, "GET", &format!("{path}/nope"), None).await).await;
    assert_eq!(code, 404);
    let (_, status): (_, Status) = open(&body);
    assert_eq!(status.message.as_deref(), Some("pods \"nope\" not found"));
    assert_eq!(status.code, Some(404));

    let (code, _, body) =
        read_all(send(&client, "POST", path, Some(envelope("v1", "Pod", &pod("bad", "abc")))).await).await;
    assert_eq!(code, 400);
    let (_, status): (_, Status) = open(&body);
    assert!(status.message.unwrap().contains("quantities must match the regular expression"));

    srv.shutdown().await;
}

#[tokio::test]
async fn json_clients_read_what_protobuf_clients_wrote() {
    let srv = common::start().await;
    let client = common::http_client(&srv, Some(srv.token()));
    let mut p = pod("mixed", "250m");
    p.spec.as_mut().unwrap().tolerations =
        vec![core::Toleration { key: Some("k".into()), operator: Some("Exists".into()), ..Default::default() }];
    let (code, _, _) =
        read_all(send(&client, "POST", "/api/v1/namespaces/default/pods", Some(envelope("v1", "Pod", &p))).await).await;
    assert_eq!(code, 201);
    let stored = srv.store().get("v1", "Pod", Some("default"), "mixed").unwrap();
    assert_eq!(stored["spec"]["containers"][0]["resources"]["requests"]["cpu"], "250m");
    assert_eq!(stored["spec"]["tolerations"][0]["key"], "k");
    srv.shutdown().await;
}
