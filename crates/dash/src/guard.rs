//! The same-origin guard: which Host and Origin headers the server answers, so that other web pages
//! (DNS rebinding included) cannot drive the engine; pure functions called from the server's tokio
//! threads.
//!
//! A browser lets any page send requests to 127.0.0.1, and a DNS-rebinding page can even make
//! its own name resolve there. Both are told apart by headers the page cannot forge: `Host`
//! carries the name the browser resolved, `Origin` the page that sent a WebSocket, PUT or POST.
//! So the server accepts a Host only when it is one of its own addresses, and an Origin (when
//! present; scripts such as curl send none) only when it is `http://` plus such an address.

use std::net::IpAddr;

/// What the server accepts as its own name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginPolicy {
    listen: IpAddr,
    port: u16,
}

impl OriginPolicy {
    /// For a server bound to `listen`:`port`.
    pub fn new(listen: IpAddr, port: u16) -> OriginPolicy {
        OriginPolicy { listen, port }
    }

    /// Whether `host` (a Host header: "name:port") names this server: 127.0.0.1, localhost,
    /// `[::1]` or the listen address, with the server's port. When bound to every address
    /// (0.0.0.0 or ::), any IP literal is accepted, since rebinding needs a DNS name.
    pub fn host_ok(&self, host: &str) -> bool {
        let Some((name, port)) = split_host_port(host) else {
            return false;
        };
        if port != self.port {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let Ok(ip) = name.parse::<IpAddr>() else {
            return false;
        };
        ip.is_loopback() || ip == self.listen || self.listen.is_unspecified()
    }

    /// Whether `origin` (an Origin header) is a page served by this server.
    pub fn origin_ok(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|authority| self.host_ok(authority))
    }

    /// Checks a request's headers; `Err` says why it is refused.
    pub fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Refused> {
        match host {
            None => return Err(Refused::NoHost),
            Some(h) if !self.host_ok(h) => {
                return Err(Refused::Host {
                    host: h.to_owned(),
                    port: self.port,
                })
            }
            Some(_) => {}
        }
        match origin {
            Some(o) if !self.origin_ok(o) => Err(Refused::Origin(o.to_owned())),
            _ => Ok(()),
        }
    }
}

/// Why [`OriginPolicy::check`] refused a request (answered with 403 and this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No Host header (HTTP/1.1 requires one).
    #[error("refused: the request has no Host header")]
    NoHost,
    /// A Host that names another server: a DNS-rebinding page, or a wrong address.
    #[error("refused: Host {host:?} is not this server (use http://127.0.0.1:{port}/)")]
    Host {
        /// The Host header.
        host: String,
        /// This server's port.
        port: u16,
    },
    /// A page from another site.
    #[error(
        "refused: Origin {0:?} is not this server; only pages it serves may control the engine"
    )]
    Origin(String),
}

/// Splits "name:port" and "[v6]:port"; `None` without a valid port (the server never runs on
/// the scheme's default port, so a Host without a port cannot be ours).
fn split_host_port(host: &str) -> Option<(&str, u16)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        (name, after.strip_prefix(':')?)
    } else {
        let (name, port) = host.rsplit_once(':')?;
        if name.contains(':') {
            return None;
        }
        (name, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn local() -> OriginPolicy {
        OriginPolicy::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8123)
    }

    #[test]
    fn own_hosts_pass() {
        let p = local();
        for h in [
            "127.0.0.1:8123",
            "localhost:8123",
            "LOCALHOST:8123",
            "[::1]:8123",
        ] {
            assert!(p.host_ok(h), "{h}");
        }
        assert!(p.check(Some("127.0.0.1:8123"), None).is_ok());
        assert!(p
            .check(Some("127.0.0.1:8123"), Some("http://127.0.0.1:8123"))
            .is_ok());
        assert!(p
            .check(Some("localhost:8123"), Some("http://localhost:8123"))
            .is_ok());
    }

    #[test]
    fn foreign_hosts_and_origins_are_refused() {
        let p = local();
        for h in [
            "evil.example:8123",
            "127.0.0.1:80",
            "127.0.0.1",
            "localhost",
            "127.0.0.1:8123x",
            "127.0.0.1:",
            "",
            "10.0.0.5:8123",
            "localhost.evil.example:8123",
            "[::1]",
            "::1:8123",
        ] {
            assert!(!p.host_ok(h), "{h}");
        }
        for o in [
            "http://evil.example",
            "http://evil.example:8123",
            "https://127.0.0.1:8123",
            "http://127.0.0.1:9999",
            "null",
            "",
            "http://127.0.0.1:8123.evil.example",
        ] {
            assert!(!p.origin_ok(o), "{o}");
            let e = p.check(Some("127.0.0.1:8123"), Some(o)).unwrap_err();
            assert_eq!(e, Refused::Origin(o.to_owned()));
            assert!(e.to_string().contains("Origin"), "{e}");
        }
        assert_eq!(p.check(None, None), Err(Refused::NoHost));
        assert!(p
            .check(None, None)
            .unwrap_err()
            .to_string()
            .contains("no Host"));
        // DNS rebinding: the page's own name resolves here, so Host and Origin agree but are foreign.
        assert!(p
            .check(
                Some("rebind.example:8123"),
                Some("http://rebind.example:8123")
            )
            .is_err());
    }

    #[test]
    fn listen_address_and_wildcard() {
        let lan = OriginPolicy::new("192.168.1.20".parse().unwrap(), 8123);
        assert!(lan.host_ok("192.168.1.20:8123"));
        assert!(lan.host_ok("127.0.0.1:8123"));
        assert!(!lan.host_ok("192.168.1.21:8123"));
        let any = OriginPolicy::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 8123);
        assert!(any.host_ok("192.168.1.21:8123"));
        assert!(any.host_ok("[fe80::1]:8123"));
        assert!(!any.host_ok("some.name:8123"));
    }
}
