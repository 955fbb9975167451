//! Name resolution for the web tools that refuses internal addresses: an allowlisted DNS name
//! whose answer points at loopback, a private range, link-local or the like (DNS rebinding, or
//! a public name mapped to an internal service) is refused unless the allowlist says private
//! answers are expected ([`UrlAllowlist::allowing_private_dns`](super::UrlAllowlist)).
//! `localhost` and `*.localhost` always mean this machine and may resolve to loopback. Hosts
//! written as IP addresses are never resolved: the allowlist names them exactly.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A resolver that drops internal addresses from answers (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GuardedResolver {
    /// Accept private answers for every name.
    pub(crate) allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let answers: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept = allowed_answers(&host, &answers, allow_private)?;
            let addrs: Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

/// The answers for `host` a web tool may connect to, or an error naming the refused address.
pub(crate) fn allowed_answers(
    host: &str,
    answers: &[SocketAddr],
    allow_private: bool,
) -> Result<Vec<SocketAddr>, std::io::Error> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let local_name = host == "localhost" || host.ends_with(".localhost");
    let kept: Vec<SocketAddr> = answers
        .iter()
        .copied()
        .filter(|a| allow_private || is_global(a.ip()) || (local_name && a.ip().is_loopback()))
        .collect();
    match (kept.is_empty(), answers.first()) {
        (false, _) => Ok(kept),
        (true, Some(refused)) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "`{host}` resolves to {}, an internal address the web tools do not reach by \
                 name (name it by IP in the allowlist, or allow private DNS answers)",
                refused.ip()
            ),
        )),
        (true, None) => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("`{host}` has no address"),
        )),
    }
}

/// Whether `ip` is an ordinary public address (not loopback, private, link-local, shared,
/// documentation, multicast, unspecified or reserved).
pub(crate) fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_global_v4(v4),
            None => is_global_v6(v6),
        },
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier NAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        SocketAddr::new(text.parse().unwrap(), 80)
    }

    #[test]
    fn internal_ranges_are_not_global() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_global(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_global(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn a_public_name_pointing_inside_is_refused() {
        let err = allowed_answers("api.example.com", &[addr("127.0.0.1")], false).unwrap_err();
        assert!(err.to_string().contains("127.0.0.1"), "{err}");
        let err =
            allowed_answers("metadata.example", &[addr("169.254.169.254")], false).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        // Internal answers are dropped, public ones kept.
        let kept =
            allowed_answers("mixed.example", &[addr("10.0.0.1"), addr("8.8.8.8")], false).unwrap();
        assert_eq!(kept, vec![addr("8.8.8.8")]);
        // Allowed when the allowlist says private answers are expected.
        assert!(allowed_answers("intranet.example", &[addr("10.0.0.1")], true).is_ok());
    }

    #[test]
    fn localhost_may_be_loopback_but_not_a_private_network() {
        assert!(allowed_answers("localhost", &[addr("127.0.0.1"), addr("::1")], false).is_ok());
        assert!(allowed_answers("app.localhost.", &[addr("127.0.0.1")], false).is_ok());
        assert!(allowed_answers("localhost", &[addr("10.0.0.1")], false).is_err());
    }
}
