//! A server's runtime as a record names it. Telling it from a process, and the lines that
//! set a socket's buffer in it, are `tpslab_analysis::runtime`.

use serde::{Deserialize, Serialize};

/// A server's runtime, as far as the buffer advice is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// A JVM (java, or any executable that maps libjvm.so).
    Java,
    /// CPython (python3*, or an executable that maps libpython).
    Python,
    /// A Go binary (carries the Go build-info blob).
    Go,
    /// Node.js.
    Node,
    /// Anything else: C, C++, Rust, ... (setsockopt).
    Native,
}

/// Every runtime the advice has lines for, in the order they are listed for a server whose
/// runtime is unknown (`tpslab_analysis::runtime::every_runtime`).
pub const ALL: [Runtime; 5] = [
    Runtime::Java,
    Runtime::Python,
    Runtime::Go,
    Runtime::Node,
    Runtime::Native,
];

impl Runtime {
    /// Lower-case name, as in the record.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Java => "java",
            Runtime::Python => "python",
            Runtime::Go => "go",
            Runtime::Node => "node",
            Runtime::Native => "c/native",
        }
    }

    /// What reads datagrams in parallel in this runtime: "threads" (Java, Go's
    /// goroutines on OS threads, native code), or "processes" where a process runs one
    /// thread of the language at a time (CPython's GIL, Node's event loop).
    pub fn readers(self) -> &'static str {
        match self {
            Runtime::Python | Runtime::Node => "processes",
            Runtime::Java | Runtime::Go | Runtime::Native => "threads",
        }
    }

    /// One of [`Runtime::readers`]: "thread" or "process".
    pub fn reader(self) -> &'static str {
        match self {
            Runtime::Python | Runtime::Node => "process",
            Runtime::Java | Runtime::Go | Runtime::Native => "thread",
        }
    }
}
