//! docs/errors.md lists exactly the codes and statuses of the error table.

use std::collections::BTreeSet;

use shelf_server::ErrorCode;

#[test]
fn errors_md_matches_the_error_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md");
    let text = std::fs::read_to_string(path).expect("docs/errors.md");
    let documented: BTreeSet<(String, u16)> = text
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let code = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let status = cells.next()?.parse::<u16>().ok()?;
            Some((code.to_string(), status))
        })
        .collect();
    let table: BTreeSet<(String, u16)> = ErrorCode::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), c.status().as_u16()))
        .collect();
    assert_eq!(documented, table);
}
