//! Hand-written HTTP/1.1 client on monoio: response parsing (pure, push-style decoders),
//! connections with keep-alive and transparent reconnect, TLS (rustls on our own buffers).

pub mod conn;
pub mod control;
pub mod request;
pub mod response;
pub mod source;
pub mod text_server;
pub mod tls;
pub mod url;
