//! A piece of SQL a table's owner hands another crate, so only the owner's code names its
//! tables: the engine writes "the succeeded runs of this subject" once, and documents splices
//! it into a query of its own tables without knowing how runs are stored.

use sea_orm::{DbBackend, Statement, Value};

/// SQL text with `?` placeholders and the values they take, in order. Spliced into a larger
/// statement, its values go exactly where its text goes among the others' placeholders.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlFragment {
    pub sql: String,
    pub values: Vec<Value>,
}

impl SqlFragment {
    pub fn new(sql: impl Into<String>, values: impl IntoIterator<Item = Value>) -> SqlFragment {
        SqlFragment {
            sql: sql.into(),
            values: values.into_iter().collect(),
        }
    }

    /// Appends `sql` and the values of its `?`s, in order.
    pub fn push(&mut self, sql: &str, values: impl IntoIterator<Item = Value>) -> &mut Self {
        self.sql.push_str(sql);
        self.values.extend(values);
        self
    }

    /// Appends `other`, its values after this fragment's.
    pub fn push_fragment(&mut self, other: &SqlFragment) -> &mut Self {
        self.push(&other.sql, other.values.iter().cloned())
    }

    /// The fragment as a whole statement (for a fragment that is one).
    pub fn into_statement(self) -> Statement {
        Statement::from_sql_and_values(DbBackend::Sqlite, self.sql, self.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn becomes_a_statement_with_its_values() {
        let fragment = SqlFragment::new("SELECT ? AS a", [Value::from(1i64)]);
        let statement = fragment.clone().into_statement();
        assert_eq!(statement.sql, fragment.sql);
        assert_eq!(statement.values.map(|v| v.0), Some(fragment.values));
    }

    #[test]
    fn spliced_values_follow_the_text() {
        let inner = SqlFragment::new("b = ?", [Value::from(2i64)]);
        let mut outer = SqlFragment::new("a = ? AND ", [Value::from(1i64)]);
        outer
            .push_fragment(&inner)
            .push(" AND c = ?", [Value::from(3i64)]);
        assert_eq!(outer.sql, "a = ? AND b = ? AND c = ?");
        assert_eq!(
            outer.values,
            [Value::from(1i64), Value::from(2i64), Value::from(3i64)]
        );
    }
}
