//! A row as an engine read it, column by column: the decoders that turn
//! rows into model values ([`super::engine`]) read through this, so every
//! engine decodes with the same rules (a column that does not decode is
//! reported in the value's `decode_error`, never fails the read).

use crate::error::{Error, Result};

/// The columns of one row an engine read, by position (0-based, in the
/// order of the statement's select list).
pub trait RowColumns {
    /// A text column.
    fn text(&self, index: usize) -> Result<String>;
    /// An integer column.
    fn int(&self, index: usize) -> Result<i64>;
    /// A text column that may be NULL (a left join's missing row).
    fn opt_text(&self, index: usize) -> Result<Option<String>>;
}

/// A value one column decodes to; lets decoders write `r.get(3)?`.
pub trait Column: Sized {
    /// Reads column `index` of `row`.
    fn read(row: &dyn RowColumns, index: usize) -> Result<Self>;
}

impl Column for String {
    fn read(row: &dyn RowColumns, index: usize) -> Result<String> {
        row.text(index)
    }
}

impl Column for i64 {
    fn read(row: &dyn RowColumns, index: usize) -> Result<i64> {
        row.int(index)
    }
}

impl Column for Option<String> {
    fn read(row: &dyn RowColumns, index: usize) -> Result<Option<String>> {
        row.opt_text(index)
    }
}

impl dyn RowColumns + '_ {
    /// Column `index` as a `T`.
    pub fn get<T: Column>(&self, index: usize) -> Result<T> {
        T::read(self, index)
    }
}

impl RowColumns for rusqlite::Row<'_> {
    fn text(&self, index: usize) -> Result<String> {
        self.get(index).map_err(Error::from_sqlite)
    }

    fn int(&self, index: usize) -> Result<i64> {
        self.get(index).map_err(Error::from_sqlite)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>> {
        self.get(index).map_err(Error::from_sqlite)
    }
}

/// A decoder of one kind of row.
pub type Decode<T> = fn(&dyn RowColumns) -> Result<T>;
