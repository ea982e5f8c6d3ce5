//! Figures that may be NaN (not measured, or an interval of one run): the serde helpers
//! the record's types use ([`tpslab_record::nan`]), re-exported.
