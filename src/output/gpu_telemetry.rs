//! The "GPU Telemetry" block (after the server's, in Python's style), the
//! `vllm_bench_gpu_telemetry` result key and the timeline's GPU lines, from the run's
//! [`GpuTelemetry`] (`--gpu-telemetry`, see `crate::server_metrics::gpu` and
//! docs/server-metrics.md). Nothing is shown, and the key is absent, without the flag.
//!
//! Figures are shown as precise as the exporter gives them: power and energy to 0.1 W and
//! 0.1 J, J/token to 4 significant digits, memory in whole MiB, utilisation to 0.1 %.

use std::fmt::Write as _;

use super::console::centred;
use super::json::{Json, JsonObject};
use super::plot::timeline::{StripLine, StripScale};
use super::run_result::Section;
use crate::server_metrics::gpu::{EnergySource, GpuFigures, Reading};
use crate::server_metrics::GpuTelemetry;

/// The result-JSON key.
pub const KEY: &str = "vllm_bench_gpu_telemetry";

fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

/// A J/token figure to 4 significant digits (it spans mJ to J).
fn per_token(j: f64) -> String {
    if j == 0.0 || !j.is_finite() {
        return format!("{j}");
    }
    let digits = (3 - j.abs().log10().floor() as i32).max(0) as usize;
    format!("{j:.digits$}")
}

fn gpu_name(g: &GpuFigures) -> String {
    match g.gpu.host.as_str() {
        "" => format!("GPU {}", g.gpu.gpu),
        host => format!("GPU {} ({host})", g.gpu.gpu),
    }
}

/// The console block and the result key; both empty without telemetry.
pub fn section(telemetry: Option<&GpuTelemetry>) -> Section {
    match telemetry {
        None => Section {
            console: String::new(),
            json: JsonObject::new(),
        },
        Some(t) => Section {
            console: render(t),
            json: to_json(t),
        },
    }
}

fn render(t: &GpuTelemetry) -> String {
    let mut out = String::new();
    centred(&mut out, " GPU Telemetry ", '=');
    line(&mut out, "GPUs:", t.gpus.len());
    line(
        &mut out,
        "Window (s, from the run's start):",
        format!("{:.3} to {:.3}", t.window_s.0, t.window_s.1),
    );
    if let Some(j) = t.energy_j {
        let how = if t.energy_integrated {
            " (power integrated: no energy counter)"
        } else {
            ""
        };
        line(&mut out, "Energy (J):", format!("{j:.1}{how}"));
    }
    if let Some(j) = t.energy_per_output_token_j {
        line(&mut out, "Energy per output token (J/token):", per_token(j));
    }
    if let (Some(mean), Some(max)) = (t.power_mean_w, t.power_max_w) {
        line(
            &mut out,
            "Power mean / max (W):",
            format!("{mean:.1} / {max:.1}"),
        );
    }
    if let Some(u) = t.util_mean_percent {
        line(&mut out, "Utilisation mean (%):", format!("{u:.1}"));
    }
    if let Some(m) = t.memory_peak_mib {
        line(&mut out, "Memory used peak (MiB):", format!("{m:.0}"));
    }
    for g in &t.gpus {
        let mut parts = Vec::new();
        if let Some(p) = g.power_w {
            parts.push(format!("{:.1}/{:.1} W", p.mean, p.max));
        }
        if let Some(u) = g.util_percent {
            parts.push(format!("{:.1} %", u.mean));
        }
        if let Some(m) = g.memory_used_mib {
            parts.push(format!("{:.0} MiB", m.max));
        }
        if let Some((j, source)) = g.energy_j {
            let mark = if source == EnergySource::PowerIntegrated {
                " (integrated)"
            } else {
                ""
            };
            parts.push(format!("{j:.1} J{mark}"));
        }
        line(&mut out, &format!("{}:", gpu_name(g)), parts.join(", "));
    }
    if samples_during(t) == 0 {
        line(
            &mut out,
            "Note:",
            "no scrape fell inside the run; lower --server-metrics-interval",
        );
    }
    out
}

