//! [`UrlAllowlist`]: the base URLs the web tools may reach, compared by scheme, host, port and
//! path prefix after parsing (so `user@host` tricks, `..` and encoded dots cannot escape).

use agentrl_core::ToolError;
use reqwest::Url;

/// The base URLs a web tool may reach: a URL is allowed when its scheme, host and port equal a
/// base's and its path starts with the base's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlAllowlist {
    bases: Vec<Url>,
    allow_private_dns: bool,
}

/// Encoded forms of `.`, `/` and `\` that could hide a path escape from a prefix check.
const ENCODED_SEPARATORS: [&str; 3] = ["%2e", "%2f", "%5c"];

impl UrlAllowlist {
    /// An allowlist of `bases` (absolute `http`/`https` URLs without user info, query or
    /// fragment); an error names the first unusable base.
    pub fn new<S: AsRef<str>>(bases: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let mut parsed = Vec::new();
        for base in bases {
            let text = base.as_ref().trim();
            let mut url =
                Url::parse(text).map_err(|e| format!("base URL `{text}` does not parse: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(format!(
                    "base URL `{text}` is not an http(s) URL with a host"
                ));
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(format!("base URL `{text}` must not hold user info"));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(format!(
                    "base URL `{text}` must not hold a query or fragment"
                ));
            }
            if !url.path().ends_with('/') {
                let path = format!("{}/", url.path());
                url.set_path(&path);
            }
            parsed.push(url);
        }
        Ok(UrlAllowlist {
            bases: parsed,
            allow_private_dns: false,
        })
    }

    /// The same allowlist, with DNS answers in private or loopback ranges accepted (`true`)
    /// or refused (`false`, the default: an allowlisted name that resolves inside is refused;
    /// hosts written as IP addresses are not affected).
    pub fn allowing_private_dns(self, allow: bool) -> Self {
        UrlAllowlist {
            allow_private_dns: allow,
            ..self
        }
    }

    /// Whether DNS answers in private or loopback ranges are accepted.
    pub fn allows_private_dns(&self) -> bool {
        self.allow_private_dns
    }

    /// The allowed base URLs (each path ends with `/`).
    pub fn bases(&self) -> &[Url] {
        &self.bases
    }

    /// The bases as one comma-separated line, for messages.
    pub fn describe(&self) -> String {
        if self.bases.is_empty() {
            return "(none: no URL is allowed)".to_string();
        }
        let names: Vec<&str> = self.bases.iter().map(Url::as_str).collect();
        names.join(", ")
    }

    /// `url` parsed, if it is allowed; otherwise an invalid-arguments error saying why.
    pub fn check(&self, url: &str) -> Result<Url, ToolError> {
        let text = url.trim();
        let parsed = Url::parse(text).map_err(|e| {
            ToolError::InvalidArguments(format!("`{text}` is not an absolute URL: {e}"))
        })?;
        self.check_url(&parsed)
    }

    /// `href` resolved against the page at `base`, if the result is allowed.
    pub fn resolve(&self, base: &Url, href: &str) -> Result<Url, ToolError> {
        let joined = base.join(href.trim()).map_err(|e| {
            ToolError::InvalidArguments(format!("`{href}` is not a usable link: {e}"))
        })?;
        self.check_url(&joined)
    }

    /// `url` again, if it is allowed.
    pub fn check_url(&self, url: &Url) -> Result<Url, ToolError> {
        let refuse = |why: &str| {
            ToolError::InvalidArguments(format!(
                "`{url}` is refused: {why}; allowed URLs start with {}",
                self.describe()
            ))
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("URLs with user info (`user@host`) are not allowed"));
        }
        let lower = url.path().to_ascii_lowercase();
        if ENCODED_SEPARATORS.iter().any(|e| lower.contains(e)) {
            return Err(refuse(
                "encoded `.`, `/` or `\\` in the path are not allowed",
            ));
        }
        if self.bases.iter().any(|base| allowed_by(base, url)) {
            Ok(url.clone())
        } else {
            Err(refuse("it is outside the allowlist"))
        }
    }
}

/// Whether `url` lies under `base` (same scheme, host and port; path prefix).
fn allowed_by(base: &Url, url: &Url) -> bool {
    let base_path = base.path();
    let same_origin = base.scheme() == url.scheme()
        && base.host_str() == url.host_str()
        && base.port_or_known_default() == url.port_or_known_default();
    let under =
        url.path().starts_with(base_path) || base_path.strip_suffix('/') == Some(url.path());
    same_origin && under
}
