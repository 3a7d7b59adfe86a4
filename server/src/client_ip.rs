//! The client's address: the socket peer, or the address a trusted proxy forwarded in
//! `X-Forwarded-For` when (and only when) the peer lies in `SHELF_API_TRUSTED_PROXY_CIDRS`.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request};
use shelf_app::settings::IpNet;

/// The client address of a request, or `None` when the transport gave no peer (in-process
/// tests).
pub fn client_ip<B>(req: &Request<B>, trusted: &[IpNet]) -> Option<IpAddr> {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())?;
    Some(resolve(peer, req.headers(), trusted))
}

fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|net| net.contains(ip))
}

/// Walks `X-Forwarded-For` from the right (the entry the trusted peer appended) past trusted
/// proxies; the first untrusted address is the client. Entries left of it were written by the
/// client itself and are never believed. A malformed entry stops the walk at the last address
/// known to be good.
fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    if !is_trusted(peer, trusted) {
        return peer;
    }
    let mut client = peer;
    let hops = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>();
    for hop in hops.iter().rev() {
        let Some(ip) = parse_hop(hop) else {
            break;
        };
        client = ip;
        if !is_trusted(ip, trusted) {
            break;
        }
    }
    client
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]:80`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    hop.parse::<SocketAddr>().ok().map(|s| s.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(xff: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_str(xff).expect("header"),
        );
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn forwarded_addresses_count_only_from_trusted_peers() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let h = headers("203.0.113.9");
        assert_eq!(
            resolve(ip("198.51.100.1"), &h, &trusted),
            ip("198.51.100.1")
        );
        assert_eq!(resolve(ip("10.0.0.2"), &h, &trusted), ip("203.0.113.9"));
        assert_eq!(
            resolve(ip("10.0.0.2"), &HeaderMap::new(), &trusted),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn spoofed_left_entries_are_ignored() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let h = headers("1.1.1.1, 203.0.113.9, 10.0.0.5");
        assert_eq!(resolve(ip("10.0.0.2"), &h, &trusted), ip("203.0.113.9"));
        let bad = headers("1.1.1.1, garbage, 10.0.0.5");
        assert_eq!(resolve(ip("10.0.0.2"), &bad, &trusted), ip("10.0.0.5"));
        let ported = headers("[2001:db8::1]:443");
        assert_eq!(
            resolve(ip("10.0.0.2"), &ported, &trusted),
            ip("2001:db8::1")
        );
    }
}
