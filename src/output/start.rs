//! The start of a run at `--start-at` as it is reported: the "Start" block of a run, a
//! shard or a merge, the late-start warning, and the check `vllm-bench merge` makes of its
//! shards' starts. A merge is one run only if its shards began together on one time axis,
//! and nothing in the metrics shows when they did not: a shard that was not ready by
//! `--start-at` sends its first requests late, and shards on machines whose clocks disagree
//! share no instant at all.
//!
//! So each shard records how it started (`modes::shard`: when it was ready, how late its clock
//! and its first request started after `--start-at`, its host and its kernel's clock
//! state), and `vllm-bench merge` reports the spread of the shards' starts and warns, in
//! one line with the numbers, when they started more than [`START_TOLERANCE_MS`] apart or
//! a shard's first request went out later than that ([`StartCheck`]); and, in a second
//! line, when shards on several hosts ran on clocks not known to be synchronized.
//!
//! The clock state is the kernel's (`runtime::clock`). An offset estimate from a
//! server's HTTP `Date` header is not taken: it has 1 s resolution, twenty times the
//! tolerance, and the control calls keep no headers.

use std::fmt::Write as _;

use serde::Serialize;

use super::json::{Json, JsonObject};
use super::run_result::Section;
use super::shard_file::{CoreStartFacts, ShardSection, StartBlock, StartFacts};
use crate::engine::StartReport;

/// How far apart the shards' starts may be, and how late a shard's first request may go
/// out after its scheduled time, before `merge` warns (ms). Well above a ready shard's
/// wake-up and dispatch (below a millisecond to a few on a busy machine), well below
/// the start gaps that skew a run's first seconds.
pub const START_TOLERANCE_MS: f64 = 50.0;

/// The facts of the "Start" block of a run at `--start-at` (`None` without).
pub fn block(start: Option<&StartReport>) -> Option<StartBlock> {
    let start = start?;
    Some(StartBlock {
        late_ms: start.late.as_secs_f64() * 1e3,
        lead_s: start.lead.as_secs_f64(),
        cores: start
            .cores
            .iter()
            .map(|c| CoreStartFacts {
                core: c.core,
                connections: c.opened,
                connecting_s: c.connecting.as_secs_f64(),
                ready_ms: c.ready_ms,
            })
            .collect(),
    })
}

/// The run's start with `--start-at` (nothing without): a "Start" block (how late the clock
/// started, how long the cores took to open their connections and when each was ready) and
/// `vllm_bench_start` in the result, for a shard, a whole run and the merge of one shard.
pub fn start_section(start: Option<&StartBlock>) -> Section {
    match start {
        Some(block) => parts_start_section(&[(String::new(), block)]),
        None => Section::default(),
    }
}

/// The "Start" block of merged shards: the run's block with each shard's figures side by
/// side on each line (`K/N: ...`), as the client's health shows its parts, and
/// `vllm_bench_start` with the latest clock start, the earliest connecting and every
/// shard's cores (each naming its shard). Nothing when no shard recorded its start.
pub fn merged_start_section<'a>(
    blocks: impl IntoIterator<Item = (String, &'a StartBlock)>,
) -> Section {
    let parts: Vec<(String, &StartBlock)> = blocks.into_iter().collect();
    parts_start_section(&parts)
}

