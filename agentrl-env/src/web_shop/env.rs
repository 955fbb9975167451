//! The `web-shop` session: it serves the shop site on 127.0.0.1 (started at the first reset,
//! stopped when the session is dropped) and offers the `browser` tool, allowed only on that
//! site, with its history cleared at each reset. The episode ends when the agent buys; the reward
//! is the purchase's WebShop score.

use agentrl_core::{Env, Error, Message, Observation, Result, Step, Task};
use agentrl_tools::{Browser, WebLimits};
use async_trait::async_trait;

use super::WEB_SHOP_ID;
use super::site::{Shared, Store, lock, router};
use super::task::shop_of;
use crate::local_server::Served;
use crate::session::{continue_step, require_tool_calls, run_tool_calls};

/// What to do instead of a malformed action.
const HINT: &str = "call the browser tool (open, click, fill, submit, back) and buy the product";

/// The reward of the store's purchase (0 without one): see [`Shop::score`](super::Shop::score).
pub fn reward(store: &Store) -> f64 {
    let Some(purchase) = &store.purchase else {
        return 0.0;
    };
    store.shop.product(&purchase.product).map_or(0.0, |p| {
        store.shop.score(p, &purchase.size, &purchase.colour)
    })
}

/// One `web-shop` session, without turn limit (the factory adds it).
pub struct WebShopEnv {
    shared: Shared,
    running: Option<Served>,
    browser: Option<Browser>,
    ctx: agentrl_core::ToolContext,
}

impl Default for WebShopEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl WebShopEnv {
    /// A session whose site starts at the first reset.
    pub fn new() -> Self {
        WebShopEnv {
            shared: Shared::default(),
            running: None,
            browser: None,
            ctx: agentrl_core::ToolContext::default(),
        }
    }
}

#[async_trait]
impl Env for WebShopEnv {
    fn id(&self) -> &str {
        WEB_SHOP_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        let shop = shop_of(task)?;
        let shared = self.shared.clone();
        let handle = &mut self.browser;
        let running = Served::ensure(
            &mut self.running,
            WEB_SHOP_ID,
            || router(shared),
            "/",
            |allow| {
                handle
                    .insert(Browser::new(allow, WebLimits::default()))
                    .clone()
            },
        )
        .await?;
        if let Some(browser) = &self.browser {
            // The last episode's pages and history are not this one's.
            browser.clear().await;
        }
        let tools = running.tools.specs();
        let text = format!(
            "Shop at {}/ with the browser tool (open the URL, search, click results, choose \
             options, buy). Instruction: {}",
            running.server.base_url(),
            shop.wish.instruction()
        );
        *lock(&self.shared) = Some(Store {
            shop,
            purchase: None,
        });
        Ok(Observation {
            messages: vec![Message::user(text)],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(running) = self
            .running
            .as_ref()
            .filter(|_| lock(&self.shared).is_some())
        else {
            return Err(Error::env(WEB_SHOP_ID, "step called outside an episode"));
        };
        if let Some(refused) = require_tool_calls(action, HINT) {
            return Ok(refused);
        }
        let shared = self.shared.clone();
        let bought = move || lock(&shared).as_ref().is_some_and(|s| s.purchase.is_some());
        let (messages, mut info) =
            run_tool_calls(WEB_SHOP_ID, &running.tools, &self.ctx, action, &bought).await?;
        if !bought() {
            return Ok(continue_step(messages, info));
        }
        let score = lock(&self.shared)
            .take()
            .map_or(0.0, |store| reward(&store));
        info.success = Some(score >= 1.0);
        Ok(Step {
            messages,
            reward: score,
            terminated: true,
            truncated: false,
            info,
        })
    }
}
