//! The rules of the extension registry, whatever the engine: which applied
//! migrations a database may hold for an extension, which tables it may
//! have under the extension's prefix, and when a table's registration
//! (its key and digested columns) may be written or changed. SQLite's
//! opener and another engine's (PostgreSQL's) keep the registry in tables
//! of their own and ask these.

use std::path::Path;

use super::{
    Extension, ExtensionTable, MAX_EXTENSION_NAME, is_identifier, overlapping, quoted, quoted_list,
    table_problem,
};
use crate::error::{Error, Result};

/// The BLAKE3 hash of a migration's DDL, lowercase hex: what the registry
/// records of each applied migration (on every engine, the SQLite DDL's).
pub(crate) fn migration_hash(ddl: &str) -> String {
    blake3::hash(ddl.as_bytes()).to_hex().to_string()
}

/// A table's entry in the extension registry, as an engine read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// The extension it is registered to.
    pub extension: String,
    /// Its registered key column.
    pub key_column: String,
    /// Its registered digested columns ([`ExtensionTable::columns_json`]).
    pub columns_json: String,
}

impl RegistryEntry {
    /// The entry's digested columns, once it is found to register a valid
    /// extension table `name` (by names alone: the extension's, the
    /// table's, the key's and the columns', as an opener checked them when
    /// it registered the table); else why not. `verify` trusts no other
    /// entry, so a tampered registry cannot put other SQL in its
    /// statements.
    ///
    /// ```
    /// use agentrt::store::engine::RegistryEntry;
    ///
    /// let entry = RegistryEntry { extension: "demo".into(), key_column: "id".into(), columns_json: r#"["id","n"]"#.into() };
    /// assert_eq!(entry.checked_columns("demo_items"), Ok(vec!["id".to_owned(), "n".to_owned()]));
    /// assert!(entry.checked_columns("runs").is_err());
    /// ```
    pub fn checked_columns(&self, name: &str) -> std::result::Result<Vec<String>, String> {
        if !is_identifier(&self.extension, MAX_EXTENSION_NAME) {
            return Err("the extension's name is not valid".into());
        }
        let Ok(columns) = serde_json::from_str::<Vec<String>>(&self.columns_json) else {
            return Err("its columns are not a JSON array of names".into());
        };
        match table_problem(
            &format!("{}_", self.extension),
            name,
            &self.key_column,
            &columns,
        ) {
            Some(why) => Err(why),
            None => Ok(columns),
        }
    }
}

/// What an engine does with a declared table's registry entry
/// ([`Extension::registration`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// The entry is the declaration's: nothing to write.
    Keep,
    /// Insert the entry (the table was not registered).
    Insert,
    /// Set the entry's extension, key and columns to the declaration's
    /// (the table holds no rows yet).
    Update,
}

impl ExtensionTable {
    /// The statement an engine runs for
    /// [`WriteTx::insert_row`](crate::store::WriteTx::insert_row) giving
    /// `columns` (`?` for each value, in their order; `DEFAULT VALUES` for
    /// none). The names are the registered declaration's.
    ///
    /// ```
    /// use agentrt::store::ExtensionTable;
    ///
    /// let t = ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "n"] };
    /// assert_eq!(t.insert_sql(&["n"]), r#"INSERT INTO "demo_items" ("n") VALUES (?)"#);
    /// assert_eq!(t.insert_sql(&[]), r#"INSERT INTO "demo_items" DEFAULT VALUES"#);
    /// ```
    pub fn insert_sql(&self, columns: &[&str]) -> String {
        if columns.is_empty() {
            format!("INSERT INTO {} DEFAULT VALUES", quoted(self.name))
        } else {
            format!(
                "INSERT INTO {} ({}) VALUES ({})",
                quoted(self.name),
                quoted_list(columns),
                vec!["?"; columns.len()].join(", ")
            )
        }
    }