/// A value per part, side by side (`K/N: v | ...`), or the one value of an unnamed part.
fn side_by_side(values: &[(&str, String)]) -> String {
    match values {
        [("", v)] => v.clone(),
        _ => values
            .iter()
            .map(|(name, v)| format!("{name}: {v}"))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

fn parts_start_section(parts: &[(String, &StartBlock)]) -> Section {
    if parts.is_empty() {
        return Section::default();
    }
    let mut console = String::new();
    let _ = writeln!(console, "{:-^50}", "Start (--start-at)");
    let each = |f: &dyn Fn(&StartBlock) -> String| -> String {
        let values: Vec<(&str, String)> = parts.iter().map(|(n, b)| (n.as_str(), f(b))).collect();
        side_by_side(&values)
    };
    let _ = writeln!(
        console,
        "{:<40} {:<10}",
        "Started late by (s):",
        each(&|b| format!("{:.2}", b.late_ms / 1e3))
    );
    let _ = writeln!(
        console,
        "{:<40} {:<10}",
        "Connecting began before it (s):",
        each(&|b| format!("{:.2}", b.lead_s))
    );
    let mut numbers: Vec<usize> = parts
        .iter()
        .flat_map(|(_, b)| b.cores.iter().map(|c| c.core))
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    for n in numbers {
        let values: Vec<(&str, String)> = parts
            .iter()
            .flat_map(|(name, b)| {
                b.cores.iter().filter(|c| c.core == n).map(|c| {
                    let text = format!(
                        "{} connections in {:.2} s, ready {:+.1} ms",
                        c.connections, c.connecting_s, c.ready_ms
                    );
                    (name.as_str(), text)
                })
            })
            .collect();
        let _ = writeln!(
            console,
            "{:<40} {}",
            format!("Core {n}:"),
            side_by_side(&values)
        );
    }
    let _ = writeln!(console, "{}", "=".repeat(50));
    let mut cores = Vec::new();
    for (name, b) in parts {
        for c in &b.cores {
            let mut o = JsonObject::new();
            if !name.is_empty() {
                o.set("shard", Json::str(name.clone()));
            }
            o.set("core", Json::UInt(c.core as u64));
            o.set("connections", Json::UInt(c.connections as u64));
            o.set("connecting_s", Json::Float(c.connecting_s));
            o.set("ready_ms", Json::Float(c.ready_ms));
            cores.push(Json::Object(o));
        }
    }
    let late = parts
        .iter()
        .map(|(_, b)| b.late_ms)
        .fold(f64::MIN, f64::max);
    let lead = parts.iter().map(|(_, b)| b.lead_s).fold(f64::MIN, f64::max);
    let mut doc = JsonObject::new();
    let mut o = JsonObject::new();
    o.set("late_ms", Json::Float(late));
    o.set("lead_s", Json::Float(lead));
    o.set("cores", Json::List(cores));
    doc.set("vllm_bench_start", Json::Object(o));
    Section { console, json: doc }
}

/// One line (for stderr) when the run's clock started more than [`START_TOLERANCE_MS`]
/// after `--start-at` because a core was still opening its connections: the duration and
/// the rates count from that later start, and the line says so with the numbers.
pub fn late_start_warning(start: Option<&StartReport>) -> Option<String> {
    let start = start?;
    let late_ms = start.late.as_secs_f64() * 1e3;
    if late_ms <= START_TOLERANCE_MS {
        return None;
    }
    let slowest = start
        .cores
        .iter()
        .max_by(|a, b| a.ready_ms.total_cmp(&b.ready_ms))?;
    Some(format!(
        "the measured run started {:.2} s after --start-at: core {} was ready {:+.0} ms \
         after it ({} connections opened in {:.2} s, from {:.1} s before it); the \
         duration and rates count from the late start; give each core fewer connections \
         (more cores or shards) or start later",
        late_ms / 1e3,
        slowest.core,
        slowest.ready_ms,
        slowest.opened,
        slowest.connecting.as_secs_f64(),
        start.lead.as_secs_f64(),
    ))
}

/// One shard's start facts, labelled `K/N`.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct ShardStart {
    shard: String,
    #[serde(flatten)]
    facts: StartFacts,
}

/// The start facts of the merged shards (those that recorded them).
#[derive(Debug, Clone, PartialEq)]
pub struct StartCheck {
    shards: Vec<ShardStart>,
}

impl StartCheck {
    pub fn of<'a>(sections: impl IntoIterator<Item = &'a ShardSection>) -> StartCheck {
        let shards = sections
            .into_iter()
            .filter_map(|s| {
                Some(ShardStart {
                    shard: format!("{}/{}", s.shard, s.shards),
                    facts: s.start.clone()?,
                })
            })
            .collect();
        StartCheck { shards }
    }

    /// Latest clock start minus the earliest, ms (`None` without facts).
    fn spread_ms(&self) -> Option<f64> {
        let late = self.shards.iter().map(|s| s.facts.late_ms);
        let max = late.clone().reduce(f64::max)?;
        Some(max - late.reduce(f64::min)?)
    }

    /// The shards whose first request went out more than the tolerance late.
    fn late_first_sends(&self) -> Vec<(&str, f64)> {
        self.shards
            .iter()
            .filter_map(|s| Some((s.shard.as_str(), s.facts.first_send_late_ms?)))
            .filter(|(_, late)| *late > START_TOLERANCE_MS)
            .collect()
    }

    fn hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = self.shards.iter().map(|s| s.facts.host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        hosts
    }

    fn together(&self) -> bool {
        self.spread_ms().is_none_or(|s| s <= START_TOLERANCE_MS)
            && self.late_first_sends().is_empty()
    }

    /// The shards' starts side by side, for stdout after the merge's own section (empty
    /// when no shard recorded them).
    pub fn render(&self) -> String {
        let Some(spread) = self.spread_ms() else {
            return String::new();
        };
        let mut out = String::new();
        let _ = writeln!(out, "{:-^50}", "Shard starts");
        let _ = writeln!(
            out,
            "{:<40} {spread:.1} (tolerance {START_TOLERANCE_MS:.0})",
            "Start spread (ms):"
        );
        for s in &self.shards {
            let f = &s.facts;
            let first = f
                .first_send_late_ms
                .map_or("none".into(), |v| format!("{v:+.1} ms"));
            let ntp = match (f.ntp_synchronized, f.clock_max_error_ms) {
                (Some(true), Some(e)) => format!("synchronized (max error {e:.0} ms)"),
                (Some(true), None) => "synchronized".into(),
                (Some(false), _) => "not synchronized".into(),
                (None, _) => "unknown".into(),
            };
            let _ = writeln!(
                out,
                "{:<40} ready {:+.1} ms, clock {:+.1} ms, first send {first}, host {}, NTP {ntp}",
                format!("Shard {}:", s.shard),
                f.ready_ms,
                f.late_ms,
                crate::safe_text::escape(&f.host),
            );
        }
        let _ = writeln!(out, "{}", "=".repeat(50));
        out
    }

    /// One line each (for stderr) when the shards did not start together, and when shards
    /// on several hosts ran on clocks not known to be synchronized.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.together() {
            let starts: Vec<String> = self
                .shards
                .iter()
                .map(|s| format!("{} {:+.1} ms", s.shard, s.facts.late_ms))
                .collect();
            let late: Vec<String> = self
                .late_first_sends()
                .iter()
                .map(|(k, v)| format!("{k} {v:+.1} ms"))
                .collect();
            let late = if late.is_empty() {
                "none".into()
            } else {
                late.join(", ")
            };
            out.push(format!(
                "warning: the shards did not start together (tolerance \
                 {START_TOLERANCE_MS:.0} ms): clock starts after --start-at {} (spread \
                 {:.1} ms); first requests late: {late}; give every shard time to be ready \
                 before --start-at",
                starts.join(", "),
                self.spread_ms().unwrap_or(0.0),
            ));
        }
        let hosts = self.hosts();
        let unsynced: Vec<String> = self
            .shards
            .iter()
            .filter(|s| s.facts.ntp_synchronized != Some(true))
            .map(|s| {
                let host = crate::safe_text::escape(&s.facts.host);
                format!("{} ({host})", s.shard)
            })
            .collect();
        if hosts.len() > 1 && !unsynced.is_empty() {
            out.push(format!(
                "warning: the shards ran on {} hosts and the clocks of shard(s) {} are not \
                 known to be NTP-synchronized, so --start-at may not be one instant on them; \
                 synchronize them (chrony, systemd-timesyncd)",
                hosts.len(),
                unsynced.join(", ")
            ));
        }
        out
    }

    /// `vllm_bench_start_check` for the merged result (nothing when no shard recorded its
    /// start).
    pub fn to_json(&self) -> Result<JsonObject<'static>, serde_json::Error> {
        let mut doc = JsonObject::new();
        let Some(spread) = self.spread_ms() else {
            return Ok(doc);
        };
        let mut check = JsonObject::new();
        check.set("tolerance_ms", Json::Float(START_TOLERANCE_MS));
        check.set("spread_ms", Json::Float(spread));
        check.set("together", Json::Bool(self.together()));
        check.set("hosts", Json::UInt(self.hosts().len() as u64));
        check.set(
            "shards",
            Json::Value(std::borrow::Cow::Owned(serde_json::to_value(&self.shards)?)),
        );
        doc.set("vllm_bench_start_check", Json::Object(check));
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_block(late_ms: f64, cores: &[(usize, f64)]) -> StartBlock {
        StartBlock {
            late_ms,
            lead_s: 2.0,
            cores: cores
                .iter()
                .map(|&(core, ready_ms)| CoreStartFacts {
                    core,
                    connections: 2,
                    connecting_s: 0.01,
                    ready_ms,
                })
                .collect(),
        }
    }

    /// The merge of several shards keeps the run's "Start" block, its lines and its key,
    /// with each shard's figures side by side; one shard's is the run's own.
    #[test]
    fn merged_shards_show_the_start_block_side_by_side() {
        let (a, b) = (
            start_block(0.0, &[(0, -1990.0), (1, -1980.0)]),
            start_block(120.0, &[(0, 120.0)]),
        );
        let merged = merged_start_section([("0/2".to_string(), &a), ("1/2".to_string(), &b)]);
        let line = |label: &str| {
            merged
                .console
                .lines()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("{label} in {}", merged.console))
                .to_string()
        };
        assert!(merged
            .console
            .starts_with("----------------Start (--start-at)"));
        assert!(line("Started late by (s):").ends_with("0/2: 0.00 | 1/2: 0.12"));
        assert!(line("Core 0:").contains("0/2: 2 connections in 0.01 s, ready -1990.0 ms | 1/2: "));
        assert!(line("Core 1:").ends_with("0/2: 2 connections in 0.01 s, ready -1980.0 ms"));
        let json: serde_json::Value = serde_json::from_str(&merged.json.to_json_string()).unwrap();
        let start = &json["vllm_bench_start"];
        assert_eq!(start["late_ms"], 120.0, "the latest clock start");
        assert_eq!(start["cores"].as_array().unwrap().len(), 3);
        assert_eq!(start["cores"][2]["shard"], "1/2");
        // One shard: the run's block, word for word.
        let one = merged_start_section([(String::new(), &a)]);
        assert_eq!(one.console, start_section(Some(&a)).console);
        assert!(one
            .console
            .contains("Core 0:                                  2 connections"));
        assert!(!one.json.to_json_string().contains("shard"));
    }

    fn start(late: f64, first: Option<f64>, host: &str, ntp: Option<bool>) -> StartFacts {
        StartFacts {
            ready_ms: if late > 0.0 { late } else { -3000.0 },
            late_ms: late,
            first_send_late_ms: first,
            host: host.into(),
            ntp_synchronized: ntp,
            clock_max_error_ms: ntp.filter(|s| *s).map(|_| 12.0),
        }
    }

    fn check(facts: Vec<StartFacts>) -> StartCheck {
        let n = facts.len();
        StartCheck {
            shards: facts
                .into_iter()
                .enumerate()
                .map(|(k, facts)| ShardStart {
                    shard: format!("{k}/{n}"),
                    facts,
                })
                .collect(),
        }
    }

    #[test]
    fn shards_that_started_together_on_one_host_give_no_warning() {
        let c = check(vec![
            start(0.0, Some(0.4), "a", Some(false)),
            start(0.0, Some(1.2), "a", None),
        ]);
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
        assert!(c.render().contains("Start spread (ms):"), "{}", c.render());
        let json = c.to_json().unwrap();
        let text = Json::Object(json).to_json_string();
        assert!(text.contains("\"together\": true"), "{text}");
    }

    #[test]
    fn a_late_shard_is_one_warning_line_with_its_numbers() {
        let c = check(vec![
            start(0.0, Some(0.4), "a", Some(true)),
            start(412.25, Some(415.0), "a", Some(true)),
        ]);
        let w = c.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(!w[0].contains('\n'));
        for needle in [
            "tolerance 50 ms",
            "0/2 +0.0 ms, 1/2 +412.2 ms",
            "spread 412.2 ms",
            "first requests late: 1/2 +415.0 ms",
        ] {
            assert!(w[0].contains(needle), "{needle}: {}", w[0]);
        }
    }

    #[test]
    fn a_late_first_request_alone_is_warned_about() {
        let c = check(vec![
            start(0.0, Some(0.4), "a", None),
            start(0.0, Some(80.0), "a", None),
        ]);
        let w = c.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("spread 0.0 ms") && w[0].contains("1/2 +80.0 ms"));
    }

    #[test]
    fn unsynchronized_clocks_on_several_hosts_are_named() {
        let c = check(vec![
            start(0.0, Some(0.4), "a", Some(true)),
            start(0.0, Some(0.5), "b", Some(false)),
            start(0.0, None, "c", None),
        ]);
        let w = c.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("3 hosts") && w[0].contains("1/3 (b), 2/3 (c)"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn shards_without_start_facts_are_not_checked() {
        let c = check(Vec::new());
        assert!(c.warnings().is_empty() && c.render().is_empty());
        assert_eq!(Json::Object(c.to_json().unwrap()).to_json_string(), "{}");
    }

    fn started(late_ms: u64) -> StartReport {
        use crate::engine::CoreStart;
        let core = |core, ready_ms| CoreStart {
            core,
            opened: 4_000,
            connecting: std::time::Duration::from_millis(9_000),
            ready_ms,
        };
        StartReport {
            lead: std::time::Duration::from_secs(8),
            late: std::time::Duration::from_millis(late_ms),
            cores: vec![core(0, -300.0), core(1, late_ms as f64 - 500.0)],
        }
    }

    #[test]
    fn a_run_ready_in_time_reports_no_late_start() {
        let s = started(0);
        assert_eq!(late_start_warning(Some(&s)), None);
        let section = start_section(block(Some(&s)).as_ref());
        assert!(
            section
                .console
                .contains("Started late by (s):                     0.00"),
            "{}",
            section.console
        );
        let text = Json::Object(section.json).to_json_string();
        assert!(text.contains("\"late_ms\": 0.0"), "{text}");
        assert!(text.contains("\"connections\": 4000"), "{text}");
    }

    #[test]
    fn a_late_start_is_one_warning_line_naming_the_slowest_core() {
        let s = started(12_500);
        let w = late_start_warning(Some(&s)).expect("late by 12.5 s");
        assert!(!w.contains('\n'));
        for needle in [
            "started 12.50 s after --start-at",
            "core 1 was ready +12000 ms",
            "4000 connections opened in 9.00 s, from 8.0 s before it",
            "count from the late start",
        ] {
            assert!(w.contains(needle), "{needle}: {w}");
        }
        assert!(start_section(block(Some(&s)).as_ref())
            .console
            .contains("12.50"));
    }

    #[test]
    fn a_run_without_a_set_start_has_no_start_block() {
        assert_eq!(late_start_warning(None), None);
        let section = start_section(None);
        assert!(section.console.is_empty());
        assert_eq!(Json::Object(section.json).to_json_string(), "{}");
    }
}
