//! GPU telemetry (`--gpu-telemetry URL`): NVIDIA DCGM exporters scraped with the server's
//! `/metrics` over the run's window (same scraper, same threads, off the engine's cores),
//! turned into per-GPU and total figures: power mean and max, utilisation mean, memory
//! peak, and the energy of the run with the energy per output token.
//!
//! Energy comes from the exporter's energy counter (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`,
//! mJ since the driver loaded): its increase from the scrape before the run to the one after
//! it, exact to the counter's resolution. Where a GPU has no counter, its power readings are
//! integrated over the scrapes instead, each held until the next (as the timeline draws
//! them), and the figures say so ([`EnergySource::PowerIntegrated`]): a reading every
//! interval misses what happened in between. The window is the scrapes' (the first a
//! moment before the run, the last a moment after), given with the figures.
//!
//! [`GpuTelemetry`] is a plain struct: the console block, the result key and the timeline
//! render it (`output::gpu_telemetry`), and a dashboard can read it as it is.

use std::collections::BTreeMap;

use super::exposition::Gpu;
use super::window::Series;

/// DCGM exporter's names (dcgm-exporter's default counters, `default-counters.csv`).
pub mod dcgm {
    /// Power draw, W.
    pub const POWER_USAGE: &str = "DCGM_FI_DEV_POWER_USAGE";
    /// Energy since the driver loaded, mJ (a counter).
    pub const TOTAL_ENERGY_CONSUMPTION: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
    /// Utilisation, %.
    pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
    /// Frame buffer used and free, MiB.
    pub const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
    pub const FB_FREE: &str = "DCGM_FI_DEV_FB_FREE";
    /// SM clock, MHz.
    pub const SM_CLOCK: &str = "DCGM_FI_DEV_SM_CLOCK";
    /// Temperature, °C.
    pub const GPU_TEMP: &str = "DCGM_FI_DEV_GPU_TEMP";
    /// Every family the figures read: what a shard file keeps of an exporter's scrapes
    /// (`output::shard_file::GpuExporter`), so that a merge computes the same figures.
    pub const READ: [&str; 7] = [
        POWER_USAGE,
        TOTAL_ENERGY_CONSUMPTION,
        GPU_UTIL,
        FB_USED,
        FB_FREE,
        SM_CLOCK,
        GPU_TEMP,
    ];
    /// The families whose series name a GPU (the others only describe one named here).
    pub const NAMING: [&str; 4] = [POWER_USAGE, TOTAL_ENERGY_CONSUMPTION, GPU_UTIL, FB_USED];
}

/// Where a GPU's energy figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnergySource {
    /// The energy counter's increase over the window: exact.
    Counter,
    /// No counter: the power readings, each held until the next scrape, summed over time.
    PowerIntegrated,
}

impl EnergySource {
    pub fn name(self) -> &'static str {
        match self {
            EnergySource::Counter => "energy_counter",
            EnergySource::PowerIntegrated => "power_integrated",
        }
    }
}

/// A gauge over the run: mean and max of the readings taken during it, and how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub mean: f64,
    pub max: f64,
    pub samples: usize,
}

/// One GPU's figures over the window; `None` where the exporter did not report it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuFigures {
    /// The exporter it came from.
    pub url: String,
    pub gpu: Gpu,
    /// Power draw, W.
    pub power_w: Option<Reading>,
    /// Utilisation, %.
    pub util_percent: Option<Reading>,
    /// Frame buffer used, MiB (its `max` is the peak).
    pub memory_used_mib: Option<Reading>,
    /// Used plus free at the peak's scrape, MiB.
    pub memory_total_mib: Option<f64>,
    pub sm_clock_mhz: Option<Reading>,
    pub temperature_c: Option<Reading>,
    /// Energy over the window, J, and where it came from.
    pub energy_j: Option<(f64, EnergySource)>,
}

