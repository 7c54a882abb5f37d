//! `bench soak --dashboard`'s WebSocket reader (the `soak-client` feature): a client that reads the
//! dashboard's telemetry frames as a page would, counting them; runs as a task on the soak's tokio
//! runtime.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// This build has the reader.
pub fn available() -> Result<(), String> {
    Ok(())
}

/// Reads telemetry frames like a page would, counting them, until the server closes the socket.
pub async fn read_frames(
    url: String,
    token: Option<String>,
    frames: Arc<AtomicU64>,
) -> Result<(), String> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| format!("bad WebSocket URL {url}: {e}"))?;
    if let Some(token) = token {
        // The dashboard asks every client for its token; a script sends it as a Bearer header.
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|e| format!("the dashboard's token does not fit a header: {e}"))?;
        request.headers_mut().insert("authorization", value);
    }
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(|e| format!("the WebSocket reader could not connect to {url}: {e}"))?;
    while let Some(message) = socket.next().await {
        match message {
            Ok(tokio_tungstenite::tungstenite::Message::Text(_)) => {
                frames.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}
