//! What each request carries besides its prompt: sampling parameters, extra body fields,
//! headers, request ids, `ignore_eos`, logprobs, and the warmup/ready-check settings.
//!
//! The body extras are merged here once, as Python merges them
//! (`{**sampling_params, **extra_body}`: `--extra-body` wins), so backends splice one map.

use serde_json::{Map, Value};

use super::parse::{json_object, no_control};
use super::ConfigError;
use crate::cli::{Backend, Cli, DatasetName};
use crate::datasets::limits;

/// Where the API key comes from (read here to be checked before the run, and again by the
/// code that sends it).
/// The API keys read from the environment: `OPENAI_API_KEY` (`Authorization`), and
/// `ANTHROPIC_API_KEY` (`x-api-key` of `--backend anthropic-messages`).
const API_KEY_VARS: [&str; 2] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// The sampling flags, each `None` unless given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingParams {
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub temperature: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
}

impl SamplingParams {
    /// The set parameters as JSON body fields, in Python's order.
    pub fn to_json(&self) -> Map<String, Value> {
        let num = |f: Option<f64>| f.and_then(serde_json::Number::from_f64).map(Value::Number);
        let fields = [
            ("top_p", num(self.top_p)),
            ("top_k", self.top_k.map(Value::from)),
            ("min_p", num(self.min_p)),
            ("temperature", num(self.temperature)),
            ("frequency_penalty", num(self.frequency_penalty)),
            ("presence_penalty", num(self.presence_penalty)),
            ("repetition_penalty", num(self.repetition_penalty)),
        ];
        fields
            .into_iter()
            .filter_map(|(name, v)| Some((name.to_owned(), v?)))
            .collect()
    }

    fn is_empty(&self) -> bool {
        self.to_json().is_empty()
    }
}

/// Per-request options.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOptions {
    /// Resolved as Python does: forced on for random/random-mm with completions or chat
    /// backends, and for timed_trace.
    pub ignore_eos: bool,
    pub logprobs: Option<u32>,
    pub num_warmups: usize,
    /// 0 skips the readiness check.
    pub ready_check_timeout_sec: u64,
    /// `x-request-id` prefix (`bench-<8 hex>-` unless given).
    pub request_id_prefix: String,
    /// `--header` pairs, in order; a later one with the same name wins when sent.
    pub headers: Vec<(String, String)>,
    /// Sampling parameters overlaid with `--extra-body`: the fields added to every body.
    pub extra_body: Map<String, Value>,
    /// Parsed and unused, as in Python 0.33's serve (no request function sends it).
    pub use_beam_search: bool,
}

/// Resolves sampling parameters; `warnings` gets a note when a pooling backend ignores them.
pub(super) fn sampling(
    cli: &Cli,
    warnings: &mut Vec<String>,
) -> Result<SamplingParams, ConfigError> {
    let s = &cli.sampling;
    let floats = [
        ("--temperature", s.temperature),
        ("--top-p", s.top_p),
        ("--min-p", s.min_p),
        ("--frequency-penalty", s.frequency_penalty),
        ("--presence-penalty", s.presence_penalty),
        ("--repetition-penalty", s.repetition_penalty),
    ];
    for (flag, v) in floats {
        if let Some(v) = v.filter(|v| !v.is_finite()) {
            return Err(ConfigError::value(flag, v, "must be a finite number"));
        }
    }
    let params = SamplingParams {
        top_p: s.top_p,
        top_k: s.top_k,
        min_p: s.min_p,
        temperature: s.temperature,
        frequency_penalty: s.frequency_penalty,
        presence_penalty: s.presence_penalty,
        repetition_penalty: s.repetition_penalty,
    };
    let backend = cli.server.backend;
    if params.is_empty() || backend.is_openai_compatible() {
        return Ok(params);
    }
    if backend.is_pooling() {
        // Python drops them silently for pooling backends; say so.
        warnings.push(format!(
            "sampling parameters are ignored by the {backend} backend"
        ));
        return Ok(SamplingParams::default());
    }
    let first = cli
        .given()
        .iter()
        .find(|f| floats.iter().any(|(n, _)| n == f) || *f == "--top-k")
        .map(String::as_str)
        .unwrap_or("--temperature");
    Err(ConfigError::flag(
        first,
        format!(
            "sampling parameters are only supported by the openai-compatible backends \
             (vllm, openai, openai-chat, openai-responses), not {backend}"
        ),
    ))
}

