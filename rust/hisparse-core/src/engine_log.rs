//! An engine's start-up log, read for what the engine measured and printed:
//! the weights it loaded, the KV room it profiled, the pools and the capacity
//! it sized (issue 21: plan from the engine's measurement).
//!
//! Engine-neutral: this module reads lines as users have them and keeps the
//! figures an engine's [`LineRule`] table finds in them; each engine release
//! brings its table (the phrases of its own `logger.info` calls, with their
//! file:line) and the re-plan. A line is read as the engines' loggers and
//! the tools around them write it: ANSI colours, a timestamp and level, a
//! `[file.py:123]` source, a process prefix such as `(EngineCore_DP0 pid=7)`
//! or `(Worker_TP3 pid=9)` (vLLM) or `[2026-01-01 10:00:00 DP1 TP3]` (SGLang),
//! several ranks interleaved, other loggers' lines, a log cut short. Figures
//! are found by the engine's phrase anywhere in the line, so a prefix we
//! have not seen costs nothing.
//!
//! Bounded: one pass over at most [`MAX_LOG_BYTES`] of a log (the start-up
//! lines come first; a log that runs on, or `/dev/zero`, ends there, and the
//! report says so), at most [`MAX_LOG_LINE_BYTES`] of a line looked at (the
//! rest is skipped without being kept) and at most [`MAX_LOG_FIGURES`]
//! figures kept; what was dropped is counted.

use serde::{Deserialize, Serialize};
use std::io::BufRead;

/// Bytes of one log line looked at: vLLM's "Initializing a V1 LLM engine
/// ... with config:" line and SGLang's `server_args=ServerArgs(...)` line run
/// to a few KB; a longer line is cut here (its tail is read and dropped).
pub const MAX_LOG_LINE_BYTES: usize = 64 << 10;

/// Bytes of a log read: the start-up lines of a 64-GPU launch are a few MB;
/// a server's log runs on with its requests (or `kubectl logs -f` never
/// ends), so reading stops here and [`EngineLog::stopped_early`] says so.
pub const MAX_LOG_BYTES: u64 = 1 << 30;

/// Figures kept from one log (a figure a line, per rank: a 64-GPU launch logs
/// a few hundred); later ones are counted in [`EngineLog::figures_dropped`].
pub const MAX_LOG_FIGURES: usize = 4096;

/// One kind of line an engine logs, and how to read its figures.
#[derive(Clone, Copy, Debug)]
pub struct LineRule {
    /// Text the line contains (after the prefixes), e.g. `Available KV cache memory:`.
    pub phrase: &'static str,
    /// Reads the figures out of the message, which starts at `phrase`.
    pub read: fn(&str) -> Vec<(&'static str, Value)>,
    /// The engine's log statement, file:line in its wheel.
    pub source: &'static str,
}

/// A figure as logged: a number, or a word (a model path, a dtype).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Number(f64),
    Text(String),
}

impl Value {
    pub fn number(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            Value::Text(_) => None,
        }
    }
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            Value::Number(_) => None,
        }
    }
}

/// One figure found in the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoggedFigure {
    /// The figure's name, e.g. `available_kv_cache_gib` (the engine's table says each).
    pub key: String,
    pub value: Value,
    /// Line number in the log, from 1.
    pub line: u64,
    /// The process that logged it (`DP0`, `TP3`, `DP1 TP3`, `EngineCore_DP0`), when the line says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<String>,
    /// The engine's log statement (file:line).
    pub source: String,
}

/// What one pass over a start-up log found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineLog {
    /// Lines read (a last line without a newline counts).
    pub lines: u64,
    /// Lines longer than [`MAX_LOG_LINE_BYTES`], looked at only up to it.
    pub lines_cut: u64,
    pub figures: Vec<LoggedFigure>,
    /// Figures past [`MAX_LOG_FIGURES`], not kept.
    pub figures_dropped: u64,
    /// Reading stopped at [`MAX_LOG_BYTES`] with more of the log unread.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped_early: bool,
}

