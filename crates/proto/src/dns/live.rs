//! The zone set being served, replaceable while serving: a [`crate::live::Live`] of
//! zone sets.

use super::db::ZoneSet;

/// The current zone set and its generation.
pub type LiveZones = crate::live::Live<ZoneSet>;