/// The run's GPU telemetry: every GPU every exporter reported, and their totals.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuTelemetry {
    /// In exporter order, then by host and index.
    pub gpus: Vec<GpuFigures>,
    /// The window the figures cover, seconds from the run's start: the first scrape (before
    /// the run) to the last (after it).
    pub window_s: (f64, f64),
    /// Sum of the GPUs' mean power, W (`None` unless every GPU reported power).
    pub power_mean_w: Option<f64>,
    /// Sum of the GPUs' largest reading, W (an upper bound of the peak of the sum).
    pub power_max_w: Option<f64>,
    /// Mean of the GPUs' mean utilisation, %.
    pub util_mean_percent: Option<f64>,
    /// Sum of the GPUs' peak memory used, MiB.
    pub memory_peak_mib: Option<f64>,
    /// Energy of every GPU over the window, J (`None` unless every GPU has a figure).
    pub energy_j: Option<f64>,
    /// Whether any GPU's energy was integrated from power (no counter).
    pub energy_integrated: bool,
    /// `energy_j` per output token of the run, J/token (`None` without tokens).
    pub energy_per_output_token_j: Option<f64>,
    /// The output tokens it was divided by.
    pub output_tokens: u64,
    /// The scrapes' times and, per GPU, its power and utilisation at each (for the
    /// timeline's strip).
    pub series: GpuSeries,
}

/// The GPUs' readings at each scrape of one exporter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuSeries {
    /// Per exporter: scrape times (seconds from the run's start), then per GPU its power (W)
    /// and utilisation (%) at each.
    pub exporters: Vec<ExporterSeries>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExporterSeries {
    pub t: Vec<f64>,
    pub power_w: Vec<(Gpu, Vec<Option<f64>>)>,
    pub util_percent: Vec<(Gpu, Vec<Option<f64>>)>,
}

/// The readings of `values` that are finite numbers (one that is not is no reading: a saved
/// series holds it as missing).
fn finite(values: &[Option<f64>]) -> Vec<f64> {
    values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect()
}

/// The readings taken during the run: all but the first scrape (before it) and the last
/// (after it), as the server's gauges are read; `None` without any.
fn reading(values: &[Option<f64>]) -> Option<Reading> {
    let seen = finite(values.get(1..values.len().saturating_sub(1))?);
    if seen.is_empty() {
        return None;
    }
    Some(Reading {
        mean: seen.iter().sum::<f64>() / seen.len() as f64,
        max: seen.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        samples: seen.len(),
    })
}

/// The counter's increase from its first to its last reading; `None` with fewer than two
/// or when it went down (the driver reloaded: the counter restarted).
fn increase(values: &[Option<f64>]) -> Option<f64> {
    let seen = finite(values);
    if seen.len() < 2 || seen.windows(2).any(|w| w[1] < w[0]) {
        return None;
    }
    Some(seen[seen.len() - 1] - seen[0])
}

/// Power readings (W) at times `t` (s), each held until the next: J.
fn integrate(t: &[f64], power: &[Option<f64>]) -> Option<f64> {
    let mut joules = None;
    for (k, w) in t.windows(2).enumerate() {
        if let Some(p) = power.get(k).copied().flatten().filter(|p| p.is_finite()) {
            *joules.get_or_insert(0.0) += p * (w[1] - w[0]);
        }
    }
    joules
}

/// The GPUs an exporter's scrapes name (by host and index), in order.
pub fn gpus_of(s: &Series) -> Vec<&Gpu> {
    let mut devices: Vec<&Gpu> = dcgm::NAMING
        .iter()
        .filter_map(|n| s.per_gpu.get(*n))
        .flat_map(BTreeMap::keys)
        .collect();
    devices.sort();
    devices.dedup();
    devices
}