impl EngineLog {
    /// Every value logged for `key`, in log order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a LoggedFigure> + 'a {
        self.figures.iter().filter(move |f| f.key == key)
    }

    /// The figure of `key` with the smallest value (the rank that binds:
    /// the engines size every rank's pool to the smallest rank's room).
    pub fn min<'a>(&'a self, key: &'a str) -> Option<&'a LoggedFigure> {
        self.pick(key, |a, b| a < b)
    }

    /// The figure of `key` with the largest value (the weights of the
    /// fullest rank).
    pub fn max<'a>(&'a self, key: &'a str) -> Option<&'a LoggedFigure> {
        self.pick(key, |a, b| a > b)
    }

    /// The first figure of `key` logged.
    pub fn first<'a>(&'a self, key: &'a str) -> Option<&'a LoggedFigure> {
        self.all(key).next()
    }

    fn pick<'a>(&'a self, key: &'a str, better: fn(f64, f64) -> bool) -> Option<&'a LoggedFigure> {
        let mut best: Option<&LoggedFigure> = None;
        for f in self.all(key) {
            let Some(v) = f.value.number() else { continue };
            if best
                .and_then(|b| b.value.number())
                .is_none_or(|b| better(v, b))
            {
                best = Some(f);
            }
        }
        best
    }

    /// How many lines matched a rule of the table.
    pub fn matched_lines(&self) -> usize {
        let mut lines: Vec<u64> = self.figures.iter().map(|f| f.line).collect();
        lines.dedup();
        lines.len()
    }
}

/// What a plan took from an engine log and how its figures compare
/// (`Plan::engine_log`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineLogReport {
    /// The log read: its path, or `-` for standard input.
    pub path: String,
    /// The engine whose lines were found (`vllm`, `sglang`).
    pub engine: String,
    pub lines: u64,
    #[serde(default)]
    pub lines_cut: u64,
    #[serde(default)]
    pub figures_dropped: u64,
    /// Reading stopped at [`MAX_LOG_BYTES`] with more of the log unread
    /// (absent when the whole log was read).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped_early: bool,
    /// Whether the logged launch ran HiSparse (its HiSparse lines are there).
    pub logged_hisparse: bool,
    /// The engine's measurements the plan used in place of its estimates.
    pub measured: Vec<Measured>,
    /// Each figure the log states, beside the plan's.
    pub compared: Vec<Compared>,
}

/// A measurement taken from the log into the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The planner input it fills (`weights_gib`, `available_kv_cache_gib`).
    pub input: String,
    pub value: f64,
    /// Which of the logged values (`the smallest of 8 ranks`).
    pub rule: String,
    pub figure: LoggedFigure,
}

/// One figure as the engine logged it and as the plan computes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    /// What it is, in the engine's words (`GPU blocks (HiSparse HMA line)`).
    pub figure: String,
    /// What it counts: `blocks`, `tokens`, `requests` (vLLM's "Nx"), `slots`.
    pub unit: String,
    pub logged: f64,
    /// The plan's figure; null where the plan has none.
    pub computed: Option<f64>,
    /// computed - logged; null where the plan has none.
    pub difference: Option<f64>,
    /// Why they differ, or what the figure is made of (null when equal and plain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub line: u64,
    pub source: String,
}

impl Compared {
    /// A comparison of `logged` (figure `f`) with `computed`.
    pub fn new(
        figure: &str,
        unit: &str,
        f: &LoggedFigure,
        computed: Option<f64>,
        why: Option<String>,
    ) -> Self {
        let logged = f.value.number().unwrap_or(f64::NAN);
        Compared {
            figure: figure.to_owned(),
            unit: unit.to_owned(),
            logged,
            computed,
            difference: computed.map(|c| c - logged),
            why,
            line: f.line,
            source: f.source.clone(),
        }
    }
}

impl EngineLogReport {
    /// The report of `log` (read from `path`) for `engine`'s plan.
    pub fn new(
        log: &EngineLog,
        path: &str,
        engine: &str,
        logged_hisparse: bool,
        measured: Vec<Measured>,
        compared: Vec<Compared>,
    ) -> Self {
        EngineLogReport {
            path: path.to_owned(),
            engine: engine.to_owned(),
            lines: log.lines,
            lines_cut: log.lines_cut,
            figures_dropped: log.figures_dropped,
            stopped_early: log.stopped_early,
            logged_hisparse,
            measured,
            compared,
        }
    }
}

