//! Disk space as a first-class resource: the free bytes of the volumes Shelf writes to (the
//! data directory, its `uploads/`, the SQLite file's directory), the floor under which Shelf
//! takes no new work (`SHELF_MIN_FREE_BYTES`), and the gate that pauses workers' claims while a
//! volume is below it. New work is refused before the disk is full, so the runs in flight have
//! the headroom to finish, and everything resumes by itself once space returns: nothing here
//! latches. A `statvfs` is one system call, cheap enough to ask before every upload, import and
//! claim.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shelf_engine::ClaimGate;

use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::shelf::Shelf;

pub const GIB: u64 = 1 << 30;

/// The default floor is this share of the volume (1/20 = 5 %), when that is under 1 GiB.
const DEFAULT_FLOOR_DIVISOR: u64 = 20;

/// Free and total bytes of one volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Volume {
    /// Bytes an unprivileged process may still write (`f_bavail`): the root reserve does not
    /// count, since Shelf should not run as root.
    pub free: u64,
    pub total: u64,
}

/// The volume holding `path`.
pub fn volume(path: &Path) -> std::io::Result<Volume> {
    let stat = rustix::fs::statvfs(path)?;
    // `f_frsize` is the unit of the block counts; a few file systems leave it 0.
    let unit = if stat.f_frsize > 0 {
        stat.f_frsize
    } else {
        stat.f_bsize
    };
    Ok(Volume {
        free: stat.f_bavail.saturating_mul(unit),
        total: stat.f_blocks.saturating_mul(unit),
    })
}

/// The free bytes a volume of `total` bytes must keep: `SHELF_MIN_FREE_BYTES` when set, else
/// 1 GiB or 5 % of the volume, whichever is smaller (so a small disk is not refused from the
/// start). 0 means no floor.
pub fn floor(min_free_bytes: Option<u64>, total: u64) -> u64 {
    min_free_bytes.unwrap_or_else(|| GIB.min(total / DEFAULT_FLOOR_DIVISOR))
}

/// A volume below its floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} free on the data volume, below the minimum of {} (SHELF_MIN_FREE_BYTES)",
    mib(*.free),
    mib(*.floor)
)]
pub struct LowSpace {
    pub free: u64,
    pub floor: u64,
}

/// Bytes as MiB with one decimal, for messages.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Whether `volume` keeps its floor.
pub fn verdict(min_free_bytes: Option<u64>, volume: Volume) -> Result<(), LowSpace> {
    let floor = floor(min_free_bytes, volume.total);
    if volume.free < floor {
        Err(LowSpace {
            free: volume.free,
            floor,
        })
    } else {
        Ok(())
    }
}

/// The volumes Shelf writes to and the floor they must keep.
#[derive(Debug, Clone)]
pub struct DiskSpace {
    paths: Vec<PathBuf>,
    min_free_bytes: Option<u64>,
}

impl DiskSpace {
    /// `paths` in order of importance: the first one's volume is the one the metric shows.
    pub fn new(paths: Vec<PathBuf>, min_free_bytes: Option<u64>) -> DiskSpace {
        DiskSpace {
            paths,
            min_free_bytes,
        }
    }

    /// The data directory, `uploads/` (which an operator may mount elsewhere) and, on SQLite,
    /// the database file's directory (`SHELF_DATABASE_PATH` may name another volume).
    pub fn of(settings: &Settings) -> DiskSpace {
        let mut paths = vec![
            settings.storage.data_dir.clone(),
            settings.storage.layout().uploads(),
        ];
        if !settings.is_postgres()
            && let Some(dir) = settings.storage.database_path.parent()
            && !dir.as_os_str().is_empty()
        {
            paths.push(dir.to_path_buf());
        }
        DiskSpace::new(paths, settings.storage.min_free_bytes)
    }

    /// Whether a floor applies at all (`SHELF_MIN_FREE_BYTES=0` turns it off).
    pub fn enabled(&self) -> bool {
        self.min_free_bytes != Some(0)
    }

    /// Ok while every volume keeps its floor; else the one with the least free space. A path
    /// that does not exist yet (`uploads/` before the first upload) is skipped: whether the
    /// data directory itself is usable is readiness's question, not this one's.
    pub fn check(&self) -> Result<(), LowSpace> {
        if !self.enabled() {
            return Ok(());
        }
        let mut worst: Option<LowSpace> = None;
        for path in &self.paths {
            let Ok(volume) = volume(path) else {
                continue;
            };
            if let Err(low) = verdict(self.min_free_bytes, volume)
                && worst.is_none_or(|w| low.free < w.free)
            {
                worst = Some(low);
            }
        }
        worst.map_or(Ok(()), Err)
    }