/// The most readings any GPU had during the run.
fn samples_during(t: &GpuTelemetry) -> usize {
    t.gpus
        .iter()
        .flat_map(|g| [g.power_w, g.util_percent, g.memory_used_mib])
        .flatten()
        .map(|r| r.samples)
        .max()
        .unwrap_or(0)
}

fn opt(v: Option<f64>) -> Json<'static> {
    v.filter(|v| v.is_finite()).map_or(Json::Null, Json::Float)
}

fn reading(r: Option<Reading>) -> Json<'static> {
    match r {
        None => Json::Null,
        Some(r) => {
            let mut o = JsonObject::new();
            o.set("mean", Json::Float(r.mean));
            o.set("max", Json::Float(r.max));
            o.set("samples", Json::UInt(r.samples as u64));
            Json::Object(o)
        }
    }
}

fn to_json(t: &GpuTelemetry) -> JsonObject<'static> {
    let mut o = JsonObject::new();
    o.set("gpus", Json::UInt(t.gpus.len() as u64));
    o.set("window_start_s", Json::Float(t.window_s.0));
    o.set("window_end_s", Json::Float(t.window_s.1));
    o.set("energy_j", opt(t.energy_j));
    o.set(
        "energy_source",
        Json::str(if t.energy_integrated {
            EnergySource::PowerIntegrated.name()
        } else {
            EnergySource::Counter.name()
        }),
    );
    o.set("output_tokens", Json::UInt(t.output_tokens));
    o.set(
        "energy_per_output_token_j",
        opt(t.energy_per_output_token_j),
    );
    o.set("power_mean_w", opt(t.power_mean_w));
    o.set("power_max_w", opt(t.power_max_w));
    o.set("util_mean_percent", opt(t.util_mean_percent));
    o.set("memory_peak_mib", opt(t.memory_peak_mib));
    let per_gpu = t
        .gpus
        .iter()
        .map(|g| {
            let mut p = JsonObject::new();
            p.set(
                "url",
                Json::str(crate::safe_text::redact_url(&g.url).into_owned()),
            );
            p.set("hostname", Json::str(g.gpu.host.clone()));
            p.set("gpu", Json::str(g.gpu.gpu.clone()));
            p.set("power_w", reading(g.power_w));
            p.set("util_percent", reading(g.util_percent));
            p.set("memory_used_mib", reading(g.memory_used_mib));
            p.set("memory_total_mib", opt(g.memory_total_mib));
            p.set("sm_clock_mhz", reading(g.sm_clock_mhz));
            p.set("temperature_c", reading(g.temperature_c));
            p.set("energy_j", opt(g.energy_j.map(|e| e.0)));
            p.set(
                "energy_source",
                g.energy_j.map_or(Json::Null, |e| Json::str(e.1.name())),
            );
            Json::Object(p)
        })
        .collect();
    o.set("per_gpu", Json::List(per_gpu));
    let mut doc = JsonObject::new();
    doc.set(KEY, Json::Object(o));
    doc
}

/// The GPUs' lines for the timeline's strip: utilisation (%) of each GPU. Power has no
/// scale of its own there; it is in the block and the result.
pub fn strip_lines(t: &GpuTelemetry) -> Vec<StripLine> {
    const COLOURS: [&str; 4] = ["#2CA02C", "#BCBD22", "#17BECF", "#8C564B"];
    let mut lines = Vec::new();
    for e in &t.series.exporters {
        for (gpu, values) in &e.util_percent {
            let name = match gpu.host.as_str() {
                "" => format!("GPU {} utilisation %", gpu.gpu),
                host => format!("GPU {} ({host}) utilisation %", gpu.gpu),
            };
            lines.push(StripLine {
                label: name,
                colour: COLOURS[lines.len() % COLOURS.len()],
                scale: StripScale::Percent,
                digits: 0,
                t: e.t.clone(),
                values: values.clone(),
            });
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joules_per_token_keep_four_significant_digits() {
        assert_eq!(per_token(0.05), "0.05000");
        assert_eq!(per_token(1.23456), "1.235");
        assert_eq!(per_token(123.456), "123.5");
        assert_eq!(per_token(12345.6), "12346");
    }
}