/// The numbers of `pairs` that were found, as figures (a rule's `read`).
pub fn numbers(pairs: &[(&'static str, Option<f64>)]) -> Vec<(&'static str, Value)> {
    pairs
        .iter()
        .filter_map(|&(k, v)| v.map(|v| (k, Value::Number(v))))
        .collect()
}

/// The figures of a line that names its fields: each `words` label's word
/// and each `numbers` label's number found in `m` (a rule's `read`).
pub fn labelled(
    m: &str,
    words: &[(&'static str, &str)],
    numbers: &[(&'static str, &str)],
) -> Vec<(&'static str, Value)> {
    let words = words
        .iter()
        .filter_map(|&(key, label)| word_after(m, label).map(|w| (key, Value::Text(w))));
    let found = numbers
        .iter()
        .filter_map(|&(key, label)| number_after(m, label).map(|n| (key, Value::Number(n))));
    words.chain(found).collect()
}

/// The model as a name to compare: the last path component of a local path
/// or an HF id (`/models/DeepSeek-V3.2` and `deepseek-ai/DeepSeek-V3.2`
/// name the same checkpoint), a snapshot directory read as its repo.
pub fn model_name(model: &str) -> String {
    let trimmed = model.trim_end_matches('/');
    if let Some(i) = trimmed.find("/models--") {
        let repo = &trimmed[i + 9..];
        let repo = repo.split('/').next().unwrap_or(repo);
        return repo.rsplit("--").next().unwrap_or(repo).to_lowercase();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_lowercase()
}

/// Where a log is not of this launch: for each `(log key, field, given)`
/// size the log states otherwise, and for `model` (`(log key, field,
/// given)`) a model of another name, the field, the message and what this
/// launch gives. `measured` names what the engine measured (`the KV room`),
/// which another layout changes. The engine words them as its diagnostics.
pub fn launch_mismatches(
    log: &EngineLog,
    path: &str,
    sizes: &[(&str, &'static str, i64)],
    model: Option<(&str, &'static str, &str)>,
    measured: &str,
) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    for &(key, field, given) in sizes {
        if let Some(f) = log.first(key) {
            let logged = f.value.number().unwrap_or(-1.0);
            if logged != given as f64 {
                out.push((field, format!("the engine log ({path}, line {}) is of a launch with {field} {logged}, this launch has {given}: the weights per GPU and {measured} it measured are another layout's", f.line), given.to_string()));
            }
        }
    }
    if let Some((key, field, given)) = model {
        if let Some(f) = log.first(key) {
            let logged = f.value.text().unwrap_or("");
            if model_name(logged) != model_name(given) {
                out.push((field, format!("the engine log ({path}, line {}) is of model {logged:?}, this launch serves {given:?}", f.line), given.to_owned()));
            }
        }
    }
    out
}

/// Reads a log in one pass, keeping the figures `rules` find. I/O errors are
/// returned as they come (a log cut short is not one: what was read counts).
pub fn read(reader: &mut dyn BufRead, rules: &[LineRule]) -> std::io::Result<EngineLog> {
    read_at_most(reader, rules, MAX_LOG_BYTES)
}

/// [`read`], stopping once `max_bytes` of the log have been read.
fn read_at_most(
    reader: &mut dyn BufRead,
    rules: &[LineRule],
    max_bytes: u64,
) -> std::io::Result<EngineLog> {
    let mut log = EngineLog::default();
    let mut line = Vec::with_capacity(1024);
    let mut bytes = 0u64;
    loop {
        line.clear();
        if bytes >= max_bytes {
            log.stopped_early = !reader.fill_buf()?.is_empty();
            return Ok(log);
        }
        let (any, cut) = read_line(reader, &mut line, &mut bytes, max_bytes)?;
        if !any {
            return Ok(log);
        }
        log.lines += 1;
        log.lines_cut += u64::from(cut);
        let text = String::from_utf8_lossy(&line);
        let clean = strip_ansi(&text);
        for rule in rules {
            if let Some(at) = clean.find(rule.phrase) {
                let message = &clean[at..];
                for (key, value) in (rule.read)(message) {
                    if log.figures.len() >= MAX_LOG_FIGURES {
                        log.figures_dropped += 1;
                        continue;
                    }
                    log.figures.push(LoggedFigure {
                        key: key.to_owned(),
                        value,
                        line: log.lines,
                        rank: rank_of(&clean[..at]),
                        source: rule.source.to_owned(),
                    });
                }
            }
        }
    }
}

/// One line into `buf` (without its newline), at most [`MAX_LOG_LINE_BYTES`]
/// kept, counting the bytes consumed into `bytes` and consuming none past
/// `max_bytes` (a line without end stops there); returns (something was
/// read, the line was cut).
fn read_line(
    reader: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    bytes: &mut u64,
    max_bytes: u64,
) -> std::io::Result<(bool, bool)> {
    let (mut any, mut cut) = (false, false);
    loop {
        if *bytes >= max_bytes {
            return Ok((any, cut));
        }
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((any, cut));
        }
        any = true;
        let left = usize::try_from(max_bytes - *bytes).unwrap_or(usize::MAX);
        let chunk = &chunk[..chunk.len().min(left)];
        let (used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let content = &chunk[..if done { used - 1 } else { used }];
        let room = MAX_LOG_LINE_BYTES.saturating_sub(buf.len());
        if content.len() > room {
            cut = true;
        }
        buf.extend_from_slice(&content[..content.len().min(room)]);
        reader.consume(used);
        *bytes += used as u64;
        if done {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok((true, cut));
        }
    }
}

/// The text without ANSI escape sequences (CSI `ESC [ ... letter`, and a
/// lone ESC), as terminals and `docker logs` leave them.
pub fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) {
                    break;
                }
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The rank a line's prefix names: vLLM's process labels
/// `(EngineCore_DP0 pid=7)`, `(Worker_TP3 pid=9)`, `(VllmWorker TP3 pid=9)`,
/// `(Worker_DP0_TP3_EP3 pid=1)`; SGLang's `[... DP1 TP3]` / `[... TP3 EP3]`.
fn rank_of(prefix: &str) -> Option<String> {
    let words = prefix.split(|c: char| c.is_whitespace() || "()[]_".contains(c));
    let ranks: Vec<&str> = words
        .filter(|w| {
            ["DP", "TP", "PP", "EP"].iter().any(|p| {
                w.strip_prefix(p)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .collect();
    (!ranks.is_empty()).then(|| ranks.join(" "))
}

/// The number that starts `text` (after spaces): digits with `,` or `_`
/// thousands separators, a fraction, an exponent (`1.5e3`); `None` when
/// there is none.
pub fn leading_number(text: &str) -> Option<f64> {
    let t = text.trim_start();
    let end = t
        .char_indices()
        .take_while(|&(i, c)| {
            c.is_ascii_digit()
                || c == ','
                || c == '_'
                || c == '.'
                || ((c == 'e' || c == 'E') && i > 0)
                || ((c == '-' || c == '+') && (i == 0 || t[..i].ends_with(['e', 'E'])))
        })
        .last()
        .map_or(0, |(i, c)| i + c.len_utf8());
    let digits: String = t[..end]
        .trim_end_matches(['.', ',', 'e', 'E'])
        .chars()
        .filter(|&c| c != ',' && c != '_')
        .collect();
    digits.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// The number right after `label` in `text` (`label` included, e.g.
/// `"max_total_num_tokens="`).
pub fn number_after(text: &str, label: &str) -> Option<f64> {
    text.find(label)
        .and_then(|i| leading_number(&text[i + label.len()..]))
}

/// The word after `label` in `text`, up to `,` `)` `}` or a space, without quotes
/// (`model='/models/x'` -> `/models/x`).
pub fn word_after(text: &str, label: &str) -> Option<String> {
    let rest = &text[text.find(label)? + label.len()..];
    let rest = rest.trim_start();
    let (quoted, rest) = match rest.chars().next() {
        Some(q @ ('\'' | '"')) => (Some(q), &rest[1..]),
        _ => (None, rest),
    };
    let end = match quoted {
        Some(q) => rest.find(q)?,
        None => rest.find([',', ')', '}', ' ']).unwrap_or(rest.len()),
    };
    Some(rest[..end].to_owned()).filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<LineRule> {
        vec![LineRule {
            phrase: "Available KV cache memory:",
            read: |m| {
                number_after(m, "memory:")
                    .map(|n| vec![("kv", Value::Number(n))])
                    .unwrap_or_default()
            },
            source: "x.py:1",
        }]
    }

    #[test]
    fn prefixes_colours_and_ranks_are_read_through() {
        let text = "\u{1b}[1;36m(Worker_TP3 pid=9)\u{1b}[0;0m INFO 12-02 10:00:00 [gpu_worker.py:773] Available KV cache memory: 50.25 GiB\r\nnoise\n(Worker_TP0 pid=8) INFO [gpu_worker.py:773] Available KV cache memory: 49.5 GiB";
        let log = read(&mut text.as_bytes(), &rules()).unwrap();
        assert_eq!(log.lines, 3);
        assert_eq!(log.figures.len(), 2);
        assert_eq!(log.figures[0].rank.as_deref(), Some("TP3"));
        assert_eq!(log.min("kv").unwrap().value, Value::Number(49.5));
        assert_eq!(log.max("kv").unwrap().line, 1);
    }

    #[test]
    fn a_long_line_is_cut_and_figures_are_capped() {
        let mut text = "x".repeat(MAX_LOG_LINE_BYTES * 2);
        text.push('\n');
        for _ in 0..(MAX_LOG_FIGURES + 5) {
            text.push_str("Available KV cache memory: 1 GiB\n");
        }
        let log = read(&mut text.as_bytes(), &rules()).unwrap();
        assert_eq!(log.lines_cut, 1);
        assert_eq!(log.figures.len(), MAX_LOG_FIGURES);
        assert_eq!(log.figures_dropped, 5);
    }

    #[test]
    fn reading_stops_at_the_byte_bound_and_says_so() {
        let line = "Available KV cache memory: 1 GiB\n";
        let text = line.repeat(10);
        // The bound falls inside the fourth line: three whole lines, the
        // fourth cut short at the bound, and the rest unread.
        let bound = (line.len() * 3 + 5) as u64;
        let log = read_at_most(&mut text.as_bytes(), &rules(), bound).unwrap();
        assert!(log.stopped_early);
        assert_eq!(log.lines, 4);
        assert_eq!(log.figures.len(), 3);
        // A log that ends at the bound exactly was read whole.
        let bound = text.len() as u64;
        let whole = read_at_most(&mut text.as_bytes(), &rules(), bound).unwrap();
        assert!(!whole.stopped_early);
        assert_eq!(whole.figures.len(), 10);
        // A line without end (/dev/zero) stops at the bound too.
        let mut zeros = std::io::Read::take(std::io::repeat(0), 1 << 40);
        let log =
            read_at_most(&mut std::io::BufReader::new(&mut zeros), &rules(), 1 << 20).unwrap();
        assert!(log.stopped_early);
        assert_eq!((log.lines, log.lines_cut), (1, 1));
    }

    #[test]
    fn numbers_and_words() {
        assert_eq!(leading_number(" 1,234,567 tokens"), Some(1_234_567.0));
        assert_eq!(leading_number("3.29x"), Some(3.29));
        assert_eq!(leading_number("1.5e3 GiB"), Some(1500.0));
        assert_eq!(leading_number("-2 x"), Some(-2.0));
        assert_eq!(leading_number("GiB"), None);
        assert_eq!(number_after("a=1, b=22.5 GB", "b="), Some(22.5));
        assert_eq!(
            word_after("model='/m/x y', tokenizer=", "model=").as_deref(),
            Some("/m/x y")
        );
        assert_eq!(
            word_after("dtype=bfloat16, x", "dtype=").as_deref(),
            Some("bfloat16")
        );
        assert_eq!(
            rank_of("[2026-01-01 10:00:00 DP1 TP3] "),
            Some("DP1 TP3".into())
        );
        assert_eq!(rank_of("(EngineCore_DP0 pid=7) INFO"), Some("DP0".into()));
        assert_eq!(rank_of("INFO 12-02 [x.py:1]"), None);
    }
}
