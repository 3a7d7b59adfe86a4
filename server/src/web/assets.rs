//! The stylesheet, script and icon, compiled into the binary (no CDN, nothing fetched at run
//! time). Pages link them with a digest of their bytes in the query (`?v=…`), so a browser may
//! keep them for a year and still never runs a stale script after an upgrade.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::middleware::Cacheable;

struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "shelf.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("static/shelf.css"),
    },
    Asset {
        name: "shelf.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("static/shelf.js"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        bytes: include_bytes!("static/favicon.svg"),
    },
];

/// Each asset's URL, with the first 12 hex digits of its SHA-256.
static URLS: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = hex::encode(Sha256::digest(a.bytes));
            (a.name, format!("/ui/static/{}?v={}", a.name, &digest[..12]))
        })
        .collect()
});

/// The URL pages link `name` with.
pub fn url(name: &str) -> String {
    URLS.iter()
        .find(|(n, _)| *n == name)
        .map_or_else(|| format!("/ui/static/{name}"), |(_, url)| url.clone())
}

/// `GET /ui/static/{file}`: open to everyone (the sign-in page needs its stylesheet).
pub async fn asset(Path(file): Path<String>) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == file) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            "Not Found",
        )
            .into_response();
    };
    let mut response = asset.bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response.extensions_mut().insert(Cacheable);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_versioned_url() {
        for asset in ASSETS {
            let url = url(asset.name);
            assert!(
                url.starts_with(&format!("/ui/static/{}?v=", asset.name)),
                "{url}"
            );
            assert!(!asset.bytes.is_empty(), "{}", asset.name);
        }
    }
}