pub(super) fn options(cli: &Cli, sampling: &SamplingParams) -> Result<RequestOptions, ConfigError> {
    let r = &cli.request;
    let mut extra_body = sampling.to_json();
    if let Some(text) = &r.extra_body {
        extra_body.extend(json_object("--extra-body", text)?);
    }
    // Warm-ups are requests too, built before they are sent.
    limits::check_requests(r.num_warmups as u64)
        .map_err(|why| ConfigError::value("--num-warmups", r.num_warmups, why))?;
    // Added to the clock: 18446744073709551615 panicked (`Instant + Duration` overflows).
    let ready = r.ready_check_timeout_sec;
    limits::duration_from_secs(ready as f64).map_err(|why| {
        ConfigError::value(
            "--ready-check-timeout-sec",
            ready,
            format!("{why}; 0 skips the check"),
        )
    })?;
    if let Some(p) = &r.request_id_prefix {
        no_control("--request-id-prefix", p)?;
    }
    for var in API_KEY_VARS {
        check_api_key(var, std::env::var_os(var))?;
    }
    Ok(RequestOptions {
        ignore_eos: r.ignore_eos || forces_ignore_eos(cli.dataset.dataset_name, cli.server.backend),
        logprobs: r.logprobs,
        num_warmups: r.num_warmups,
        ready_check_timeout_sec: r.ready_check_timeout_sec,
        request_id_prefix: match &r.request_id_prefix {
            Some(p) => p.clone(),
            None => default_request_id_prefix(cli),
        },
        headers: r
            .header
            .iter()
            .map(|h| header(h))
            .collect::<Result<_, _>>()?,
        extra_body,
        use_beam_search: r.use_beam_search,
    })
}

/// An API key variable (`var`) goes into every request's header: it must be text without
/// control characters. Never echoed.
fn check_api_key(var: &str, key: Option<std::ffi::OsString>) -> Result<(), ConfigError> {
    let Some(key) = key else {
        return Ok(());
    };
    let Some(key) = key.to_str() else {
        return Err(ConfigError::flag(
            var,
            "is not valid UTF-8 text (the value is not shown: it may be a secret)",
        ));
    };
    no_control(var, key)
}

/// Python sets `ignore_eos` itself so generation runs to the requested length.
fn forces_ignore_eos(dataset: DatasetName, backend: Backend) -> bool {
    match dataset {
        DatasetName::Random | DatasetName::RandomMm => backend.is_openai_compatible(),
        DatasetName::TimedTrace | DatasetName::AgenticTrace => true,
        _ => false,
    }
}

/// One `--header`, as Python's `KEY=VALUE` or as curl's `Key: Value` (a header name holds
/// neither `:` nor a space, so the two cannot be confused), checked so it cannot break the
/// HTTP request it is written into.
fn header(item: &str) -> Result<(String, String), ConfigError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let is_name = |n: &str| !n.is_empty() && n.chars().all(token);
    // The value may be a secret (`Authorization: Bearer ...`): errors name the header only.
    let expected = || {
        ConfigError::flag(
            "--header",
            "expected KEY=VALUE or 'Key: Value' (the value is not shown: it may be a secret)",
        )
    };
    let split = |sep: char| {
        item.split_once(sep)
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
    };
    let (name, value) = match split('=') {
        Some((n, v)) if is_name(&n) => (n, v),
        // Not Python's form: curl's, or an invalid name reported below.
        eq => split(':')
            .or(eq)
            .filter(|(n, _)| !n.is_empty())
            .ok_or_else(expected)?,
    };
    if !is_name(&name) {
        let shown: String = name.chars().filter(|c| !c.is_control()).collect();
        return Err(ConfigError::flag(
            "--header",
            format!(
                "{} is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)",
                crate::cli::quote(&shown)
            ),
        ));
    }
    if let Some(why) = header_we_write(&name) {
        return Err(ConfigError::flag(&format!("--header {name}"), why));
    }
    no_control(&format!("--header {name}"), &value)?;
    Ok((name, value))
}

/// Why `--header NAME` is refused, when it names a header vllm-bench writes itself per
/// request: the client frames every body itself (a second `Content-Length` or a
/// `Transfer-Encoding` would make the server read the body wrong or refuse it: request
/// smuggling's recipe), and `Expect`/`Upgrade` ask for an exchange it does not speak.
/// `Host`, `User-Agent` and `Accept` are not here: a `--header` of those replaces ours
/// (`http::request::HeadTemplate`). docs/flags.md says the same.
fn header_we_write(name: &str) -> Option<&'static str> {
    let is = |n: &str| name.eq_ignore_ascii_case(n);
    if is("content-length") || is("transfer-encoding") {
        Some("vllm-bench frames every request body itself; remove this header")
    } else if is("content-type") {
        Some("set per API by vllm-bench (JSON, or multipart with its boundary); remove this header")
    } else if is("x-request-id") {
        Some("set per request by vllm-bench; use --request-id-prefix to choose the ids")
    } else if is("x-session-id") {
        Some("set per conversation by vllm-bench; remove this header")
    } else if is("expect") || is("upgrade") || is("te") || is("trailer") {
        Some("asks for an HTTP exchange vllm-bench does not speak; remove this header")
    } else {
        None
    }
}

