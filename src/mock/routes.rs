//! The mock's URL space: which `(method, path)` is which endpoint, and the stable list of
//! endpoints that per-path statistics are kept for.

use crate::http::request::Method;

/// One endpoint of the mock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `GET /v1/models`
    Models,
    /// `GET /health`
    Health,
    /// `GET /metrics`
    Metrics,
    /// `POST /v1/completions`
    Completions,
    /// `POST /v1/chat/completions`
    ChatCompletions,
    /// `POST /v1/responses`
    Responses,
    /// `POST /v1/messages` (Anthropic Messages)
    Messages,
    /// `POST /v1/embeddings`
    Embeddings,
    /// `POST /embeddings` (Infinity's path; answered like `/v1/embeddings`)
    EmbeddingsInfinity,
    /// `POST /v1/audio/transcriptions` (a multipart form with the audio file)
    Transcriptions,
    /// `POST /pooling`
    Pooling,
    /// `POST /v1/pooling`
    PoolingV1,
    /// `POST /rerank`
    Rerank,
    /// `POST /v1/rerank`
    RerankV1,
    /// `POST /tokenize`
    Tokenize,
    /// `POST /detokenize`
    Detokenize,
    /// `POST /start_profile`
    StartProfile,
    /// `POST /stop_profile`
    StopProfile,
    /// `POST /reset_prefix_cache`
    ResetPrefixCache,
}

/// Every route with its method and path; the index is the route's statistics slot.
pub const ROUTES: [(Route, Method, &str); 19] = [
    (Route::Models, Method::Get, "/v1/models"),
    (Route::Health, Method::Get, "/health"),
    (Route::Metrics, Method::Get, "/metrics"),
    (Route::Completions, Method::Post, "/v1/completions"),
    (Route::ChatCompletions, Method::Post, "/v1/chat/completions"),
    (Route::Embeddings, Method::Post, "/v1/embeddings"),
    (Route::Pooling, Method::Post, "/pooling"),
    (Route::PoolingV1, Method::Post, "/v1/pooling"),
    (Route::Rerank, Method::Post, "/rerank"),
    (Route::RerankV1, Method::Post, "/v1/rerank"),
    (Route::Tokenize, Method::Post, "/tokenize"),
    (Route::Detokenize, Method::Post, "/detokenize"),
    (Route::StartProfile, Method::Post, "/start_profile"),
    (Route::StopProfile, Method::Post, "/stop_profile"),
    (Route::ResetPrefixCache, Method::Post, "/reset_prefix_cache"),
    // Last, so the statistics slots of the older routes keep their places.
    (Route::Responses, Method::Post, "/v1/responses"),
    (Route::EmbeddingsInfinity, Method::Post, "/embeddings"),
    (
        Route::Transcriptions,
        Method::Post,
        "/v1/audio/transcriptions",
    ),
    (Route::Messages, Method::Post, "/v1/messages"),
];

/// Number of routes (statistics slots).
pub const ROUTE_COUNT: usize = ROUTES.len();

impl Route {
    /// The route's statistics slot.
    pub fn index(self) -> usize {
        ROUTES.iter().position(|(r, _, _)| *r == self).unwrap_or(0)
    }

    /// Model requests: the ones that take the server's "compute" (timed, counted as running,
    /// subject to fault injection).
    pub fn is_model(self) -> bool {
        matches!(
            self,
            Route::Completions
                | Route::ChatCompletions
                | Route::Responses
                | Route::Messages
                | Route::Transcriptions
                | Route::Embeddings
                | Route::EmbeddingsInfinity
                | Route::Pooling
                | Route::PoolingV1
                | Route::Rerank
                | Route::RerankV1
        )
    }
}

/// What a request line resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// A served endpoint.
    Found(Route),
    /// The path exists with another method (`405`, `Allow: <method>`).
    WrongMethod(Method),
    /// No such path (`404`).
    NotFound,
}

/// Resolves a request (`method` is `None` for one the mock does not know). `HEAD` is served
/// like `GET` (without a body) where `GET` is allowed.
pub fn lookup(method: Option<Method>, path: &[u8]) -> Lookup {
    let Some(&(route, allowed, _)) = ROUTES.iter().find(|(_, _, p)| p.as_bytes() == path) else {
        return Lookup::NotFound;
    };
    if method == Some(allowed) || (method == Some(Method::Head) && allowed == Method::Get) {
        Lookup::Found(route)
    } else {
        Lookup::WrongMethod(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_distinct_and_paths_round_trip() {
        for (i, (route, method, path)) in ROUTES.iter().enumerate() {
            assert_eq!(route.index(), i);
            assert_eq!(
                lookup(Some(*method), path.as_bytes()),
                Lookup::Found(*route)
            );
        }
    }

    #[test]
    fn wrong_method_and_unknown_path() {
        assert_eq!(
            lookup(Some(Method::Get), b"/v1/completions"),
            Lookup::WrongMethod(Method::Post)
        );
        assert_eq!(
            lookup(Some(Method::Post), b"/health"),
            Lookup::WrongMethod(Method::Get)
        );
        assert_eq!(
            lookup(Some(Method::Head), b"/health"),
            Lookup::Found(Route::Health)
        );
        assert_eq!(lookup(Some(Method::Get), b"/nope"), Lookup::NotFound);
        assert_eq!(
            lookup(Some(Method::Post), b"/v1/completions/"),
            Lookup::NotFound
        );
    }
}
