//! A webhook receiver on loopback for the notify tests: it records every
//! request and answers 200, or a redirect, or never.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;

/// One request a receiver took.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }
}

/// A receiver on loopback that records every request and answers 200
/// (the request at index `hang`, when set, it takes and never answers).
#[derive(Clone)]
pub struct Receiver {
    pub seen: Arc<Mutex<Vec<Received>>>,
    pub hang: Arc<Mutex<Option<usize>>>,
    /// When set, every request is answered with a redirect there.
    pub redirect: Arc<Mutex<Option<String>>>,
}

impl Receiver {
    pub fn new() -> Receiver {
        Receiver {
            seen: Arc::default(),
            hang: Arc::default(),
            redirect: Arc::default(),
        }
    }

    /// Serves on `listener` until the test ends.
    pub fn serve(&self, listener: tokio::net::TcpListener) {
        let me = self.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                let me = me.clone();
                async move {
                    let index = {
                        let mut seen = me.seen.lock().unwrap();
                        seen.push(Received {
                            path: uri.path().to_owned(),
                            headers,
                            body,
                        });
                        seen.len() - 1
                    };
                    if *me.hang.lock().unwrap() == Some(index) {
                        std::future::pending::<()>().await;
                    }
                    match me.redirect.lock().unwrap().clone() {
                        Some(to) => (
                            StatusCode::TEMPORARY_REDIRECT,
                            [(axum::http::header::LOCATION, to)],
                        )
                            .into_response(),
                        None => StatusCode::OK.into_response(),
                    }
                }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }

    pub fn seen(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until it took `n` requests.
    pub async fn until(&self, n: usize) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let seen = self.seen();
            if seen.len() >= n {
                return seen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waited for {n} requests, got {}",
                seen.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn listener() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
}
