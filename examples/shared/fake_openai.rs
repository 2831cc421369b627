//! A local fake of an OpenAI-compatible chat endpoint that answers with
//! scripted replies in order: what the examples' recordings are re-made
//! against (no model is reachable from the build machine).

use std::sync::{Arc, Mutex};

/// Serves `replies` on `127.0.0.1` at `/v1/chat/completions`, one per
/// request; the base URL (`…/v1`) and the server's task (abort it when done).
pub async fn serve(replies: Vec<serde_json::Value>) -> (String, tokio::task::JoinHandle<()>) {
    use axum::routing::post;
    let replies = Arc::new(Mutex::new(replies.into_iter()));
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let next = replies
                .lock()
                .expect("the replies")
                .next()
                .expect("a reply is scripted");
            async move { axum::Json(next) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a local port");
    let addr = listener.local_addr().expect("its address");
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), server)
}
