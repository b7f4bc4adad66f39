//! Local wall-clock time in the two text forms the result JSON uses: the `date` key and the
//! result file name (`%Y%m%d-%H%M%S`, Python's `datetime.now().strftime(...)`), and
//! `rps_change_events` timestamps (`datetime.now().isoformat()`).
//!
//! Local time needs the system time-zone rules (`TZ`, `/etc/localtime`); chrono's `Local`
//! reads them the way libc does, without the unsafe `localtime_r` calls this module once had.

use chrono::{DateTime, Datelike, Local, Timelike};
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A broken-down local date and time with microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDateTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub microsecond: u32,
}

impl LocalDateTime {
    /// The current local time. Falls back to UTC fields if the time zone cannot be read.
    pub fn now() -> Self {
        Self::at(SystemTime::now())
    }

    /// The local time of `t` (a time before 1970 counts as the epoch).
    pub fn at(t: SystemTime) -> Self {
        let since_epoch = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let local: DateTime<Local> = (UNIX_EPOCH + since_epoch).into();
        LocalDateTime {
            year: local.year(),
            month: local.month(),
            day: local.day(),
            hour: local.hour(),
            minute: local.minute(),
            second: local.second(),
            microsecond: since_epoch.subsec_micros(),
        }
    }

    /// `%Y%m%d-%H%M%S`, e.g. `20261130-084051` (the `date` key and file-name suffix).
    pub fn result_date(&self) -> String {
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// Python's naive `isoformat()`: `2026-11-30T08:40:51.123456`, without the fraction
    /// when the microseconds are 0.
    pub fn isoformat(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for LocalDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )?;
        if self.microsecond != 0 {
            write!(f, ".{:06}", self.microsecond)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_python() {
        let t = LocalDateTime {
            year: 2026,
            month: 11,
            day: 30,
            hour: 8,
            minute: 4,
            second: 5,
            microsecond: 42,
        };
        assert_eq!(t.result_date(), "20261130-080405");
        assert_eq!(t.isoformat(), "2026-11-30T08:04:05.000042");
        assert_eq!(
            LocalDateTime {
                microsecond: 0,
                ..t
            }
            .isoformat(),
            "2026-11-30T08:04:05"
        );
    }

    #[test]
    fn now_is_a_plausible_date() {
        let t = LocalDateTime::now();
        assert!(t.year >= 2024 && (1..=12).contains(&t.month) && (1..=31).contains(&t.day));
        assert_eq!(t.result_date().len(), 15);
    }
}