    /// The compare-and-set statement an engine runs for
    /// [`WriteTx::update_row`](crate::store::WriteTx::update_row): `set`'s
    /// columns set where the key and every column of `guard` hold their
    /// values (`?` for each: the set values, the key, the guard values).
    ///
    /// ```
    /// use agentrt::store::ExtensionTable;
    ///
    /// let t = ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "n"] };
    /// assert_eq!(
    ///     t.update_sql(&["n"], &["n"]),
    ///     r#"UPDATE "demo_items" SET "n" = ? WHERE "id" = ? AND "n" = ?"#
    /// );
    /// ```
    pub fn update_sql(&self, set: &[&str], guard: &[&str]) -> String {
        let sets: Vec<String> = set.iter().map(|c| format!("{} = ?", quoted(c))).collect();
        let mut sql = format!(
            "UPDATE {} SET {} WHERE {} = ?",
            quoted(self.name),
            sets.join(", "),
            quoted(self.key_column)
        );
        for column in guard {
            sql.push_str(&format!(" AND {} = ?", quoted(column)));
        }
        sql
    }

    /// The registry's form of the digested columns: a JSON array of their
    /// names, in digest order.
    ///
    /// ```
    /// use agentrt::store::ExtensionTable;
    ///
    /// let table = ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "seen_at"] };
    /// assert_eq!(table.columns_json(), r#"["id","seen_at"]"#);
    /// ```
    pub fn columns_json(&self) -> String {
        let quoted: Vec<String> = self.columns.iter().map(|c| format!("\"{c}\"")).collect();
        format!("[{}]", quoted.join(","))
    }
}

/// Refuses an extension whose prefix overlaps that of an extension the
/// database already holds (`held`: the names with applied migrations).
pub fn check_held<'a>(
    extensions: &[Extension],
    held: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    for held in held {
        if let Some(ext) = extensions
            .iter()
            .find(|e| e.name != held && overlapping(e.name, held))
        {
            return Err(Error::ExtensionDeclaration {
                extension: ext.name.to_owned(),
                detail: format!(
                    "its prefix {:?} overlaps the prefix of extension {held:?}, which this database holds",
                    ext.prefix()
                ),
            });
        }
    }
    Ok(())
}

impl Extension {
    /// The registry's hash of migration `version` (`None`: no such
    /// migration).
    pub fn migration_hash(&self, version: i64) -> Option<String> {
        let at = usize::try_from(version.checked_sub(1)?).ok()?;
        self.migrations.get(at).map(|(_, ddl)| migration_hash(ddl))
    }

    /// The version a database holds this extension at, given the
    /// migrations it recorded as applied (`(version, hash)` in version
    /// order), once they are found to be this build's: versions `1..` with
    /// the same DDL, none newer than the build ([`Error::ExtensionVersion`]
    /// naming `place`), none changed ([`Error::ExtensionMigrationChanged`]).
    ///
    /// ```
    /// use agentrt::store::{Extension, ExtensionTable};
    ///
    /// const DEMO: Extension = Extension {
    ///     name: "demo",
    ///     migrations: &[(1, "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, written_seq INTEGER NOT NULL DEFAULT 0)")],
    ///     tables: &[ExtensionTable { name: "demo_items", key_column: "id", columns: &["id"] }],
    /// };
    /// let place = std::path::Path::new("db");
    /// assert_eq!(DEMO.applied_version(place, &[])?, 0);
    /// assert_eq!(DEMO.applied_version(place, &[(1, DEMO.migration_hash(1).unwrap())])?, 1);
    /// assert!(DEMO.applied_version(place, &[(1, "edited".into())]).is_err());
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn applied_version(&self, place: &Path, applied: &[(i64, String)]) -> Result<i64> {
        let database = applied.last().map_or(0, |(v, _)| *v);
        if database > self.version() {
            return Err(Error::ExtensionVersion {
                path: place.into(),
                extension: self.name.to_owned(),
                database,
                build: self.version(),
            });
        }
        for (at, (version, hash)) in applied.iter().enumerate() {
            if i64::try_from(at + 1).ok() != Some(*version) {
                return Err(Error::ExtensionSchema {
                    extension: self.name.to_owned(),
                    table: "extension_migrations".into(),
                    detail: format!(
                        "the applied versions are not 1 to {database}: version {} is missing",
                        at + 1
                    ),
                });
            }
            let declared = self.migration_hash(*version).unwrap_or_default();
            if declared != *hash {
                return Err(Error::ExtensionMigrationChanged {
                    extension: self.name.to_owned(),
                    version: *version,
                    applied: hash.clone(),
                    declared,
                });
            }
        }
        Ok(database)
    }

