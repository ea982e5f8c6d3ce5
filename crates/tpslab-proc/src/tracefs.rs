//! A tracepoint's `format` file from tracefs (`events/SYSTEM/NAME/format`): its id, its
//! fields (name, offset, size) and the names its print format gives to a field's values
//! (`__print_symbolic(REC->reason, { 2, "NOT_SPECIFIED" }, ...)`). The numbers differ
//! between kernels: read them, never hard-code them.

/// One field of a tracepoint's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name (`reason`).
    pub name: String,
    /// Its C type as written (`enum skb_drop_reason`).
    pub ty: String,
    /// Offset in the record, bytes.
    pub offset: usize,
    /// Size, bytes.
    pub size: usize,
}

/// A parsed `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// The tracepoint's name.
    pub name: String,
    /// Its id (perf_event_attr.config of a PERF_TYPE_TRACEPOINT event).
    pub id: u64,
    /// Its fields, common ones included, in order.
    pub fields: Vec<Field>,
    /// The print format's text after `print fmt: `.
    pub print_fmt: String,
}

impl Format {
    /// The values of `field` and their names, from `__print_symbolic(REC->field, ...)` in
    /// the print format, in the order written; empty when the format has none.
    pub fn symbols(&self, field: &str) -> Vec<(u64, String)> {
        let key = format!("__print_symbolic(REC->{field},");
        let Some(start) = self.print_fmt.find(&key) else {
            return vec![];
        };
        let mut out = vec![];
        let mut rest = &self.print_fmt[start + key.len()..];
        // Each entry is `{ NUMBER, "NAME" }`; the list ends at the closing parenthesis.
        while let Some(open) = rest.find('{') {
            if rest[..open].contains(')') {
                break;
            }
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let entry = &rest[open + 1..open + close];
            if let Some((n, name)) = entry.split_once(',') {
                let n = n.trim();
                let parsed = n
                    .strip_prefix("0x")
                    .map_or_else(|| n.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
                let name = name.trim().trim_matches('"');
                if let Some(v) = parsed.filter(|_| !name.is_empty()) {
                    out.push((v, name.to_string()));
                }
            }
            rest = &rest[open + close + 1..];
        }
        out
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parses a tracepoint `format` file. None when it has no `name:` or `ID:` line.
pub fn parse_format(text: &str) -> Option<Format> {
    let mut name = None;
    let mut id = None;
    let mut fields = vec![];
    let mut print_fmt = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("ID:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = t.strip_prefix("print fmt:") {
            print_fmt = v.trim().to_string();
        } else if let Some(v) = t.strip_prefix("field:") {
            // `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`
            let mut parts = v.split(';').map(str::trim);
            let decl = parts.next().unwrap_or_default();
            let rest: Vec<&str> = parts.collect();
            let kv = |k: &str| -> Option<usize> {
                rest.iter()
                    .find_map(|p| p.strip_prefix(k))
                    .and_then(|x| x.trim().parse().ok())
            };
            let (offset, size) = (kv("offset:"), kv("size:"));
            let (ty, fname) = decl.rsplit_once(' ').unwrap_or(("", decl));
            // Arrays are written `char name[16]`.
            let fname = fname.split('[').next().unwrap_or(fname);
            if let (Some(offset), Some(size)) = (offset, size) {
                fields.push(Field {
                    name: fname.to_string(),
                    ty: ty.trim().to_string(),
                    offset,
                    size,
                });
            }
        }
    }
    Some(Format {
        name: name?,
        id: id?,
        fields,
        print_fmt,
    })
}
