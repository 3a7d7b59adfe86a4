//! The run and stage state machines. Terminal states never change; the store's SQL guards
//! (`WHERE status IN (...)`) enforce the same table this module states.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Canceled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 5] = [
        Self::Queued,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Canceled)
    }

    /// The allowed transitions. `running -> queued` happens when a stage failure schedules a
    /// retry: the run goes back to the queue with a later due time instead of a sleeping worker.
    pub fn can_become(self, next: RunStatus) -> bool {
        use RunStatus::*;
        matches!(
            (self, next),
            (Queued, Running)
                | (Queued, Canceled)
                | (Queued, Failed)
                | (Running, Queued)
                | (Running, Running)
                | (Running, Succeeded)
                | (Running, Failed)
                | (Running, Canceled)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    Pending,
    Running,
    Succeeded,
    Failed,
    Skipped,
    Canceled,
}

impl StageStatus {
    pub const ALL: [StageStatus; 6] = [
        Self::Pending,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Skipped,
        Self::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// A dependency in one of these states lets its dependents start.
    pub fn satisfies_dependents(self) -> bool {
        matches!(self, Self::Succeeded | Self::Skipped)
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Skipped | Self::Canceled
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_run_states_never_change() {
        for from in RunStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in RunStatus::ALL {
                assert!(!from.can_become(to), "{from:?} -> {to:?} must be refused");
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
        }
        for s in StageStatus::ALL {
            assert_eq!(StageStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(RunStatus::parse("done"), None);
    }
}
