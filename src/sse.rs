//! Zero-copy Server-Sent Events framing.
