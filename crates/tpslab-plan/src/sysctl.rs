//! The sysctls tpslab may change, and their values as the kernel reads them.

/// Sysctls that bear on UDP loss, recorded with every run.
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.ipv4.udp_mem",
    "net.ipv4.udp_rmem_min",
];

/// How many numbers a value of `name` (one of [`SYSCTLS`]) holds: 3 for
/// `net.ipv4.udp_mem` (min, pressure, max, in pages), 1 for every other.
pub fn fields(name: &str) -> usize {
    match name {
        "net.ipv4.udp_mem" => 3,
        _ => 1,
    }
}

/// One field of a numeric sysctl as the kernel parses it (`proc_dointvec` and friends:
/// base 0, so `0x10` is 16 and a leading `0` means octal: `020000` is 8192).
pub fn kernel_number(field: &str) -> Option<u64> {
    let (digits, radix) = if let Some(h) = field
        .strip_prefix("0x")
        .or_else(|| field.strip_prefix("0X"))
    {
        (h, 16)
    } else if field.len() > 1 && field.starts_with('0') {
        (&field[1..], 8)
    } else {
        (field, 10)
    };
    // Digits only: from_str_radix would also take a leading '+', which the kernel refuses.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A numeric sysctl value in canonical form: each whitespace-separated field parsed as
/// the kernel parses it and written in decimal, one space apart (`tcp_rmem` style values
/// compare field by field). None when a field is not a number.
pub fn canonical(value: &str) -> Option<String> {
    let fields: Option<Vec<String>> = value
        .split_whitespace()
        .map(|f| kernel_number(f).map(|n| n.to_string()))
        .collect();
    fields.filter(|f| !f.is_empty()).map(|f| f.join(" "))
}