    /// Refuses a table the database has under this extension's prefix (or
    /// registers to it) that the extension does not declare: every
    /// extension table stays declared, so its rows stay on the chain.
    pub fn undeclared(&self, found: &[String]) -> Result<()> {
        match found
            .iter()
            .find(|name| !self.tables.iter().any(|t| t.name == name.as_str()))
        {
            Some(undeclared) => Err(Error::ExtensionSchema {
                extension: self.name.to_owned(),
                table: undeclared.clone(),
                detail: "the database has it (created by the extension's migrations, or registered), but the extension does not declare it; every extension table stays declared, so its rows are on the chain".into(),
            }),
            None => Ok(()),
        }
    }

    /// What to do with `table`'s registry `entry` (`None`: not
    /// registered): keep it, insert it, or update it — the last only while
    /// the table holds no rows (`rows` counts them, asked only then),
    /// because rows on the chain are digested by the registered columns.
    /// An opener that does not migrate (`register` false) only keeps.
    ///
    /// ```
    /// use agentrt::store::engine::{Registration, RegistryEntry};
    /// use agentrt::store::{Extension, ExtensionTable};
    ///
    /// const TABLE: ExtensionTable = ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "n"] };
    /// const DEMO: Extension = Extension { name: "demo", migrations: &[(1, "")], tables: &[TABLE] };
    /// let mut no_rows = || Ok(0);
    /// assert_eq!(DEMO.registration(&TABLE, None, true, &mut no_rows)?, Registration::Insert);
    /// let old = RegistryEntry { extension: "demo".into(), key_column: "id".into(), columns_json: r#"["id"]"#.into() };
    /// assert_eq!(DEMO.registration(&TABLE, Some(&old), true, &mut no_rows)?, Registration::Update);
    /// assert!(DEMO.registration(&TABLE, Some(&old), true, &mut || Ok(3)).is_err());
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn registration(
        &self,
        table: &ExtensionTable,
        entry: Option<&RegistryEntry>,
        register: bool,
        rows: &mut dyn FnMut() -> Result<i64>,
    ) -> Result<Registration> {
        let wrong = |detail: String| Error::ExtensionSchema {
            extension: self.name.to_owned(),
            table: table.name.to_owned(),
            detail,
        };
        let columns_json = table.columns_json();
        let Some(entry) = entry else {
            return if register {
                Ok(Registration::Insert)
            } else {
                Err(wrong(
                    "it is not registered; open the database for writing once to register it"
                        .into(),
                ))
            };
        };
        if entry.extension != self.name {
            return Err(wrong(format!(
                "it is registered to extension {:?}",
                entry.extension
            )));
        }
        if entry.key_column == table.key_column && entry.columns_json == columns_json {
            return Ok(Registration::Keep);
        }
        let held = rows()?;
        if !register || held > 0 {
            return Err(wrong(format!(
                "it is registered with key {:?} and digested columns {}, but declared with key {:?} and {columns_json}; \
                 its {held} row(s) are on the chain as registered, so an extension table's key and columns never change once it holds rows (declare a new table)",
                entry.key_column, entry.columns_json, table.key_column
            )));
        }
        Ok(Registration::Update)
    }
}
