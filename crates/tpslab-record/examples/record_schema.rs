//! Prints the record's JSON Schema, the text of `docs/record.schema.json`:
//! `cargo run -p tpslab-record --features schema --example record_schema > docs/record.schema.json`

fn main() {
    print!("{}", tpslab_record::schema::record_schema_text());
}