impl GpuTelemetry {
    /// The telemetry of `exporters` (each one's URL and scrape series; those without a DCGM
    /// series are left out) for a run that produced `output_tokens`. `None` when no
    /// exporter reported a GPU.
    pub fn of<'s>(
        exporters: impl IntoIterator<Item = (&'s str, &'s Series)>,
        output_tokens: u64,
    ) -> Option<GpuTelemetry> {
        let mut gpus = Vec::new();
        let mut series = GpuSeries::default();
        let (mut start, mut end) = (f64::INFINITY, f64::NEG_INFINITY);
        for (url, s) in exporters {
            let of = |name: &str| s.per_gpu.get(name);
            let devices = gpus_of(s);
            if devices.is_empty() {
                continue;
            }
            if let (Some(&a), Some(&b)) = (s.t.first(), s.t.last()) {
                (start, end) = (start.min(a), end.max(b));
            }
            let values = |name: &str, gpu: &Gpu| of(name).and_then(|m| m.get(gpu));
            let mut exporter = ExporterSeries {
                t: s.t.clone(),
                ..ExporterSeries::default()
            };
            for gpu in devices {
                let power = values(dcgm::POWER_USAGE, gpu);
                let used = values(dcgm::FB_USED, gpu);
                let energy =
                    match values(dcgm::TOTAL_ENERGY_CONSUMPTION, gpu).and_then(|v| increase(v)) {
                        Some(mj) => Some((mj / 1e3, EnergySource::Counter)),
                        None => power
                            .and_then(|p| integrate(&s.t, p))
                            .map(|j| (j, EnergySource::PowerIntegrated)),
                    };
                // The total memory at the scrape where the most was used.
                let memory_total_mib = used.and_then(|u| {
                    let free = values(dcgm::FB_FREE, gpu)?;
                    let k = (0..u.len())
                        .filter(|&k| u[k].is_some() && free.get(k).copied().flatten().is_some())
                        .max_by(|&a, &b| u[a].unwrap_or(0.0).total_cmp(&u[b].unwrap_or(0.0)))?;
                    Some(u[k]? + free[k]?)
                });
                gpus.push(GpuFigures {
                    url: url.to_string(),
                    gpu: gpu.clone(),
                    power_w: power.and_then(|v| reading(v)),
                    util_percent: values(dcgm::GPU_UTIL, gpu).and_then(|v| reading(v)),
                    memory_used_mib: used.and_then(|v| reading(v)),
                    memory_total_mib,
                    sm_clock_mhz: values(dcgm::SM_CLOCK, gpu).and_then(|v| reading(v)),
                    temperature_c: values(dcgm::GPU_TEMP, gpu).and_then(|v| reading(v)),
                    energy_j: energy,
                });
                if let Some(p) = power {
                    exporter.power_w.push((gpu.clone(), p.clone()));
                }
                if let Some(u) = values(dcgm::GPU_UTIL, gpu) {
                    exporter.util_percent.push((gpu.clone(), u.clone()));
                }
            }
            series.exporters.push(exporter);
        }
        if gpus.is_empty() {
            return None;
        }
        let all = |f: fn(&GpuFigures) -> Option<f64>| -> Option<Vec<f64>> {
            gpus.iter().map(f).collect()
        };
        let sum = |f: fn(&GpuFigures) -> Option<f64>| all(f).map(|v| v.iter().sum::<f64>());
        let energy_j = sum(|g| g.energy_j.map(|e| e.0));
        let util = all(|g| g.util_percent.map(|r| r.mean));
        Some(GpuTelemetry {
            window_s: (start, end),
            power_mean_w: sum(|g| g.power_w.map(|r| r.mean)),
            power_max_w: sum(|g| g.power_w.map(|r| r.max)),
            util_mean_percent: util.map(|u| u.iter().sum::<f64>() / u.len() as f64),
            memory_peak_mib: sum(|g| g.memory_used_mib.map(|r| r.max)),
            energy_integrated: gpus
                .iter()
                .any(|g| matches!(g.energy_j, Some((_, EnergySource::PowerIntegrated)))),
            energy_per_output_token_j: energy_j
                .filter(|_| output_tokens > 0)
                .map(|j| j / output_tokens as f64),
            energy_j,
            output_tokens,
            gpus,
            series,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(i: &str) -> Gpu {
        Gpu {
            host: "h".into(),
            gpu: i.into(),
        }
    }

    fn series(per_gpu: &[(&str, &str, Vec<Option<f64>>)]) -> Series {
        let mut s = Series {
            t: vec![-0.5, 1.0, 2.0, 3.5],
            ..Series::default()
        };
        for (name, g, v) in per_gpu {
            s.per_gpu
                .entry(name.to_string())
                .or_default()
                .insert(gpu(g), v.clone());
        }
        s
    }

    #[test]
    fn energy_is_the_counters_increase_per_gpu_and_in_total() {
        let s = series(&[
            (
                dcgm::TOTAL_ENERGY_CONSUMPTION,
                "0",
                vec![Some(1e6), Some(1.1e6), Some(1.2e6), Some(1.25e6)],
            ),
            (
                dcgm::TOTAL_ENERGY_CONSUMPTION,
                "1",
                vec![Some(5e6), Some(5e6), Some(5.1e6), Some(5.15e6)],
            ),
            (
                dcgm::POWER_USAGE,
                "0",
                vec![Some(90.0), Some(100.0), Some(120.0), Some(80.0)],
            ),
            (
                dcgm::POWER_USAGE,
                "1",
                vec![Some(50.0), Some(60.0), Some(70.0), Some(50.0)],
            ),
            (
                dcgm::GPU_UTIL,
                "0",
                vec![Some(0.0), Some(40.0), Some(60.0), Some(0.0)],
            ),
            (
                dcgm::GPU_UTIL,
                "1",
                vec![Some(0.0), Some(20.0), Some(30.0), Some(0.0)],
            ),
            (
                dcgm::FB_USED,
                "0",
                vec![Some(100.0), Some(900.0), Some(800.0), Some(100.0)],
            ),
            (
                dcgm::FB_FREE,
                "0",
                vec![Some(900.0), Some(100.0), Some(200.0), Some(900.0)],
            ),
        ]);
        let t = GpuTelemetry::of([("http://x/metrics", &s)], 1000).unwrap();
        assert_eq!(t.gpus.len(), 2);
        // 250,000 mJ and 150,000 mJ.
        assert_eq!(t.gpus[0].energy_j, Some((250.0, EnergySource::Counter)));
        assert_eq!(t.energy_j, Some(400.0));
        assert_eq!(t.energy_per_output_token_j, Some(0.4));
        assert!(!t.energy_integrated);
        // The readings during the run (not the first and last scrapes).
        let p0 = t.gpus[0].power_w.unwrap();
        assert_eq!((p0.mean, p0.max, p0.samples), (110.0, 120.0, 2));
        assert_eq!(t.power_mean_w, Some(110.0 + 65.0));
        assert_eq!(t.power_max_w, Some(120.0 + 70.0));
        assert_eq!(t.util_mean_percent, Some((50.0 + 25.0) / 2.0));
        assert_eq!(t.memory_peak_mib, None, "GPU 1 reported no memory");
        assert_eq!(t.gpus[0].memory_used_mib.unwrap().max, 900.0);
        assert_eq!(t.gpus[0].memory_total_mib, Some(1000.0));
        assert_eq!(t.window_s, (-0.5, 3.5));
    }

    #[test]
    fn without_a_counter_power_is_held_between_scrapes_and_integrated() {
        let s = series(&[(
            dcgm::POWER_USAGE,
            "0",
            vec![Some(100.0), Some(200.0), None, Some(50.0)],
        )]);
        let t = GpuTelemetry::of([("u", &s)], 0).unwrap();
        // 100 W for 1.5 s, 200 W for 1 s; the missing reading holds nothing.
        assert_eq!(
            t.gpus[0].energy_j,
            Some((350.0, EnergySource::PowerIntegrated))
        );
        assert!(t.energy_integrated);
        assert_eq!(t.energy_per_output_token_j, None, "no tokens");
    }

    #[test]
    fn a_counter_that_went_down_is_not_an_energy() {
        let s = series(&[
            (
                dcgm::TOTAL_ENERGY_CONSUMPTION,
                "0",
                vec![Some(5e6), Some(1e3), Some(2e3), Some(3e3)],
            ),
            (
                dcgm::POWER_USAGE,
                "0",
                vec![Some(10.0), Some(10.0), Some(10.0), Some(10.0)],
            ),
        ]);
        let t = GpuTelemetry::of([("u", &s)], 10).unwrap();
        assert_eq!(
            t.gpus[0].energy_j,
            Some((40.0, EnergySource::PowerIntegrated))
        );
    }

    #[test]
    fn an_exporter_without_gpus_gives_nothing() {
        assert!(GpuTelemetry::of([("u", &Series::default())], 10).is_none());
    }
}
