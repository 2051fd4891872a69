//! kube-rs's mock client as these tests use it: a client whose every request the test
//! answers by hand.

use http::{Method, Request, Response};
use kube::client::Body;
use kube::Client;
use serde_json::Value;
use tower_test::mock;

pub type Handle = mock::Handle<Request<Body>, Response<Body>>;

pub fn mock_client() -> (Client, Handle) {
    let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(svc, "default"), handle)
}

/// The next request: method, path and query, JSON body.
pub async fn next(
    handle: &mut std::pin::Pin<&mut Handle>,
) -> (Method, String, Value, mock::SendResponse<Response<Body>>) {
    let (req, send) = handle.next_request().await.expect("a request");
    let method = req.method().clone();
    let uri = req.uri().to_string();
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (method, uri, body, send)
}

pub fn ok(v: Value) -> Response<Body> {
    Response::new(Body::from(serde_json::to_vec(&v).unwrap()))
}
