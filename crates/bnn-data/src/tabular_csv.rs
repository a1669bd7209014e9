//! Tabular data from CSV files: a header row naming the columns, then one row of numbers per
//! line. The target columns are named by the caller (`--target NAME`, repeatable); every other
//! column is a feature, in the header's order.
//!
//! - Cells are numbers as Rust's `f32` parser reads them (`3`, `-0.5`, `1e-3`), spaces around
//!   them ignored; fields may be quoted (`"1.5"`). An empty cell, text, NaN, infinity or a
//!   number beyond `f32`'s range is an error naming the file, the line and the column: missing
//!   values are not supported (impute or drop them first).
//! - Every row has as many fields as the header; the header's names are distinct and
//!   non-empty. A UTF-8 byte-order mark before the header is skipped; blank lines are skipped.
//! - The file's size is checked against the memory budget ([`crate::memory_budget`] with
//!   [`crate::MAX_TABULAR_BYTES`]) before it is read: its values can take up to twice its size
//!   as `f32` (a value of at least two characters, with its separator, becomes four bytes).
//!   The budget is checked again as the rows are read, so a file that grows (or a pipe) is
//!   stopped there too.
//!
//! A command line names CSV data as a [`CsvSource`]: `csv:TRAIN.csv` or
//! `csv:TRAIN.csv,test=TEST.csv`.

use std::path::{Path, PathBuf};

use crate::error::{DataError, Result};
use crate::memory::memory_budget;
use crate::tabular::{MAX_TABULAR_BYTES, TabularDataset, TabularSplits};

/// CSV files named on a command line: `csv:TRAIN.csv` for a training file alone, or
/// `csv:TRAIN.csv,test=TEST.csv` with a test file given after `,test=`; the test file must
/// have the same header (the same names in the same order). Paths are taken as written
/// (relative to the working directory); a path holding a comma cannot be named this way.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CsvSource {
    /// The training file.
    pub train: PathBuf,
    /// The test file, if one is given.
    pub test: Option<PathBuf>,
}

/// The spelling of a CSV source, for error messages.
const CSV_FORMS: &str = "csv:TRAIN.csv or csv:TRAIN.csv,test=TEST.csv";

impl CsvSource {
    /// Parses `csv:TRAIN.csv` or `csv:TRAIN.csv,test=TEST.csv`. An empty path, an option
    /// other than `test=` (or `test=` twice) or a spec without the `csv:` prefix is an error
    /// naming the spec.
    pub fn parse(spec: &str) -> Result<Self> {
        let rest = spec.strip_prefix("csv:").ok_or_else(|| {
            DataError::Config(format!("`{spec}` is not a CSV source ({CSV_FORMS})"))
        })?;
        let mut parts = rest.split(',');
        let train = parts.next().unwrap_or_default();
        if train.trim().is_empty() {
            return Err(DataError::Config(format!(
                "`{spec}` names no training file ({CSV_FORMS})"
            )));
        }
        let mut test = None;
        for part in parts {
            match part.split_once('=') {
                Some(("test", path)) => {
                    if test.is_some() {
                        return Err(DataError::Config(format!(
                            "`{spec}` gives `test=` twice: name one test file"
                        )));
                    }
                    if path.trim().is_empty() {
                        return Err(DataError::Config(format!(
                            "`{spec}` names no test file after `test=` ({CSV_FORMS})"
                        )));
                    }
                    test = Some(PathBuf::from(path));
                }
                _ if part.is_empty() => {
                    return Err(DataError::Config(format!(
                        "`{spec}` has an empty option after a comma ({CSV_FORMS})"
                    )));
                }
                _ => {
                    return Err(DataError::Config(format!(
                        "`{spec}`: unknown option `{part}` (the one option is test=FILE: \
                         {CSV_FORMS}; a path holding a comma cannot be named here)"
                    )));
                }
            }
        }
        Ok(CsvSource {
            train: PathBuf::from(train),
            test,
        })
    }

    /// Reads the training file and, when given, the test file, with the columns named in
    /// `targets` as targets ([`read_csv`]); the test file must have the training file's header.
    /// Both files together are held within the memory budget.
    pub fn load(&self, targets: &[String]) -> Result<TabularSplits> {
        let mut budget = memory_budget(MAX_TABULAR_BYTES);
        self.load_within(targets, &mut budget)
    }