    /// Free bytes of the data directory's volume, when it can be read.
    pub fn free_bytes(&self) -> Option<u64> {
        self.paths
            .first()
            .and_then(|p| volume(p).ok())
            .map(|v| v.free)
    }
}

/// The workers' admission rule: claim only while every volume keeps its floor. The engine
/// asks it before each claim; the `shelf_worker_claims_paused` gauge follows its answer.
pub struct StorageGate {
    space: DiskSpace,
    metrics: Arc<Metrics>,
}

impl StorageGate {
    pub fn new(space: DiskSpace, metrics: Arc<Metrics>) -> StorageGate {
        StorageGate { space, metrics }
    }
}

impl ClaimGate for StorageGate {
    fn may_claim(&self) -> Result<(), String> {
        let verdict = self.space.check();
        self.metrics.set_claims_paused(verdict.is_err());
        verdict.map_err(|low| format!("{low}; free space to resume"))
    }
}

impl Shelf {
    /// The volumes this process writes to, with `SHELF_MIN_FREE_BYTES`.
    pub fn disk_space(&self) -> DiskSpace {
        DiskSpace::of(&self.settings)
    }

    /// Refuses new work (an upload, a batch, an import) while a volume is below its floor:
    /// counted in `shelf_storage_refusals_total` and logged, for the operator.
    pub fn admit_new_work(&self) -> Result<(), LowSpace> {
        self.disk_space().check().inspect_err(|low| {
            self.metrics.storage_refused();
            tracing::warn!(
                free_bytes = low.free,
                min_free_bytes = low.floor,
                "new work refused: {low}"
            );
        })
    }

    /// The gate a worker of this process claims through.
    pub fn claim_gate(&self) -> Arc<dyn ClaimGate> {
        Arc::new(StorageGate::new(self.disk_space(), self.metrics.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_default_floor_is_the_smaller_of_1_gib_and_5_percent() {
        assert_eq!(floor(None, 100 * GIB), GIB);
        assert_eq!(floor(None, 20 * GIB), GIB);
        assert_eq!(floor(None, 10 * GIB), GIB / 2);
        assert_eq!(floor(None, 64 * MIB), 64 * MIB / 20);
        assert_eq!(floor(None, 0), 0);
        assert_eq!(floor(Some(5 * GIB), 10 * GIB), 5 * GIB);
        assert_eq!(floor(Some(0), 10 * GIB), 0);
    }

    #[test]
    fn a_volume_below_its_floor_is_refused_and_at_it_admitted() {
        let volume = |free| Volume {
            free,
            total: 100 * GIB,
        };
        assert_eq!(verdict(None, volume(2 * GIB)), Ok(()));
        assert_eq!(verdict(None, volume(GIB)), Ok(()));
        assert_eq!(
            verdict(None, volume(GIB - 1)),
            Err(LowSpace {
                free: GIB - 1,
                floor: GIB
            })
        );
        assert_eq!(verdict(Some(0), volume(0)), Ok(()), "0 turns the floor off");
        assert_eq!(
            verdict(Some(10 * MIB), volume(3 * MIB)),
            Err(LowSpace {
                free: 3 * MIB,
                floor: 10 * MIB
            })
        );
        let message = LowSpace {
            free: 3 * MIB,
            floor: 10 * MIB,
        }
        .to_string();
        assert_eq!(
            message,
            "3.0 MiB free on the data volume, below the minimum of 10.0 MiB (SHELF_MIN_FREE_BYTES)"
        );
    }

    #[test]
    fn the_check_reads_real_volumes_and_skips_missing_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = volume(dir.path()).expect("statvfs");
        assert!(real.total > 0 && real.free <= real.total, "{real:?}");
        let missing = dir.path().join("not-yet");
        // No floor can be kept: more than the volume's size.
        let impossible = DiskSpace::new(vec![dir.path().into(), missing.clone()], Some(u64::MAX));
        let low = impossible.check().expect_err("below an impossible floor");
        assert_eq!(low.floor, u64::MAX);
        assert!(impossible.free_bytes().is_some());
        assert_eq!(
            DiskSpace::new(vec![dir.path().into()], Some(0)).check(),
            Ok(())
        );
        assert_eq!(
            DiskSpace::new(vec![dir.path().into()], Some(1)).check(),
            Ok(())
        );
        assert_eq!(
            DiskSpace::new(vec![missing], Some(u64::MAX)).check(),
            Ok(())
        );
    }
}
