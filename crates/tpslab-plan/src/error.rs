//! The one error type of plan validation: one line naming the bad value and what is
//! allowed.

/// A plan that cannot run. `Display` gives one line such as
/// `--threads 0: allowed 1..=1024`; the label is the command-line flag by default and is
/// renamed with [`PlanError::relabel`] where the value came from elsewhere (a plan file, a
/// sweep factor).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A value out of its limit, or not of the allowed form.
    #[error("{label} {value}: allowed {allowed}")]
    Value {
        /// Where the value came from (a flag such as `--threads`).
        label: String,
        /// The value as given.
        value: String,
        /// What is allowed (`1..=1024`, `a duration such as 50ms`, ...).
        allowed: String,
    },
    /// Settings that contradict each other; the message names both.
    #[error("{0}")]
    Conflict(String),
}

impl PlanError {
    /// A value error.
    /// A value with control characters (a newline pasted into a flag) is shown escaped and
    /// quoted, once (a value the caller quoted already, `"..."`, is not quoted again), so
    /// the error stays one line; an empty one is shown as `""`, so it is seen.
    pub fn value(label: &str, value: impl std::fmt::Display, allowed: impl Into<String>) -> Self {
        let v = value.to_string();
        let inner = match v.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
            Some(inner) => inner,
            None => &v,
        };
        PlanError::Value {
            label: label.to_string(),
            value: if v.is_empty() || v.chars().any(char::is_control) {
                format!("{inner:?}")
            } else {
                v
            },
            allowed: allowed.into(),
        }
    }

    /// The label of a value error (None for a conflict).
    pub fn label(&self) -> Option<&str> {
        match self {
            PlanError::Value { label, .. } => Some(label),
            PlanError::Conflict(_) => None,
        }
    }

    /// The same error with its label renamed by `f` (e.g. `--threads` -> `plan: server
    /// threads` for a plan file). Conflicts are prefixed by `f("")` when that is not empty.
    pub fn relabel(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            PlanError::Value {
                label,
                value,
                allowed,
            } => PlanError::Value {
                label: f(&label),
                value,
                allowed,
            },
            PlanError::Conflict(m) => match f("") {
                p if p.is_empty() => PlanError::Conflict(m),
                p => PlanError::Conflict(format!("{p}: {m}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_with_a_newline_stays_on_one_line() {
        let e = PlanError::value("--rate", "10\n0", "a rate");
        assert_eq!(e.to_string(), "--rate \"10\\n0\": allowed a rate");
    }

    /// A value its caller quoted (a URL, a header) with a control character in it is
    /// escaped inside one pair of quotes, not quoted and escaped again (`"\"x\u{1b}\""`).
    #[test]
    fn a_quoted_value_is_escaped_once() {
        let e = PlanError::value("URL", "\"http://h/\u{1b}[31m\"", "a URL");
        assert_eq!(e.to_string(), "URL \"http://h/\\u{1b}[31m\": allowed a URL");
        let e = PlanError::value("URL", "\"http://h/\"", "a URL");
        assert_eq!(e.to_string(), "URL \"http://h/\": allowed a URL");
        assert_eq!(
            PlanError::value("--x", "", "y").to_string(),
            "--x \"\": allowed y"
        );
    }

    #[test]
    fn relabel_renames_values_and_prefixes_conflicts() {
        let e = PlanError::value("--threads", 0, "1..=1024")
            .relabel(|l| format!("plan: server {}", &l[2..]));
        assert_eq!(e.to_string(), "plan: server threads 0: allowed 1..=1024");
        let c = PlanError::Conflict("a and b".into()).relabel(|_| "plan".into());
        assert_eq!(c.to_string(), "plan: a and b");
    }
}
