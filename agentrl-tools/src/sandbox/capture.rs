//! Reading a child's output stream with a size cap, without ever blocking the child.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes kept from one output stream and how many there were in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes of the stream, at most the cap.
    pub bytes: Vec<u8>,
    /// Total bytes the stream produced (kept and dropped).
    pub total: u64,
}

impl Captured {
    /// Bytes produced beyond the cap and dropped.
    pub fn dropped(&self) -> u64 {
        self.total.saturating_sub(self.bytes.len() as u64)
    }

    /// The kept bytes as text (invalid UTF-8 replaced), with a note when bytes were dropped.
    pub fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.dropped() > 0 {
            text.push_str(&format!(
                "\n…[output truncated: {} more bytes dropped]",
                self.dropped()
            ));
        }
        text
    }
}

/// Reads `stream` to its end, keeping the first `cap` bytes and counting the rest; a read error
/// ends the stream.
pub(crate) async fn read_capped<R: AsyncRead + Unpin>(mut stream: R, cap: usize) -> Captured {
    let mut captured = Captured::default();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                captured.total += n as u64;
                let room = cap.saturating_sub(captured.bytes.len());
                captured.bytes.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    captured
}

/// Removes `prefix` from the start of `captured`; `false` when it is not there.
pub(crate) fn strip_prefix(captured: &mut Captured, prefix: &[u8]) -> bool {
    if !captured.bytes.starts_with(prefix) {
        return false;
    }
    captured.bytes.drain(..prefix.len());
    captured.total -= prefix.len() as u64;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn caps_and_counts() {
        let data = vec![b'a'; 20_000];
        let c = read_capped(&data[..], 100).await;
        assert_eq!((c.bytes.len(), c.total, c.dropped()), (100, 20_000, 19_900));
        assert!(
            c.text()
                .ends_with("[output truncated: 19900 more bytes dropped]")
        );
        let mut c = read_capped(&b"MARKhello"[..], 100).await;
        assert!(strip_prefix(&mut c, b"MARK"));
        assert_eq!((c.text().as_str(), c.total), ("hello", 5));
        assert!(!strip_prefix(&mut c, b"MARK"));
    }
}