    /// [`CsvSource::load`] within `budget` bytes.
    fn load_within(&self, targets: &[String], budget: &mut u64) -> Result<TabularSplits> {
        let (train, header) = read_csv_within(&self.train, targets, budget, None)?;
        let test = match &self.test {
            Some(path) => {
                Some(read_csv_within(path, targets, budget, Some((&self.train, &header)))?.0)
            }
            None => None,
        };
        Ok(TabularSplits { train, test })
    }
}

impl std::fmt::Display for CsvSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "csv:{}", self.train.display())?;
        if let Some(test) = &self.test {
            write!(f, ",test={}", test.display())?;
        }
        Ok(())
    }
}

impl std::str::FromStr for CsvSource {
    type Err = DataError;

    /// [`CsvSource::parse`].
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Reads the CSV file at `path` (module docs): the columns named in `targets` (at least one,
/// each once, in that order) are the targets, every other column a feature in the header's
/// order. Errors name the file, the 1-based line and the column: a cell that is not a finite
/// number, an empty cell, a row with another number of fields than the header, a target not in
/// the header (the error lists the header's names), a header name given twice, no feature
/// column left, no data rows, or a file too large for the memory budget.
pub fn read_csv(path: &Path, targets: &[String]) -> Result<TabularDataset> {
    let mut budget = memory_budget(MAX_TABULAR_BYTES);
    Ok(read_csv_within(path, targets, &mut budget, None)?.0)
}

/// A [`DataError::Cell`] at `line`, `column` of `path`.
fn cell(path: &Path, line: u64, column: &str, reason: String) -> DataError {
    DataError::Cell {
        path: path.to_path_buf(),
        line,
        column: column.to_string(),
        reason,
    }
}

/// A `csv` crate error while reading `path`, with the line where it has one.
fn csv_error(path: &Path, e: csv::Error) -> DataError {
    let line = e.position().map(|p| p.line());
    match e.into_kind() {
        csv::ErrorKind::Io(io) => DataError::io(path, io),
        kind => {
            let what = match kind {
                csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8 text ({err})"),
                other => format!("{:?}", other),
            };
            match line {
                Some(line) => DataError::format(path, format!("line {line}: {what}")),
                None => DataError::format(path, what),
            }
        }
    }
}

/// Makes room in `values` for `more` values, growing it by half its length at a time and never
/// past `limit` values in all; `false` when that cannot hold them.
fn make_room(values: &mut Vec<f32>, more: usize, limit: usize) -> bool {
    let need = values.len() + more;
    if need <= values.capacity() {
        return true;
    }
    if need > limit {
        return false;
    }
    let grown = (values.len() + values.len() / 2)
        .max(need)
        .max(1024)
        .min(limit);
    values.reserve_exact(grown - values.len());
    true
}

/// Parses one cell: a finite `f32`.
fn parse_cell(text: &str) -> std::result::Result<f32, String> {
    if text.is_empty() {
        return Err(
            "empty cell: every cell must hold a number (missing values are not supported)".into(),
        );
    }
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) if text.parse::<f64>().is_ok_and(f64::is_finite) => {
            Err(format!("`{text}` is beyond f32's range (about ±3.4e38)"))
        }
        Ok(_) => Err(format!(
            "`{text}` is not a finite number: NaN and infinity are refused (missing values are \
             not supported)"
        )),
        Err(_) => Err(format!("`{text}` is not a number")),
    }
}

