//! The server a run talks to, as the configuration names it: a URL, or the embedded mock
//! started on its own core. The calls made to it are the control plane's
//! ([`crate::control_plane`]); this only decides which server and with what settings.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::config::{Config, ServerLocation};
use crate::control_plane::{request_headers, Reach, Target, CONTROL_TIMEOUT};
use crate::http::url::BaseUrl;
use crate::mock::{MockConfig, MockServer};
use crate::output::stdio::Console;
use crate::runtime::ResolvedDriver;
use crate::tokenizer::Tokenizer;

/// Timings of the embedded mock (`--mock-server`): a small, realistic stream so the demo run
/// shows meaningful TTFT/ITL figures.
const MOCK_TTFT: Duration = Duration::from_millis(20);
const MOCK_ITL: Duration = Duration::from_millis(5);

/// Connects the run to its server; the embedded mock, when it is the server, comes back
/// beside it (it must outlive the run). With `--mock-server` the mock is started first, on
/// `mock_core` when given (the client's cores exclude it), counting prompt tokens with
/// `mock_tokenizer` (the client's; `None`: the mock's toy tokenizer).
pub fn resolve(
    config: &Config,
    driver: ResolvedDriver,
    mock_core: Option<usize>,
    mock_tokenizer: Option<Arc<Tokenizer>>,
    console: &Console,
) -> Result<(Target, Option<MockServer>)> {
    let (base, mock) = match &config.server.location {
        ServerLocation::Url(u) => (u.clone(), None),
        ServerLocation::EmbeddedMock => {
            let cfg = MockConfig {
                first_token_delay: MOCK_TTFT,
                token_interval: MOCK_ITL,
                reasoning_tokens: usize::try_from(config.server.mock_reasoning.tokens)
                    .unwrap_or(usize::MAX),
                thinking_delay: config.server.mock_reasoning.thinking,
                core_ids: mock_core.map(|c| vec![c]),
                pin: mock_core.is_some(),
                driver: driver.into(),
                tokenizer: mock_tokenizer,
                slots: config.server.mock_slots,
                ..MockConfig::default()
            };
            let server = MockServer::start(cfg).context("cannot start the embedded mock server")?;
            let addr = server.addr();
            (
                BaseUrl::http(addr.ip().to_string(), addr.port()),
                Some(server),
            )
        }
    };
    let console = console.clone();
    let reach = Reach {
        driver,
        insecure: config.server.insecure,
        connect_timeout: config.engine.connect_timeout,
        local_addrs: config.engine.local_addrs,
        // The environment is read once, here.
        headers: request_headers(
            config.server.backend,
            |name| std::env::var(name).ok().filter(|v| !v.is_empty()),
            &config.request.headers,
        ),
        // A server that accepts and never answers must not hold the run longer on its
        // control plane than on a request.
        control_timeout: CONTROL_TIMEOUT.min(config.engine.request_timeout),
        notice: Arc::new(move |n: &str| console.note(n)),
    };
    let target = Target::connect(base, &config.server.more_replicas, reach)?;
    Ok((target, mock))
}
