//! `--dcgm N`: the mock's `/metrics` also speaks as an NVIDIA DCGM exporter for N GPUs, so
//! `--gpu-telemetry` is tested against known figures. Each GPU's energy counter
//! (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, mJ) starts at `(g + 1) × 1,000,000` and grows by
//! [`MJ_PER_TOKEN`] for every token the server generated: a run's energy is exactly
//! `N × MJ_PER_TOKEN × its output tokens`. The gauges are constants per GPU g: power
//! `100 + 10g` W, utilisation `50 + g` %, memory used `1000 + g` MiB of 81,920, SM clock
//! 1410 MHz, temperature `40 + g` °C.

use std::fmt::Write as _;

use crate::server_metrics::gpu::dcgm;

/// Energy each GPU's counter adds per generated token, mJ.
pub const MJ_PER_TOKEN: u64 = 50;

/// The mock's host name label.
pub const HOSTNAME: &str = "mock-gpu-host";

/// Appends the DCGM families of `gpus` GPUs after `generated` tokens.
pub fn render(out: &mut Vec<u8>, gpus: usize, generated: u64) {
    let mut text = String::new();
    let family = |text: &mut String, name: &str, kind: &str, value: &dyn Fn(u64) -> f64| {
        let _ = writeln!(text, "# HELP {name} {name}.\n# TYPE {name} {kind}");
        for g in 0..gpus as u64 {
            let _ = writeln!(
                text,
                "{name}{{gpu=\"{g}\",UUID=\"GPU-mock-{g}\",device=\"nvidia{g}\",\
                 modelName=\"Mock GPU\",Hostname=\"{HOSTNAME}\"}} {}",
                value(g)
            );
        }
    };
    let energy = |g: u64| ((g + 1) * 1_000_000 + generated * MJ_PER_TOKEN) as f64;
    family(&mut text, dcgm::POWER_USAGE, "gauge", &|g| {
        100.0 + 10.0 * g as f64
    });
    family(
        &mut text,
        dcgm::TOTAL_ENERGY_CONSUMPTION,
        "counter",
        &energy,
    );
    family(&mut text, dcgm::GPU_UTIL, "gauge", &|g| 50.0 + g as f64);
    family(&mut text, dcgm::FB_USED, "gauge", &|g| 1000.0 + g as f64);
    family(&mut text, dcgm::FB_FREE, "gauge", &|g| 80920.0 - g as f64);
    family(&mut text, dcgm::SM_CLOCK, "gauge", &|_| 1410.0);
    family(&mut text, dcgm::GPU_TEMP, "gauge", &|g| 40.0 + g as f64);
    out.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::exposition::{parse, Gpu};

    #[test]
    fn the_parser_reads_each_gpu_apart() {
        let mut out = Vec::new();
        render(&mut out, 2, 10);
        let scrape = parse(std::str::from_utf8(&out).unwrap()).unwrap();
        let energy = &scrape.per_gpu[dcgm::TOTAL_ENERGY_CONSUMPTION];
        let gpu = |g: &str| Gpu {
            host: HOSTNAME.into(),
            gpu: g.into(),
        };
        assert_eq!(energy[&gpu("0")], 1_000_500.0);
        assert_eq!(energy[&gpu("1")], 2_000_500.0);
        assert_eq!(scrape.per_gpu[dcgm::POWER_USAGE][&gpu("1")], 110.0);
        // The sums as before.
        assert_eq!(scrape.counters[dcgm::TOTAL_ENERGY_CONSUMPTION], 3_001_000.0);
    }
}
