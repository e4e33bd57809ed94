//! Cron jobs on the gateway (OpenClaw's `cron.*`): when they run (`schedule.rs`).

pub mod schedule;
