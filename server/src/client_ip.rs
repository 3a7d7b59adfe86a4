//! The client's address: the socket peer, or the address a trusted proxy forwarded in
//! `X-Forwarded-For` when (and only when) the peer lies in `SHELF_API_TRUSTED_PROXY_CIDRS`;
//! and the client it stands for ([`client_key`]): an IPv4 address, or an IPv6 network of
//! `SHELF_API_CLIENT_IPV6_PREFIX` bits.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

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

/// The client an address stands for, as the rate limit, the stream cap and the audit trail
/// count it: an IPv4 address as is (also written IPv4-mapped, `::ffff:192.0.2.1`), an IPv6
/// address as its network of `v6_prefix` bits (`2001:db8:1:2::/64`). A host is usually given
/// a whole /64 and picks addresses in it at will, so keying by the full address would let it
/// be any number of clients.
pub fn client_key(ip: IpAddr, v6_prefix: u8) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let bits = u32::from(v6_prefix.clamp(1, 128));
                let mask = u128::MAX << (128 - bits);
                let network = Ipv6Addr::from(u128::from(v6) & mask);
                format!("{network}/{bits}")
            }
        },
    }
}

/// Whether the client reached Shelf over TLS: a trusted proxy (the peer) says so with
/// `X-Forwarded-Proto: https` (Shelf itself serves plain HTTP). Session cookies are then
/// `Secure`.
pub fn forwarded_https(peer: Option<IpAddr>, headers: &HeaderMap, trusted: &[IpNet]) -> bool {
    peer.is_some_and(|ip| is_trusted(ip, trusted))
        && headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|net| net.contains(ip))
}

/// Walks `X-Forwarded-For` from the right (the entry the trusted peer appended) past trusted
/// proxies; the first untrusted address is the client. Entries left of it were written by the
/// client itself and are never believed. A malformed entry stops the walk at the last address
/// known to be good.
pub fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
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
    fn ipv6_clients_are_keyed_by_their_network_and_mapped_ipv4_as_ipv4() {
        assert_eq!(client_key(ip("192.0.2.7"), 64), "192.0.2.7");
        assert_eq!(client_key(ip("::ffff:192.0.2.7"), 64), "192.0.2.7");
        let a = client_key(ip("2001:db8:1:2::1"), 64);
        assert_eq!(a, "2001:db8:1:2::/64");
        assert_eq!(client_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), 64), a);
        assert_ne!(client_key(ip("2001:db8:1:3::1"), 64), a);
        assert_eq!(client_key(ip("2001:db8:1:3::1"), 48), "2001:db8:1::/48");
        assert_eq!(client_key(ip("2001:db8::1"), 128), "2001:db8::1/128");
        assert_eq!(client_key(ip("2001:db8::1"), 1), "::/1");
        assert_eq!(client_key(ip("::1"), 64), "::/64");
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
