//! DefaultBinder (upstream `framework/plugins/defaultbinder`): binds the pod through the API client (`pods/<name>/binding`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ksched_framework::client::ApiClient;
use ksched_framework::{BindPlugin, CycleState, Handle, Plugin, PodInfo, Status};

use crate::names;

/// The DefaultBinder plugin.
pub struct DefaultBinder {
    client: Arc<dyn ApiClient>,
}

impl std::fmt::Debug for DefaultBinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultBinder").finish_non_exhaustive()
    }
}

/// Builds the plugin around the handle's client; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(DefaultBinder { client: handle.client.clone() }))
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &str {
        names::DEFAULT_BINDER
    }

    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        Some(self)
    }
}

impl BindPlugin for DefaultBinder {
    fn bind<'a>(
        &'a self,
        _state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
    ) -> Pin<Box<dyn Future<Output = Status> + Send + 'a>> {
        let call = self.client.bind(&pod.pod, node);
        Box::pin(async move {
            match call.await {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    use crate::helper::testing::{pod, pod_info};
    use ksched_framework::client::ApiError;
    use ksched_framework::pod::Pod;
    use ksched_framework::Code;
    use serde_json::json;

    type Ready<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

    /// Records bind calls and answers with a fixed result.
    struct FakeClient {
        result: Result<(), ApiError>,
        calls: Mutex<Vec<(String, String, String, String)>>,
    }

    impl ApiClient for FakeClient {
        fn bind(&self, pod: &Pod, node: &str) -> Ready<Result<(), ApiError>> {
            let m = &pod.metadata;
            self.calls.lock().unwrap().push((
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default(),
                m.uid.clone().unwrap_or_default(),
                node.to_string(),
            ));
            let r = self.result.clone();
            Box::pin(async move { r })
        }
        fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> Ready<Result<(), ApiError>> {
            unreachable!("the binder only binds")
        }
        fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> Ready<Result<(), ApiError>> {
            unreachable!("the binder only binds")
        }
    }

    /// Polls a future that never waits on I/O to completion.
    fn run<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    #[test]
    fn bind() {
        let cases = [
            ("successful", Ok(()), Code::Success, ""),
            ("binding error", Err(ApiError { code: 409, message: "conflict".into() }), Code::Error, "conflict"),
        ];
        for (name, result, code, msg) in cases {
            let client = Arc::new(FakeClient { result, calls: Mutex::new(Vec::new()) });
            let handle = Handle { client: client.clone(), ..Handle::for_tests() };
            let plugin = new(None, &handle).unwrap();
            let p =
                pod_info(pod(json!({"name": "foo", "namespace": "ns", "uid": "foo-uid"}), json!({"containers": []})));
            let status = run(plugin.as_bind().unwrap().bind(&CycleState::new(), &p, "foohost.kubernetes.mydomain.com"));
            assert_eq!(status.code(), code, "{name}");
            assert_eq!(status.message(), msg, "{name}");
            let calls = client.calls.lock().unwrap();
            assert_eq!(
                *calls,
                [("ns".into(), "foo".into(), "foo-uid".into(), "foohost.kubernetes.mydomain.com".into())],
                "{name}"
            );
        }
    }
}