/// `bench-<8 hex>-`: random per run, except for the shards of one run (`--shard`), which
/// must send one run's request ids and so derive the digits from what they share (the
/// seed and `--start-at`).
fn default_request_id_prefix(cli: &Cli) -> String {
    let digits = match &cli.shard.shard {
        None => rand::random::<u32>(),
        Some(_) => {
            let mut h = crate::mix::Fnv64::new();
            h.write_u64(cli.dataset.seed);
            h.write_u64(cli.shard.start_at.map_or(0, f64::to_bits));
            h.finish() as u32
        }
    };
    format!("bench-{digits:08x}-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sampling_fields_come_out_in_pythons_order() {
        let p = SamplingParams {
            temperature: Some(0.0),
            top_k: Some(5),
            top_p: Some(0.9),
            ..SamplingParams::default()
        };
        let v = Value::Object(p.to_json());
        assert_eq!(
            v.to_string(),
            r#"{"top_p":0.9,"top_k":5,"temperature":0.0}"#
        );
        assert_eq!(v, json!({"top_p": 0.9, "top_k": 5, "temperature": 0.0}));
    }

    #[test]
    fn headers_are_checked() {
        assert_eq!(header("x-a=1").unwrap(), ("x-a".to_owned(), "1".to_owned()));
        assert_eq!(
            header("bad name=1").unwrap_err().to_string(),
            "--header: 'bad name' is not a valid header name (letters, digits and \
             !#$%&'*+-.^_`|~)"
        );
        // curl's form, also when the value holds an '='.
        assert_eq!(
            header("Authorization: Bearer x=").unwrap(),
            ("Authorization".to_owned(), "Bearer x=".to_owned())
        );
        assert_eq!(header("a:b=1").unwrap(), ("a".to_owned(), "b=1".to_owned()));
        assert_eq!(
            header("x-a=b: c").unwrap(),
            ("x-a".to_owned(), "b: c".to_owned()),
            "a valid KEY before '=' keeps Python's reading"
        );
        assert!(header("bad name: 1")
            .unwrap_err()
            .to_string()
            .starts_with("--header: 'bad name' is not a valid header name"));
        assert!(header("=x").is_err());
        let e = header("Authorization Bearer sk-1").unwrap_err().to_string();
        assert!(
            e.starts_with("--header: expected KEY=VALUE or 'Key: Value'"),
            "{e}"
        );
        assert!(!e.contains("sk-1"), "{e}");
        for framing in [
            "Content-Length=5",
            "transfer-encoding: chunked",
            "Expect: 100-continue",
        ] {
            let e = header(framing).unwrap_err().to_string();
            assert!(e.starts_with("--header "), "{e}");
            assert!(e.contains("remove this header"), "{e}");
        }
        assert!(header("x-request-id=a")
            .unwrap_err()
            .to_string()
            .contains("--request-id-prefix"));
        assert!(header("Host: example.com").is_ok(), "Host replaces ours");
        assert!(header("Connection: close").is_ok());
        let e = header("x-a: sk-1\r\nX-Evil: 1").unwrap_err().to_string();
        assert!(
            e.starts_with("--header x-a: contains a control character (CR)"),
            "{e}"
        );
        assert!(!e.contains("sk-1") && !e.contains("Evil"), "{e}");
    }

    #[test]
    fn the_api_key_must_be_control_free() {
        assert!(check_api_key("OPENAI_API_KEY", None).is_ok());
        assert!(check_api_key("OPENAI_API_KEY", Some("sk-1".into())).is_ok());
        let e = check_api_key("ANTHROPIC_API_KEY", Some("k\r\n".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("ANTHROPIC_API_KEY: contains a control character"),
            "{e}"
        );
        let e = check_api_key("OPENAI_API_KEY", Some("k\r\nX-Evil: 1".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("OPENAI_API_KEY: contains a control character"),
            "{e}"
        );
        assert!(!e.contains("Evil"), "{e}");
    }

    #[test]
    fn ignore_eos_is_forced_like_python() {
        assert!(forces_ignore_eos(DatasetName::Random, Backend::Vllm));
        assert!(forces_ignore_eos(DatasetName::Random, Backend::OpenaiChat));
        assert!(!forces_ignore_eos(
            DatasetName::Random,
            Backend::OpenaiEmbeddings
        ));
        assert!(forces_ignore_eos(DatasetName::TimedTrace, Backend::Vllm));
        assert!(!forces_ignore_eos(DatasetName::Sharegpt, Backend::Vllm));
    }
}
