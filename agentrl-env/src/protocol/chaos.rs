//! Opt-in fault injection for chaos tests of an env fleet (`agentrl env-server --chaos-*`, used
//! by `cargo xtask chaos` and the trainer's `chaos_fleet` test). Off unless configured: a
//! [`ChaosConfig::default`] injects nothing and adds no layer. Never turn it on for a run whose
//! results matter: it makes the server fail on purpose.
//!
//! Faults are deterministic per server process (counters, no randomness), so a test knows how
//! many it gets from how many requests a server answered:
//! - **delay**: every `delay_every`-th `interact` is answered `delay` late;
//! - **drop**: every `drop_every`-th `interact` is carried out, but its answer is cut off after
//!   the status line, as when a connection breaks mid-answer (the client cannot know whether
//!   the step happened, so its episode ends as an env error);
//! - **hang**: every `hang_every`-th env step waits `hang` before the env steps, as a step whose
//!   tool has no time limit would; the client's request timeout ends that episode.
//!
//! Each injected fault is logged at warn level as a line starting `chaos: ` (`chaos: delayed`,
//! `chaos: dropped`, `chaos: hung`), which is what `cargo xtask chaos` counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, Task};
use async_trait::async_trait;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::Response;

/// Which faults a server injects (each `*_every` of 0 turns that fault off).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChaosConfig {
    /// Every this many `interact` requests, one is answered [`ChaosConfig::delay`] late.
    pub delay_every: u64,
    /// How late a delayed answer comes.
    pub delay: Duration,
    /// Every this many `interact` requests, one is carried out and its answer cut off.
    pub drop_every: u64,
    /// Every this many env steps, one waits [`ChaosConfig::hang`] before the env steps.
    pub hang_every: u64,
    /// How long a hung step waits.
    pub hang: Duration,
}

impl ChaosConfig {
    /// Whether no fault is configured.
    pub fn is_off(&self) -> bool {
        self.delay_every == 0 && self.drop_every == 0 && self.hang_every == 0
    }

    /// Refuses a fault without its duration (a delay or hang of zero injects nothing).
    pub fn validate(&self) -> Result<()> {
        if self.delay_every > 0 && self.delay.is_zero() {
            return Err(Error::Config(
                "chaos: delays need a positive delay (--chaos-delay-ms)".into(),
            ));
        }
        if self.hang_every > 0 && self.hang.is_zero() {
            return Err(Error::Config(
                "chaos: hangs need a positive duration (--chaos-hang-ms)".into(),
            ));
        }
        Ok(())
    }

    /// One line naming the faults, for the server's start-up message.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.delay_every > 0 {
            parts.push(format!(
                "every {} interact answered {} ms late",
                ordinal(self.delay_every),
                self.delay.as_millis()
            ));
        }
        if self.drop_every > 0 {
            parts.push(format!(
                "every {} interact answer dropped",
                ordinal(self.drop_every)
            ));
        }
        if self.hang_every > 0 {
            parts.push(format!(
                "every {} env step hangs {} ms",
                ordinal(self.hang_every),
                self.hang.as_millis()
            ));
        }
        parts.join("; ")
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, ...
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A server's fault injector: its config and request counters.
#[derive(Debug, Default)]
pub(crate) struct Chaos {
    config: ChaosConfig,
    interacts: AtomicU64,
    steps: AtomicU64,
}

/// Whether the `n`-th event (1-based) is one of every `every`.
fn hits(every: u64, n: u64) -> bool {
    every > 0 && n.is_multiple_of(every)
}

impl Chaos {
    /// The injector of `config`, or `None` when it injects nothing.
    pub(crate) fn new(config: &ChaosConfig) -> Option<Arc<Chaos>> {
        (!config.is_off()).then(|| {
            Arc::new(Chaos {
                config: config.clone(),
                ..Chaos::default()
            })
        })
    }

    /// `routes` with the delay and drop faults on `/api/interact`.
    pub(crate) fn layer(self: &Arc<Self>, routes: Router) -> Router {
        routes.layer(middleware::from_fn_with_state(self.clone(), inject))
    }

    /// `env`, hanging every `hang_every`-th step of this server (itself when hangs are off).
    pub(crate) fn wrap(self: &Arc<Self>, env: Box<dyn Env>) -> Box<dyn Env> {
        if self.config.hang_every == 0 {
            return env;
        }
        Box::new(HangingEnv {
            inner: env,
            chaos: self.clone(),
        })
    }
}

/// The middleware: delays and drops `interact` answers.
async fn inject(State(chaos): State<Arc<Chaos>>, request: Request, next: Next) -> Response {
    if request.uri().path() != "/api/interact" {
        return next.run(request).await;
    }
    let c = &chaos.config;
    let n = chaos.interacts.fetch_add(1, Ordering::Relaxed) + 1;
    if hits(c.delay_every, n) {
        tracing::warn!("chaos: delayed interact #{n} by {} ms", c.delay.as_millis());
        tokio::time::sleep(c.delay).await;
    }
    let response = next.run(request).await;
    if !hits(c.drop_every, n) {
        return response;
    }
    tracing::warn!("chaos: dropped the answer to interact #{n}");
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let broken = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "chaos: answer dropped",
        ))
    });
    Response::from_parts(parts, Body::from_stream(broken))
}

/// An env whose every `hang_every`-th step (counted over the server) first waits `hang`.
struct HangingEnv {
    inner: Box<dyn Env>,
    chaos: Arc<Chaos>,
}

#[async_trait]
impl Env for HangingEnv {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.inner.reset(task).await
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let c = &self.chaos.config;
        let n = self.chaos.steps.fetch_add(1, Ordering::Relaxed) + 1;
        if hits(c.hang_every, n) {
            tracing::warn!(
                "chaos: hung env step #{n} of `{}` for {} ms",
                self.inner.id(),
                c.hang.as_millis()
            );
            tokio::time::sleep(c.hang).await;
        }
        self.inner.step(action).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_hit_every_nth_event_only_when_on() {
        let hit: Vec<u64> = (1..=10).filter(|&n| hits(3, n)).collect();
        assert_eq!(hit, [3, 6, 9]);
        assert!((1..=10).all(|n| !hits(0, n)));
        assert!(Chaos::new(&ChaosConfig::default()).is_none());
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(12), "12th");
        assert_eq!(ordinal(23), "23rd");
    }

    #[test]
    fn a_fault_needs_its_duration() {
        let delay = ChaosConfig {
            delay_every: 2,
            ..ChaosConfig::default()
        };
        assert!(delay.validate().is_err());
        let hang = ChaosConfig {
            hang_every: 2,
            hang: Duration::from_millis(5),
            ..ChaosConfig::default()
        };
        assert!(hang.validate().is_ok());
        assert!(hang.describe().contains("every 2nd env step hangs 5 ms"));
    }
}