/// Reads the CSV at `path` within `budget` bytes (lowered by what its values take); `expect`,
/// for a test file, is the training file and its header, which this file's must equal.
/// Returns the data set and the file's header.
fn read_csv_within(
    path: &Path,
    targets: &[String],
    budget: &mut u64,
    expect: Option<(&Path, &[String])>,
) -> Result<(TabularDataset, Vec<String>)> {
    let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let size = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    if size.saturating_mul(2) > *budget {
        return Err(DataError::format(
            path,
            format!(
                "a file of {size} bytes, whose values may take up to {} bytes as f32, more than \
                 the {budget} bytes a data set may take on this machine (a quarter of its \
                 available memory, at most {MAX_TABULAR_BYTES})",
                size.saturating_mul(2)
            ),
        ));
    }
    if targets.is_empty() {
        return Err(DataError::Config(format!(
            "{}: name at least one target column (--target NAME)",
            path.display()
        )));
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(std::io::BufReader::new(file));
    let header_record = reader.headers().map_err(|e| csv_error(path, e))?.clone();
    let header_line = header_record.position().map_or(1, |p| p.line());
    let header: Vec<String> = header_record.iter().map(str::to_string).collect();
    if header.is_empty() {
        return Err(DataError::format(
            path,
            "empty file: no header row naming the columns",
        ));
    }
    for (j, name) in header.iter().enumerate() {
        if name.is_empty() {
            return Err(cell(
                path,
                header_line,
                &format!("#{}", j + 1),
                format!(
                    "the header names no column {} (every column needs a name)",
                    j + 1
                ),
            ));
        }
        if let Some(first) = header[..j].iter().position(|n| n == name) {
            return Err(cell(
                path,
                header_line,
                name,
                format!(
                    "duplicate header name: columns {} and {} are both `{name}`",
                    first + 1,
                    j + 1
                ),
            ));
        }
    }
    if let Some((train, train_header)) = expect
        && header != train_header
    {
        let at = header
            .iter()
            .zip(train_header)
            .position(|(a, b)| a != b)
            .unwrap_or(header.len().min(train_header.len()));
        return Err(DataError::format(
            path,
            format!(
                "the header ({}) differs from the training file {}'s ({}) at column {}: a test \
                 file needs the training file's columns in the same order",
                header.join(","),
                train.display(),
                train_header.join(","),
                at + 1
            ),
        ));
    }
    let mut target_at = Vec::with_capacity(targets.len());
    for (k, name) in targets.iter().enumerate() {
        if targets[..k].contains(name) {
            return Err(DataError::Config(format!(
                "{}: target column `{name}` is named twice",
                path.display()
            )));
        }
        match header.iter().position(|h| h == name) {
            Some(j) => target_at.push(j),
            None => {
                return Err(DataError::format(
                    path,
                    format!(
                        "target column `{name}` is not in the header; its columns are: {}",
                        header.join(", ")
                    ),
                ));
            }
        }
    }
    let feature_at: Vec<usize> = (0..header.len())
        .filter(|j| !target_at.contains(j))
        .collect();
    if feature_at.is_empty() {
        return Err(DataError::format(
            path,
            format!(
                "no feature column left: every column ({}) is a target",
                header.join(", ")
            ),
        ));
    }
    // Rows split into features and targets in a fixed proportion: each vector may take its
    // share of the budget's values, so that together they never take more.
    let (d, t) = (feature_at.len() as u128, target_at.len() as u128);
    let share =
        |w: u128| usize::try_from((*budget / 4) as u128 * w / (d + t)).unwrap_or(usize::MAX);
    let (feature_limit, target_limit) = (share(d), share(t));
    let (mut features, mut values_of_row) = (Vec::<f32>::new(), vec![0f32; header.len()]);
    let mut target_values = Vec::<f32>::new();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(csv_error(path, e)),
        }
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != header.len() {
            let column = match header.get(record.len()) {
                Some(missing) => missing.clone(),
                None => format!("#{}", header.len() + 1),
            };
            return Err(cell(
                path,
                line,
                &column,
                format!(
                    "the row has {} fields and the header {}: every row needs one per column",
                    record.len(),
                    header.len()
                ),
            ));
        }
        for (j, text) in record.iter().enumerate() {
            values_of_row[j] =
                parse_cell(text).map_err(|reason| cell(path, line, &header[j], reason))?;
        }
        if !(make_room(&mut features, feature_at.len(), feature_limit)
            && make_room(&mut target_values, target_at.len(), target_limit))
        {
            return Err(DataError::format(
                path,
                format!(
                    "line {line}: the values up to this row take more than the {budget} bytes a \
                     data set may take on this machine (a quarter of its available memory, at \
                     most {MAX_TABULAR_BYTES})"
                ),
            ));
        }
        features.extend(feature_at.iter().map(|&j| values_of_row[j]));
        target_values.extend(target_at.iter().map(|&j| values_of_row[j]));
    }
    if target_values.is_empty() {
        return Err(DataError::format(
            path,
            "no data rows: the file has a header and nothing after it",
        ));
    }
    features.shrink_to_fit();
    target_values.shrink_to_fit();
    *budget = budget.saturating_sub((features.len() + target_values.len()) as u64 * 4);
    let feature_names = feature_at.iter().map(|&j| header[j].clone()).collect();
    let data = TabularDataset::build(
        Some(path),
        features,
        target_values,
        (feature_at.len(), target_at.len()),
        Some(feature_names),
        Some(targets.to_vec()),
    )?;
    Ok((data, header))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn specs_parse_and_print_back() {
        let s = CsvSource::parse("csv:data/train.csv").unwrap();
        assert_eq!(s.train, Path::new("data/train.csv"));
        assert_eq!(s.test, None);
        assert_eq!(s.to_string(), "csv:data/train.csv");
        let s: CsvSource = "csv:a.csv,test=b/test.csv".parse().unwrap();
        assert_eq!(s.train, Path::new("a.csv"));
        assert_eq!(s.test.as_deref(), Some(Path::new("b/test.csv")));
        assert_eq!(s.to_string(), "csv:a.csv,test=b/test.csv");
        for (bad, want) in [
            ("csv:", "names no training file"),
            ("csv:,test=b.csv", "names no training file"),
            ("csv:a.csv,test=", "names no test file"),
            ("csv:a.csv,valid=b.csv", "unknown option `valid=b.csv`"),
            ("csv:a.csv,b.csv", "unknown option `b.csv`"),
            ("csv:a.csv,", "empty option"),
            ("csv:a.csv,test=b.csv,test=c.csv", "twice"),
            ("a.csv", "not a CSV source"),
        ] {
            let e = CsvSource::parse(bad).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn a_train_and_test_pair_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let train = write(
            dir.path(),
            "train.csv",
            "\u{feff}x1, y ,x2,z\n1,10,2,-1\n\n3, 30 ,\"4\",-3\n5,50,6,1e-3\n",
        );
        let test = write(dir.path(), "test.csv", "x1,y,x2,z\n7,70,8,0.5\n");
        let spec = format!("csv:{},test={}", train.display(), test.display());
        let splits = CsvSource::parse(&spec)
            .unwrap()
            .load(&names(&["z", "y"]))
            .unwrap();
        let t = &splits.train;
        assert_eq!((t.len(), t.feature_dim(), t.target_dim()), (3, 2, 2));
        assert_eq!(t.feature_names().unwrap(), ["x1", "x2"]);
        assert_eq!(t.target_names().unwrap(), ["z", "y"]);
        assert_eq!(t.features(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(t.targets(), &[-1.0, 10.0, -3.0, 30.0, 1e-3, 50.0]);
        assert_eq!(t.source(), Some(train.as_path()));
        let e = splits.test.unwrap();
        assert_eq!(
            (e.features(), e.targets()),
            (&[7.0, 8.0][..], &[0.5, 70.0][..])
        );
        // One file alone.
        let alone = read_csv(&test, &names(&["y"])).unwrap();
        assert_eq!(alone.features(), &[7.0, 8.0, 0.5]);
        assert_eq!(alone.feature_names().unwrap(), ["x1", "x2", "z"]);
    }

    /// Every malformed file is refused naming the file, the line and the column.
    #[test]
    fn bad_files_are_refused_naming_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let case = |text: &str, targets: &[&str], want: &[&str]| {
            let p = write(dir.path(), "bad.csv", text);
            let e = read_csv(&p, &names(targets))
                .map(|_| ())
                .expect_err(text)
                .to_string();
            assert!(e.contains(&p.display().to_string()), "{e}");
            for w in want {
                assert!(e.contains(w), "`{w}` missing from: {e}");
            }
        };
        let head = "a,b,y\n1,2,3\n";
        case(
            &format!("{head}4,five,6\n"),
            &["y"],
            &["line 3", "column `b`", "`five` is not a number"],
        );
        case(
            &format!("{head}4,,6\n"),
            &["y"],
            &["line 3", "column `b`", "empty cell"],
        );
        case(
            &format!("{head}4,5\n"),
            &["y"],
            &["line 3", "column `y`", "2 fields and the header 3"],
        );
        case(
            &format!("{head}4,5,6,7\n"),
            &["y"],
            &["line 3", "column `#4`", "4 fields"],
        );
        case(
            &format!("{head}nan,5,6\n"),
            &["y"],
            &["line 3", "column `a`", "not a finite number"],
        );
        case(
            &format!("{head}4,5,inf\n"),
            &["y"],
            &["line 3", "column `y`", "not a finite number"],
        );
        case(
            &format!("{head}4,1e39,6\n"),
            &["y"],
            &["line 3", "column `b`", "beyond f32's range"],
        );
        case(
            head,
            &["price"],
            &["target column `price`", "not in the header", "a, b, y"],
        );
        case(
            "a,b,a\n1,2,3\n",
            &["b"],
            &[
                "line 1",
                "column `a`",
                "duplicate header name",
                "columns 1 and 3",
            ],
        );
        case(
            "a,,y\n1,2,3\n",
            &["y"],
            &["line 1", "column `#2`", "no column 2"],
        );
        case(
            "a,y\n1,2\n",
            &["a", "y"],
            &["no feature column left", "a, y"],
        );
        case("a,b,y\n", &["y"], &["no data rows"]);
        case("", &["y"], &["empty file"]);
        case(head, &["y", "y"], &["`y` is named twice"]);
        case(head, &[], &["at least one target"]);
    }

    #[test]
    fn invalid_utf8_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("latin1.csv");
        std::fs::write(&p, b"a,y\n1,2\n3,\xe9\n").unwrap();
        let e = read_csv(&p, &names(&["y"])).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("UTF-8"), "{e}");
        assert!(e.contains(&p.display().to_string()), "{e}");
    }

    /// A pipe has no size to check beforehand: the budget stops it as its rows arrive.
    #[cfg(unix)]
    #[test]
    fn a_pipe_is_stopped_at_the_budget_as_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pipe.csv");
        let made = std::process::Command::new("mkfifo").arg(&p).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("no mkfifo: skipped");
            return;
        }
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                let _ = f.write_all(b"a,y\n");
                for i in 0..100_000 {
                    if f.write_all(format!("{i},{i}\n").as_bytes()).is_err() {
                        break;
                    }
                }
            })
        };
        let mut budget = 40_000;
        let e = read_csv_within(&p, &names(&["y"]), &mut budget, None)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        writer.join().unwrap();
        // 5,000 rows of two values fill 40,000 bytes: the row after them is refused.
        assert!(
            e.contains(&p.display().to_string()) && e.contains("line 5002") && e.contains("40000"),
            "{e}"
        );
    }

    #[test]
    fn a_test_file_with_another_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let train = write(dir.path(), "train.csv", "a,b,y\n1,2,3\n");
        let test = write(dir.path(), "test.csv", "a,c,y\n1,2,3\n");
        let e = CsvSource {
            train: train.clone(),
            test: Some(test.clone()),
        }
        .load(&names(&["y"]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&test.display().to_string())
                && e.contains(&train.display().to_string())
                && e.contains("column 2"),
            "{e}"
        );
    }

    #[test]
    fn a_file_over_the_memory_budget_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = std::iter::once("a,y\n".to_string())
            .chain((0..100).map(|i| format!("{i},{i}\n")))
            .collect();
        let p = write(dir.path(), "big.csv", &text);
        let size = text.len() as u64;
        let mut budget = size; // less than the twice its size the values may take
        let e = read_csv_within(&p, &names(&["y"]), &mut budget, None)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&p.display().to_string())
                && e.contains(&format!("{size} bytes"))
                && e.contains(&format!("the {size} bytes")),
            "{e}"
        );
        let mut budget = 4 * size;
        let (data, _) = read_csv_within(&p, &names(&["y"]), &mut budget, None).unwrap();
        assert_eq!(data.len(), 100);
        assert_eq!(budget, 4 * size - 800);
        // The budget as the rows are read (a pipe, a growing file): room is made within it.
        let mut v = Vec::new();
        assert!(make_room(&mut v, 10, 10) && v.capacity() == 10);
        assert!(!make_room(&mut Vec::new(), 11, 10));
        // Exactly the values' bytes is enough once past the size check.
        let mut budget = 2 * size;
        let (data, _) = read_csv_within(&p, &names(&["y"]), &mut budget, None).unwrap();
        assert_eq!(data.len(), 100);
    }
}
